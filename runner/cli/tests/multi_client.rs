//! `s3-bench` and `swift-bench` from several client hosts at once: real
//! sshd hosts on 127.0.0.2 (node1) and 127.0.0.3 (node2) (`common::sshd`),
//! each running a `pipeline worker` the runner copied there, against the
//! sandbox gateway (`eval "$(pipeline sandbox env)"`).
//!
//! Checked with what is not ours: the gateway's perf counters (every
//! request the hosts made, once), the p99 of the union of both hosts'
//! recorded latencies (decoded from results.json with the hdrhistogram
//! crate and ranked by this test), `pgrep` over SSH (no worker left on any
//! host), and the gateway's bucket list (nothing left behind).

mod common;

use pipeline_test_tiers::{Tier, live};

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use common::gateway::{bucket_names, gateway_counters, metric, total};
use common::sshd::{ADDRESSES, Sshd};
use common::stage;
use serde_json::Value;

/// `tests/clients/NAME.yaml` with the harness's inventory appended, in a
/// fresh folder; the suite file and the run folder.
fn suite(sshd: &Sshd, name: &str) -> (PathBuf, PathBuf) {
    let dir = common::temp_dir(&format!("clients-{name}"));
    let yaml =
        std::fs::read_to_string(common::root().join(format!("tests/clients/{name}.yaml"))).unwrap();
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, format!("{yaml}\n{}", sshd.inventory_yaml())).unwrap();
    (file, dir.join("run"))
}

fn run_suite(file: &Path, run_dir: &Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    let mut args = vec![
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = common::pipeline(&args);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), results(run_dir, &output), output)
}

fn results(run_dir: &Path, output: &str) -> Value {
    let text = std::fs::read_to_string(run_dir.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json ({e})\n{output}"));
    serde_json::from_str(&text).unwrap()
}

fn find<'a>(s: &'a Value, name: &str, labels: &[(&str, &str)]) -> Option<&'a Value> {
    s["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name && labels.iter().all(|(k, v)| m["labels"][*k] == *v))
}

fn value(s: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    find(s, name, labels)
        .and_then(|m| m["value"].as_f64())
        .unwrap_or_else(|| panic!("no {name}{labels:?} in {s:#}"))
}

/// Every latency recorded in a histogram of results.json, as the values
/// HDR kept (each repeated as often as it was recorded).
fn samples(h: &Value) -> Vec<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(h["hdr"].as_str().unwrap())
        .unwrap();
    let hdr: hdrhistogram::Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut Cursor::new(bytes))
        .unwrap();
    hdr.iter_recorded()
        .flat_map(|v| std::iter::repeat_n(v.value_iterated_to(), v.count_at_value() as usize))
        .collect()
}

fn histogram<'a>(s: &'a Value, host: &str) -> &'a Value {
    s["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| {
            h["name"] == "latency"
                && h["labels"]["host"] == host
                && h["labels"]["op"] == "put"
                && h["labels"]["phase"] == "measure"
        })
        .unwrap_or_else(|| panic!("no latency histogram of {host}"))
}

