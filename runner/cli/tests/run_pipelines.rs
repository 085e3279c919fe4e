//! Every file in `tests/runs/` is a pipeline that runs without a cluster,
//! paired with the expected shape of its run (`.expect.json`): exit code, run
//! status, each stage's status, metric names, outputs and error, the files in
//! the run folder and the report's headings. Figures are not compared: they
//! are measurements.

mod common;

use std::path::Path;

use serde_json::{Value, json};

fn shape_of_stage(s: &Value) -> Value {
    let names = |key: &str| -> Vec<Value> {
        s[key]
            .as_array()
            .map(|a| a.iter().map(|m| m["name"].clone()).collect())
            .unwrap_or_default()
    };
    json!({
        "id": s["id"],
        "status": s["status"],
        "metrics": names("metrics"),
        "outputs": s["outputs"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default(),
        "error": s["error"],
        "skip_reason": s["skip_reason"],
    })
}

fn files_in(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_in(&path, base, out);
        } else {
            out.push(
                path.strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
            );
        }
    }
}

fn run_shape(case: &Path) -> (Value, String) {
    let rel = common::relative(case);
    let out_dir = common::temp_dir(&format!(
        "run-{}",
        case.file_stem().unwrap().to_string_lossy()
    ));
    let run_dir = out_dir.join("run");
    let out = common::pipeline(&["run", &rel, "--out", run_dir.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        run_dir.join("results.json").exists(),
        "{rel}: no results.json\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap_or_else(|e| {
        panic!(
            "{rel}: no report.md ({e}) {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let mut files = Vec::new();
    files_in(&run_dir, &run_dir, &mut files);
    files.sort();
    let headings: Vec<&str> = report.lines().filter(|l| l.starts_with('#')).collect();
    let shape = json!({
        "exit_code": out.status.code(),
        "status": results["status"],
        "stages": results["stages"].as_array().unwrap().iter().map(shape_of_stage).collect::<Vec<_>>(),
        "cleanup": results["cleanup"].as_array().unwrap().iter().map(shape_of_stage).collect::<Vec<_>>(),
        "files": files,
        "report_headings": headings,
    });
    // Every file of the run folder, raw command outputs included; but the
    // suite's own copy, which holds what its author wrote (a default).
    let mut texts = String::new();
    for f in files.iter().filter(|f| *f != "pipeline.yaml") {
        texts.push_str(&String::from_utf8_lossy(
            &std::fs::read(run_dir.join(f)).unwrap_or_default(),
        ));
    }
    assert!(
        stdout.contains(&format!("report: {}", run_dir.join("report.md").display())),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
    (shape, texts)
}

#[test]
fn example_runs_have_the_expected_shape() {
    let mut failures = Vec::new();
    for case in common::cases("tests/runs", "yaml") {
        let (shape, texts) = run_shape(&case);
        assert!(
            !texts.contains("s3cr3t"),
            "{}: a secret leaked into the run folder",
            case.display()
        );
        let text = serde_json::to_string_pretty(&shape).unwrap() + "\n";
        if let Some(diff) = common::golden(&case.with_extension("expect.json"), &text) {
            failures.push(diff);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

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
