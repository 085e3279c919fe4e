//! The example plugins, built from source (`plugins/guests/build.sh` puts
//! them in `plugins/wasm/`), against the sandbox cluster that
//! `scripts/test.sh` starts: the Rust `ceph-df` and the Python `osd-perf`
//! run `ceph` through the host and report metrics like native stages.

use pipeline_test_tiers::{Tier, live};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::progress::Progress;
use pipeline_engine::results::{RunResults, StageStatus};
use pipeline_engine::runner::{self, RunOptions};
use pipeline_wasm::WasmLoader;
use pipeline_wasm::cache::ComponentCache;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn preconditions() {
    std::env::var("CEPH_CONF").expect(
        "CEPH_CONF is not set: these tests need a cluster; run them through scripts/test.sh, \
         which starts the sandbox (or `eval \"$(pipeline sandbox env)\"` first)",
    );
    for plugin in ["ceph-df", "osd-perf"] {
        let file = repo().join(format!("plugins/wasm/{plugin}.wasm"));
        assert!(
            file.is_file(),
            "{} is missing: build the example plugins with plugins/guests/build.sh",
            file.display()
        );
    }
}

fn run(file: &Path) -> RunResults {
    // One at a time: the first compiles the Python plugin (seconds), the next reads the cache.
    static ONE: Mutex<()> = Mutex::new(());
    let _turn = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut registry = pipeline_native::registry();
    // Shared by the tests of this file: the Python plugin is compiled once.
    let cache = std::env::temp_dir().join("pipeline-wasm-ceph-test-cache");
    registry.set_loader(Arc::new(
        WasmLoader::new()
            .with_cache(ComponentCache::new(Some(cache)))
            .with_search_path(Vec::new()),
    ));
    let plan =
        compile_file(file, &registry, &CompileOptions::default()).unwrap_or_else(|d| panic!("{d}"));
    let out = std::env::temp_dir().join(format!(
        "pipeline-wasm-ceph-run-{}-{}",
        std::process::id(),
        file.file_stem().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&out);
    runner::run(
        &plan,
        RunOptions {
            out_dir: Some(out),
            runs_root: std::env::temp_dir(),
            signals: Signals::default(),
            progress: Progress::Quiet,
            live: None,
        },
    )
    .unwrap()
    .results
}

fn rust_and_python_plugins_report_cluster_metrics() {
    preconditions();
    let r = run(&repo().join("tests/wasm/ceph-plugins.yaml"));
    let capacity = &r.stages[0];
    assert_eq!(
        capacity.status,
        StageStatus::Succeeded,
        "{:?}",
        capacity.error
    );
    assert_eq!(capacity.plugin, "ceph-df");
    let raw_total = capacity
        .metrics
        .iter()
        .find(|m| m.name == "raw_total")
        .unwrap();
    assert!(raw_total.value > 0.0);
    assert!(
        capacity
            .metrics
            .iter()
            .any(|m| m.name == "pool_stored" && m.labels.contains_key("pool"))
    );
    assert!(
        capacity.commands[0].command.contains(" df -f json"),
        "{:?}",
        capacity.commands
    );

    let latency = &r.stages[1];
    assert_eq!(
        latency.status,
        StageStatus::Succeeded,
        "{:?}",
        latency.error
    );
    assert_eq!(latency.plugin, "osd-perf");
    let osds = latency.outputs["osds"].as_u64().unwrap();
    assert!(osds >= 1);
    let per_osd = latency
        .metrics
        .iter()
        .filter(|m| m.name == "commit_latency")
        .count();
    assert_eq!(per_osd as u64, osds);
    assert!(
        latency
            .metrics
            .iter()
            .any(|m| m.name == "commit_latency_max" && m.headline)
    );
    assert_eq!(latency.commands.len(), 2, "samples: 2");
    assert!(
        latency
            .artifacts
            .iter()
            .any(|a| a.name == "series: commit_latency_max")
    );
}

fn a_python_plugin_is_refused_a_program_it_was_not_granted() {
    preconditions();
    let dir =
        std::env::temp_dir().join(format!("pipeline-wasm-ceph-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("refused.yaml");
    std::fs::write(
        &file,
        format!(
            "name: refused\nstages:\n  - id: latency\n    uses: {}\n    grants: {{exec: [rados]}}\n",
            repo().join("plugins/wasm/osd-perf.wasm").display()
        ),
    )
    .unwrap();
    let r = run(&file);
    let s = &r.stages[0];
    assert_eq!(s.status, StageStatus::Failed);
    assert_eq!(
        s.error.as_deref(),
        Some(
            "plugin `osd-perf` tried to run `ceph`, which the pipeline does not grant (grants.exec: [rados])"
        )
    );
    assert!(s.commands.is_empty());
}

fn main() {
    pipeline_test_tiers::run(vec![
        live(
            "rust_and_python_plugins_report_cluster_metrics",
            &[Tier::Cluster],
            rust_and_python_plugins_report_cluster_metrics,
        ),
        live(
            "a_python_plugin_is_refused_a_program_it_was_not_granted",
            &[Tier::Cluster],
            a_python_plugin_is_refused_a_program_it_was_not_granted,
        ),
    ]);
}
