//! `repeat: N` end to end (tests/repeat/counter.yaml): each repetition's
//! figures kept with their label and folder, the summary over them, the
//! report leading with the median and flagging the spread, a failed
//! repetition ending the stage, and `compare` testing the repetitions.

mod common;

use serde_json::Value;

fn run(dir: &std::path::Path) -> (Value, String) {
    let out = run_suite("tests/repeat/counter.yaml", dir, 0);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read(dir)
}

/// Runs `suite` into `dir/run` with its counters in `dir`, starting at `start`.
fn run_suite(suite: &str, dir: &std::path::Path, start: u32) -> std::process::Output {
    common::pipeline(&[
        "run",
        suite,
        "--out",
        dir.join("run").to_str().unwrap(),
        "--set",
        &format!("dir={}", dir.display()),
        "--set",
        &format!("start={start}"),
    ])
}

/// A stage's metric values with their repetition label, in order.
fn by_repetition(stage: &Value) -> Vec<(String, f64)> {
    stage["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["labels"]["repetition"].as_str().unwrap().to_string(),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn read(dir: &std::path::Path) -> (Value, String) {
    let run_dir = dir.join("run");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).unwrap())
            .unwrap();
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    (results, report)
}

#[test]
fn every_repetition_is_kept_and_summarized() {
    let dir = common::temp_dir("repeat-counter");
    let (r, report) = run(&dir);
    let count = &r["stages"][0];
    assert_eq!(count["status"], "succeeded");
    let runs = by_repetition(count);
    assert_eq!(
        runs,
        [("1".into(), 1.0), ("2".into(), 2.0), ("3".into(), 3.0)]
    );
    let reps = &count["repetitions"];
    assert_eq!(
        (reps["planned"].as_u64(), reps["completed"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(reps["pause_s"], 0.1);
    let s = &reps["summaries"][0];
    assert_eq!(
        (s["median"].as_f64(), s["min"].as_f64(), s["max"].as_f64()),
        (Some(2.0), Some(1.0), Some(3.0))
    );
    // sd(1, 2, 3) = 1, mean 2: CV 50%, above the default 10%.
    assert_eq!(s["cv_percent"].as_f64(), Some(50.0));
    assert_eq!(s["too_noisy"], true);
    for k in 1..=3 {
        let stdout = dir.join(format!("run/stages/count/repetition-{k}/01-command.stdout"));
        assert_eq!(
            std::fs::read_to_string(&stdout).unwrap().trim(),
            k.to_string()
        );
    }
    assert!(
        report.contains("| runs **2** ↑ median of 3, CV 50.0% ⚠️ too noisy |"),
        "{report}"
    );
    assert!(
        report.contains("3 of 3 repetitions, 100ms apart."),
        "{report}"
    );

    // A failed repetition ends the stage and says which one it was.
    let fails = &r["stages"][1];
    assert_eq!(fails["status"], "failed");
    let error = fails["error"].as_str().unwrap();
    assert!(error.starts_with("repetition 2 of 3: "), "{error}");
    assert_eq!(fails["repetitions"]["completed"], 1);
    assert_eq!(fails["commands"].as_array().unwrap().len(), 2);
}

#[test]
fn compare_tests_the_repetitions() {
    let dir = common::temp_dir("repeat-compare");
    run(&dir);
    let out = common::pipeline(&[
        "compare",
        dir.join("run").to_str().unwrap(),
        dir.join("run").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &c["stages"][0]["metrics"][0];
    assert_eq!(m["name"], "runs");
    assert_eq!(m["baseline"]["n"], 3);
    let change = &m["candidates"][0];
    assert_eq!(change["test"]["kind"], "welch");
    assert_eq!(change["test"]["p"], 1.0);
    assert_eq!(change["verdict"], "no_significant_change");
}

/// `report.compare_to`: the run compares itself with the baseline, puts the
/// verdict in its report, and exits 1 on a regression.
#[test]
fn a_suite_with_a_baseline_gates_on_it() {
    // Baseline: runs 101, 102, 103.
    let baseline = common::temp_dir("repeat-baseline");
    let out = run_suite("tests/repeat/counter.yaml", &baseline, 100);
    assert_eq!(out.status.code(), Some(0));
    let suites = common::temp_dir("repeat-suites");
    let suite = suites.join("gated.yaml");
    std::fs::write(
        &suite,
        std::fs::read_to_string(common::root().join("tests/repeat/counter.yaml")).unwrap()
            + &format!(
                "report:\n  compare_to: {}\n  thresholds: {{runs: -2%}}\n",
                baseline.join("run").display()
            ),
    )
    .unwrap();

    // Better: runs 104, 105, 106.
    let better = common::temp_dir("repeat-better");
    let out = run_suite(suite.to_str().unwrap(), &better, 103);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (r, report) = read(&better);
    assert_eq!(r["comparison"]["regressions"], serde_json::json!([]));
    assert!(
        report.contains("## Comparison with the baseline"),
        "{report}"
    );
    assert!(
        report.contains("No regression: no gated metric is worse past its threshold."),
        "{report}"
    );
    let comparison = std::fs::read_to_string(better.join("run/comparison.md")).unwrap();
    assert!(comparison.contains("✅ better (p="), "{comparison}");

    // Worse: runs 1, 2, 3.
    let worse = common::temp_dir("repeat-worse");
    let out = run_suite(suite.to_str().unwrap(), &worse, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("regression: count runs: 102 -> 2 (-98.0%), past its threshold of 2%"),
        "{stderr}"
    );
    let (r, report) = read(&worse);
    assert_eq!(r["status"], "succeeded", "the run itself succeeded");
    assert_eq!(r["comparison"]["regressions"][0]["metric"], "runs");
    assert!(
        report.contains("- ❌ **count** `runs`: 102 → 2 (-98.0%), past its threshold of 2%"),
        "{report}"
    );
    let comparison = std::fs::read_to_string(worse.join("run/comparison.md")).unwrap();
    assert!(comparison.contains("❌ worse (p=<0.001)"), "{comparison}");
    // Its charts next to it, linked relatively, the change marked.
    assert!(
        comparison.contains("](comparison-charts/runs.svg)"),
        "{comparison}"
    );
    let chart = std::fs::read_to_string(worse.join("run/comparison-charts/runs.svg")).unwrap();
    assert!(chart.contains(">-98.0% worse</text>"), "{chart}");
    // The same gate as JUnit XML, for the CI job's test report: the better
    // run's one gated metric passed, the worse run's failed.
    for (dir, failures) in [(&better, 0), (&worse, 1)] {
        let (r, _) = read(dir);
        assert_eq!(r["comparison"]["junit"], "comparison.junit.xml");
        let xml = std::fs::read_to_string(dir.join("run/comparison.junit.xml")).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let cases: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 1, "{xml}");
        assert_eq!(cases[0].attribute("classname"), Some("count"), "{xml}");
        assert_eq!(cases[0].attribute("name"), Some("runs"), "{xml}");
        let failed: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("failure"))
            .collect();
        assert_eq!(failed.len(), failures, "{xml}");
        if let Some(f) = failed.first() {
            assert_eq!(
                f.attribute("message"),
                Some("count runs: 102 -> 2 (-98.0%), past its threshold of 2%"),
                "{xml}"
            );
        }
    }
}

#[test]
fn a_missing_baseline_is_an_error_at_validate() {
    let dir = common::temp_dir("repeat-missing-baseline");
    let suite = dir.join("gated.yaml");
    std::fs::write(
        &suite,
        "name: x\nstages:\n  - id: a\n    uses: exec\n    with: {command: [\"true\"]}\nreport:\n  compare_to: runs/nothing-here\n  thresholds: {bandwidth: fast}\n",
    )
    .unwrap();
    let out = common::pipeline(&["validate", suite.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: `report.compare_to`: no run at `runs/nothing-here`"),
        "{stderr}"
    );
    assert!(stderr.contains("gated.yaml:7:15"), "{stderr}");
    assert!(
        stderr.contains("error: `report.thresholds`: `bandwidth=fast`: `fast` is not a percentage"),
        "{stderr}"
    );
    assert!(stderr.contains("2 errors found"), "{stderr}");
}

/// The suite's own `repeat:`: all stages then cleanup, again and again; one
/// record per stage holding every run's figures.
#[test]
fn the_whole_suite_repeats_with_its_cleanup_each_time() {
    let dir = common::temp_dir("repeat-suite");
    let out = run_suite("tests/repeat/suite.yaml", &dir, 0);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (r, report) = read(&dir);
    let stages = r["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1, "one record for the stage over all runs");
    let values = by_repetition(&stages[0]);
    assert_eq!(
        values,
        [("1".into(), 1.0), ("2".into(), 2.0), ("3".into(), 3.0)]
    );
    assert_eq!(stages[0]["repetitions"]["completed"], 3);
    assert_eq!(stages[0]["repetitions"]["summaries"][0]["median"], 2.0);
    // Cleanup ran after each run of the suite.
    assert_eq!(
        std::fs::read_to_string(dir.join("cleanups")).unwrap(),
        "cleanup\n".repeat(3)
    );
    assert_eq!(r["cleanup"][0]["commands"].as_array().unwrap().len(), 3);
    for k in 1..=3 {
        assert!(
            dir.join(format!("run/stages/count/repetition-{k}/01-command.stdout"))
                .is_file()
        );
    }
    assert!(
        report.contains("| runs **2** ↑ median of 3, CV 50.0% ⚠️ too noisy |"),
        "{report}"
    );
}
