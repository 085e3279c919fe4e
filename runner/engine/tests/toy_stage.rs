//! The toy native stage of docs/writing-a-native-stage.md
//! (docs/examples/settle.rs), compiled here as the page shows it: one file,
//! registered with one line, its typed parameter checked by `validate`'s
//! compiler, its one metric in the results as declared.

#[path = "../../../docs/examples/settle.rs"]
mod settle;

use std::sync::atomic::{AtomicUsize, Ordering};

use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::progress::Progress;
use pipeline_engine::registry::Registry;
use pipeline_engine::results::StageStatus;
use pipeline_engine::runner::{self, RunOptions};
use pipeline_stage_api::typed::Typed;

const DOC: &str = "../../docs/writing-a-native-stage.md";

fn suite(wait: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pipeline-toy-stage-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("settle.yaml");
    let yaml = format!(
        "name: toy\nstages:\n  - id: settle\n    uses: settle\n    with:\n      wait: {wait}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    (dir, file)
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    // The one registry line (plugins/native/src/lib.rs has one per stage).
    registry.add_native(Typed(settle::Settle));
    registry
}

#[test]
fn the_toy_stage_runs_and_reports_its_declared_metric() {
    let (dir, file) = suite("200ms");
    let plan = compile_file(&file, &registry(), &CompileOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let outcome = runner::run(
        &plan,
        RunOptions {
            out_dir: Some(dir.join("run")),
            runs_root: dir.clone(),
            signals: Default::default(),
            progress: Progress::Quiet,
            live: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let stage = &outcome.results.stages[0];
    assert_eq!(stage.status, StageStatus::Succeeded, "{:?}", stage.error);
    let [waited] = stage.metrics.as_slice() else {
        panic!("one metric expected: {:?}", stage.metrics)
    };
    assert_eq!(
        (waited.name.as_str(), waited.unit.as_str()),
        ("waited", "s")
    );
    assert!(waited.value >= 0.2, "{waited:?}");
}

#[test]
fn the_toy_stage_parameter_is_type_checked() {
    let (dir, file) = suite("soon");
    let errors = compile_file(&file, &registry(), &CompileOptions::default())
        .err()
        .expect("`wait: soon` is not a duration")
        .to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(errors.contains("wait"), "{errors}");
    assert!(errors.contains("settle.yaml:6:"), "{errors}");
}

/// The page shows the file as it is compiled here, whole.
#[test]
fn the_page_shows_the_toy_stage_verbatim() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join(DOC)).unwrap();
    let file = std::fs::read_to_string(root.join("../../docs/examples/settle.rs")).unwrap();
    assert!(
        page.contains(&format!("```rust\n{file}```\n")),
        "{DOC} must show docs/examples/settle.rs whole, in a ```rust block"
    );
}
