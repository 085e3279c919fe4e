//! `s3-bench` against a real gateway: the sandbox's radosgw
//! (`eval "$(pipeline sandbox env)"` sets AWS_ENDPOINT_URL and the keys).
//! Run under the cluster lock, which also keeps the gateway's perf counters
//! free of other tests' traffic:
//! `flock /tmp/pipeline-ceph.lock cargo test -p pipeline --test objgw`.
//!
//! What we claim is checked with tools that are not ours: `curl
//! --aws-sigv4` lists buckets and keys, and the gateway's own perf counters
//! (`ceph --admin-daemon …rgw….asok perf dump`) must have moved by exactly
//! the operations and bytes the stage reports.

mod common;

use pipeline_test_tiers::{Tier, live};

use common::gateway::{bucket_names, curl, env, gateway_counters, keys, metric, total};
use common::stage;

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

/// One test at a time: the perf-counter deltas must be ours alone.
static GATEWAY: Mutex<()> = Mutex::new(());

/// Runs a pipeline; (exit code, results.json, run folder, stdout+stderr).
fn run(
    file: &str,
    extra: &[&str],
    env_overrides: &[(&str, &str)],
) -> (Option<i32>, Value, PathBuf, String) {
    let name = std::path::Path::new(file)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let dir = common::temp_dir(&format!("objgw-{name}"));
    let run_dir = dir.join("run");
    let mut args = vec!["run", file, "--out", run_dir.to_str().unwrap()];
    args.extend(extra);
    let mut cmd = common::pipeline_command(&args);
    for (k, v) in env_overrides {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run pipeline");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(run_dir.join("results.json"))
            .unwrap_or_else(|e| panic!("{file}: no results.json ({e})\n{output}")),
    )
    .unwrap();
    (out.status.code(), results, run_dir, output)
}

/// No file of the run holds the S3 secret key or the Swift key.
fn assert_secret_absent(run_dir: &std::path::Path) {
    for secret in [env("AWS_SECRET_ACCESS_KEY"), env("ST_KEY")] {
        assert_absent(run_dir, &secret);
    }
}

fn assert_absent(run_dir: &std::path::Path, secret: &str) {
    let mut stack = vec![run_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).to_string();
                assert!(
                    !text.contains(secret),
                    "the secret key is in {}",
                    path.display()
                );
            }
        }
    }
}

/// Runs `file`, checks it succeeded, left no bucket named after it, and
/// that the gateway counted exactly the PUTs, GETs and bytes reported.
fn run_and_cross_check(file: &str, id: &str, plan_name: &str) -> Value {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let before = gateway_counters();
    let (code, r, run_dir, output) = run(file, &[], &[]);
    let after = gateway_counters();
    assert_eq!(code, Some(0), "{output}\n{r:#}");
    let s = stage(&r, id).clone();
    let moved: Vec<u64> = before.iter().zip(after).map(|(b, a)| a - b).collect();
    let gets = total(&s, "ops", "get");
    // radosgw (16.2, 18.2 and 20.2 alike) adds the object's last byte offset
    // minus its first (an inclusive range, so size - 1) to its get bytes
    // (`get_b`; 20.2: `get_obj_bytes`) for every GET: measured on 16.2,
    // 400 GETs of 64 KiB moved get_b by 400 x 65535, 774 GETs of 8 KiB by
    // 774 x 8191. Our byte count is the bodies received, which the stage
    // also compares byte for byte with what was PUT.
    // A HEAD counts as a get (with no bytes) in all three releases' counters:
    // 99 GETs and 201 HEADs of 4 KiB moved `get` by 300 and `get_b` by 99 x 4095.
    let ours = [
        total(&s, "ops", "put"),
        total(&s, "bytes", "put"),
        gets + total(&s, "ops", "head"),
        total(&s, "bytes", "get") - gets,
    ];
    assert_eq!(
        moved, ours,
        "gateway (put, put bytes, get, get bytes) moved by {moved:?}, we report {ours:?}"
    );
    let leftovers: Vec<String> = bucket_names()
        .into_iter()
        .filter(|b| b.contains(plan_name))
        .collect();
    assert!(leftovers.is_empty(), "buckets left behind: {leftovers:?}");
    let ledger = r["created"].as_array().unwrap();
    assert!(!ledger.is_empty(), "the buckets are in the ledger: {r:#}");
    assert!(
        ledger.iter().all(|res| res["removed"] == true),
        "{ledger:#?}"
    );
    assert_secret_absent(&run_dir);
    s
}

