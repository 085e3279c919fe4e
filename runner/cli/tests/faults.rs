//! Faults while running, against the sandbox cluster: a monitor that stops
//! answering, an OSD that goes away in the middle of a write. Each fault is
//! undone by the test (SIGCONT) before it returns, and the cluster is back
//! to active+clean before the next test.
//!
//! The OSD is stopped (SIGSTOP) and marked down rather than killed: the
//! sandbox's memstore OSDs keep their data in memory, so a killed one could
//! not come back, and every later test would run on a degraded cluster.

mod common;

use pipeline_test_tiers::{Tier, live};

use common::results;

use common::stage;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::cluster::{ceph, conf, pools, wait_until_clean};
use serde_json::Value;

static CLUSTER: Mutex<()> = Mutex::new(());

/// A sandbox daemon (`mon.a`, `osd.2`), by the pid file it keeps.
fn daemon_pid(name: &str) -> i32 {
    let dir = Path::new(&conf()).parent().unwrap().to_path_buf();
    let file = dir.join("run").join(format!("{name}.pid"));
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{file:?}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// SIGSTOP on a daemon; SIGCONT when dropped, whatever the test did.
struct Stopped(i32);

impl Stopped {
    fn daemon(name: &str) -> Stopped {
        let pid = daemon_pid(name);
        // SAFETY: signalling a sandbox daemon this test owns.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::kill(self.0, libc::SIGCONT);
        }
    }
}