/// Processes of `pipeline worker` on a host, and whatever runs it there
/// (`timeout`, the shell), by `pgrep` over SSH.
fn workers_on(sshd: &Sshd, address: &str) -> String {
    let out = sshd.ssh(address, "pgrep -af -- 'worker --for [^ ]*/' || true");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Nothing of the run is left: no worker (nor what runs it) on either
/// host, no bucket named after `suite` at the gateway, and every one of the
/// `buckets` in the run's ledger removed.
fn assert_nothing_left(sshd: &Sshd, suite: &str, r: &Value, buckets: usize) {
    for address in ADDRESSES {
        assert_eq!(
            workers_on(sshd, address),
            "",
            "a worker is left on {address}"
        );
    }
    let leftovers: Vec<String> = bucket_names()
        .into_iter()
        .filter(|b| b.contains(suite))
        .collect();
    assert!(leftovers.is_empty(), "buckets left: {leftovers:?}");
    let ledger = r["created"].as_array().unwrap();
    assert_eq!(ledger.len(), buckets, "{ledger:#?}");
    assert!(ledger.iter().all(|b| b["removed"] == true), "{ledger:#?}");
}

fn two_hosts_count_what_the_gateway_counts_and_merge_their_histograms() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "put");
    let before = gateway_counters();
    let (code, r, output) = run_suite(&file, &run_dir, &[]);
    let after = gateway_counters();
    assert_eq!(code, Some(0), "{output}\n{r:#}");
    let s3 = stage(&r, "s3");
    let swift = stage(&r, "swift");
    // Each host did its operations; the merged count is their sum, and the
    // gateway saw every one of them once.
    for (s, ops, size) in [(s3, 150.0, 4096.0), (swift, 100.0, 8192.0)] {
        for host in ["node1", "node2"] {
            let labels = [("host", host), ("op", "put"), ("phase", "measure")];
            assert_eq!(value(s, "ops", &labels), ops, "{host}");
            assert_eq!(value(s, "bytes", &labels), ops * size);
        }
        let all = [("host", "all"), ("op", "put"), ("phase", "measure")];
        assert_eq!(value(s, "ops", &all), 2.0 * ops);
    }
    let moved: Vec<u64> = before.iter().zip(after).map(|(b, a)| a - b).collect();
    // (No GETs: `total` of the per-host rows, not host=all.)
    let per_host = |s: &Value, name: &str| -> u64 {
        ["node1", "node2"]
            .iter()
            .map(|h| value(s, name, &[("host", h), ("op", "put"), ("phase", "measure")]) as u64)
            .sum()
    };
    let ours = [
        per_host(s3, "ops") + per_host(swift, "ops"),
        per_host(s3, "bytes") + per_host(swift, "bytes"),
        0,
        0,
    ];
    assert_eq!(
        moved, ours,
        "gateway (put, put bytes, get, get bytes) moved by {moved:?}, we report {ours:?}"
    );
    assert_eq!(total(s3, "ops", "put"), 600, "node1 + node2 + all");

    // p99 of host=all is that of both hosts' recorded latencies together,
    // ranked here: the smallest value with at least 99% of them at or below.
    for s in [s3, swift] {
        let mut union: Vec<u64> = samples(histogram(s, "node1"));
        union.extend(samples(histogram(s, "node2")));
        union.sort_unstable();
        let rank = ((0.99 * union.len() as f64).ceil() as usize).max(1) - 1;
        let expected = union[rank] as f64;
        let merged = value(
            s,
            "latency_p99",
            &[("host", "all"), ("op", "put"), ("phase", "measure")],
        );
        // HDR keeps 3 significant digits: the same bucket, to 0.1%.
        assert!(
            (merged - expected).abs() <= expected * 0.001 + 1.0,
            "host=all p99 {merged} µs, the union's {expected} µs"
        );
        let combined =
            &find(s, "latency_p99", &[("host", "all"), ("phase", "measure")]).unwrap()["combined"];
        assert_eq!(combined["count"], 2);
        // The rates of host=all are over the window both hosts measured in.
        let rate =
            &find(s, "ops_per_s", &[("host", "all"), ("phase", "measure")]).unwrap()["combined"];
        let window = value(s, "common_window_seconds", &[("host", "all")]);
        assert_eq!(rate["window_s"].as_f64(), Some(window));
        assert!(window > 0.0);
        // The start spread and the clocks are reported.
        let spread = value(s, "start_spread_ms", &[("host", "all")]);
        assert!((0.0..1000.0).contains(&spread), "{spread}");
        for host in ["node1", "node2"] {
            assert!(find(s, "clock_offset_ms", &[("host", host)]).is_some());
            assert!(find(s, "start_offset_ms", &[("host", host)]).is_some());
            assert!(value(s, "client_cores", &[("host", host)]) >= 1.0);
        }
        let notes = s["notes"].to_string();
        assert!(notes.contains("started together at"), "{notes}");
        assert!(notes.contains("clock offsets node1"), "{notes}");
        // Each host ran its own worker over SSH, which is recorded.
        let commands = s["commands"].to_string();
        assert!(
            commands.contains("[node1]") && commands.contains("worker --for"),
            "{commands}"
        );
    }
    // Nothing is left; one bucket per host and stage.
    assert_nothing_left(&sshd, "clients-put", &r, 4);
    // The hosts' binary cache keeps the last few copies, not every build's.
    let out = sshd.ssh(ADDRESSES[0], "ls ~/.cache/pipeline/bin");
    let copies = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("pipeline-"))
        .count();
    assert!((1..=3).contains(&copies), "{copies} copies in the cache");
    // No key of the gateway in any file of the run.
    for secret in ["AWS_SECRET_ACCESS_KEY", "ST_KEY"] {
        let secret = std::env::var(secret).unwrap();
        let out = Command::new("grep")
            .args(["-rlF", &secret])
            .arg(&run_dir)
            .output()
            .unwrap();
        assert!(
            out.stdout.is_empty(),
            "{secret}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // The report shows the hosts and the merged row.
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        report.contains("host=all, op=put, phase=measure"),
        "{report}"
    );
}

