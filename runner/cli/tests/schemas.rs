//! The committed JSON Schemas (`schemas/`) must match what the Rust types
//! generate, so editors autocomplete what the runner accepts.
//! `UPDATE_EXPECT=1 cargo test -p pipeline --test schemas` refreshes them.

mod common;

fn check(args: &[&str], file: &str) {
    let out = common::pipeline(args);
    assert_eq!(out.status.code(), Some(0));
    let schema = String::from_utf8(out.stdout).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&schema).expect("schema is JSON");
    assert!(parsed["properties"].is_object(), "{parsed:#}");
    if let Some(diff) = common::golden(&common::root().join(file), &schema) {
        panic!("{file} is stale: {diff}");
    }
}

#[test]
fn pipeline_schema_is_current() {
    check(&["schema"], "schemas/pipeline.schema.json");
}

#[test]
fn results_schema_is_current() {
    check(&["schema", "--results"], "schemas/results.schema.json");
}