fn put_runs_counts_what_the_gateway_counts_and_leaves_nothing() {
    let s = run_and_cross_check("tests/objgw/put.yaml", "put", "objgw-put");
    assert_eq!(metric(&s, "ops", "put", "measure"), 300.0);
    // The sandbox gateway is on loopback: its CPU is read from /proc.
    let gateway_cpu = s["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "gateway_cpu_seconds")
        .and_then(|m| m["value"].as_f64())
        .expect("gateway_cpu_seconds for a local gateway");
    // 300 PUTs cost radosgw well over one clock tick (10 ms).
    assert!(gateway_cpu > 0.0, "{gateway_cpu}");
    assert!(metric(&s, "ops_per_s", "put", "measure") > 0.0);
    assert!(
        metric(&s, "latency_p99", "put", "measure") >= metric(&s, "latency_p50", "put", "measure")
    );
    let histograms = s["histograms"]
        .as_array()
        .expect("histograms in results.json");
    assert!(
        histograms
            .iter()
            .any(|h| h["name"] == "latency" && h["count"] == 300)
    );
}

fn get_prefills_verifies_and_leaves_nothing() {
    let s = run_and_cross_check("tests/objgw/get.yaml", "get", "objgw-get");
    assert_eq!(metric(&s, "ops", "put", "prefill"), 40.0);
    assert_eq!(metric(&s, "ops", "get", "measure"), 400.0);
    assert_eq!(metric(&s, "bytes", "get", "measure"), 400.0 * 65536.0);
    assert!(
        metric(&s, "ttfb_p50", "get", "measure") <= metric(&s, "latency_p50", "get", "measure")
    );
}

fn mixed_runs_every_operation_and_leaves_nothing() {
    let s = run_and_cross_check("tests/objgw/mixed.yaml", "mixed", "objgw-mixed");
    let artifacts = s["artifacts"].to_string();
    for op in ["get", "put", "delete"] {
        assert!(metric(&s, "ops", op, "measure") > 0.0, "no {op} measured");
        for series in ["ops_per_s", "bandwidth", "latency_p99"] {
            let name = format!("{op}_{series}");
            assert!(artifacts.contains(&name), "no series {name}: {artifacts}");
        }
    }
}

fn wrong_credentials_fail_at_once_with_one_clear_message() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let wrong = "not-the-secret-key-of-this-gateway";
    let (code, r, run_dir, output) = run(
        "tests/objgw/put.yaml",
        &[],
        &[("AWS_SECRET_ACCESS_KEY", wrong)],
    );
    assert_ne!(code, Some(0), "{output}");
    let error = stage(&r, "put")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("refused the credentials"),
        "{error}\n{output}"
    );
    assert!(error.contains("SignatureDoesNotMatch"), "{error}");
    assert!(
        !output.contains(wrong)
            && !std::fs::read_to_string(run_dir.join("results.json"))
                .unwrap()
                .contains(wrong)
    );
    assert!(bucket_names().iter().all(|b| !b.contains("objgw-put")));
}

