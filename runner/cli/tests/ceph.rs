//! Real pipelines against a real Ceph cluster: the sandbox that
//! `scripts/test.sh` starts (CEPH_CONF from `pipeline sandbox env`). The tests
//! share the one cluster, so they take turns.

mod common;

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

static CLUSTER: Mutex<()> = Mutex::new(());

fn conf() -> String {
    std::env::var("CEPH_CONF").expect(
        "CEPH_CONF is not set: these tests need a cluster; run them through scripts/test.sh, \
         which starts the sandbox (or `eval \"$(pipeline sandbox env)\"` first)",
    )
}

/// `ceph ARGS` against the test cluster; (success, stdout+stderr).
fn ceph(program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(program)
        .args(["--conf", &conf()])
        .args(args)
        .output()
        .expect("run ceph");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn pools() -> Vec<String> {
    let (ok, text) = ceph("ceph", &["osd", "pool", "ls", "--format", "json"]);
    assert!(ok, "{text}");
    serde_json::from_str(text.trim()).unwrap()
}

fn delete_pool(pool: &str) {
    ceph(
        "ceph",
        &[
            "osd",
            "pool",
            "delete",
            pool,
            pool,
            "--yes-i-really-really-mean-it",
        ],
    );
}

/// Runs a pipeline; returns (exit code, results.json, report.md).
fn run(file: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let (code, results, report, _) = run_in(file, extra);
    (code, results, report)
}

fn run_in(file: &str, extra: &[&str]) -> (Option<i32>, Value, String, std::path::PathBuf) {
    let name = std::path::Path::new(file)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let dir = common::temp_dir(&format!("ceph-{name}"));
    let run_dir = dir.join("run");
    let mut args = vec!["run", file, "--out", run_dir.to_str().unwrap()];
    args.extend(extra);
    let out = common::pipeline(&args);
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json")).unwrap_or_else(|e| {
            panic!(
                "{file}: no results.json ({e})\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        }),
    )
    .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap_or_default();
    (out.status.code(), results, report, run_dir)
}

fn stage<'a>(results: &'a Value, id: &str) -> &'a Value {
    results["stages"]
        .as_array()
        .unwrap()
        .iter()
        .chain(results["cleanup"].as_array().unwrap())
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no stage {id} in {results:#}"))
}

fn metric(stage: &Value, name: &str) -> f64 {
    stage["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["value"].as_f64())
        .unwrap_or_else(|| panic!("no metric {name} in {stage:#}"))
}

#[test]
fn full_baseline_runs_and_leaves_nothing_behind() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let (code, r, report, run_dir) = run_in(
        "pipelines/full-baseline.yaml",
        &[
            "--set",
            "seconds=2",
            "--set",
            "max_objects=16",
            "--set",
            "rbd_io_total=8M",
            "--set",
            "fio_clients=2",
            "--set",
            "fio_image_size=64M",
        ],
    );
    assert_eq!(code, Some(0), "{r:#}");
    assert_eq!(r["status"], "succeeded");
    for (id, name, unit) in [
        ("rados-write", "bandwidth", "MiB/s"),
        ("rados-read[mode=seq]", "iops_avg", "IOPS"),
        ("rados-read[mode=rand]", "latency_avg", "s"),
        ("rbd-bench[io_type=write]", "iops", "IOPS"),
        ("rbd-bench[io_type=read]", "bandwidth", "B/s"),
        ("fio-rbd[rw=randwrite]", "write_iops", "IOPS"),
        ("fio-rbd[rw=randread]", "read_clat_p99", "us"),
        ("capacity", "raw_total", "B"),
    ] {
        let s = stage(&r, id);
        assert_eq!(s["status"], "succeeded", "{s:#}");
        let m = s["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap();
        assert!(m["value"].as_f64().unwrap() > 0.0, "{id} {name}: {m}");
        assert_eq!(m["unit"], unit, "{id} {name}");
    }
    // rados bench's per-second series is kept as an artifact.
    assert!(
        stage(&r, "rados-write")["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"].as_str().unwrap().starts_with("series"))
    );
    // `pipeline parse` reads the saved raw output with the stage's parser: same figures.
    let write = stage(&r, "rados-write");
    let stdout = write["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"].as_str().unwrap().contains(" bench "))
        .unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    let parsed = common::pipeline(&[
        "parse",
        "rados-bench",
        run_dir.join(stdout).to_str().unwrap(),
    ]);
    assert_eq!(
        parsed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let parsed: Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(parsed["metrics"], write["metrics"]);
    // The environment section: cluster versions and state.
    assert!(r["environment"]["ceph versions"].is_object());
    assert!(report.contains("## Environment") && report.contains("ceph osd tree"));
    // Everything created was removed; the cluster has the pools it had.
    assert!(
        r["created"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["removed"] == true),
        "{:#}",
        r["created"]
    );
    assert_eq!(pools(), before);
}

