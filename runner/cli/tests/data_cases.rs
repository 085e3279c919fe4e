//! The data-driven tests, one named test per case file (as just and
//! ripgrep do), so one case runs alone:
//! `cargo test -p pipeline --test data_cases -- invalid::06-unknown-plugin`.
//!
//! - `invalid::NAME`: `tests/invalid/NAME.yaml` is a broken pipeline;
//!   `pipeline validate` must print exactly `NAME.stderr` and exit 2.
//! - `plan::NAME`: `pipeline plan tests/plan/NAME.yaml` prints exactly
//!   `NAME.stdout`.
//! - `runs::NAME`: `tests/runs/NAME.yaml` runs without a cluster; the shape
//!   of its run (see `common::run_shape`) is `NAME.expect.json`, and no
//!   secret reaches any file of its run folder.
//! - `report::NAME`: `pipeline report` of `tests/report/NAME.results.json`
//!   writes exactly `NAME.report.md`.
//!
//! `UPDATE_EXPECT=1` rewrites the golden files; a missing golden fails.

mod common;

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let invalid = common::cases("tests/invalid", "yaml");
    let count = invalid.len();
    trials.push(Trial::test("invalid::there-are-cases", move || {
        if count >= 30 {
            Ok(())
        } else {
            Err(format!("expected at least 30 invalid cases, found {count}").into())
        }
    }));
    trials.extend(cases("invalid", invalid, invalid_case));
    trials.extend(cases(
        "plan",
        common::cases("tests/plan", "yaml"),
        plan_case,
    ));
    trials.extend(cases("runs", common::cases("tests/runs", "yaml"), run_case));
    let reports: Vec<PathBuf> = common::cases("tests/report", "json")
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".results.json"))
        .collect();
    trials.extend(reports.into_iter().map(|file| {
        let name = file
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".results.json")
            .to_string();
        Trial::test(format!("report::{name}"), move || report_case(&file, &name))
    }));
    libtest_mimic::run(&args, trials).exit();
}

fn cases(
    kind: &'static str,
    files: Vec<PathBuf>,
    check: fn(&Path) -> Result<(), Failed>,
) -> impl Iterator<Item = Trial> {
    files.into_iter().map(move |file| {
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        Trial::test(format!("{kind}::{stem}"), move || check(&file))
    })
}

fn golden(path: PathBuf, actual: &str) -> Result<(), Failed> {
    match common::golden(&path, actual) {
        None => Ok(()),
        Some(diff) => Err(diff.into()),
    }
}

fn invalid_case(case: &Path) -> Result<(), Failed> {
    let rel = common::relative(case);
    let out = common::pipeline(&["validate", &rel]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("panicked") {
        return Err(format!("{rel}: panicked:\n{stderr}").into());
    }
    if out.status.code() != Some(2) {
        return Err(format!("{rel}: exit {:?}, expected 2\n{stderr}", out.status.code()).into());
    }
    if !out.stdout.is_empty() {
        return Err(format!(
            "{rel}: unexpected stdout {}",
            String::from_utf8_lossy(&out.stdout)
        )
        .into());
    }
    golden(case.with_extension("stderr"), &stderr)
}

fn plan_case(case: &Path) -> Result<(), Failed> {
    let rel = common::relative(case);
    // The cluster line shows $CEPH_CONF when set (scripts/test.sh sets it).
    let out = common::pipeline_command(&["plan", &rel])
        .env_remove("CEPH_CONF")
        .env("PIPELINE_SANDBOX_DIR", "/nonexistent")
        .output()
        .unwrap();
    if out.status.code() != Some(0) {
        return Err(format!("{rel}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    golden(
        case.with_extension("stdout"),
        &String::from_utf8_lossy(&out.stdout),
    )
}

fn run_case(case: &Path) -> Result<(), Failed> {
    let (shape, texts) = common::run_shape::run_shape(case);
    if texts.contains("s3cr3t") {
        return Err(format!("{}: a secret leaked into the run folder", case.display()).into());
    }
    let text = serde_json::to_string_pretty(&shape).unwrap() + "\n";
    golden(case.with_extension("expect.json"), &text)
}

fn report_case(case: &Path, name: &str) -> Result<(), Failed> {
    let dir = common::temp_dir(&format!("report-{name}"));
    std::fs::copy(case, dir.join("results.json")).unwrap();
    let out = common::pipeline(&["report", dir.to_str().unwrap()]);
    if out.status.code() != Some(0) {
        return Err(String::from_utf8_lossy(&out.stderr).to_string().into());
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    golden(case.with_file_name(format!("{name}.report.md")), &report)
}