/// `pipeline run` of the `lost` suite in the background.
fn spawn_lost(file: &Path, run_dir: &Path, extra: &[&str]) -> Child {
    common::pipeline_command(
        &[
            &[
                "run",
                file.to_str().unwrap(),
                "--out",
                run_dir.to_str().unwrap(),
            ],
            extra,
        ]
        .concat(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// Waits (at most 120 s, a bound against a hang) until both workers are
/// in their measured phase: each worker's stream in the run folder says
/// `started`.
fn wait_until_measuring(run_dir: &Path) {
    for _ in 0..1200 {
        let started = std::fs::read_dir(run_dir.join("stages/s3"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("-worker.stdout"))
            .filter(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("\"type\":\"started\""))
            })
            .count();
        if started == 2 {
            // A few measured seconds on both.
            std::thread::sleep(Duration::from_secs(2));
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the workers never started measuring");
}

/// `pkill -SIGNAL` of node2's worker process itself, not the `timeout`
/// and shell that run it (both hosts are this machine: the worker is told
/// apart by its `--for …@node2` tag).
fn signal_node2_worker(sshd: &Sshd, signal: &str) {
    let out = sshd.ssh(
        ADDRESSES[1],
        &format!("pkill -{signal} -f '^[^ ]*/pipeline-[0-9a-f]* worker --for [^ ]*/s3@node2$'"),
    );
    assert!(
        out.status.success(),
        "no worker of node2 to signal: {out:?}"
    );
}

fn finish(child: Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn a_host_whose_worker_dies_fails_the_stage_by_name_and_nothing_is_left() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "lost");
    let child = spawn_lost(&file, &run_dir, &[]);
    wait_until_measuring(&run_dir);
    signal_node2_worker(&sshd, "KILL");
    let (code, output) = finish(child);
    let r = results(&run_dir, &output);
    assert_eq!(code, Some(1), "{output}");
    let s = stage(&r, "s3");
    assert_eq!(s["status"], "failed");
    let error = s["error"].as_str().unwrap();
    assert!(error.starts_with("node2: "), "{error}");
    assert!(error.contains("ended without a result"), "{error}");
    // Not the stage's timeout: the loss was noticed, the stage did not wait it out.
    assert!(
        !error.contains("timed out") && !error.contains("timeout"),
        "{error}"
    );
    // node1's worker was stopped and removed its bucket; node2's bucket,
    // left by its killed worker, went with the cleanup stage.
    assert_eq!(stage(&r, "cleanup")["status"], "succeeded", "{output}");
    assert_nothing_left(&sshd, "clients-lost", &r, 2);
}

fn a_silent_host_is_excluded_when_the_suite_says_so_and_marked() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "lost");
    let child = spawn_lost(
        &file,
        &run_dir,
        &[
            "--set",
            "lost=exclude",
            "--set",
            "silence=3s",
            "--set",
            "duration=12s",
        ],
    );
    wait_until_measuring(&run_dir);
    // Stopped, not killed: it holds its SSH session and says nothing.
    signal_node2_worker(&sshd, "STOP");
    let (code, output) = finish(child);
    let r = results(&run_dir, &output);
    assert_eq!(code, Some(0), "{output}");
    let s = stage(&r, "s3");
    assert_eq!(s["status"], "succeeded");
    let notes = s["notes"].to_string();
    assert!(
        notes.contains("host node2 was lost (it stopped answering")
            && notes.contains("NOT in host=all"),
        "{notes}"
    );
    assert_eq!(value(s, "host_lost", &[("host", "node2")]), 1.0);
    // node1's figures are there; no host=all figure pretends to cover node2.
    assert!(metric(s, "ops", "get", "measure") > 0.0);
    assert!(find(s, "ops_per_s", &[("host", "node2")]).is_none());
    assert!(find(s, "ops_per_s", &[("host", "all")]).is_none());
    // The stopped worker was killed by its pid: nothing is left.
    assert_nothing_left(&sshd, "clients-lost", &r, 2);
}

/// `pipelines/multi-client.yaml`, the example, with its Ansible inventory,
/// against the harness's hosts: `plan` shows where each worker runs, and
/// the run merges both hosts in every stage.
fn the_multi_client_example_plans_and_runs_from_both_hosts() {
    let sshd = Sshd::start();
    let dir = common::temp_dir("clients-example");
    let root = common::root();
    std::fs::copy(
        root.join("pipelines/multi-client.yaml"),
        dir.join("multi-client.yaml"),
    )
    .unwrap();
    // The inventory on the port the harness got (2222 unless another run holds it).
    let ini = std::fs::read_to_string(root.join("pipelines/multi-client.hosts.ini"))
        .unwrap()
        .replace("ansible_port=2222", &format!("ansible_port={}", sshd.port));
    std::fs::write(dir.join("multi-client.hosts.ini"), ini).unwrap();
    let file = dir.join("multi-client.yaml");
    let env = |cmd: &mut Command| {
        cmd.env("PIPELINE_TEST_SSH_KEY", &sshd.key)
            .env("PIPELINE_TEST_KNOWN_HOSTS", &sshd.known_hosts);
    };
    let mut plan = common::pipeline_command(&["plan", file.to_str().unwrap()]);
    env(&mut plan);
    let out = plan.output().unwrap();
    let plan = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{plan}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for host in ["client1 (root@127.0.0.2", "client2 (root@127.0.0.3"] {
        assert!(plan.contains(&format!("-> on {host}")), "{plan}");
    }
    assert!(plan.contains("start them together"), "{plan}");
    let run_dir = dir.join("run");
    let mut run = common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
        "--set",
        "seconds=2",
        "--set",
        "concurrency=4",
    ]);
    env(&mut run);
    let out = run.output().unwrap();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = results(&run_dir, &output);
    assert_eq!(out.status.code(), Some(0), "{output}");
    for (id, op) in [("s3-put", "put"), ("s3-get", "get"), ("swift-get", "get")] {
        let s = stage(&r, id);
        let all = value(
            s,
            "ops_per_s",
            &[("host", "all"), ("op", op), ("phase", "measure")],
        );
        let hosts: f64 = ["client1", "client2"]
            .iter()
            .map(|h| value(s, "ops", &[("host", h), ("op", op), ("phase", "measure")]))
            .sum();
        assert!(all > 0.0 && hosts > 0.0, "{id}: {all} {hosts}");
        assert!(
            value(s, "common_window_seconds", &[("host", "all")]) > 0.5,
            "{id}"
        );
    }
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        report.contains("| Client host | clock offset |"),
        "{report}"
    );
    assert!(bucket_names().iter().all(|b| !b.contains("multi-client")));
}