#[test]
fn failing_stage_is_followed_by_cleanup() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let (code, r, _) = run("tests/ceph/failing-read-then-cleanup.yaml", &[]);
    assert_eq!(code, Some(1));
    let failed = stage(&r, "read-without-data");
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("Must write data before running a read benchmark!"),
        "{failed:#}"
    );
    assert_eq!(stage(&r, "never")["status"], "skipped");
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded");
    assert!(!pools().contains(&"pipeline-test-failing".to_string()));
}

#[test]
fn existing_pool_is_refused_and_untouched() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let pool = "pipeline-test-existing";
    delete_pool(pool);
    assert!(ceph("ceph", &["osd", "pool", "create", pool, "8"]).0);
    ceph(
        "ceph",
        &["osd", "pool", "application", "enable", pool, "rados"],
    );
    let marker = std::env::temp_dir().join(format!("pipeline-marker-{}", std::process::id()));
    std::fs::write(&marker, "not the runner's").unwrap();
    assert!(
        ceph(
            "rados",
            &[
                "-p",
                pool,
                "put",
                "someone-elses-object",
                marker.to_str().unwrap()
            ]
        )
        .0
    );

    let (code, r, _) = run("tests/ceph/existing-pool.yaml", &[]);
    assert_eq!(code, Some(1));
    let refused = stage(&r, "pool");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("already exists and this run did not create it"),
        "{refused:#}"
    );
    assert_eq!(stage(&r, "write")["status"], "skipped");
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded");
    assert!(r["created"].as_array().unwrap().is_empty());
    assert!(
        pools().contains(&pool.to_string()),
        "the pre-existing pool was deleted"
    );
    let (ok, listing) = ceph("rados", &["-p", pool, "ls"]);
    assert!(
        ok && listing.lines().any(|l| l == "someone-elses-object"),
        "{listing}"
    );
    delete_pool(pool);
    let _ = std::fs::remove_file(marker);
}

#[test]
fn pool_delete_disabled_is_reported_and_nothing_else_deleted() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let pool = "pipeline-test-nodelete";
    assert!(
        ceph(
            "ceph",
            &[
                "tell",
                "mon.a",
                "config",
                "set",
                "mon_allow_pool_delete",
                "false"
            ]
        )
        .0
    );
    let (code, r, report) = run("tests/ceph/pool-delete-disabled.yaml", &[]);
    assert!(
        ceph(
            "ceph",
            &[
                "tell",
                "mon.a",
                "config",
                "set",
                "mon_allow_pool_delete",
                "true"
            ]
        )
        .0
    );

    assert_eq!(
        code,
        Some(1),
        "a cleanup that could not remove the pool fails the run"
    );
    let cleanup = stage(&r, "cleanup");
    assert_eq!(cleanup["status"], "failed");
    let error = cleanup["error"].as_str().unwrap();
    assert!(
        error.contains("pool `pipeline-test-nodelete` was left in place")
            && error.contains("mon_allow_pool_delete"),
        "{error}"
    );
    assert!(report.contains("was left in place"));
    // The pool stays, but what could be removed inside it was.
    assert!(pools().contains(&pool.to_string()));
    let (_, images) = ceph("rbd", &["ls", pool]);
    assert!(images.trim().is_empty(), "images left: {images}");
    let (_, objects) = ceph("rados", &["-p", pool, "ls"]);
    assert!(
        !objects.contains("benchmark_data"),
        "benchmark objects left: {objects}"
    );
    let created = r["created"].as_array().unwrap();
    assert!(
        created
            .iter()
            .any(|c| c["kind"] == "pool" && c["removed"] == false)
    );
    assert!(
        created
            .iter()
            .any(|c| c["kind"] == "rbd-image" && c["removed"] == true)
    );
    delete_pool(pool);
}

