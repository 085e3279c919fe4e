//! What every WASM sandbox test needs: a registry with the WASM loader, a
//! pipeline written next to a plugin file and run through the engine, and
//! the hostile guests built from `plugins/guests/testing/` (by
//! `plugins/guests/build.sh`, which CI runs before the tests).
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::progress::Progress;
use pipeline_engine::registry::Registry;
use pipeline_engine::results::{RunResults, StageRecord, StageStatus};
use pipeline_engine::runner::{self, RunOptions};
use pipeline_wasm::cache::ComponentCache;
use pipeline_wasm::{Limits, WasmLoader};

/// A guest built from `plugins/guests/testing/NAME` (crate name with `-`);
/// built first when missing (`pipeline_test_tiers::guests`).
pub fn guest(name: &str) -> PathBuf {
    pipeline_test_tiers::guests::built(&format!(
        "plugins/guests/target/{}.wasm",
        name.replace('-', "_")
    ))
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pipeline-wasm-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Small limits, with room for a loaded CI machine (2 cores, tests in parallel).
pub fn limits() -> Limits {
    Limits {
        memory: 64 << 20,
        run_time: Duration::from_secs(3),
        call_time: Duration::from_secs(5),
    }
}

pub fn loader(cache: &Path, limits: Limits) -> WasmLoader {
    WasmLoader::new()
        .with_cache(ComponentCache::new(Some(cache.to_path_buf())))
        .with_search_path(Vec::new())
        .with_limits(limits)
}

pub fn registry(limits: Limits) -> Registry {
    let mut r = pipeline_native::registry();
    let names: Vec<String> = r.names().map(str::to_string).collect();
    // One cache for all tests: the first compile is paid once.
    let cache = std::env::temp_dir().join("pipeline-wasm-test-cache");
    r.set_loader(Arc::new(
        loader(&cache, limits).with_reserved_names(names.iter().map(String::as_str)),
    ));
    r
}

/// Writes `yaml` next to a copy of the testkit fixture and runs it.
pub fn run_yaml(yaml: &str, limits: Limits) -> RunResults {
    run_yaml_with(yaml, limits, Signals::default())
}

pub fn run_yaml_with(yaml: &str, limits: Limits, signals: Signals) -> RunResults {
    run_plugin_yaml(&fixture("testkit-0.1.0.wasm"), yaml, limits, signals).0
}

/// Runs `yaml` in a fresh folder holding a copy of `plugin` (the testkit
/// fixture as `./testkit.wasm`, a guest under its own file name, e.g.
/// `./hostile_env.wasm`). Returns the results and the folder (the run folder
/// is its `run/`).
pub fn run_plugin_yaml(
    plugin: &Path,
    yaml: &str,
    limits: Limits,
    signals: Signals,
) -> (RunResults, PathBuf) {
    let dir = temp_dir("run");
    let name = if plugin.ends_with("testkit-0.1.0.wasm") {
        "testkit.wasm".to_string()
    } else {
        plugin.file_name().unwrap().to_string_lossy().into_owned()
    };
    std::fs::copy(plugin, dir.join(name)).unwrap();
    let file = dir.join("pipeline.yaml");
    std::fs::write(&file, yaml).unwrap();
    let registry = registry(limits);
    let plan = match compile_file(&file, &registry, &CompileOptions::default()) {
        Ok(p) => p,
        Err(d) => panic!("{d}"),
    };
    let outcome = runner::run(
        &plan,
        RunOptions {
            out_dir: Some(dir.join("run")),
            runs_root: dir.clone(),
            signals,
            progress: Progress::Quiet,
            live: None,
        },
    )
    .unwrap();
    (outcome.results, dir)
}

pub fn compile_errors(yaml: &str, wasm: Option<&[u8]>) -> String {
    let dir = temp_dir("compile");
    let bytes = match wasm {
        Some(b) => b.to_vec(),
        None => std::fs::read(fixture("testkit-0.1.0.wasm")).unwrap(),
    };
    std::fs::write(dir.join("testkit.wasm"), bytes).unwrap();
    let file = dir.join("pipeline.yaml");
    std::fs::write(&file, yaml).unwrap();
    match compile_file(&file, &registry(limits()), &CompileOptions::default()) {
        Ok(_) => String::new(),
        Err(d) => d.to_string(),
    }
}

pub fn stage<'a>(r: &'a RunResults, id: &str) -> &'a StageRecord {
    r.stages
        .iter()
        .chain(&r.cleanup)
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no stage {id}"))
}

/// A pipeline with one testkit stage and a cleanup stage that must still run.
pub fn one_stage(body: &str) -> String {
    format!(
        "name: wasm-test\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n{body}\ncleanup:\n  - id: after\n    uses: exec\n    with:\n      command: [echo, cleanup ran]\n"
    )
}

pub fn assert_cleanup_ran(r: &RunResults) {
    assert_eq!(stage(r, "after").status, StageStatus::Succeeded);
}
