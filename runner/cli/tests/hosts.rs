//! Multi-host stages against real SSH: the harness (`common::sshd`) starts
//! an OpenSSH server on 127.0.0.2 (node1) and 127.0.0.3 (node2). Every
//! `tests/hosts/*.yaml` gets the harness's `inventory:` appended and runs
//! with `pipeline run`; the shape of the outcome (exit code, stage statuses,
//! metric names, errors, or the refusal on stderr when nothing ran) is
//! compared with `.expect.json` (`UPDATE_EXPECT=1` rewrites it). Throughput
//! figures are only checked to be positive.
//!
//! A `# harness: ...` line in a case asks for a broken setup:
//! `key=wrong`, `known_hosts=empty`, `node3-down` (a node3 at 127.0.0.4,
//! where nothing listens), `node2-missing=PROGRAM`,
//! `node2-read-only-proc-sys`, `dir` (a fresh folder as `--set dir=...`).

mod common;

use pipeline_test_tiers::{Tier, live, live_case};

use std::path::{Path, PathBuf};

use common::sshd::{ADDRESSES, DOWN_ADDRESS, Options, Sshd};
use serde_json::{Value, json};

fn text(out: &std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The harness itself: the key works on both addresses; a wrong key, an
/// unknown host key and a host that is down fail with the messages the
/// engine classifies.
fn sshd_harness_accepts_the_key_and_refuses_the_rest() {
    let sshd = Sshd::start();
    for address in ADDRESSES {
        let (code, stdout, stderr) = text(&sshd.ssh(address, "echo ok; id -u"));
        assert_eq!(code, Some(0), "{address}: {stderr}\n{}", sshd.log_text());
        assert_eq!(stdout, "ok\n0\n");
    }
    let wrong = sshd.ssh_with(&sshd.wrong_key, &sshd.known_hosts, ADDRESSES[0], "true");
    let (code, _, stderr) = text(&wrong);
    assert_eq!(code, Some(255));
    assert!(
        stderr.contains("root@127.0.0.2: Permission denied (publickey)."),
        "{stderr}"
    );
    let unknown = sshd.ssh_with(&sshd.key, &sshd.empty_known_hosts, ADDRESSES[0], "true");
    let (code, _, stderr) = text(&unknown);
    assert_eq!(code, Some(255));
    assert!(stderr.contains("Host key verification failed."), "{stderr}");
    let (code, _, stderr) = text(&sshd.ssh(DOWN_ADDRESS, "true"));
    assert_eq!(code, Some(255));
    assert!(
        stderr.contains(&format!(
            "ssh: connect to host {DOWN_ADDRESS} port {}: Connection refused",
            sshd.port
        )),
        "{stderr}"
    );
    let inventory = sshd.inventory_yaml();
    assert!(inventory.starts_with("inventory:\n  ssh:\n    user: root\n"));
    assert!(inventory.contains(&format!(
        "  hosts:\n    node1: {{address: 127.0.0.2, port: {p}}}\n    node2: {{address: 127.0.0.3, port: {p}}}\n  groups:\n    osds: [node1, node2]\n    clients: [node2]\n",
        p = sshd.port
    )));
}

/// The harness's broken node2: a program missing from its PATH, and a
/// read-only /proc/sys/vm, while node1 is untouched.
fn sshd_harness_can_break_node2() {
    let sshd = Sshd::start_with(Options {
        node2_missing: vec!["fio".into()],
        node2_read_only_proc_sys: true,
    });
    let probe = "command -v fio || echo no-fio; echo 3 > /proc/sys/vm/drop_caches && echo dropped";
    let (code, stdout, stderr) = text(&sshd.ssh(ADDRESSES[0], probe));
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "/usr/bin/fio\ndropped\n");
    let (code, stdout, stderr) = text(&sshd.ssh(ADDRESSES[1], probe));
    assert_eq!(code, Some(2), "{stdout}");
    assert_eq!(stdout, "no-fio\n");
    assert!(
        stderr.contains("cannot create /proc/sys/vm/drop_caches: Read-only file system"),
        "{stderr}"
    );
    // The read-only view is node2's sessions' own; this machine's is untouched.
    assert!(
        !std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .contains("/proc/sys/vm")
    );
}