fn ctrl_c_stops_every_worker_and_their_buckets_are_removed() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "lost");
    let child = spawn_lost(&file, &run_dir, &[]);
    wait_until_measuring(&run_dir);
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let (code, output) = finish(child);
    assert_eq!(code, Some(130), "{output}");
    let r = results(&run_dir, &output);
    assert_eq!(stage(&r, "s3")["status"], "cancelled", "{output}");
    assert_nothing_left(&sshd, "clients-lost", &r, 2);
}

/// `rados -p POOL ls` on the test cluster: the objects left in a pool.
fn objects_in(pool: &str) -> Vec<String> {
    let (ok, text) = common::cluster::ceph("rados", &["-p", pool, "ls"]);
    assert!(ok, "{text}");
    text.lines().map(str::to_string).collect()
}

fn rados_bench_on_two_hosts_starts_together_and_cleanup_finds_both_hosts_objects() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "rados");
    let (code, r, output) = run_suite(&file, &run_dir, &[]);
    let left = objects_in("pipeline-test-clients-rados");
    let (deleted, text) = common::cluster::ceph(
        "ceph",
        &[
            "osd",
            "pool",
            "delete",
            "pipeline-test-clients-rados",
            "pipeline-test-clients-rados",
            "--yes-i-really-really-mean-it",
        ],
    );
    assert!(deleted, "{text}");
    assert_eq!(code, Some(0), "{output}\n{r:#}");
    for id in ["write", "read"] {
        let s = stage(&r, id);
        let spread = value(s, "start_spread_ms", &[("host", "all")]);
        assert!((0.0..1000.0).contains(&spread), "{id}: {spread}");
        assert!(value(s, "bandwidth", &[("host", "all")]) > 0.0, "{id}");
        for host in ["node1", "node2"] {
            assert!(
                value(s, "bandwidth", &[("host", host)]) > 0.0,
                "{id} {host}"
            );
            assert!(find(s, "clock_offset_ms", &[("host", host)]).is_some());
        }
        assert!(
            s["notes"].to_string().contains("started together at"),
            "{id}"
        );
    }
    // Each host wrote under its own run name, and both are in the ledger.
    let ledger = r["created"].to_string();
    for host in ["node1", "node2"] {
        assert!(
            ledger.contains(&format!("-{host}\"")),
            "no run name of {host} in {ledger}"
        );
    }
    assert!(
        r["created"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] != "pool")
            .all(|c| c["removed"] == true),
        "{ledger}"
    );
    assert!(left.is_empty(), "objects left in the pool: {left:?}");
}