fn a_pre_existing_bucket_keeps_its_other_objects() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let bucket = format!("pipeline-test-s3-existing-{}", std::process::id());
    let (status, body) = curl("PUT", &format!("/{bucket}"), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = curl("PUT", &format!("/{bucket}/keep-me"), Some("not ours"));
    assert_eq!(status, 200, "{body}");
    let set = format!("bucket={bucket}");
    let (code, r, _, output) = run("tests/objgw/existing-bucket.yaml", &["--set", &set], &[]);
    let left = keys(&bucket);
    let still_there = bucket_names().contains(&bucket);
    curl("DELETE", &format!("/{bucket}/keep-me"), None);
    curl("DELETE", &format!("/{bucket}"), None);
    assert_eq!(code, Some(0), "{output}\n{r:#}");
    assert!(still_there, "the pre-existing bucket was deleted");
    assert_eq!(left, vec!["keep-me".to_string()]);
    assert!(metric(stage(&r, "put"), "ops", "put", "measure") > 0.0);
}

/// `pipeline run FILE --out DIR/run` in the background; the child and its run folder.
fn spawn_run(file: &str, name: &str) -> (std::process::Child, PathBuf) {
    let run_dir = common::temp_dir(name).join("run");
    let child = common::pipeline_command(&["run", file, "--out", run_dir.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start pipeline");
    (child, run_dir)
}

/// Polls `done` every 100 ms for at most 60 s (a bound against a hang, not
/// a timing); panics naming `what` when it never happens.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what} did not happen within 60 s");
}

fn ctrl_c_stops_the_load_and_still_removes_the_bucket() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let (mut child, run_dir) = spawn_run("tests/objgw/interrupted.yaml", "objgw-interrupted");
    // The load runs once its bucket exists.
    let mut started = false;
    for _ in 0..300 {
        if bucket_names()
            .iter()
            .any(|b| b.contains("objgw-interrupted"))
        {
            started = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let mut status = None;
    for _ in 0..600 {
        if let Some(s) = child.try_wait().expect("wait for pipeline") {
            status = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let Some(status) = status else {
        let _ = child.kill();
        panic!("the runner did not exit after SIGINT");
    };
    assert!(started, "the s3-bench bucket never appeared");
    assert_eq!(status.code(), Some(130));
    let leftovers: Vec<String> = bucket_names()
        .into_iter()
        .filter(|b| b.contains("objgw-interrupted"))
        .collect();
    assert!(leftovers.is_empty(), "buckets left behind: {leftovers:?}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let ledger = results["created"].as_array().unwrap();
    assert!(
        !ledger.is_empty() && ledger.iter().all(|r| r["removed"] == true),
        "{ledger:#?}"
    );
}

fn swift_put_counts_what_the_gateway_counts_and_leaves_nothing() {
    let s = run_and_cross_check("tests/objgw/swift-put.yaml", "swift-put", "objgw-swift-put");
    assert_eq!(s["plugin"], "swift-bench");
    assert_eq!(metric(&s, "ops", "put", "measure"), 300.0);
    assert_eq!(metric(&s, "bytes", "put", "measure"), 300.0 * 4096.0);
    assert!(
        metric(&s, "latency_p99", "put", "measure") >= metric(&s, "latency_p50", "put", "measure")
    );
}

fn swift_mixed_runs_every_operation_over_two_containers_and_leaves_nothing() {
    let s = run_and_cross_check(
        "tests/objgw/swift-mixed.yaml",
        "swift-mixed",
        "objgw-swift-mixed",
    );
    for op in ["get", "put", "delete"] {
        assert!(metric(&s, "ops", op, "measure") > 0.0, "no {op} measured");
    }
    assert_eq!(metric(&s, "ops", "put", "prefill"), 80.0);
    assert!(
        metric(&s, "ttfb_p50", "get", "measure") <= metric(&s, "latency_p50", "get", "measure")
    );
}

fn a_wrong_swift_key_fails_at_once_with_one_clear_message() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let wrong = "not-the-swift-key-of-this-gateway";
    let (code, r, run_dir, output) = run("tests/objgw/swift-put.yaml", &[], &[("ST_KEY", wrong)]);
    assert_ne!(code, Some(0), "{output}");
    let s = stage(&r, "swift-put");
    let error = s["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error.contains(&format!(
            "refused the key of Swift user `{}` (HTTP 401)",
            env("ST_USER")
        )),
        "{error}\n{output}"
    );
    assert_eq!(total(s, "ops", "put"), 0, "no request after the refusal");
    assert_absent(&run_dir, wrong);
    assert!(!output.contains(wrong));
    assert!(
        bucket_names()
            .iter()
            .all(|b| !b.contains("objgw-swift-put"))
    );
}

fn a_target_rate_issues_requests_on_its_schedule_and_says_so() {
    let s = run_and_cross_check("tests/objgw/rate.yaml", "rate", "objgw-rate");
    let target = s["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "target_rate")
        .expect("target_rate");
    assert_eq!(target["value"], 50.0);
    // The schedule has 50 x 2 s requests due in the measured phase (one more
    // for the rounding of 1/50 s): no more are issued, however fast the
    // gateway answers (a bound, not a timing).
    let measured = metric(&s, "ops", "put", "measure");
    assert!((1.0..=101.0).contains(&measured), "{measured}");
    let notes = s["notes"].to_string();
    assert!(notes.contains("target rate 50 ops/s"), "{notes}");
    assert!(notes.contains("coordinated omission corrected"), "{notes}");
}

fn head_and_list_run_beside_get_and_are_counted_apart() {
    let s = run_and_cross_check("tests/objgw/head-list.yaml", "head-list", "objgw-head-list");
    let head = metric(&s, "ops", "head", "measure");
    let get = metric(&s, "ops", "get", "measure");
    let list = metric(&s, "ops", "list", "measure");
    assert_eq!(head + get + list, 400.0);
    assert!(head > 0.0 && get > 0.0 && list > 0.0, "{head} {get} {list}");
    assert!(metric(&s, "latency_p99", "list", "measure") > 0.0);
    let bandwidth_of = |op: &str| {
        s["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "bandwidth" && m["labels"]["op"] == op)
    };
    assert!(bandwidth_of("get") && !bandwidth_of("head") && !bandwidth_of("list"));
}

fn steady_state_says_whether_it_was_reached() {
    let s = run_and_cross_check("tests/objgw/steady.yaml", "steady", "objgw-steady");
    let value = |name: &str| {
        s["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let reached = value("steady_state");
    let notes = s["notes"].to_string();
    if reached == 1.0 {
        // Ended by the steady state, which needs its 3 s window first.
        let measured = value("measure_seconds");
        assert!(measured >= 3.0, "{measured}");
        assert!(notes.contains("steady state reached after"), "{notes}");
    } else {
        assert_eq!(reached, 0.0);
        assert!(notes.contains("steady state NOT reached"), "{notes}");
    }
}

/// The sandbox gateway's pid.
fn gateway_pid() -> i32 {
    let sandbox = std::env::var("PIPELINE_SANDBOX_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/tmp/pipeline-sandbox".into());
    let file = std::path::Path::new(&sandbox).join("run/client.rgw.sandbox.pid");
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{file:?}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// SIGSTOP on the gateway; SIGCONT when dropped, whatever the test did.
struct GatewayStopped(i32);

impl Drop for GatewayStopped {
    fn drop(&mut self) {
        // SAFETY: signalling the sandbox's gateway, which this test stopped.
        unsafe {
            libc::kill(self.0, libc::SIGCONT);
        }
    }
}

fn a_gateway_that_stops_answering_fails_the_stage_with_counted_errors_and_cleanup_still_runs() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let (mut child, run_dir) =
        spawn_run("tests/objgw/gateway-stopped.yaml", "objgw-gateway-stopped");
    wait_for("the load starting", || {
        bucket_names()
            .iter()
            .any(|b| b.contains("objgw-gateway-stopped"))
    });
    let pid = gateway_pid();
    // SAFETY: signalling the sandbox's gateway; the guard resumes it.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let stopped = GatewayStopped(pid);
    wait_for("the stage failing", || {
        common::results(&run_dir).is_some_and(|r| r["stages"][0]["status"] == "failed")
    });
    drop(stopped);
    let mut status = None;
    wait_for("the run ending", || {
        status = child.try_wait().expect("wait for pipeline");
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(1));
    let r = common::results(&run_dir).expect("results.json");
    let put = stage(&r, "put");
    let error = put["error"].as_str().unwrap_or_default();
    // The failure carries the counts by kind (the report shows it).
    assert!(error.contains("requests failed"), "{error}");
    assert!(error.contains("put timeout: "), "{error}");
    assert_eq!(stage(&r, "remove")["status"], "succeeded", "{r:#}");
    let leftovers: Vec<String> = bucket_names()
        .into_iter()
        .filter(|b| b.contains("objgw-gateway-stopped"))
        .collect();
    assert!(leftovers.is_empty(), "buckets left behind: {leftovers:?}");
}

fn objects_of_several_sizes_are_written_and_read_back_each_at_its_size() {
    let s = run_and_cross_check("tests/objgw/sizes.yaml", "sizes", "objgw-sizes");
    let puts = total(&s, "ops", "put");
    let put_bytes = total(&s, "bytes", "put");
    // Every PUT was 1 KiB or 64 KiB, and both sizes were written.
    assert!(
        put_bytes > puts * 1024 && put_bytes < puts * 65536,
        "{puts} {put_bytes}"
    );
    assert!(metric(&s, "ops", "head", "measure") > 0.0);
    let r = run_and_cross_check(
        "tests/objgw/swift-range.yaml",
        "swift-range",
        "objgw-swift-range",
    );
    let gets = metric(&r, "ops", "get", "measure");
    let bytes = metric(&r, "bytes", "get", "measure");
    assert_eq!(gets, 200.0);
    assert!(
        (200.0 * 1024.0..=200.0 * 32768.0).contains(&bytes),
        "{bytes}"
    );
}

fn large_objects_go_in_parts_with_latency_per_object_and_per_part() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let (code, r, _, output) = run("tests/objgw/multipart.yaml", &[], &[]);
    assert_eq!(code, Some(0), "{output}\n{r:#}");
    for id in ["s3-multipart", "swift-multipart"] {
        let s = stage(&r, id);
        // The prefill writes 3 objects, then 8 measured operations follow.
        let objects = total(s, "ops", "put");
        let parts = total(s, "ops", "put-part");
        assert_eq!(
            parts,
            3 * objects,
            "{id}: 12 MiB in 5 MiB parts is 3 parts each"
        );
        assert_eq!(total(s, "bytes", "put-part"), total(s, "bytes", "put"));
        assert_eq!(total(s, "bytes", "put"), objects * (12 << 20));
        let gets = total(s, "ops", "get");
        assert_eq!(
            total(s, "bytes", "get"),
            gets * (12 << 20),
            "{id}: whole objects read back"
        );
        // A whole object takes at least as long as its median part.
        let p50 = |op: &str| {
            s["metrics"].as_array().unwrap().iter().find_map(|m| {
                (m["name"] == "latency_p50"
                    && m["labels"]["op"] == op
                    && m["labels"]["phase"] == "prefill")
                    .then(|| m["value"].as_f64().unwrap())
            })
        };
        assert!(p50("put").unwrap() >= p50("put-part").unwrap(), "{id}");
    }
    let leftovers: Vec<String> = bucket_names()
        .into_iter()
        .filter(|b| b.contains("objgw-multipart"))
        .collect();
    assert!(leftovers.is_empty(), "buckets left behind: {leftovers:?}");
}

fn keys_can_come_from_a_profile_of_the_shared_credentials_file() {
    let _turn = GATEWAY.lock().unwrap_or_else(|e| e.into_inner());
    let dir = common::temp_dir("objgw-profile");
    let file = dir.join("credentials");
    std::fs::write(
        &file,
        format!(
            "[default]\naws_access_key_id = NOT-THIS-ONE\n[bench]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            env("AWS_ACCESS_KEY_ID"),
            env("AWS_SECRET_ACCESS_KEY")
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline_command(&[
        "run",
        "tests/objgw/put.yaml",
        "--out",
        run_dir.to_str().unwrap(),
    ])
    .env_remove("AWS_ACCESS_KEY_ID")
    .env_remove("AWS_SECRET_ACCESS_KEY")
    .env("AWS_SHARED_CREDENTIALS_FILE", &file)
    .env("AWS_PROFILE", "bench")
    .output()
    .expect("run pipeline");
    let r = common::results(&run_dir).expect("results.json");
    assert!(
        out.status.success(),
        "{}{r:#}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(metric(stage(&r, "put"), "ops", "put", "measure"), 300.0);
    assert_secret_absent(&run_dir);
}

fn main() {
    pipeline_test_tiers::run(vec![
        live("put_runs_counts_what_the_gateway_counts_and_leaves_nothing", &[Tier::Cluster], put_runs_counts_what_the_gateway_counts_and_leaves_nothing),
        live("get_prefills_verifies_and_leaves_nothing", &[Tier::Cluster], get_prefills_verifies_and_leaves_nothing),
        live("mixed_runs_every_operation_and_leaves_nothing", &[Tier::Cluster], mixed_runs_every_operation_and_leaves_nothing),
        live("wrong_credentials_fail_at_once_with_one_clear_message", &[Tier::Cluster], wrong_credentials_fail_at_once_with_one_clear_message),
        live("a_pre_existing_bucket_keeps_its_other_objects", &[Tier::Cluster], a_pre_existing_bucket_keeps_its_other_objects),
        live("ctrl_c_stops_the_load_and_still_removes_the_bucket", &[Tier::Cluster], ctrl_c_stops_the_load_and_still_removes_the_bucket),
        live("swift_put_counts_what_the_gateway_counts_and_leaves_nothing", &[Tier::Cluster], swift_put_counts_what_the_gateway_counts_and_leaves_nothing),
        live("swift_mixed_runs_every_operation_over_two_containers_and_leaves_nothing", &[Tier::Cluster], swift_mixed_runs_every_operation_over_two_containers_and_leaves_nothing),
        live("a_wrong_swift_key_fails_at_once_with_one_clear_message", &[Tier::Cluster], a_wrong_swift_key_fails_at_once_with_one_clear_message),
        live("a_target_rate_issues_requests_on_its_schedule_and_says_so", &[Tier::Cluster], a_target_rate_issues_requests_on_its_schedule_and_says_so),
        live("head_and_list_run_beside_get_and_are_counted_apart", &[Tier::Cluster], head_and_list_run_beside_get_and_are_counted_apart),
        live("steady_state_says_whether_it_was_reached", &[Tier::Cluster], steady_state_says_whether_it_was_reached),
        live("a_gateway_that_stops_answering_fails_the_stage_with_counted_errors_and_cleanup_still_runs", &[Tier::Cluster], a_gateway_that_stops_answering_fails_the_stage_with_counted_errors_and_cleanup_still_runs),
        live("objects_of_several_sizes_are_written_and_read_back_each_at_its_size", &[Tier::Cluster], objects_of_several_sizes_are_written_and_read_back_each_at_its_size),
        live("large_objects_go_in_parts_with_latency_per_object_and_per_part", &[Tier::Cluster], large_objects_go_in_parts_with_latency_per_object_and_per_part),
        live("keys_can_come_from_a_profile_of_the_shared_credentials_file", &[Tier::Cluster], keys_can_come_from_a_profile_of_the_shared_credentials_file),
    ]);
}
