//! Helpers shared by the integration tests: where the data lives, how to run
//! the `pipeline` binary, and golden-file comparison.
#![allow(dead_code)]

pub mod cluster;
pub mod gateway;
pub mod hostile_http;
pub mod registry;
pub mod run_shape;
pub mod sshd;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (tests run from the crate folder).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// `pipeline ARGS` run from the workspace root, with a quiet, stable environment.
pub fn pipeline(args: &[&str]) -> Output {
    pipeline_command(args).output().expect("run pipeline")
}

pub fn pipeline_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pipeline"));
    cmd.args(args)
        .current_dir(root())
        .env("RUST_BACKTRACE", "0")
        .env("NO_COLOR", "1");
    cmd
}

/// A path under the workspace root as the tests pass it to `pipeline`.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .to_string()
}

/// Files in `dir` with extension `ext`, sorted.
pub fn cases(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .expect("case folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// Compares `actual` with the golden file; `UPDATE_EXPECT=1` rewrites it.
/// Returns a description of the mismatch, if any.
pub fn golden(path: &Path, actual: &str) -> Option<String> {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, actual).expect("write golden file");
        return None;
    }
    let Ok(expected) = std::fs::read_to_string(path) else {
        return Some(format!(
            "{} is missing (UPDATE_EXPECT=1 to create it from this run):\n{actual}",
            path.display()
        ));
    };
    if expected == actual {
        return None;
    }
    Some(format!(
        "{} differs (UPDATE_EXPECT=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    ))
}

/// `pipeline report RUN_DIR`, which must succeed; the report it wrote.
pub fn render_report(run_dir: &Path) -> String {
    let out = pipeline(&["report", run_dir.to_str().expect("a UTF-8 path")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(run_dir.join("report.md")).expect("report.md")
}

/// A fresh temporary folder for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipeline-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// results.json of a run folder, when it is there and whole.
pub fn results(run_dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).ok()?).ok()
}

/// The record of stage instance `id` in a results.json (stages, then cleanup).
pub fn stage<'a>(results: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    results["stages"]
        .as_array()
        .into_iter()
        .chain(results["cleanup"].as_array())
        .flatten()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no stage {id} in {results:#}"))
}
