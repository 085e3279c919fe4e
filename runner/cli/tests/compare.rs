//! `pipeline compare` on two real runs of full-baseline (tests/compare/):
//! golden Markdown and JSON, the exit code as a CI gate, and errors.

mod common;

use serde_json::Value;

const BASELINE: &str = "tests/compare/full-baseline-1.results.json";
const CANDIDATE: &str = "tests/compare/full-baseline-2.results.json";

fn text(out: &std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn markdown_and_json_match_golden_files() {
    for (format, golden) in [
        ("markdown", "tests/compare/full-baseline-1-vs-2.md"),
        ("json", "tests/compare/full-baseline-1-vs-2.json"),
    ] {
        let out = common::pipeline(&["compare", BASELINE, CANDIDATE, "--format", format]);
        let (code, stdout, stderr) = text(&out);
        // Single noisy runs: the threshold alone decides, and some headline
        // figures moved past 5%.
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.starts_with("regression: "), "{stderr}");
        if let Some(diff) = common::golden(&common::root().join(golden), &stdout) {
            panic!("{diff}");
        }
    }
}

#[test]
fn a_run_against_itself_has_no_regression() {
    let out = common::pipeline(&["compare", BASELINE, BASELINE, "--format", "json"]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let c: Value = serde_json::from_str(&stdout).unwrap();
    let mut judged = 0;
    for stage in c["stages"].as_array().unwrap() {
        for m in stage["metrics"].as_array().unwrap() {
            let verdict = &m["candidates"][0]["verdict"];
            assert!(
                verdict == "no_significant_change" || verdict == "not_judged",
                "{}: {verdict}",
                m["name"]
            );
            judged += usize::from(verdict == "no_significant_change");
        }
    }
    assert!(judged > 50, "only {judged} metrics were judged");
}

/// The gate: a copy of the baseline with rados bench write bandwidth cut by
/// 30% fails, naming the stage, the metric, both values and the change.
#[test]
fn bandwidth_cut_by_30_percent_fails_the_gate() {
    let mut r: Value =
        serde_json::from_str(&std::fs::read_to_string(common::root().join(BASELINE)).unwrap())
            .unwrap();
    let stage = r["stages"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["id"] == "rados-write")
        .expect("rados-write stage");
    let mut before = 0.0;
    for m in stage["metrics"].as_array_mut().unwrap() {
        if m["name"] == "bandwidth" {
            before = m["value"].as_f64().unwrap();
            m["value"] = Value::from(before * 0.7);
        }
    }
    assert!(before > 0.0);
    let dir = common::temp_dir("compare-cut");
    let cut = dir.join("results.json");
    std::fs::write(&cut, serde_json::to_string(&r).unwrap()).unwrap();
    let out = common::pipeline(&["compare", BASELINE, dir.to_str().unwrap()]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "only the cut metric regressed: {stderr}");
    assert!(
        lines[0].starts_with("regression: rados-write bandwidth (mode=write): ")
            && lines[0].ends_with("(-30.0%), past its threshold of 5%"),
        "{stderr}"
    );
    assert!(
        stdout.contains("## Regressions\n\n- **rados-write** `bandwidth`"),
        "{stdout}"
    );
    // A looser threshold for bandwidth lets it pass.
    let out = common::pipeline(&[
        "compare",
        BASELINE,
        dir.to_str().unwrap(),
        "--threshold",
        "bandwidth=-35%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).2);
}

#[test]
fn unreadable_inputs_and_bad_thresholds_are_all_reported() {
    let out = common::pipeline(&[
        "compare",
        "/nonexistent/run",
        "tests/compare/README.md",
        "--threshold",
        "bandwidth",
    ]);
    let (code, _, stderr) = text(&out);
    assert_eq!(code, Some(2));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(
        lines[0].starts_with("error: --threshold `bandwidth`: expected METRIC=PERCENT"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("error: /nonexistent/run: "),
        "{stderr}"
    );
    assert!(
        lines[2].starts_with("error: tests/compare/README.md"),
        "{stderr}"
    );
}

/// A runs folder of the two full-baseline runs and a broken one.
fn runs_folder(name: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(&format!("compare-runs-{name}"));
    for (name, file) in [("first", BASELINE), ("second", CANDIDATE)] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::copy(
            common::root().join(file),
            dir.join(name).join("results.json"),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    std::fs::write(dir.join("broken/results.json"), "{\"schema_version\": 2,").unwrap();
    std::fs::create_dir_all(dir.join("not-a-run")).unwrap();
    dir
}

#[test]
fn runs_are_listed_oldest_first_and_broken_ones_named() {
    let dir = runs_folder("list");
    let out = common::pipeline(&["runs", "list", dir.to_str().unwrap()]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Vec<&str> = stdout.lines().skip(2).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(
        rows[0].starts_with("| first | full-baseline | 2026-12-01T00:45:10.765Z | succeeded |"),
        "{stdout}"
    );
    assert!(
        rows[1].starts_with("| second | full-baseline | 2026-12-01T00:46:03.673Z | succeeded |"),
        "{stdout}"
    );
    assert!(rows[2].starts_with("| broken | unreadable: "), "{stdout}");
}

/// `pipeline history DIR --metric bandwidth --stage rados-read --format FORMAT`'s stdout.
fn rados_read_bandwidth_history(dir: &std::path::Path, format: &str) -> String {
    let out = common::pipeline(&[
        "history",
        dir.to_str().unwrap(),
        "--metric",
        "bandwidth",
        "--stage",
        "rados-read",
        "--format",
        format,
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    stdout
}

#[test]
fn history_marks_where_the_gate_would_have_fired() {
    let dir = runs_folder("history");
    let stdout = rados_read_bandwidth_history(&dir, "json");
    let lines: Value = serde_json::from_str(&stdout).unwrap();
    let by_stage = |id: &str| {
        lines
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["stage"] == id)
            .unwrap_or_else(|| panic!("no line for {id}: {stdout}"))
            .clone()
    };
    // The same figures `compare` judged: random reads fell 26.9%.
    let rand = by_stage("rados-read[mode=rand]");
    let points = rand["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["gate_fired"], false);
    assert_eq!(points[1]["gate_fired"], true);
    assert!((points[1]["change_percent"].as_f64().unwrap() + 26.9).abs() < 0.05);
    assert_eq!(
        by_stage("rados-read[mode=seq]")["points"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A figure measured on a cluster that was not clean (its stage's cluster
/// watch flagged it) is shown in the history but never gated, as `compare`
/// without --allow-unhealthy; one the host watch found limited is marked.
#[test]
fn history_marks_unclean_and_host_limited_figures_and_does_not_gate_them() {
    let dir = runs_folder("history-flags");
    let second = dir.join("second/results.json");
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&second).unwrap()).unwrap();
    for stage in r["stages"].as_array_mut().unwrap() {
        if stage["id"] == "rados-read[mode=rand]" {
            stage["cluster"] = serde_json::json!({
                "interval_s": 1.0,
                "unhealthy": "16 PGs were recovering (12 s of 30)"
            });
            stage["hosts"] = serde_json::json!([{
                "host": "local",
                "interval_s": 1.0,
                "limited_by": ["CPU: every core of local ≥ 90% busy (28 s of 30)"],
                "sampler_cpu_s": 0.02
            }]);
        }
    }
    std::fs::write(&second, serde_json::to_string(&r).unwrap()).unwrap();
    let history = |format: &str| rados_read_bandwidth_history(&dir, format);
    let json = history("json");
    let lines: Value = serde_json::from_str(&json).unwrap();
    let rand = lines
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["stage"] == "rados-read[mode=rand]")
        .unwrap();
    let point = &rand["points"][1];
    // The same -26.9% that fires the gate on clean runs.
    assert!((point["change_percent"].as_f64().unwrap() + 26.9).abs() < 0.05);
    assert_eq!(point["gate_fired"], false, "{json}");
    assert_eq!(point["cluster_not_clean"], true);
    assert_eq!(point["host_limited"], true);
    let markdown = history("markdown");
    let row = markdown
        .lines()
        .find(|l| l.contains("-26.9%"))
        .unwrap_or_else(|| panic!("{markdown}"));
    assert!(
        row.ends_with("| ⚠️ cluster not clean 🔎 host-limited |") && !row.contains("❌"),
        "{row}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn out_file_gets_charts_next_to_it_and_stdout_none() {
    let dir = common::temp_dir("compare-charts");
    let file = dir.join("cmp.md");
    let out = common::pipeline(&[
        "compare",
        BASELINE,
        CANDIDATE,
        "--out",
        file.to_str().unwrap(),
    ]);
    let (code, _, stderr) = text(&out);
    assert_eq!(code, Some(1), "{stderr}");
    let md = std::fs::read_to_string(&file).unwrap();
    let links: Vec<&str> = md
        .lines()
        .filter_map(|l| l.strip_prefix("![")?.rsplit_once("](")?.1.strip_suffix(')'))
        .collect();
    assert!(links.contains(&"cmp-charts/latency_avg.svg"), "{md}");
    for link in &links {
        let svg = std::fs::read_to_string(dir.join(link)).unwrap();
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{link}: {e}"));
    }
    // Without the charts the file is what stdout prints.
    let stdout = common::pipeline(&["compare", BASELINE, CANDIDATE]);
    let printed = String::from_utf8_lossy(&stdout.stdout);
    assert!(!printed.contains("## Charts") && !printed.contains("!["));
    let charts_section = md
        .split("## Charts\n")
        .nth(1)
        .and_then(|rest| rest.split_once("\n## ").map(|(_, after)| after))
        .unwrap();
    assert!(printed.ends_with(charts_section), "{md}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn history_chart_rings_the_run_where_the_gate_fired() {
    let dir = runs_folder("chart");
    let chart = dir.join("bandwidth.svg");
    let out = common::pipeline(&[
        "history",
        dir.to_str().unwrap(),
        "--metric",
        "bandwidth",
        "--stage",
        "rados-read",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("# History of `bandwidth`"), "{stdout}");
    assert!(stderr.contains("chart: "), "{stderr}");
    let svg = std::fs::read_to_string(&chart).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let lines = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("lines"))
        .unwrap();
    // Two lines (seq and rand), and one ring: rand in the second run.
    assert_eq!(
        lines
            .children()
            .filter(|n| n.has_tag_name("polyline"))
            .count(),
        2
    );
    let rings: Vec<_> = lines
        .children()
        .filter(|n| n.attribute("class") == Some("ring"))
        .collect();
    assert_eq!(rings.len(), 1, "{svg}");
    let plot: Vec<f64> = lines
        .attribute("data-plot")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let num = |n: roxmltree::Node, k: &str| n.attribute(k).unwrap().parse::<f64>().unwrap();
    let (x_min, x_max) = (num(lines, "data-x-min"), num(lines, "data-x-max"));
    let (y_min, y_max) = (num(lines, "data-y-min"), num(lines, "data-y-max"));
    let run = x_min + (num(rings[0], "cx") - plot[0]) / plot[2] * (x_max - x_min);
    let value = y_min + (1.0 - (num(rings[0], "cy") - plot[1]) / plot[3]) * (y_max - y_min);
    assert!((run - 1.0).abs() < 0.01, "{run}");
    // rados-read[mode=rand] in the second run: 1142.5 MiB/s.
    assert!(
        (value - 1142.5 * 1048576.0).abs() < (y_max - y_min) / 200.0 * 0.06,
        "{value}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Two real runs of `tests/client-roots/client-release.yaml` that differ
/// only in the client (16.2 from this machine, 18.2 from the trixie root):
/// the client release is named above the figures, beside each regression,
/// and on stderr before the regression lines.
#[test]
fn a_client_upgrade_is_named_above_the_figures() {
    const HOST: &str = "tests/compare/client-16.2.results.json";
    const REEF: &str = "tests/compare/client-18.2.results.json";
    let out = common::pipeline(&["compare", HOST, REEF]);
    let (code, stdout, stderr) = text(&out);
    if let Some(diff) = common::golden(
        &common::root().join("tests/compare/client-16.2-vs-18.2.md"),
        &stdout,
    ) {
        panic!("{diff}");
    }
    let change = stdout
        .find("- client librbd 16.2.15 → 18.2.7 (fio-rbd)")
        .expect("the librbd change");
    let regressions = stdout.find("## Regressions").unwrap();
    let figures = stdout.find("## fio-rbd").unwrap();
    assert!(change < regressions && regressions < figures, "{stdout}");
    // These single runs moved fio's figures past 5%: each regression says
    // what changed under it.
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stdout.contains("past its threshold of 5%; changed: client librados, librbd, rbd 16.2.15 → 18.2.7; client fio 3.33 → 3.39"),
        "{stdout}"
    );
    let first_regression = stderr.find("regression: ").expect("regression lines");
    assert!(
        stderr[..first_regression].contains("changed: client librbd 16.2.15 → 18.2.7 (fio-rbd)"),
        "{stderr}"
    );
    // The JSON output has the same changes.
    let json = common::pipeline(&["compare", HOST, REEF, "--format", "json"]);
    let c: Value = serde_json::from_slice(&json.stdout).unwrap();
    let whats: Vec<&str> = c["environment"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["what"].as_str().unwrap())
        .collect();
    assert_eq!(whats, ["librados", "librbd", "rados", "rbd", "fio"]);
    assert_eq!(
        c["environment"]["compared"],
        serde_json::json!([
            "client versions",
            "daemon versions",
            "configuration",
            "pools",
            "layout",
            "kernels"
        ])
    );
}

/// The failures of `--format junit` (one test case per gated metric).
fn junit_failures(xml: &str) -> (usize, Vec<String>) {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .count();
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .map(|n| n.attribute("message").unwrap_or_default().to_string())
        .collect();
    (cases, failures)
}

/// JUnit XML: the golden file, and a failure for exactly each regression
/// line the exit code stands for (the same gate, the same words).
#[test]
fn junit_has_a_failure_for_each_regression_and_matches_its_golden_file() {
    let out = common::pipeline(&["compare", BASELINE, CANDIDATE, "--format", "junit"]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(1), "{stderr}");
    if let Some(diff) = common::golden(
        &common::root().join("tests/compare/full-baseline-1-vs-2.junit.xml"),
        &stdout,
    ) {
        panic!("{diff}");
    }
    let (cases, failures) = junit_failures(&stdout);
    let regressions: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("regression: "))
        .map(str::to_string)
        .collect();
    assert!(!regressions.is_empty());
    assert_eq!(failures, regressions, "{stdout}");
    assert!(cases > failures.len(), "{cases} cases");

    // Against itself: every gated metric passes.
    let out = common::pipeline(&["compare", BASELINE, BASELINE, "--format", "junit"]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "{stderr}");
    let (same_cases, failures) = junit_failures(&stdout);
    assert_eq!(same_cases, cases, "the same gated metrics");
    assert!(failures.is_empty(), "{failures:?}");
}

/// Names that a hostile results.json carries (escapes, markup, quotes) come
/// out as well-formed XML holding no control character.
#[test]
fn junit_of_hostile_names_is_well_formed_and_has_no_escapes() {
    let mut r: Value =
        serde_json::from_str(&std::fs::read_to_string(common::root().join(BASELINE)).unwrap())
            .unwrap();
    let hostile = "\u{1b}]0;owned\u{7}<x a=\"1\">]]>&\u{0}\u{9b}2J";
    r["pipeline"]["name"] = Value::from(hostile);
    for stage in r["stages"].as_array_mut().unwrap() {
        stage["id"] = Value::from(format!("{}{hostile}", stage["id"].as_str().unwrap()));
        for m in stage["metrics"].as_array_mut().unwrap() {
            if m["headline"] == true {
                m["labels"]["evil"] = Value::from(hostile);
                m["value"] = Value::from(m["value"].as_f64().unwrap() * 0.5);
            }
        }
    }
    let dir = common::temp_dir("compare-junit-hostile");
    let file = dir.join("results.json");
    std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
    let out = common::pipeline(&[
        "compare",
        file.to_str().unwrap(),
        BASELINE,
        "--format",
        "junit",
    ]);
    let (code, stdout, stderr) = text(&out);
    assert_eq!(code, Some(0), "nothing matches: no gate: {stderr}");
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    let doc = roxmltree::Document::parse(&stdout).unwrap_or_else(|e| panic!("{e}:\n{stdout}"));
    let suite = doc.root_element();
    assert_eq!(
        suite.attribute("name"),
        Some("pipeline compare: ]0;owned<x a=\"1\">]]>&2J")
    );
    // The hostile side as the candidate: its renamed stages are not in the
    // baseline, and the baseline's are not in it: skipped, each said why.
    let out = common::pipeline(&[
        "compare",
        BASELINE,
        file.to_str().unwrap(),
        "--format",
        "junit",
    ]);
    let (_, stdout, _) = text(&out);
    let doc = roxmltree::Document::parse(&stdout).unwrap_or_else(|e| panic!("{e}:\n{stdout}"));
    let skipped: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("skipped"))
        .filter_map(|n| n.attribute("message"))
        .collect();
    assert!(skipped.contains(&"not in this run"), "{stdout}");
    assert!(skipped.contains(&"not in the baseline"), "{stdout}");
}
