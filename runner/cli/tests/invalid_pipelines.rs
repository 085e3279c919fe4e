//! `pipeline validate` and `plan` beyond the data cases (those are in
//! `data_cases.rs`, one named test per file).

mod common;

#[test]
fn validate_reports_all_files_at_once() {
    let out = common::pipeline(&[
        "validate",
        "pipelines/smoke.yaml",
        "tests/invalid/06-unknown-plugin.yaml",
        "tests/invalid/17-undefined-var.yaml",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("06-unknown-plugin.yaml:4:11"), "{stderr}");
    assert!(stderr.contains("17-undefined-var.yaml:8:23"), "{stderr}");
    assert!(stderr.ends_with("2 errors found\n"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("pipelines/smoke.yaml: ok"));
}

#[test]
fn every_example_pipeline_validates() {
    // full-baseline.yaml runs the example plugin ceph-df: built from source.
    pipeline_test_tiers::guests::built("plugins/wasm/ceph-df.wasm");
    for case in common::cases("pipelines", "yaml") {
        let rel = common::relative(&case);
        // Suites with registry plugins need the plugin published first:
        // registry.rs publishes, locks and runs pipelines/shared-plugin.yaml.
        if std::fs::read_to_string(&case).is_ok_and(|t| t.contains("uses: oci://")) {
            continue;
        }
        let out = common::pipeline(&["validate", &rel]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn set_overrides_and_unknown_variables() {
    let out = common::pipeline(&["plan", "pipelines/smoke.yaml", "--set", "block_kib=128"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bs=128K"));
    let out = common::pipeline(&["plan", "pipelines/smoke.yaml", "--set", "block_kb=128"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--set block_kb: the pipeline has no variable `block_kb`"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean `block_kib`?"), "{stderr}");
}