/// A `pipeline:` in the inventory that is no pipeline binary (or none at
/// all) fails the stage naming the host and the binary, before any load.
fn a_binary_named_by_the_inventory_that_is_not_a_worker_is_refused_by_name() {
    let sshd = Sshd::start();
    for (node, address, binary, expected) in [
        (
            "node1",
            ADDRESSES[0],
            "/bin/true",
            "ended without answering (exit code 0)",
        ),
        (
            "node2",
            ADDRESSES[1],
            "/nonexistent/pipeline",
            "ended without answering (exit code 127)",
        ),
    ] {
        let (file, run_dir) = suite(&sshd, "put");
        let line = format!("{node}: {{address: {address}, port: {}}}", sshd.port);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains(&line), "{text}");
        let named = format!(
            "{node}: {{address: {address}, port: {}, pipeline: {binary}}}",
            sshd.port
        );
        std::fs::write(&file, text.replace(&line, &named)).unwrap();
        let (code, r, output) = run_suite(&file, &run_dir, &["--only", "s3"]);
        assert_eq!(code, Some(1), "{output}");
        let error = stage(&r, "s3")["error"].as_str().unwrap().to_string();
        let shown = format!("{node}: `{binary} worker` {expected}");
        assert!(error.starts_with(&shown), "{error}");
        assert!(
            error.contains(
                "the inventory's `pipeline:` must name a pipeline binary of this runner's version"
            ),
            "{error}"
        );
        // The other host's worker was stopped and removed its bucket.
        assert_nothing_left(
            &sshd,
            "clients-put",
            &r,
            r["created"].as_array().unwrap().len(),
        );
    }
}