#[test]
fn stage_timeout_kills_rados_and_cleans_up() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let started = std::time::Instant::now();
    let (code, r, _) = run("tests/ceph/stage-timeout.yaml", &[]);
    assert_eq!(code, Some(1));
    let s = stage(&r, "long-write");
    assert_eq!(s["status"], "failed");
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .starts_with("timed out after 3.0s"),
        "{s:#}"
    );
    assert!(s["duration_s"].as_f64().unwrap() < 30.0);
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded");
    assert!(!pools().contains(&"pipeline-test-timeout".to_string()));
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn ec_vs_replica_runs_side_by_side() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let (code, r, _) = run(
        "pipelines/ec-vs-replica.yaml",
        &["--set", "seconds=2", "--set", "max_objects=8"],
    );
    assert_eq!(code, Some(0), "{r:#}");
    for pool in ["pipeline-replica3", "pipeline-ec21"] {
        assert!(metric(stage(&r, &format!("write[pool={pool}]")), "bandwidth") > 0.0);
        assert!(metric(stage(&r, &format!("seq-read[pool={pool}]")), "bandwidth") > 0.0);
    }
    assert_eq!(pools(), before);
}

/// The cluster's health checks now, from `ceph health -f json`.
fn health_checks() -> Vec<String> {
    let (ok, text) = ceph("ceph", &["health", "--format", "json"]);
    assert!(ok, "{text}");
    let health: Value = serde_json::from_str(text.trim()).unwrap();
    health["checks"]
        .as_object()
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default()
}

/// Clears the noout flag even when the test fails halfway.
struct NooutSet;

impl Drop for NooutSet {
    fn drop(&mut self) {
        ceph("ceph", &["osd", "unset", "noout"]);
    }
}

/// ceph-health with the noout flag set (HEALTH_WARN, OSDMAP_FLAGS): `fail_on:
/// warn` fails naming the check; ignoring every check present passes and
/// still records them (metrics, outputs, notes, environment).
#[test]
fn ceph_health_gates_on_the_configured_health() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let (ok, text) = ceph("ceph", &["osd", "set", "noout"]);
    assert!(ok, "{text}");
    let _unset = NooutSet;
    // The monitor lists the flag with its next health update.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut checks = health_checks();
    while !checks.iter().any(|c| c == "OSDMAP_FLAGS") {
        assert!(
            std::time::Instant::now() < deadline,
            "no OSDMAP_FLAGS check after `ceph osd set noout`: {checks:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
        checks = health_checks();
    }
    // Not `ceph-health`: `run` takes that folder (from the file name) for the run.
    let dir = common::temp_dir("ceph-health-suite");
    let file = dir.join("health.yaml");
    std::fs::write(
        &file,
        format!(
            "name: health\nstages:\n  - id: strict\n    uses: ceph-health\n    with: {{fail_on: warn}}\n    continue_on_error: true\n  - id: lenient\n    uses: ceph-health\n    with:\n      fail_on: warn\n      ignore: [{}]\n",
            checks.join(", ")
        ),
    )
    .unwrap();
    let (code, r, _) = run(file.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{r:#}");
    let strict = stage(&r, "strict");
    assert_eq!(strict["status"], "failed", "{strict:#}");
    let error = strict["error"].as_str().unwrap();
    assert!(
        error.contains("HEALTH_WARN") && error.contains("OSDMAP_FLAGS (noout flag(s) set)"),
        "{error}"
    );
    let lenient = stage(&r, "lenient");
    assert_eq!(lenient["status"], "succeeded", "{lenient:#}");
    assert_eq!(lenient["outputs"]["health"], "HEALTH_WARN");
    assert!(
        lenient["outputs"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "OSDMAP_FLAGS")
    );
    assert_eq!(metric(lenient, "health_status"), 1.0);
    assert!(metric(lenient, "health_checks") >= 1.0);
    assert!(
        lenient["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("HEALTH_WARN OSDMAP_FLAGS: noout flag(s) set")),
        "{lenient:#}"
    );
    assert_eq!(
        r["environment"]["ceph health detail"]["status"],
        "HEALTH_WARN"
    );
}
