//! A run that could not clean up: full-baseline killed with SIGKILL in the
//! middle, then `pipeline cleanup RUN_DIR`. Against the sandbox cluster.

mod common;

use pipeline_test_tiers::{Tier, live};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cluster::{ceph, pools};
use serde_json::Value;

/// The one run folder under `runs` (the default place, relative to the
/// working directory), once it exists.
fn the_run_dir(runs: &Path, deadline: Instant) -> PathBuf {
    loop {
        if let Some(dir) = std::fs::read_dir(runs)
            .ok()
            .and_then(|mut entries| entries.next())
            .and_then(|e| e.ok())
        {
            return dir.path();
        }
        assert!(Instant::now() < deadline, "no run folder in {runs:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the run's ledger journal records a resource of `kind`.
fn wait_for_created(run_dir: &Path, kind: &str, deadline: Instant) {
    let wanted = format!("\"kind\":\"{kind}\"");
    while !std::fs::read_to_string(run_dir.join("created.jsonl"))
        .unwrap_or_default()
        .contains(&wanted)
    {
        assert!(
            Instant::now() < deadline,
            "the run never created a {kind}: {}",
            std::fs::read_to_string(run_dir.join("results.json")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes whose command line contains `text` (pgrep -f).
fn processes(text: &str) -> String {
    let out = std::process::Command::new("pgrep")
        .args(["-a", "-f", text])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The tests share the cluster and compare its pools before and after: one at a time.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn sigkill_mid_full_baseline_then_pipeline_cleanup_leaves_the_pools_as_they_were() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let dir = common::temp_dir("recovery-sigkill");
    let suite = common::root().join("pipelines/full-baseline.yaml");
    let mut child = common::pipeline_command(&[
        "run",
        suite.to_str().unwrap(),
        "--set",
        "seconds=2",
        "--set",
        "max_objects=16",
        "--set",
        "rbd_io_total=8M",
        "--set",
        "fio_image_size=64M",
    ])
    .current_dir(&dir)
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let run_dir = the_run_dir(&dir.join("runs"), deadline);
    // Pool, rados bench objects, then the rbd-bench stage's image: killed
    // while that stage runs, before results.json heard of the image.
    wait_for_created(&run_dir, "rbd-image", deadline);

    // While the run lives, `pipeline cleanup` refuses it.
    let refused = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused).contains("is in use by pipeline run pid"),
        "{}",
        text(&refused)
    );

    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    let killed: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(killed["status"], "running");
    // What the runner was running died with it (no rbd bench writing on).
    let gone = Instant::now() + Duration::from_secs(10);
    while !processes("rbd.*bench").is_empty() {
        assert!(
            Instant::now() < gone,
            "outlived the runner: {}",
            processes("rbd.*bench")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_ne!(pools(), before, "the killed run's pool is still there");

    // The next run in the same folder names the dead run and the command.
    let quick = dir.join("quick.yaml");
    std::fs::write(
        &quick,
        "name: quick\nstages:\n  - id: hello\n    uses: exec\n    with: {command: [echo, hi]}\n",
    )
    .unwrap();
    let next = common::pipeline_command(&["run", quick.to_str().unwrap()])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(next.status.code(), Some(0), "{}", text(&next));
    let hint = format!(
        "pipeline cleanup runs/{}",
        run_dir.file_name().unwrap().to_str().unwrap()
    );
    assert!(text(&next).contains(&hint), "{}", text(&next));
    assert!(text(&next).contains("rbd-image `"), "{}", text(&next));

    // `pipeline cleanup` removes what the run created, and only that.
    let cleaned = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    let shown = text(&cleaned);
    assert_eq!(cleaned.status.code(), Some(0), "{shown}");
    assert!(shown.contains("its status is now `failed`"), "{shown}");
    for kind in ["pool", "rbd-image", "rados-bench-objects"] {
        assert!(shown.contains(&format!("removed: {kind} `")), "{shown}");
    }
    assert_eq!(pools(), before);
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(r["status"], "failed");
    let created = r["created"].as_array().unwrap();
    assert!(
        created.iter().any(|c| c["kind"] == "rbd-image"),
        "the image came from the journal: {created:#?}"
    );
    assert!(created.iter().all(|c| c["removed"] == true), "{created:#?}");
    let recovery = r["cleanup"].as_array().unwrap().last().unwrap();
    assert_eq!(recovery["status"], "succeeded", "{recovery:#}");
    assert!(
        recovery["id"].as_str().unwrap().ends_with(".recovery-1"),
        "{recovery:#}"
    );
    assert!(run_dir.join("report.md").exists());

    // Idempotent: a second call finds nothing.
    let again = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(
        text(&again).contains("nothing to clean up"),
        "{}",
        text(&again)
    );
    assert_eq!(pools(), before);
}

/// The cluster's OSD flags (`ceph osd dump`'s flags_set).
fn osd_flags() -> Vec<String> {
    let (ok, text) = ceph("ceph", &["osd", "dump", "--format", "json"]);
    assert!(ok, "{text}");
    let dump: Value = serde_json::from_str(text.trim()).unwrap();
    dump["flags_set"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// `cluster.flags: [noscrub, nodeep-scrub]`: set for the run and unset
/// after it; after a SIGKILL, unset by `pipeline cleanup`; a flag that was
/// already set is left set.
fn scrub_flags_are_restored_after_a_run_and_after_sigkill() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let has = |flag: &str| osd_flags().contains(&flag.to_string());
    assert!(!has("noscrub") && !has("nodeep-scrub"), "{:?}", osd_flags());
    let dir = common::temp_dir("recovery-scrub-flags");
    let suite = common::root().join("tests/ceph/scrub-flags.yaml");
    let suite = suite.to_str().unwrap();

    // A whole run: set during its stages (the watch sees OSDMAP_FLAGS from
    // the first sample, the cluster's standing state then), unset after.
    let run_dir = dir.join("whole");
    let out = common::pipeline(&["run", suite, "--out", run_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("set OSD flag noscrub for the run"),
        "{}",
        text(&out)
    );
    assert!(!has("noscrub") && !has("nodeep-scrub"), "{:?}", osd_flags());
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let flags: Vec<&Value> = r["created"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "osd_flag")
        .collect();
    assert_eq!(flags.len(), 2, "{:#}", r["created"]);
    assert!(flags.iter().all(|f| f["removed"] == true), "{flags:#?}");
    let write = common::stage(&r, "write");
    let first = &write["cluster"]["samples"][0];
    assert!(
        first["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "OSDMAP_FLAGS"),
        "{write:#}"
    );
    assert!(write["cluster"]["unhealthy"].is_null(), "{write:#}");

    // noscrub set beforehand by someone else; the run is killed mid-write.
    assert!(ceph("ceph", &["osd", "set", "noscrub"]).0);
    let run_dir = dir.join("killed");
    let mut child = common::pipeline_command(&[
        "run",
        suite,
        "--out",
        run_dir.to_str().unwrap(),
        "--set",
        "seconds=30",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    // The pool is journalled as the pool stage makes it; the kill lands
    // in that stage or early in the write.
    wait_for_created(&run_dir, "pool", Instant::now() + Duration::from_secs(120));
    assert!(has("noscrub") && has("nodeep-scrub"), "{:?}", osd_flags());
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert!(
        has("nodeep-scrub"),
        "the killed run could not have unset it"
    );
    let cleaned = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    let shown = text(&cleaned);
    assert_eq!(cleaned.status.code(), Some(0), "{shown}");
    assert!(shown.contains("unset OSD flag nodeep-scrub"), "{shown}");
    assert!(!shown.contains("unset OSD flag noscrub"), "{shown}");
    let left = osd_flags();
    assert!(ceph("ceph", &["osd", "unset", "noscrub"]).0);
    assert!(
        left.contains(&"noscrub".to_string()) && !left.contains(&"nodeep-scrub".to_string()),
        "{left:?}"
    );
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "sigkill_mid_full_baseline_then_pipeline_cleanup_leaves_the_pools_as_they_were",
            &[Tier::Cluster],
            sigkill_mid_full_baseline_then_pipeline_cleanup_leaves_the_pools_as_they_were,
        ),
        live(
            "scrub_flags_are_restored_after_a_run_and_after_sigkill",
            &[Tier::Cluster],
            scrub_flags_are_restored_after_a_run_and_after_sigkill,
        ),
    ]);
}
