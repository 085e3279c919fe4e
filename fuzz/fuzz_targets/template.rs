//! The template layer: any template text renders or fails with an error,
//! within the rendered-size limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pipeline_engine::template;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env = template::environment();
    let ctx = template::context(serde_json::json!({
        "vars": {"pool": "bench", "size": 3, "list": [1, 2, 3]},
        "env": {"CEPH_CONF": "/etc/ceph/ceph.conf"},
        "matrix": {"bs": "4K"},
        "stages": {"pool": {"status": "succeeded", "outputs": {"pool": "p"}}},
        "run": {"id": "20261201T000000Z-fuzz"}
    }));
    if let Ok(out) = template::render(&env, text, &ctx) {
        assert!(out.len() <= template::MAX_RENDERED_BYTES);
    }
    let _ = template::eval_bool(&env, text, &ctx);
    let _ = template::referenced_names(&env, text, false);
    let _ = template::referenced_names(&env, text, true);
});
