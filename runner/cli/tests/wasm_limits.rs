//! The WASM limits as the README states them, set through the environment
//! of `pipeline run`: `PIPELINE_WASM_MEMORY` (default 512 MiB per linear
//! memory) and `PIPELINE_WASM_TIME` (default 5 min of guest compute per
//! `run`); a malformed value is refused before anything runs. Uses the
//! committed `testkit` fixture (its `mode` picks the misbehaviour).

mod common;

use std::path::PathBuf;

/// A suite running the fixture in `mode`, in a fresh folder with its own
/// compile cache; returns (exit code, results.json's first stage, output).
fn run(name: &str, mode: &str, env: &[(&str, &str)]) -> (Option<i32>, serde_json::Value, String) {
    let dir = common::temp_dir(name);
    let fixture = common::root().join("runner/wasm/tests/fixtures/testkit-0.1.0.wasm");
    std::fs::copy(&fixture, dir.join("testkit.wasm")).unwrap();
    let suite = dir.join("suite.yaml");
    std::fs::write(
        &suite,
        format!("name: limits\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    with:\n      mode: {mode}\n"),
    )
    .unwrap();
    let run_dir: PathBuf = dir.join("run");
    let mut cmd = common::pipeline_command(&[
        "run",
        suite.to_str().unwrap(),
        "--out",
        run_dir.to_str().unwrap(),
    ]);
    cmd.env("PIPELINE_CACHE_DIR", dir.join("cache"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stage = std::fs::read_to_string(run_dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|r| r["stages"][0].clone())
        .unwrap_or_default();
    (out.status.code(), stage, text)
}

fn error(stage: &serde_json::Value) -> &str {
    stage["error"].as_str().unwrap_or_default()
}

#[test]
fn memory_cap_defaults_to_512_mib_and_follows_pipeline_wasm_memory() {
    let (code, stage, text) = run("wasm-memory-default", "memory", &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        error(&stage).contains("over its cap of 512 MiB"),
        "{stage:#}"
    );
    let (code, stage, text) = run(
        "wasm-memory-set",
        "memory",
        &[("PIPELINE_WASM_MEMORY", "32M")],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        error(&stage).contains("over its cap of 32 MiB"),
        "{stage:#}"
    );
}

#[test]
fn guest_time_follows_pipeline_wasm_time() {
    let started = std::time::Instant::now();
    let (code, stage, text) = run("wasm-time-set", "loop", &[("PIPELINE_WASM_TIME", "1s")]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        error(&stage).contains("ran for more than 1.0s without finishing"),
        "{stage:#}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn malformed_limits_are_refused_naming_the_variable() {
    for (var, value) in [
        ("PIPELINE_WASM_MEMORY", "lots"),
        ("PIPELINE_WASM_TIME", "soon"),
    ] {
        let (code, stage, text) = run("wasm-limits-bad", "ok", &[(var, value)]);
        assert_ne!(code, Some(0), "{var}={value}: {text}");
        assert!(
            text.contains(&format!("{var}={value}"))
                || error(&stage).contains(&format!("{var}={value}")),
            "{var}={value}: {text}\n{stage:#}"
        );
    }
}
