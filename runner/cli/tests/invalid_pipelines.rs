//! Every file in `tests/invalid/` is a broken pipeline paired with the exact
//! output `pipeline validate` must give (`.stderr`). Adding a case is adding
//! two files.

mod common;

#[test]
fn invalid_pipelines_give_exact_errors() {
    let cases = common::cases("tests/invalid", "yaml");
    assert!(
        cases.len() >= 30,
        "expected at least 30 invalid cases, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let rel = common::relative(case);
        let out = common::pipeline(&["validate", &rel]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(2) {
            failures.push(format!("{rel}: exit {:?}, expected 2", out.status.code()));
        }
        if !out.stdout.is_empty() {
            failures.push(format!(
                "{rel}: unexpected stdout {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        if stderr.contains("panicked") {
            failures.push(format!("{rel}: panicked"));
        }
        if let Some(diff) = common::golden(&case.with_extension("stderr"), &stderr) {
            failures.push(diff);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

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
    for case in common::cases("pipelines", "yaml") {
        let rel = common::relative(&case);
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

/// `tests/plan/*.yaml` paired with the exact `pipeline plan` output (`.stdout`).
#[test]
fn plans_match_golden_files() {
    let mut failures = Vec::new();
    for case in common::cases("tests/plan", "yaml") {
        let rel = common::relative(&case);
        // The cluster line shows $CEPH_CONF when set (scripts/test.sh sets it).
        let out = common::pipeline_command(&["plan", &rel])
            .env_remove("CEPH_CONF")
            .env("PIPELINE_SANDBOX_DIR", "/nonexistent")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(diff) = common::golden(
            &case.with_extension("stdout"),
            &String::from_utf8_lossy(&out.stdout),
        ) {
            failures.push(diff);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
