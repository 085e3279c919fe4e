//! `pipeline sandbox up` on a Ceph it does not know how to start: one clear
//! message and a non-zero exit, before anything is started or any port is
//! looked at. The installed release is whatever `ceph-mon --version` on PATH
//! says; here a `ceph-mon` earlier on PATH says 15.2 Octopus (the text is the
//! shape 16.2, 18.2 and 20.2 print, see plugins/parsers/tests/data), or
//! something that is no version at all.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `pipeline sandbox up` with a `ceph-mon` that prints `version_line` first on PATH.
fn sandbox_up_with_mon_saying(name: &str, version_line: &str) -> (Option<i32>, String, bool) {
    let dir = common::temp_dir(name);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mon = bin.join("ceph-mon");
    std::fs::write(&mon, format!("#!/bin/sh\necho '{version_line}'\n")).unwrap();
    std::fs::set_permissions(&mon, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sandbox = dir.join("sandbox");
    let out = common::pipeline_command(&["sandbox", "up", "--dir", &sandbox.to_string_lossy()])
        .env("PATH", path)
        .output()
        .expect("run pipeline");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let started_nothing = !Path::new(&sandbox).join("run").exists();
    let _ = std::fs::remove_dir_all(&dir);
    (out.status.code(), stderr, started_nothing)
}

#[test]
fn an_unsupported_release_is_refused_with_what_is_installed_and_what_is_tested() {
    let (code, stderr, started_nothing) = sandbox_up_with_mon_saying(
        "release-15",
        "ceph version 15.2.17 (8a82819d84cf884bd39c17e3236e0632ac146dc4) octopus (stable)",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the installed Ceph is `ceph version 15.2.17"),
        "{stderr}"
    );
    assert!(stderr.contains("16 to 20"), "{stderr}");
    assert!(stderr.contains("tested: 16.2, 18.2, 20.2"), "{stderr}");
    assert!(stderr.contains("docs/ceph-releases.md"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one message: {stderr}");
    assert!(started_nothing, "a run folder was made: {stderr}");
}

#[test]
fn a_monitor_that_prints_no_version_is_a_clear_error() {
    let (code, stderr, started_nothing) =
        sandbox_up_with_mon_saying("release-garbage", "Segmentation fault");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("`ceph-mon --version`"), "{stderr}");
    assert!(stderr.contains("Segmentation fault"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(started_nothing, "a run folder was made: {stderr}");
}
