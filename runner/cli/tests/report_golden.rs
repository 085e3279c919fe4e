//! The Markdown report for fixed inputs: `tests/report/NAME.results.json`
//! rendered by `pipeline report` must equal `tests/report/NAME.report.md`.

mod common;

#[test]
fn reports_match_golden_files() {
    let cases = common::cases("tests/report", "json");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in cases {
        let name = case
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".results.json", "");
        let dir = common::temp_dir(&format!("report-{name}"));
        std::fs::copy(&case, dir.join("results.json")).unwrap();
        let out = common::pipeline(&["report", dir.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        if let Some(diff) =
            common::golden(&case.with_file_name(format!("{name}.report.md")), &report)
        {
            failures.push(diff);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn report_of_a_missing_run_is_an_error() {
    let out = common::pipeline(&["report", "/nonexistent/run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/run/results.json")
    );
}