/// What a case's `# harness:` lines ask for.
#[derive(Default)]
struct Setup {
    options: Options,
    wrong_key: bool,
    empty_known_hosts: bool,
    node3_down: bool,
    dir: bool,
}

fn setup(yaml: &str) -> Setup {
    let mut s = Setup::default();
    for line in yaml.lines() {
        let Some(words) = line.strip_prefix("# harness:") else {
            continue;
        };
        for word in words.split_whitespace() {
            match word.split_once('=') {
                Some(("key", "wrong")) => s.wrong_key = true,
                Some(("known_hosts", "empty")) => s.empty_known_hosts = true,
                Some(("node2-missing", program)) => {
                    s.options.node2_missing.push(program.to_string())
                }
                None if word == "node3-down" => s.node3_down = true,
                None if word == "node2-read-only-proc-sys" => {
                    s.options.node2_read_only_proc_sys = true
                }
                None if word == "dir" => s.dir = true,
                _ => panic!("unknown harness directive `{word}`"),
            }
        }
    }
    s
}

/// Replaces what differs between runs: the port, the test's folders, run ids.
fn normalize(text: &str, sshd: &Sshd, dirs: &[&Path]) -> String {
    let mut t = text.to_string();
    for d in dirs {
        t = t.replace(d.to_str().unwrap(), "TMP");
    }
    t = t.replace(&format!(":{}", sshd.port), ":PORT");
    without_run_ids(&t)
}

