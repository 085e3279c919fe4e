//! Client roots against the test cluster (CEPH_CONF, the sandbox that
//! `scripts/test.sh` starts): `tests/client-roots/client-release.yaml`
//! runs its rados bench and fio from this machine's Ceph 16.2 tools and
//! from the Debian trixie root (Ceph 18.2) that `scripts/ceph-root.sh 18.2`
//! builds in `$PIPELINE_CLIENT_ROOTS`. Each stage instance records its
//! client's versions, nothing stays mounted, and `pipeline compare` of the
//! two runs names the client release above the figures.
//!
//! A live test of the `cluster` and `roots` tiers (pipeline-test-tiers):
//! listed as ignored unless scripts/test.sh turned them on.

mod common;

use pipeline_test_tiers::{Tier, live};

use std::path::{Path, PathBuf};

use serde_json::Value;

const SUITE: &str = "tests/client-roots/client-release.yaml";

/// The folder holding the roots, with its trixie root finished: the
/// `roots` tier promised them, so their absence fails rather than skips.
fn roots() -> PathBuf {
    let dir = std::env::var_os("PIPELINE_CLIENT_ROOTS")
        .filter(|d| !d.is_empty())
        .expect("the roots tier is on, but PIPELINE_CLIENT_ROOTS is not set (the folder scripts/ceph-root.sh builds the roots in, e.g. /var/cache/pipeline/roots)");
    let trixie = Path::new(&dir).join("trixie");
    assert!(
        trixie.join(".pipeline-root").is_file(),
        "PIPELINE_CLIENT_ROOTS is set, but {} is not a finished root (no .pipeline-root): run scripts/ceph-root.sh 18.2",
        trixie.display()
    );
    PathBuf::from(dir)
}

/// Runs the suite with `client`; returns the run folder and its results.
fn run(client: &str, dir: &Path) -> (PathBuf, Value) {
    let run_dir = dir.join(format!("run-{client}"));
    let out = common::pipeline(&[
        "run",
        SUITE,
        "--set",
        &format!("client={client}"),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let results = common::results(&run_dir).unwrap_or_else(|| {
        panic!(
            "no results.json for client {client}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(out.status.code(), Some(0), "client {client}: {results:#}");
    (run_dir, results)
}

/// The one client record of a stage instance, run on this machine.
fn client_versions<'a>(results: &'a Value, id: &str) -> &'a Value {
    let stage = common::stage(results, id);
    let records = stage["client_versions"]
        .as_array()
        .unwrap_or_else(|| panic!("{id} recorded no client versions: {stage:#}"));
    assert_eq!(records.len(), 1, "{id}: {records:#?}");
    assert_eq!(records[0]["host"], "local");
    &records[0]
}

fn version_of<'a>(record: &'a Value, list: &str, name: &str) -> &'a str {
    record[list]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["name"] == name))
        .and_then(|i| i["version"].as_str())
        .unwrap_or_else(|| panic!("no {name} version in {record:#}"))
}

fn mounted_under(root: &Path) -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let root = root.display().to_string();
    mounts
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(4)
                .is_some_and(|m| m.starts_with(&root))
        })
        .map(str::to_string)
        .collect()
}

fn each_stage_records_its_client_and_compare_names_the_client_release() {
    let roots = roots();
    let trixie = roots.join("trixie");
    let dir = common::temp_dir("client-roots");

    let (reef_dir, reef) = run("18.2", &dir);
    for id in ["rados-write", "fio-rbd"] {
        let record = client_versions(&reef, id);
        assert_eq!(record["client"], "18.2", "{id}");
        assert_eq!(record["root"], trixie.display().to_string(), "{id}");
        assert!(record["kernel"].as_str().is_some_and(|k| !k.is_empty()));
        let library = if id == "fio-rbd" {
            "librbd"
        } else {
            "librados"
        };
        // trixie's Debian package, e.g. 18.2.7+ds-1+deb13u1.
        let version = version_of(record, "libraries", library);
        assert!(version.starts_with("18.2."), "{id} {library}: {version}");
        let tool = if id == "fio-rbd" { "fio" } else { "rados" };
        assert!(!version_of(record, "tools", tool).is_empty());
    }
    assert!(
        version_of(client_versions(&reef, "rados-write"), "tools", "rados").starts_with("18.2."),
        "{reef:#}"
    );
    // The namespace ended with each command: nothing of the run is mounted.
    assert_eq!(mounted_under(&trixie), Vec::<String>::new());
    // The cluster's daemons and configuration are recorded beside them.
    assert!(
        reef["environment"]["ceph versions"]["osd"].is_object(),
        "{reef:#}"
    );
    assert!(
        reef["environment"]["ceph config dump"].is_array(),
        "{reef:#}"
    );

    let (host_dir, host) = run("16.2", &dir);
    let record = client_versions(&host, "fio-rbd");
    assert!(record.get("root").is_none(), "{record:#}");
    let host_librbd = version_of(record, "libraries", "librbd").to_string();

    // The report puts the clients in its Versions table.
    let report = std::fs::read_to_string(reef_dir.join("report.md")).unwrap();
    assert!(
        report.contains(&format!(
            "| client 18.2 on local (root {})",
            trixie.display()
        )),
        "{report}"
    );

    // 16.2 against 18.2: the difference is named above the figures.
    let out = common::pipeline(&[
        "compare",
        host_dir.to_str().unwrap(),
        reef_dir.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let upstream = |v: &str| v.split(['+', '-']).next().unwrap().to_string();
    let expected = format!("- client librbd {} → 18.2.", upstream(&host_librbd));
    let at = text
        .find(&expected)
        .unwrap_or_else(|| panic!("no `{expected}` in:\n{text}"));
    let figures = text.find("## fio-rbd").expect("the fio-rbd figures");
    assert!(at < figures, "the change comes after the figures:\n{text}");
    assert!(
        text[..at].contains("## What differs between the runs"),
        "{text}"
    );

    let json = common::pipeline(&[
        "compare",
        host_dir.to_str().unwrap(),
        reef_dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let comparison: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let changes = comparison["environment"]["changes"].as_array().unwrap();
    let librbd = changes
        .iter()
        .find(|c| c["kind"] == "client" && c["what"] == "librbd")
        .unwrap_or_else(|| panic!("no librbd change: {changes:#?}"));
    assert!(librbd["value"].as_str().unwrap().starts_with("18.2."));
    assert_eq!(librbd["stages"], serde_json::json!(["fio-rbd"]));
    // The cluster and the kernel are the same ones.
    assert!(
        changes
            .iter()
            .all(|c| c["kind"] != "daemons" && c["kind"] != "kernel"),
        "{changes:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    pipeline_test_tiers::run(vec![live(
        "each_stage_records_its_client_and_compare_names_the_client_release",
        &[Tier::Cluster, Tier::Roots],
        each_stage_records_its_client_and_compare_names_the_client_release,
    )]);
}