fn spawn_run(suite: &str, name: &str) -> (Child, PathBuf) {
    let dir = common::temp_dir(name);
    let file = dir.join("suite.yaml");
    std::fs::write(&file, suite).unwrap();
    let run_dir = dir.join("run");
    let child = common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    (child, run_dir)
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until a stage of the run has a record with `status`.
fn wait_for_stage(run_dir: &Path, id: &str, limit: Duration) {
    wait_until(&format!("stage {id}"), limit, || {
        results(run_dir).is_some_and(|r| {
            r["stages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["id"] == id)
        })
    });
}

fn finish(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (status.code(), text);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the run did not end within {limit:?}:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

const MON_STOPPED: &str = r#"
name: fault-mon-stopped
env: [CEPH_CONF]
cluster:
  conf: "{{ env.CEPH_CONF }}"
  command_timeout: 8s
stages:
  - id: pool
    uses: ceph-pool
    with: {name: pipeline-test-mon-stopped, size: 1, pg_num: 8}
  - id: settle
    uses: exec
    with: {command: [sleep, "2"]}
  - id: info
    uses: ceph-info
cleanup:
  - id: cleanup
    uses: ceph-cleanup
"#;

/// The monitor stops answering after the pool exists: every Ceph command
/// gives up at the suite's `command_timeout` with a message that says so,
/// the run fails with results.json intact, and once the monitor is back
/// `pipeline cleanup` removes the pool.
fn a_stopped_monitor_fails_the_run_cleanly_and_pipeline_cleanup_finishes_later() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let started = Instant::now();
    let (child, run_dir) = spawn_run(MON_STOPPED, "fault-mon");
    wait_for_stage(&run_dir, "pool", Duration::from_secs(60));
    let (code, text) = {
        let _mon = Stopped::daemon("mon.a");
        finish(child, Duration::from_secs(120))
    };
    assert_eq!(code, Some(1), "{text}");
    let r = results(&run_dir).expect("results.json intact");
    assert_eq!(r["status"], "failed");
    let info = stage(&r, "info");
    assert_eq!(info["status"], "failed", "{info:#}");
    let error = info["error"].as_str().unwrap();
    assert!(error.starts_with("timed out after 8.0s"), "{error}");
    let cleanup = stage(&r, "cleanup");
    assert_eq!(cleanup["status"], "failed", "{cleanup:#}");
    assert!(
        cleanup["error"]
            .as_str()
            .unwrap()
            .contains("pipeline-test-mon-stopped"),
        "{cleanup:#}"
    );
    // Each command gave up at its limit: minutes, not hours.
    assert!(started.elapsed() < Duration::from_secs(150));

    // The monitor is back: `pipeline cleanup` removes what the run left.
    wait_until("the monitor", Duration::from_secs(60), || {
        ceph("ceph", &["osd", "pool", "ls"]).0
    });
    let out = common::pipeline(&["cleanup", run_dir.to_str().unwrap()]);
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("removed: pool `pipeline-test-mon-stopped`"),
        "{shown}"
    );
    assert_eq!(pools(), before);
    wait_until_clean();
}

const OSD_STOPPED: &str = r#"
name: fault-osd-stopped
env: [CEPH_CONF]
cluster:
  conf: "{{ env.CEPH_CONF }}"
  command_timeout: 30s
stages:
  - id: health-before
    uses: ceph-health
    with: {fail_on: never}
  - id: pool
    uses: ceph-pool
    with: {name: pipeline-test-osd-stopped, size: 3, pg_num: 8}
  - id: write
    uses: rados-bench
    with: {pool: "{{ stages.pool.outputs.pool }}", mode: write, seconds: 12, block_size: 4K, concurrent_ops: 4, max_objects: 100000}
  - id: health-after
    uses: ceph-health
    with: {fail_on: never}
cleanup:
  - id: cleanup
    uses: ceph-cleanup
"#;

/// An OSD stops in the middle of a rados bench write and is marked down:
/// the write completes degraded (size 3, min_size 2), the health before
/// and after is in the results and the report, and cleanup removes
/// everything.
fn an_osd_lost_mid_write_is_reported_and_cleanup_still_removes_everything() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let (child, run_dir) = spawn_run(OSD_STOPPED, "fault-osd");
    wait_until("the write to start", Duration::from_secs(60), || {
        std::fs::read_dir(run_dir.join("stages/write"))
            .map(|d| d.count() > 0)
            .unwrap_or(false)
    });
    std::thread::sleep(Duration::from_secs(3));
    let (code, text) = {
        let _osd = Stopped::daemon("osd.2");
        // What a dead OSD's peers would report after their grace period.
        let (ok, out) = ceph("ceph", &["osd", "down", "2"]);
        assert!(ok, "{out}");
        wait_for_stage(&run_dir, "write", Duration::from_secs(90));
        let r = results(&run_dir).unwrap();
        let write = stage(&r, "write");
        let (code, text) = finish(child, Duration::from_secs(120));
        (code, format!("{text}\n{write:#}"))
    };
    let r = results(&run_dir).expect("results.json");
    let write = stage(&r, "write");
    assert!(
        write["status"] == "succeeded" || write["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{text}"
    );
    let after = stage(&r, "health-after");
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert_eq!(after["outputs"]["health"], "HEALTH_WARN", "{after:#}");
    let checks = after["outputs"]["checks"].to_string();
    assert!(
        checks.contains("OSD_DOWN"),
        "health after the fault: {after:#}"
    );
    let before_checks = stage(&r, "health-before")["outputs"]["checks"].to_string();
    assert!(!before_checks.contains("OSD_DOWN"), "{before_checks}");
    assert!(report.contains("health-after") && report.contains("OSD_DOWN"));
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded", "{text}");
    assert_eq!(pools(), before);
    // Degraded but writable (size 3, min_size 2): the run succeeds.
    if write["status"] == "succeeded" {
        assert_eq!(code, Some(0), "{text}");
    }
    wait_until_clean();
}

const LONG_WRITE: &str = r#"
name: ctrl-c-ceph
env: [CEPH_CONF]
cluster:
  conf: "{{ env.CEPH_CONF }}"
  command_timeout: 30s
stages:
  - id: pool
    uses: ceph-pool
    with: {name: pipeline-test-ctrl-c, size: 1, pg_num: 8}
  - id: write
    uses: rados-bench
    with: {pool: "{{ stages.pool.outputs.pool }}", mode: write, seconds: 60, block_size: 4K, concurrent_ops: 4, max_objects: 100000}
cleanup:
  - id: cleanup
    uses: ceph-cleanup
"#;

/// Ctrl-C (SIGINT) in the middle of a rados bench write: rados stops, the
/// run ends cancelled (130), cleanup removes the pool and the objects, and
/// the cancelled stage keeps what the cluster and this machine did while it
/// ran (its telemetry), with no latency-bound verdict for figures it never had.
fn ctrl_c_during_a_ceph_stage_stops_it_and_cleanup_removes_what_it_wrote() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let (child, run_dir) = spawn_run(LONG_WRITE, "ctrl-c-ceph");
    wait_until("the write to start", Duration::from_secs(60), || {
        std::fs::read_dir(run_dir.join("stages/write"))
            .map(|d| d.count() > 0)
            .unwrap_or(false)
    });
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let (code, text) = finish(child, Duration::from_secs(90));
    assert_eq!(code, Some(130), "{text}");
    assert!(started.elapsed() < Duration::from_secs(45), "{text}");
    let r = results(&run_dir).unwrap();
    assert_eq!(r["status"], "cancelled");
    let write = stage(&r, "write");
    assert_eq!(write["status"], "cancelled", "{r:#}");
    // Interrupted 2 s or more after its folder appeared: samples from then.
    let cluster_samples = write["cluster"]["samples"].as_array().map_or(0, Vec::len);
    assert!(cluster_samples >= 2, "{write:#}");
    let local = write["hosts"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["host"] == "local"))
        .unwrap_or_else(|| panic!("{write:#}"));
    assert!(local["samples"].as_array().unwrap().len() >= 2, "{local:#}");
    assert!(write["latency_bound"] != true, "{write:#}");
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded", "{r:#}");
    assert!(
        r["created"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["removed"] == true),
        "{r:#}"
    );
    assert_eq!(pools(), before);
}

