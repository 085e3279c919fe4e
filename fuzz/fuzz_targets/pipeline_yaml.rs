//! A pipeline file: YAML -> compile -> checked plan -> `pipeline plan`'s text.
//! Any input must give a plan or diagnostics, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_engine::compile::{CompileOptions, compile_source};
use pipeline_engine::diagnostic::Source;

thread_local! {
    static REGISTRY: pipeline_engine::registry::Registry = pipeline_native::registry();
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let options = CompileOptions {
        // A fixed environment: the fuzzer's own must not leak in.
        env: &|name| (name == "CEPH_CONF").then(|| "/nonexistent/ceph.conf".to_string()),
        ..Default::default()
    };
    REGISTRY.with(|registry| {
        match compile_source(&Source::new("fuzz.yaml", text), registry, &options) {
            Ok(plan) => {
                let _ = plan.render_text();
                let _ = plan.stage_folders();
            }
            Err(diagnostics) => {
                let _ = diagnostics.to_string();
            }
        }
    });
});