/// `search:` from two client hosts: every step's rate is split between
/// them, the knee is judged on the merged (host=all) figures, and the hold
/// ran at its share of the knee on each host.
fn a_knee_search_from_two_hosts_splits_each_steps_rate_between_them() {
    let sshd = Sshd::start();
    let (file, run_dir) = suite(&sshd, "knee");
    let (code, r, output) = run_suite(&file, &run_dir, &[]);
    assert_eq!(code, Some(0), "{output}");
    let s = stage(&r, "s3");
    let top = |name: &str| {
        s["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name && m["labels"].get("search_step").is_none())
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name}: {s:#}"))
    };
    let knee = top("knee");
    // Found (no floor: how high depends on the machine and its load).
    assert!(knee > 0.0, "{knee}");
    assert!(knee < 40000.0, "a step above the knee failed");
    let notes = s["notes"].to_string();
    assert!(notes.contains("did not ("), "{notes}");
    // The hold: each host at half the hold's target.
    let hold = top("hold_target_rate");
    for host in ["node1", "node2"] {
        let each = value(s, "target_rate", &[("host", host)]);
        assert!(
            (each - hold / 2.0).abs() < 1e-6,
            "{host}: {each}, hold {hold}"
        );
        assert!(
            value(
                s,
                "ops",
                &[("host", host), ("op", "get"), ("phase", "measure")]
            ) > 0.0
        );
    }
    // The figures judged are host=all's: its p99 from the merged histograms.
    assert!(
        find(
            s,
            "latency_p99",
            &[("host", "all"), ("op", "get"), ("phase", "measure")]
        )
        .is_some()
    );
    assert!(top("search_steps") >= 3.0);
    // One bucket name per host, made and removed again by every step and
    // the hold: the ledger has each once.
    assert_nothing_left(&sshd, "clients-knee", &r, 2);
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "a_knee_search_from_two_hosts_splits_each_steps_rate_between_them",
            &[Tier::Cluster, Tier::Hosts],
            a_knee_search_from_two_hosts_splits_each_steps_rate_between_them,
        ),
        live(
            "two_hosts_count_what_the_gateway_counts_and_merge_their_histograms",
            &[Tier::Cluster, Tier::Hosts],
            two_hosts_count_what_the_gateway_counts_and_merge_their_histograms,
        ),
        live(
            "a_host_whose_worker_dies_fails_the_stage_by_name_and_nothing_is_left",
            &[Tier::Cluster, Tier::Hosts],
            a_host_whose_worker_dies_fails_the_stage_by_name_and_nothing_is_left,
        ),
        live(
            "a_silent_host_is_excluded_when_the_suite_says_so_and_marked",
            &[Tier::Cluster, Tier::Hosts],
            a_silent_host_is_excluded_when_the_suite_says_so_and_marked,
        ),
        live(
            "the_multi_client_example_plans_and_runs_from_both_hosts",
            &[Tier::Cluster, Tier::Hosts],
            the_multi_client_example_plans_and_runs_from_both_hosts,
        ),
        live(
            "ctrl_c_stops_every_worker_and_their_buckets_are_removed",
            &[Tier::Cluster, Tier::Hosts],
            ctrl_c_stops_every_worker_and_their_buckets_are_removed,
        ),
        live(
            "rados_bench_on_two_hosts_starts_together_and_cleanup_finds_both_hosts_objects",
            &[Tier::Cluster, Tier::Hosts],
            rados_bench_on_two_hosts_starts_together_and_cleanup_finds_both_hosts_objects,
        ),
        live(
            "a_binary_named_by_the_inventory_that_is_not_a_worker_is_refused_by_name",
            &[Tier::Cluster, Tier::Hosts],
            a_binary_named_by_the_inventory_that_is_not_a_worker_is_refused_by_name,
        ),
    ]);
}
