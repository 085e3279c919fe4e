//! Whole runs without a cluster, beyond the `tests/runs/` data cases (those
//! are in `data_cases.rs`, one named test per file).

mod common;

use serde_json::Value;

use common::run_shape::run_shape;

#[test]
fn smoke_pipeline_runs_end_to_end() {
    let (shape, _) = run_shape(&common::root().join("pipelines/smoke.yaml"));
    assert_eq!(shape["exit_code"], 0);
    assert_eq!(shape["status"], "succeeded");
    let stages = shape["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 7, "{shape:#}");
    assert!(
        stages
            .iter()
            .any(|s| s["status"] == "failed" && s["id"] == "known-failure")
    );
    assert_eq!(shape["cleanup"][0]["status"], "succeeded");
}

/// Local commands record the CPU they and their children used (the kernel's
/// count, from `wait4`); results.json sums it per stage, and the report
/// shows it and notes a client-bound stage exactly when the figures say so.
#[test]
fn local_commands_record_their_cpu() {
    let dir = common::temp_dir("run-cpu");
    let file = dir.join("cpu.yaml");
    let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    std::fs::write(
        &file,
        format!(
            "name: cpu\nstages:\n  - id: busy\n    uses: exec\n    with:\n      shell: \"({busy}) & ({busy}); wait\"\n  - id: idle\n    uses: exec\n    with:\n      command: [sleep, \"0.3\"]\n"
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
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    let cpus = r["host"]["cpus"].as_f64().unwrap();
    for (stage, busy) in r["stages"].as_array().unwrap().iter().zip([true, false]) {
        let command = &stage["commands"][0];
        assert_eq!(command["host"], Value::Null, "ran here");
        let local = stage["command_cpu"]["local_s"].as_f64().unwrap();
        let own = command["cpu_user_s"].as_f64().unwrap() + command["cpu_sys_s"].as_f64().unwrap();
        assert!((local - own).abs() < 1e-9, "{stage}");
        if busy {
            // Both loops ran in children of the shell: their CPU counts.
            assert!(local > 0.1, "{stage}");
        } else {
            assert!(local < 0.1, "a sleep: {stage}");
        }
        let bound = local / stage["duration_s"].as_f64().unwrap() >= 0.9 * cpus;
        let section = report
            .split("\n### ")
            .find(|s| s.contains(&format!(". {}\n", stage["id"].as_str().unwrap())))
            .unwrap();
        assert_eq!(
            section.contains("- Note: client-bound:"),
            bound,
            "{section}"
        );
        assert!(section.contains(" user + "), "{section}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The host watch beside a benchmark: an iperf3 test that had to share
/// every core with busy loops (a noisy neighbour, made by its `during:`) is
/// flagged as limited by this machine's CPU, in results.json, the report
/// and the progress line; its samples cover the stage second by second.
#[test]
fn a_stage_starved_of_cpu_is_flagged_as_limited_by_it() {
    let dir = common::temp_dir("host-watch-cpu");
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        "tests/host-watch/cpu-contention.yaml",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let watch = &r["stages"][0]["hosts"][0];
    assert_eq!(watch["host"], "local", "{watch:#}");
    let samples = watch["samples"].as_array().unwrap();
    assert!((6..=8).contains(&samples.len()), "{watch:#}");
    let cores = r["host"]["cpus"].as_u64().unwrap() as usize;
    assert!(
        samples
            .iter()
            .all(|s| s["cpu_busy_pct"].as_array().unwrap().len() == cores),
        "{watch:#}"
    );
    let limits: Vec<&str> = watch["limited_by"]
        .as_array()
        .unwrap_or_else(|| panic!("no limit found: {watch:#}"))
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        limits
            .iter()
            .any(|l| l.starts_with("CPU: every core of local ≥ 90% busy (")),
        "{limits:?}"
    );
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(
        report.contains("🔎 **Limited by local:** CPU: every core of local")
            && report.contains("🔎 host-limited"),
        "{report}"
    );
    // The host's CPU and network, charted beside the stage's own series.
    for chart in ["host-local-cpu.svg", "host-local-network.svg"] {
        assert!(report.contains(chart), "{report}");
        let svg =
            std::fs::read_to_string(run_dir.join("stages/network/charts").join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{svg}");
    }
    let progress = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(
        progress.contains("[limited by CPU: every core of local"),
        "{progress}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--only ID` (README): just those stages, and cleanup; a stage whose
/// inputs it leaves out, or an unknown id, is refused before anything runs.
#[test]
fn only_runs_the_named_stages_and_cleanup() {
    let dir = common::temp_dir("only");
    let suite = dir.join("only.yaml");
    std::fs::write(
        &suite,
        "name: only\nstages:\n  - id: a\n    uses: exec\n    with: {command: [echo, a]}\n  - id: b\n    uses: exec\n    with: {command: [echo, \"{{ stages.a.outputs.stdout }}\"]}\n  - id: c\n    uses: exec\n    with: {command: [echo, c]}\ncleanup:\n  - id: z\n    uses: exec\n    with: {command: [echo, z]}\n",
    )
    .unwrap();
    let file = suite.to_str().unwrap();
    let run_dir = dir.join("run");
    let out = common::pipeline(&[
        "run",
        file,
        "--only",
        "c",
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let ids: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .chain(r["cleanup"].as_array().unwrap())
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c", "z"]);

    let refused = common::pipeline(&[
        "run",
        file,
        "--only",
        "b",
        "--out",
        dir.join("b").to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("stage `b` uses outputs of `a`, which --only leaves out")
            && stderr.contains("help: add `--only a`"),
        "{stderr}"
    );
    assert!(!dir.join("b").exists(), "nothing may run");

    let unknown = common::pipeline(&["run", file, "--only", "nope"]);
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--only `nope`: no such stage") && stderr.contains("stages: a, b, c"),
        "{stderr}"
    );
}
