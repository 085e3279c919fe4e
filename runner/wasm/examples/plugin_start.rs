//! Plugin start-up figures: first compile, load from the disk cache (what a
//! `pipeline` process pays per plugin), and instantiate + call (what each
//! stage call pays). `benches/plugin_start.sh` runs it in release mode.
//!
//!   cargo run --release -p pipeline-wasm --example plugin_start -- [FILE.wasm...]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::params::Params;
use pipeline_stage_api::stage::{PlanContext, Stage};
use pipeline_wasm::cache::ComponentCache;
use pipeline_wasm::{WasmLoader, WasmStage};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let mut files: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if files.is_empty() {
        files.push(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testkit-0.1.0.wasm"),
        );
    }
    let cache_dir =
        std::env::temp_dir().join(format!("pipeline-bench-cache-{}", std::process::id()));
    let loader = || {
        WasmLoader::new()
            .with_cache(ComponentCache::new(Some(cache_dir.clone())))
            .with_search_path(Vec::new())
    };
    // The engine (and its epoch thread) is created once per process: count it apart.
    let t = Instant::now();
    pipeline_wasm::engine::engine().expect("engine");
    println!("engine start: {}", ms(t.elapsed()));
    for file in &files {
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        let t = Instant::now();
        let plugin = match loader().load_plugin(file, None) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                continue;
            }
        };
        let cold = t.elapsed();
        // A fresh loader per round: nothing kept in memory, the cache file is read.
        let cached = median(
            (0..21)
                .map(|_| {
                    let t = Instant::now();
                    let p = loader().load_plugin(file, None).expect("cached load");
                    assert_eq!(p.cache, pipeline_wasm::cache::CacheOutcome::Hit);
                    t.elapsed()
                })
                .collect(),
        );
        let stage = WasmStage {
            plugin: plugin.clone(),
        };
        let ceph = CephConnection::default();
        let mut params = Params::new();
        // testkit's `mode` (ignored by plugins without it: a plan call is harmless).
        params.insert("mode".into(), "ok".into());
        let ctx = PlanContext {
            instance_id: "bench",
            ceph: &ceph,
            targets: &[],
        };
        let call = median(
            (0..201)
                .map(|_| {
                    let t = Instant::now();
                    std::hint::black_box(stage.plan(&params, &ctx));
                    t.elapsed()
                })
                .collect(),
        );
        println!(
            "{} ({} KiB): first compile {}; load from disk cache (compiled code + link + describe) {}; instantiate + call {}",
            plugin.description.name,
            size / 1024,
            ms(cold),
            ms(cached),
            ms(call)
        );
    }
    let _ = std::fs::remove_dir_all(&cache_dir);
}
