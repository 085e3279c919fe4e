//! `pipeline compare --format junit` and a run's `comparison.junit.xml`
//! against the JUnit schema CI servers read them with: junit-10.xsd (the
//! Jenkins xunit plugin's; GitLab reads the same elements), validated by
//! libxml2's `xmllint --schema`. scripts/install-deps.sh puts both in place
//! (scripts/junit-xsd.sh fetches the schema; `PIPELINE_JUNIT_XSD` moves it).
//!
//! A live test of the `integrations` tier (pipeline-test-tiers): listed as
//! ignored unless scripts/test.sh turned it on. Nothing here needs a cluster.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use pipeline_test_tiers::{Tier, live};
use serde_json::Value;

const BASELINE: &str = "tests/compare/full-baseline-1.results.json";
const CANDIDATE: &str = "tests/compare/full-baseline-2.results.json";

/// The schema: the tier promised it, so its absence fails rather than skips.
fn xsd() -> PathBuf {
    let xsd = std::env::var_os("PIPELINE_JUNIT_XSD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/pipeline/junit/junit-10.xsd"));
    assert!(
        xsd.is_file(),
        "the integrations tier is on, but {} is missing: run scripts/junit-xsd.sh (scripts/install-deps.sh does)",
        xsd.display()
    );
    xsd
}

/// Validates `file` with xmllint; panics with xmllint's words when invalid.
fn assert_valid(file: &Path) {
    let out = Command::new("xmllint")
        .args(["--noout", "--nonet", "--schema"])
        .arg(xsd())
        .arg(file)
        .output()
        .expect("xmllint (Debian libxml2-utils, installed by scripts/install-deps.sh)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains(" validates"),
        "{} does not validate against junit-10.xsd:\n{stderr}\n{}",
        file.display(),
        std::fs::read_to_string(file).unwrap_or_default()
    );
}

/// `compare --format junit --out FILE`; returns FILE and the exit code.
fn compare_junit(dir: &Path, name: &str, baseline: &str, candidate: &str) -> (PathBuf, i32) {
    let file = dir.join(format!("{name}.junit.xml"));
    let out = common::pipeline(&[
        "compare",
        baseline,
        candidate,
        "--format",
        "junit",
        "--out",
        file.to_str().unwrap(),
    ]);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "compare {name}: exit {code}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (file, code)
}

fn count(xml: &Path, tag: &str) -> usize {
    let text = std::fs::read_to_string(xml).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    doc.descendants().filter(|n| n.has_tag_name(tag)).count()
}

/// A regression (failures), a run against itself (none), and a candidate
/// that shares no stage with its baseline (skipped cases) all validate.
fn compare_outputs_validate() {
    let dir = common::temp_dir("junit-schema-compare");
    let root = common::root();
    let (base, cand) = (root.join(BASELINE), root.join(CANDIDATE));
    let (base, cand) = (base.to_str().unwrap(), cand.to_str().unwrap());

    let (file, code) = compare_junit(&dir, "regression", base, cand);
    assert_eq!(code, 1);
    assert!(count(&file, "failure") > 0);
    assert_valid(&file);

    let (file, code) = compare_junit(&dir, "self", base, base);
    assert_eq!(code, 0);
    assert_eq!(count(&file, "failure"), 0);
    assert_valid(&file);

    // Hostile names: markup, quotes, escapes, NUL, C1 controls.
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(base).unwrap()).unwrap();
    let hostile = "\u{1b}]0;owned\u{7}<x a=\"1\">]]>&\u{0}\u{9b}2J";
    r["pipeline"]["name"] = Value::from(hostile);
    for stage in r["stages"].as_array_mut().unwrap() {
        stage["id"] = Value::from(format!("{}{hostile}", stage["id"].as_str().unwrap()));
    }
    let renamed = dir.join("hostile.results.json");
    std::fs::write(&renamed, serde_json::to_string(&r).unwrap()).unwrap();
    let (file, _) = compare_junit(&dir, "hostile", base, renamed.to_str().unwrap());
    assert!(count(&file, "skipped") > 0);
    assert_valid(&file);
}

/// The file `report.compare_to` writes into a run folder validates, with
/// its one failure when the run regressed.
fn a_runs_comparison_validates() {
    let dir = common::temp_dir("junit-schema-run");
    let run = |out: &Path, suite: &str, start: u32| {
        common::pipeline(&[
            "run",
            suite,
            "--out",
            out.join("run").to_str().unwrap(),
            "--set",
            &format!("dir={}", out.display()),
            "--set",
            &format!("start={start}"),
        ])
    };
    let baseline = dir.join("baseline");
    std::fs::create_dir_all(&baseline).unwrap();
    let suite = common::root().join("tests/repeat/counter.yaml");
    assert_eq!(
        run(&baseline, suite.to_str().unwrap(), 100).status.code(),
        Some(0)
    );
    let gated = dir.join("gated.yaml");
    std::fs::write(
        &gated,
        std::fs::read_to_string(&suite).unwrap()
            + &format!(
                "report:\n  compare_to: {}\n  thresholds: {{runs: -2%}}\n",
                baseline.join("run").display()
            ),
    )
    .unwrap();
    let worse = dir.join("worse");
    std::fs::create_dir_all(&worse).unwrap();
    let out = run(&worse, gated.to_str().unwrap(), 0);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = worse.join("run/comparison.junit.xml");
    assert_eq!(count(&file, "failure"), 1);
    assert_valid(&file);
}

fn main() {
    let needs = [Tier::Integrations];
    pipeline_test_tiers::run(vec![
        live("compare_outputs_validate", &needs, compare_outputs_validate),
        live(
            "a_runs_comparison_validates",
            &needs,
            a_runs_comparison_validates,
        ),
    ]);
}