const SHARED_SUITE: &str = r#"
name: two-at-once
env: [CEPH_CONF]
cluster:
  conf: "{{ env.CEPH_CONF }}"
  command_timeout: 60s
stages:
  - id: pool
    uses: ceph-pool
    with: {name: "pipeline-test-{{ run.id }}", size: 1, pg_num: 8}
  - id: write
    uses: rados-bench
    with: {pool: "{{ stages.pool.outputs.pool }}", mode: write, seconds: 3, block_size: 4K, concurrent_ops: 4, max_objects: 100000}
cleanup:
  - id: cleanup
    uses: ceph-cleanup
"#;

/// Two runs of one suite started in the same second against one cluster:
/// different run ids (so different pools, bench run names and buckets),
/// both succeed, and each cleanup removes only what its own run created.
fn two_runs_of_one_suite_at_once_do_not_touch_each_other() {
    let _turn = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let before = pools();
    let (first, first_dir) = spawn_run(SHARED_SUITE, "two-at-once-1");
    let (second, second_dir) = spawn_run(SHARED_SUITE, "two-at-once-2");
    let (code1, text1) = finish(first, Duration::from_secs(120));
    let (code2, text2) = finish(second, Duration::from_secs(120));
    assert_eq!(code1, Some(0), "{text1}");
    assert_eq!(code2, Some(0), "{text2}");
    let (r1, r2) = (results(&first_dir).unwrap(), results(&second_dir).unwrap());
    assert_ne!(r1["run_id"], r2["run_id"]);
    let created = |r: &Value| -> Vec<String> {
        r["created"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["removed"], true, "{c}");
                format!("{} {}", c["kind"], c["name"])
            })
            .collect()
    };
    let (c1, c2) = (created(&r1), created(&r2));
    assert!(c1.iter().all(|c| !c2.contains(c)), "{c1:?}\n{c2:?}");
    assert_eq!(pools(), before);
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "a_stopped_monitor_fails_the_run_cleanly_and_pipeline_cleanup_finishes_later",
            &[Tier::Cluster],
            a_stopped_monitor_fails_the_run_cleanly_and_pipeline_cleanup_finishes_later,
        ),
        live(
            "an_osd_lost_mid_write_is_reported_and_cleanup_still_removes_everything",
            &[Tier::Cluster],
            an_osd_lost_mid_write_is_reported_and_cleanup_still_removes_everything,
        ),
        live(
            "ctrl_c_during_a_ceph_stage_stops_it_and_cleanup_removes_what_it_wrote",
            &[Tier::Cluster],
            ctrl_c_during_a_ceph_stage_stops_it_and_cleanup_removes_what_it_wrote,
        ),
        live(
            "two_runs_of_one_suite_at_once_do_not_touch_each_other",
            &[Tier::Cluster],
            two_runs_of_one_suite_at_once_do_not_touch_each_other,
        ),
    ]);
}