/// `20261130T100000Z` (a run id's timestamp) -> `RUNID`.
fn without_run_ids(text: &str) -> String {
    let shape = |w: &[u8]| {
        w.len() == 16
            && w[..8].iter().all(u8::is_ascii_digit)
            && w[8] == b'T'
            && w[9..15].iter().all(u8::is_ascii_digit)
            && w[15] == b'Z'
    };
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if i + 16 <= bytes.len() && shape(&bytes[i..i + 16]) {
            out.push_str("RUNID");
            i += 16;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn shape_of_stage(s: &Value) -> Value {
    // Each metric with the host it is for (`host=all`: the aggregate), so a
    // missing host row or aggregate shows; other labels (targets, tests)
    // are kept apart by the count.
    let mut names: Vec<String> = s["metrics"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    let name = m["name"].as_str()?;
                    Some(match m["labels"]["host"].as_str() {
                        Some(host) => format!("{name} host={host}"),
                        None => name.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort_unstable();
    json!({
        "id": s["id"],
        "status": s["status"],
        "metrics": names,
        "error": s["error"],
        "skip_reason": s["skip_reason"],
    })
}

/// Beside every benchmark that succeeded, this machine and each host that
/// has figures were watched over the run's SSH connections: one series per
/// host, this machine first, a sample a second on the runner's clock.
fn assert_hosts_watched(case: &str, results: &Value) {
    for stage in results["stages"].as_array().unwrap() {
        let metrics = stage["metrics"].as_array().cloned().unwrap_or_default();
        if stage["status"] != "succeeded" || metrics.is_empty() {
            continue;
        }
        let watches = stage["hosts"].as_array().cloned().unwrap_or_default();
        if watches.is_empty() {
            // Steps without headline figures (drop-caches) are not watched.
            continue;
        }
        let names: Vec<&str> = watches.iter().filter_map(|w| w["host"].as_str()).collect();
        assert_eq!(names[0], "local", "{case}: {names:?}");
        let hosts: std::collections::BTreeSet<&str> = metrics
            .iter()
            .filter_map(|m| m["labels"]["host"].as_str())
            .filter(|h| *h != "all" && *h != "local")
            .collect();
        let long = stage["duration_s"].as_f64().unwrap_or(0.0) >= 1.5;
        for host in hosts {
            let watch = watches
                .iter()
                .find(|w| w["host"] == host)
                .unwrap_or_else(|| panic!("{case}: {host} not watched: {names:?}"));
            if long {
                // What the remote host is, read over the same session.
                let manifest = &results["host_manifests"][host];
                assert!(
                    manifest["kernel"].is_string(),
                    "{case}: {host}: {manifest:#}"
                );
                let samples = watch["samples"].as_array();
                assert!(
                    samples.is_some_and(|s| !s.is_empty()
                        && s.iter().all(|x| {
                            !x["cpu_busy_pct"].as_array().unwrap().is_empty()
                                && x["memory_total_bytes"].as_u64().is_some_and(|m| m > 0)
                        })),
                    "{case}: {host}: {watch:#}"
                );
            }
        }
    }
}

/// Rates must be measurements: positive, on every host and the aggregate.
fn assert_rates_positive(case: &str, results: &Value) {
    for stage in results["stages"].as_array().unwrap() {
        for m in stage["metrics"].as_array().unwrap() {
            let unit = m["unit"].as_str().unwrap_or_default();
            if unit.ends_with("/s") || unit == "IOPS" {
                assert!(
                    m["value"].as_f64().unwrap() > 0.0,
                    "{case}: {} {m}",
                    stage["id"]
                );
            }
        }
    }
}

/// Hosts started together (`sync_start`, the `sync-start*` cases): every
/// host has its actual start against the earliest and its clock offset,
/// the spread is within a generous sanity bound (both hosts are this
/// machine), a note says when and how close, and the tools' stderr files
/// hold what the tools printed, not the remote shell's start report.
fn assert_started_together(case: &str, results: &Value, run_dir: &Path) {
    let stage = results["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "succeeded")
        .unwrap_or_else(|| panic!("{case}: no stage succeeded"));
    let value = |name: &str, host: &str| {
        stage["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name && m["labels"]["host"] == host)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("{case}: no {name}{{host={host}}}: {:#}", stage["metrics"]))
    };
    let spread = value("start_spread_ms", "all");
    assert!(
        (0.0..1000.0).contains(&spread),
        "{case}: spread {spread} ms"
    );
    for host in ["node1", "node2"] {
        let after = value("start_offset_ms", host);
        assert!((0.0..=spread).contains(&after), "{case}: {host} {after} ms");
        assert!(
            value("clock_offset_ms", host).abs() < 1000.0,
            "{case}: {host}"
        );
    }
    let notes: Vec<&str> = stage["notes"]
        .as_array()
        .map(|n| n.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        notes.iter().any(|n| n.starts_with("started together at ")
            && n.contains(" UTC: spread ")
            && n.contains(" ms over 2 hosts; clock offsets node1 ")
            && n.contains(", node2 ")),
        "{case}: {notes:?}"
    );
    for command in stage["commands"].as_array().unwrap() {
        let stderr = run_dir.join(command["stderr"].as_str().unwrap());
        let text = std::fs::read_to_string(&stderr).unwrap();
        assert!(!text.contains("@@pipeline-remote"), "{case}: {text}");
    }
}

/// Runs one case; returns its normalized shape.
fn run_case(case: &Path) -> Value {
    let name = case.file_stem().unwrap().to_string_lossy().to_string();
    let yaml = std::fs::read_to_string(case).unwrap();
    let want = setup(&yaml);
    let sshd = Sshd::start_with(want.options.clone());
    let dir = common::temp_dir(&format!("hosts-{name}"));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let extra = if want.node3_down {
        format!(
            "    node3: {{address: {DOWN_ADDRESS}, port: {}}}\n",
            sshd.port
        )
    } else {
        String::new()
    };
    let key = if want.wrong_key {
        &sshd.wrong_key
    } else {
        &sshd.key
    };
    let known_hosts = if want.empty_known_hosts {
        &sshd.empty_known_hosts
    } else {
        &sshd.known_hosts
    };
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "{yaml}\n{}",
            sshd.inventory_yaml_with(key, known_hosts, &extra)
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let mut args = vec![
        "run".to_string(),
        file.display().to_string(),
        "--out".into(),
        run_dir.display().to_string(),
    ];
    if want.dir {
        args.extend(["--set".into(), format!("dir={}", data.display())]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = common::pipeline(&args);
    let (code, stdout, stderr) = text(&out);
    let results: Option<Value> = std::fs::read_to_string(run_dir.join("results.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap());
    let shape = match &results {
        Some(r) => {
            assert_rates_positive(&name, r);
            assert_hosts_watched(&name, r);
            if name.starts_with("sync-start") {
                assert_started_together(&name, r, &run_dir);
            }
            json!({
                "exit_code": code,
                "status": r["status"],
                "stages": r["stages"].as_array().unwrap().iter().map(shape_of_stage).collect::<Vec<_>>(),
            })
        }
        // Refused before anything ran (validate, preflight): what it said.
        None => json!({"exit_code": code, "stderr": stderr.lines().collect::<Vec<_>>()}),
    };
    let text = serde_json::to_string_pretty(&shape).unwrap();
    let shape: Value = serde_json::from_str(&normalize(&text, &sshd, &[&dir])).unwrap();
    if want.dir {
        let left: Vec<PathBuf> = std::fs::read_dir(&data)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(left.is_empty(), "{name}: files left behind: {left:?}");
    }
    assert!(
        wait_until_gone(|| iperf3_servers().is_empty()),
        "{name}: iperf3 servers left running: {:?}",
        iperf3_servers()
    );
    assert!(
        std::fs::read_dir("/tmp").unwrap().flatten().all(|e| !e
            .file_name()
            .to_string_lossy()
            .starts_with("pipeline-iperf3-")),
        "{name}: an iperf3 pid file is left in /tmp"
    );
    if shape["exit_code"] != json!(0) && results.is_some() && std::env::var_os("VERBOSE").is_some()
    {
        eprintln!("{name}:\n{stdout}\n{stderr}");
    }
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
    shape
}

/// Command lines of iperf3 servers started by a stage (their pid file is ours).
fn iperf3_servers() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with("iperf3 ") && c.contains("/tmp/pipeline-iperf3-"))
        .collect()
}

/// Remote commands are ended by the `timeout` the engine wraps them in, a
/// moment after the stage: give them up to 10 s.
fn wait_until_gone(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    done()
}

/// One case of `tests/hosts/`: its run has the shape of its `.expect.json`.
fn host_case(case: &Path) -> Result<(), pipeline_test_tiers::Failed> {
    // The cases take turns, as they did in one loop: several start iperf3 on fixed ports.
    static CASES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = CASES.lock().unwrap_or_else(|e| e.into_inner());
    let shape = run_case(case);
    let text = serde_json::to_string_pretty(&shape).unwrap() + "\n";
    match common::golden(&case.with_extension("expect.json"), &text) {
        None => Ok(()),
        Some(diff) => Err(diff.into()),
    }
}

/// `pipelines/multi-host.yaml`, the example suite, against the harness's
/// hosts: key and known_hosts come from the environment it declares.
fn multi_host_example_runs() {
    let sshd = Sshd::start();
    let dir = common::temp_dir("hosts-multi-host-example");
    let mut file = common::root().join("pipelines/multi-host.yaml");
    if sshd.port != common::sshd::PREFERRED_PORT {
        // Another run holds 2222: the same suite on the port we got.
        let text = std::fs::read_to_string(&file).unwrap().replace(
            &format!("port: {}", common::sshd::PREFERRED_PORT),
            &format!("port: {}", sshd.port),
        );
        file = dir.join("multi-host.yaml");
        std::fs::write(&file, text).unwrap();
    }
    let run_dir = dir.join("run");
    let out = common::pipeline_command(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
        "--set",
        "seconds=1",
        "--set",
        "disk_size=16M",
    ])
    .env("PIPELINE_TEST_SSH_KEY", &sshd.key)
    .env("PIPELINE_TEST_KNOWN_HOSTS", &sshd.known_hosts)
    .output()
    .unwrap();
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    assert_rates_positive("multi-host", &r);
    let stages = r["stages"].as_array().unwrap();
    let statuses: Vec<(&str, &str)> = stages
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("drop-caches", "succeeded"),
            ("disk", "succeeded"),
            ("disks-together", "succeeded"),
            ("network", "succeeded")
        ]
    );
    let has = |id: &str, name: &str, labels: &[(&str, &str)]| {
        stages.iter().find(|s| s["id"] == id).unwrap()["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == name && labels.iter().all(|(k, v)| m["labels"][*k] == *v))
    };
    assert!(has(
        "disk",
        "bandwidth",
        &[("host", "node1"), ("test", "dd-write")]
    ));
    // Both hosts' fio started at one instant (`sync_start`).
    assert!(has("disks-together", "start_spread_ms", &[("host", "all")]));
    assert!(has("disks-together", "write_iops", &[("host", "all")]));
    assert!(has(
        "disk",
        "read_iops",
        &[("host", "all"), ("test", "fio-randread")]
    ));
    // fio's percentiles over both hosts come from their merged latency
    // histograms (json+ bins), which are kept next to the hosts' own.
    let disk = stages.iter().find(|s| s["id"] == "disk").unwrap();
    let p99 = disk["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["name"] == "read_clat_p99"
                && m["labels"]["host"] == "all"
                && m["labels"]["test"] == "fio-randread"
        })
        .unwrap();
    assert_eq!(
        p99["aggregate"],
        json!({"histogram": {"name": "read_clat", "quantile": 0.99}})
    );
    assert!(disk["histograms"].as_array().unwrap().iter().any(|h| {
        h["name"] == "read_clat"
            && h["labels"]["host"] == "all"
            && h["labels"]["test"] == "fio-randread"
    }));
    assert_eq!(disk["notes"], Value::Null, "{:#}", disk["notes"]);
    assert!(has(
        "network",
        "bits_per_second",
        &[
            ("client", "node2"),
            ("server", "node1"),
            ("side", "receiver")
        ]
    ));
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("bits_per_second"), "{report}");
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An `exec` stage on node1 and node2, `parallel` hosts at a time, reporting
/// a rate (200 MB/s on node1, 300 MB/s on node2: the last octet of the
/// address the host was reached at) and a latency declared `max`.
fn run_rates(sshd: &Sshd, parallel: u32) -> (Value, String) {
    let dir = common::temp_dir(&format!("hosts-batches-{parallel}"));
    let yaml = format!(
        r#"name: batches
stages:
  - id: rate
    uses: exec
    on: osds
    parallel: {parallel}
    with:
      shell: 'set -- $SSH_CONNECTION; echo "${{3##*.}}00"'
      metrics:
        - {{name: rate, regex: '(\d+)', unit: MB/s, direction: higher, headline: true}}
        - {{name: latency, regex: '(\d+)', unit: ms, direction: lower, aggregate: max}}
{}"#,
        sshd.inventory_yaml()
    );
    let file = dir.join("batches.yaml");
    std::fs::write(&file, yaml).unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (results["stages"][0].clone(), report)
}

/// `(host, value)` of every metric named `name`.
fn values_of(stage: &Value, name: &str) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = stage["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == name)
        .map(|m| {
            (
                m["labels"]["host"].as_str().unwrap().to_string(),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn pairs(v: &[(&str, f64)]) -> Vec<(String, f64)> {
    v.iter().map(|(h, x)| (h.to_string(), *x)).collect()
}

/// Rates of hosts that ran one after the other (`parallel: 1`) were measured
/// over different windows: host=all does not sum them, and the stage says
/// why. With both hosts at once (`parallel: 2`) it does.
fn host_all_sums_rates_only_of_hosts_that_ran_together() {
    let sshd = Sshd::start();

    let (sequential, report) = run_rates(&sshd, 1);
    assert_eq!(sequential["status"], "succeeded", "{sequential:#}");
    assert_eq!(
        values_of(&sequential, "rate"),
        pairs(&[("node1", 200.0), ("node2", 300.0)])
    );
    assert_eq!(
        sequential["notes"],
        json!([
            "the 2 hosts ran in 2 sequential batches of `parallel: 1`, so rates were not \
             summed into host=all (rate)"
        ])
    );
    // A maximum does not assume the hosts overlapped.
    assert_eq!(
        values_of(&sequential, "latency"),
        pairs(&[("all", 300.0), ("node1", 200.0), ("node2", 300.0)])
    );
    assert!(report.contains("max of 2 hosts"), "{report}");
    assert!(!report.contains("sum of 2 hosts"), "{report}");

    let (together, report) = run_rates(&sshd, 2);
    assert_eq!(
        values_of(&together, "rate"),
        pairs(&[("all", 500.0), ("node1", 200.0), ("node2", 300.0)])
    );
    let all = together["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "rate" && m["labels"]["host"] == "all")
        .unwrap();
    assert_eq!(all["aggregate"], "sum");
    assert_eq!(all["combined"], json!({"over": "host", "count": 2}));
    assert_eq!(together["notes"], Value::Null);
    assert!(
        report.contains("| rate | host=all (sum of 2 hosts) | 500 MB/s |"),
        "{report}"
    );
    drop(sshd);
}

/// Commands on another host report the CPU they used there (their shell's
/// `times`, appended to stderr), and the saved stderr file holds exactly
/// what the tool printed; a command killed before its shell reported has an
/// unknown CPU, and its stderr is still only the tool's.
fn remote_commands_report_their_cpu_and_keep_their_stderr() {
    let sshd = Sshd::start();
    let dir = common::temp_dir("hosts-remote-cpu");
    let file = dir.join("remote-cpu.yaml");
    let yaml = r#"name: remote-cpu
stages:
  - id: busy
    uses: exec
    on: node1
    with:
      shell: "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo 'tool: line 1' >&2; printf 'tool: no newline' >&2"
  - id: idle
    uses: exec
    on: node1
    with:
      command: [sleep, "0.3"]
  - id: killed
    uses: exec
    on: node1
    timeout: 1s
    continue_on_error: true
    with:
      shell: "echo 'tool: started' >&2; sleep 30"
"#;
    std::fs::write(&file, format!("{yaml}\n{}", sshd.inventory_yaml())).unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let command = |stage: usize| r["stages"][stage]["commands"][0].clone();
    let stderr_of = |stage: usize| {
        std::fs::read_to_string(run_dir.join(command(stage)["stderr"].as_str().unwrap())).unwrap()
    };

    let busy = command(0);
    assert_eq!(busy["host"], "node1");
    assert!(busy["cpu_user_s"].as_f64().unwrap() > 0.05, "{busy}");
    assert!(busy["cpu_sys_s"].as_f64().is_some(), "{busy}");
    assert_eq!(stderr_of(0), "tool: line 1\ntool: no newline");
    let cpu = &r["stages"][0]["command_cpu"];
    assert!(cpu["remote_s"].as_f64().unwrap() > 0.05, "{cpu}");
    assert_eq!(cpu["unknown"], 0);

    let idle = command(1);
    let idle_cpu = idle["cpu_user_s"].as_f64().unwrap() + idle["cpu_sys_s"].as_f64().unwrap();
    assert!(idle_cpu < 0.1, "a sleep: {idle}");
    assert_eq!(stderr_of(1), "");

    assert_eq!(r["stages"][2]["status"], "failed");
    let killed = command(2);
    assert!(
        killed["exit"].as_str().unwrap().starts_with("timeout"),
        "{killed}"
    );
    assert_eq!(killed["cpu_user_s"], Value::Null, "{killed}");
    assert_eq!(r["stages"][2]["command_cpu"]["unknown"], 1);
    assert_eq!(stderr_of(2), "tool: started\n");
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WASM plugin on another host: its command runs over SSH from a
/// minimal environment (`env -i --` on the far side) plus the variables the
/// pipeline grants; the far side's own session variables (SSH_*, MAIL...)
/// do not reach it. Uses the `hostile-env` test guest.
fn a_wasm_plugin_on_a_remote_host_gets_only_the_granted_environment() {
    let guest = common::root().join("plugins/guests/target/hostile_env.wasm");
    assert!(
        guest.is_file(),
        "build the test guests first: plugins/guests/build.sh --rust"
    );
    let sshd = Sshd::start();
    let dir = common::temp_dir("hosts-wasm-env");
    let file = dir.join("pipeline.yaml");
    std::fs::write(
        &file,
        format!(
            "name: wasm-env-remote\n{inventory}stages:\n  - id: env\n    uses: {guest}\n    on: node1\n    grants: {{exec: [env], env: [CEPH_ARGS]}}\n    with:\n      argv: [env]\n      env: ['CEPH_ARGS=--id admin --keyring \"/etc/ceph/a b\"']\n",
            inventory = sshd.inventory_yaml(),
            guest = guest.display(),
        ),
    )
    .unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}\n{}", sshd.log_text());
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let stage = &r["stages"][0];
    let printed = stage["outputs"]["stdout"].as_str().unwrap();
    assert!(
        printed.contains("CEPH_ARGS=--id admin --keyring \"/etc/ceph/a b\"\n"),
        "the value arrives intact through the remote shell:\n{printed}"
    );
    let names: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(
        names.contains(&"PATH"),
        "the far side's PATH is kept: {printed}"
    );
    for name in names {
        assert!(
            name == "CEPH_ARGS" || pipeline_stage_api::exec::MINIMAL_ENV.contains(&name),
            "`{name}` reached the plugin's program on node1:\n{printed}"
        );
    }
    assert_eq!(stage["commands"][0]["host"], "node1");
}

/// A host that disappears in the middle of a stage (its SSH session is
/// killed on the far side): the stage fails naming it, within the stage's
/// timeout, and nothing the stage started is left running on the other
/// host (checked with pgrep over SSH).
fn a_host_lost_mid_stage_is_named_and_nothing_is_left_running_elsewhere() {
    let sshd = Sshd::start();
    let dir = common::temp_dir("hosts-lost");
    let file = dir.join("lost.yaml");
    // node2 kills its own sshd session process (the far side of the
    // connection); node1 sleeps on.
    let yaml = r#"name: host-lost
stages:
  - id: both
    uses: exec
    on: [node1, node2]
    timeout: 6s
    with:
      shell: "case \"$SSH_CONNECTION\" in *' 127.0.0.3 '*) p=$$; while [ \"$(cat /proc/$p/comm)\" != sshd ]; do p=$(cut -d' ' -f4 /proc/$p/stat); done; kill -9 $p;; esac; exec sleep 299"
"#;
    std::fs::write(&file, format!("{yaml}\n{}", sshd.inventory_yaml())).unwrap();
    let run_dir = dir.join("run");
    let started = std::time::Instant::now();
    let out = common::pipeline(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let elapsed = started.elapsed();
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let stage = &r["stages"][0];
    assert_eq!(stage["status"], "failed", "{stage:#}");
    let error = stage["error"].as_str().unwrap();
    assert!(
        error.contains("host node2 (root@127.0.0.3:")
            && error.contains("the SSH connection was lost mid-command"),
        "the lost host is named: {error}"
    );
    assert!(
        elapsed < std::time::Duration::from_secs(20),
        "{elapsed:?}: {error}"
    );
    // node1's sleep ends with the stage's limit on the far side too.
    let gone = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, left, _) = text(&sshd.ssh(ADDRESSES[0], "pgrep -a -x sleep || true"));
        if !left.contains("299") {
            break;
        }
        assert!(
            std::time::Instant::now() < gone,
            "left running on node1: {left}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pipeline validate --check-hosts` (README): connects to every host and
/// checks the programs its stages need, without running anything; a host
/// that is down is named, and the exit code says invalid.
fn validate_check_hosts_connects_and_names_a_host_that_is_down() {
    let sshd = Sshd::start();
    let dir = common::temp_dir("hosts-check");
    let suite = "name: check-hosts\nstages:\n  - id: caches\n    uses: drop-caches\n    on: all\n    with: {if_not_permitted: skip}\n";
    let ready = dir.join("ready.yaml");
    std::fs::write(&ready, format!("{suite}\n{}", sshd.inventory_yaml())).unwrap();
    let out = common::pipeline(&["validate", "--check-hosts", ready.to_str().unwrap()]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(": ok (1 stage instance(s), 0 cleanup, hosts ready)"),
        "{stdout}"
    );

    let down = dir.join("down.yaml");
    let extra = format!(
        "    node3: {{address: {DOWN_ADDRESS}, port: {}}}\n",
        sshd.port
    );
    std::fs::write(
        &down,
        format!(
            "{suite}\n{}",
            sshd.inventory_yaml_with(&sshd.key, &sshd.known_hosts, &extra)
        ),
    )
    .unwrap();
    let out = common::pipeline(&["validate", "--check-hosts", down.to_str().unwrap()]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("host node3") && stderr.contains("connection refused"),
        "{stderr}"
    );
    // Without --check-hosts nothing connects: the same file is valid.
    let out = common::pipeline(&["validate", down.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).2);
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    // One trial per case of tests/hosts: `cargo test -p pipeline --test hosts -- cases::wrong-key`.
    let cases = common::cases("tests/hosts", "yaml")
        .into_iter()
        .map(|case| {
            let name = case.file_stem().unwrap().to_string_lossy().into_owned();
            live_case(&format!("cases::{name}"), &[Tier::Hosts], move || {
                host_case(&case)
            })
        });
    let mut trials: Vec<_> = cases.collect();
    trials.extend(vec![
        live(
            "sshd_harness_accepts_the_key_and_refuses_the_rest",
            &[Tier::Hosts],
            sshd_harness_accepts_the_key_and_refuses_the_rest,
        ),
        live(
            "sshd_harness_can_break_node2",
            &[Tier::Hosts],
            sshd_harness_can_break_node2,
        ),
        live(
            "multi_host_example_runs",
            &[Tier::Hosts],
            multi_host_example_runs,
        ),
        live(
            "host_all_sums_rates_only_of_hosts_that_ran_together",
            &[Tier::Hosts],
            host_all_sums_rates_only_of_hosts_that_ran_together,
        ),
        live(
            "remote_commands_report_their_cpu_and_keep_their_stderr",
            &[Tier::Hosts],
            remote_commands_report_their_cpu_and_keep_their_stderr,
        ),
        live(
            "a_wasm_plugin_on_a_remote_host_gets_only_the_granted_environment",
            &[Tier::Hosts],
            a_wasm_plugin_on_a_remote_host_gets_only_the_granted_environment,
        ),
        live(
            "a_host_lost_mid_stage_is_named_and_nothing_is_left_running_elsewhere",
            &[Tier::Hosts],
            a_host_lost_mid_stage_is_named_and_nothing_is_left_running_elsewhere,
        ),
        live(
            "validate_check_hosts_connects_and_names_a_host_that_is_down",
            &[Tier::Hosts],
            validate_check_hosts_connects_and_names_a_host_that_is_down,
        ),
    ]);
    pipeline_test_tiers::run(trials);
}
