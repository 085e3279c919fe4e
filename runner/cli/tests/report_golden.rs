//! `pipeline report` beyond the golden cases (`tests/report/NAME.results.json`
//! rendered must equal `NAME.report.md`: `report::NAME` in data_cases.rs).

mod common;

#[test]
fn report_of_a_missing_run_is_an_error() {
    let out = common::pipeline(&["report", "/nonexistent/run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/run/results.json")
    );
}

/// `pipeline report DIR` of a results.json with the given text.
fn report_of(name: &str, text: &str) -> (std::process::Output, std::path::PathBuf) {
    let dir = common::temp_dir(&format!("report-{name}"));
    std::fs::write(dir.join("results.json"), text).unwrap();
    (common::pipeline(&["report", dir.to_str().unwrap()]), dir)
}

fn smoke_results() -> serde_json::Value {
    let text =
        std::fs::read_to_string(common::root().join("tests/report/smoke.results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn results_from_a_newer_pipeline_are_refused_naming_versions() {
    use pipeline_engine::results::SCHEMA_VERSION;
    let newer = u64::from(SCHEMA_VERSION) + 98;
    let mut future = smoke_results();
    future["schema_version"] = newer.into();
    future["runner"]["version"] = "9.1.0".into();
    // What a newer writer might add, in places this version refuses to guess at.
    future["comparison"] = serde_json::json!({"baseline": "runs/earlier"});
    future["stages"][1]["metrics"][0]["aggregation"] = "sum".into();
    future["stages"][0]["status"] = "timed_out".into();
    let (out, dir) = report_of("future", &serde_json::to_string_pretty(&future).unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let file = dir.join("results.json");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {} was written by pipeline 9.1.0 (results schema {newer}); this pipeline ({}) reads results schema {SCHEMA_VERSION} and older: use pipeline 9.1.0 or newer to read it",
            file.display(),
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(
        !dir.join("report.md").exists(),
        "no report from a refused file"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn fields_unknown_to_this_version_are_ignored() {
    let expected = {
        let (out, dir) = report_of("known", &smoke_results().to_string());
        assert_eq!(out.status.code(), Some(0));
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        let _ = std::fs::remove_dir_all(dir);
        report
    };
    let mut extended = smoke_results();
    extended["schema_version"] = pipeline_engine::results::SCHEMA_VERSION.into();
    extended["annotations"] = serde_json::json!({"by": "a later runner"});
    extended["runner"]["build"] = "abc123".into();
    extended["stages"][0]["retries"] = 0.into();
    extended["stages"][1]["metrics"][0]["confidence"] = 0.95.into();
    extended["stages"][0]["commands"][0]["cpu_s"] = 0.01.into();
    let (out, dir) = report_of("extended", &extended.to_string());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(
        report, expected,
        "extra fields change nothing in the report"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_truncated_or_garbled_results_file_is_named_with_line_and_column() {
    let text = serde_json::to_string_pretty(&smoke_results()).unwrap();
    let cut = &text[..text.find("\"stages\"").unwrap() + 20];
    let (out, dir) = report_of("truncated", cut);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines = cut.lines().count();
    let file = dir.join("results.json");
    assert!(
        stderr.starts_with(&format!("error: {}:{lines}:", file.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("the file ends in the middle of the JSON document (truncated?)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);

    let (out, dir) = report_of("garbled", "<html>\n  not found\n</html>\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {}:1:1: not valid JSON: expected value",
            dir.join("results.json").display()
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Copies `from` (files and folders) into `to`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A run folder with series files (`tests/report/charts/`): `pipeline
/// report` draws their charts and links them; the report and one small
/// chart are golden files (`charts.report.md`, `charts.bandwidth.svg`).
#[test]
fn a_run_folder_with_series_gets_its_charts_drawn_and_linked() {
    let fixture = common::root().join("tests/report/charts");
    let dir = common::temp_dir("report-charts");
    copy_tree(&fixture, &dir);
    let report = common::render_report(&dir);
    let svg =
        std::fs::read_to_string(dir.join("stages/rbd-bench_io_type=write_/charts/bandwidth.svg"))
            .unwrap();
    let fanned_out = dir.join("stages/rados-read_mode=seq_/charts/cur_bandwidth.svg");
    assert!(fanned_out.is_file(), "both clients' series in one chart");
    let goldens = common::root().join("tests/report");
    let failures: Vec<String> = [
        common::golden(&goldens.join("charts.report.md"), &report),
        common::golden(&goldens.join("charts.bandwidth.svg"), &svg),
    ]
    .into_iter()
    .flatten()
    .collect();
    let _ = std::fs::remove_dir_all(dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
