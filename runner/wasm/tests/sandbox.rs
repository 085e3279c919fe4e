//! The sandbox, end to end through the engine: real pipelines compiled and
//! run with the committed `testkit` fixture (built against
//! `pipeline:stage@0.1.0`, so every test here also shows that a plugin built
//! for that interface version still runs).

use std::time::{Duration, Instant};

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::registry::PluginLoader;
use pipeline_engine::results::StageStatus;
use pipeline_wasm::Limits;
use pipeline_wasm::cache::CacheOutcome;

mod common;
use common::*;

#[test]
fn a_plugin_built_for_interface_0_1_0_runs_like_a_native_stage() {
    let r = run_yaml(
        &one_stage("    with:\n      mode: ok\n      size: 4K\n      wait: 250ms"),
        limits(),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    assert_eq!(s.plugin, "testkit");
    let value = |name: &str| s.metrics.iter().find(|m| m.name == name).map(|m| m.value);
    // Parameters arrive typed and converted: `4K` as bytes, `250ms` as seconds.
    assert_eq!(value("size"), Some(4096.0));
    assert_eq!(value("wait"), Some(0.25));
    assert_eq!(
        value("emitted"),
        Some(1.0),
        "emit-metric reaches the results"
    );
    assert!(s.metrics.iter().any(|m| m.name == "size" && m.headline));
    assert_eq!(s.outputs["mode"], "ok");
    assert_eq!(s.outputs["instance"], "plugin");
    assert_eq!(s.outputs["host"], "local");
    assert!(s.artifacts.iter().any(|a| a.name == "testkit.txt"));
    assert!(
        s.artifacts.iter().any(|a| a.name == "series: ramp"),
        "{:?}",
        s.artifacts
    );
    assert_cleanup_ran(&r);
}

#[test]
fn exec_of_a_program_not_granted_is_refused() {
    let r = run_yaml(
        &one_stage(
            "    grants: {exec: [echo]}\n    with:\n      mode: exec\n      argv: [rm, -rf, /tmp/pipeline-wasm-nothing]",
        ),
        limits(),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    assert_eq!(
        s.error.as_deref(),
        Some(
            "plugin `testkit` tried to run `rm`, which the pipeline does not grant (grants.exec: [echo])"
        )
    );
    assert!(s.commands.is_empty(), "nothing ran: {:?}", s.commands);
    assert_cleanup_ran(&r);
}

#[test]
fn exec_without_any_grant_is_refused() {
    let r = run_yaml(
        &one_stage("    with:\n      mode: exec\n      argv: [echo, hi]"),
        limits(),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    let e = s.error.as_deref().unwrap_or_default();
    assert!(
        e.starts_with(
            "plugin `testkit` tried to run `echo hi`, but the pipeline grants it no `exec`"
        ),
        "{e}"
    );
}

#[test]
fn granted_exec_goes_through_the_stage_context() {
    let r = run_yaml(
        &one_stage(
            "    grants: {exec: [echo]}\n    with:\n      mode: exec\n      argv: [echo, hello]",
        ),
        limits(),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    assert_eq!(s.outputs["stdout"], "hello\n");
    // Recorded like a native stage's command, output files in the run folder.
    assert_eq!(s.commands.len(), 1);
    assert_eq!(s.commands[0].command, "echo hello");
    assert!(
        s.commands[0].stdout.ends_with("01-echo.stdout"),
        "{:?}",
        s.commands[0]
    );
}

#[test]
fn an_infinite_loop_is_stopped_and_the_run_goes_on_to_cleanup() {
    let started = Instant::now();
    let one_second = Limits {
        run_time: Duration::from_secs(1),
        ..limits()
    };
    let r = run_yaml(&one_stage("    with:\n      mode: loop"), one_second);
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    assert_eq!(
        s.error.as_deref(),
        Some(
            "plugin `testkit` ran for more than 1.0s without finishing (a runaway loop?) and was stopped (in `run`)"
        )
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_cleanup_ran(&r);
}

#[test]
fn the_stage_timeout_stops_a_loop_too() {
    let generous = Limits {
        run_time: Duration::from_secs(300),
        ..limits()
    };
    let started = Instant::now();
    let r = run_yaml(
        &one_stage("    timeout: 1s\n    with:\n      mode: loop"),
        generous,
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    assert!(
        s.error
            .as_deref()
            .unwrap_or_default()
            .contains("was still running at the stage's deadline"),
        "{:?}",
        s.error
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_cleanup_ran(&r);
}

#[test]
fn a_memory_bomb_hits_the_cap() {
    let r = run_yaml(&one_stage("    with:\n      mode: memory"), limits());
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    let e = s.error.as_deref().unwrap_or_default();
    assert!(
        e.starts_with("plugin `testkit` tried to grow a memory to "),
        "{e}"
    );
    assert!(e.contains("over its cap of 64 MiB, and was stopped"), "{e}");
    assert_cleanup_ran(&r);
}

#[test]
fn a_panic_is_a_stage_failure_with_the_panic_message() {
    let r = run_yaml(&one_stage("    with:\n      mode: panic"), limits());
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    let e = s.error.as_deref().unwrap_or_default();
    assert!(e.starts_with("plugin `testkit` crashed in `run`"), "{e}");
    assert!(e.contains("testkit was asked to panic"), "{e}");
}

#[test]
fn files_only_in_the_work_folder_and_only_when_granted() {
    let ok = run_yaml(
        &one_stage(
            "    grants: {files: work}\n    with:\n      mode: write\n      path: sub/note.txt",
        ),
        limits(),
    );
    let s = stage(&ok, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    assert_eq!(s.metrics[0].value, 19.0);

    let escape = run_yaml(
        &one_stage(
            "    grants: {files: work}\n    with:\n      mode: read\n      path: ../../pipeline.yaml",
        ),
        limits(),
    );
    assert_eq!(
        stage(&escape, "plugin").error.as_deref(),
        Some("plugin `testkit` tried to read `../../pipeline.yaml`: paths may not contain `..`")
    );

    let ungranted = run_yaml(&one_stage("    with:\n      mode: write"), limits());
    let e = stage(&ungranted, "plugin")
        .error
        .clone()
        .unwrap_or_default();
    assert!(
        e.starts_with(
            "plugin `testkit` tried to write `note.txt`, but the pipeline grants it no `files`"
        ),
        "{e}"
    );
}

#[test]
fn http_only_to_granted_prefixes() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
    });
    let url = format!("http://127.0.0.1:{port}/metrics");
    let r = run_yaml(
        &one_stage(&format!(
            "    grants: {{http: [\"http://127.0.0.1:{port}/\"]}}\n    with:\n      mode: http\n      url: {url}"
        )),
        limits(),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    assert_eq!(s.metrics[0].value, 204.0);
    server.join().unwrap();

    let r = run_yaml(
        &one_stage(&format!(
            "    grants: {{http: [\"http://127.0.0.1:{port}/\"]}}\n    with:\n      mode: http\n      url: http://10.1.2.3/x"
        )),
        limits(),
    );
    let e = stage(&r, "plugin").error.clone().unwrap_or_default();
    assert!(
        e.contains("tried to send `GET http://10.1.2.3/x`, which the pipeline does not grant"),
        "{e}"
    );
}

#[test]
fn a_tampered_plugin_with_a_pinned_hash_is_refused() {
    let bytes = std::fs::read(fixture("testkit-0.1.0.wasm")).unwrap();
    let sha = pipeline_wasm::cache::sha256_hex(&bytes);
    let yaml = format!(
        "name: pinned\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    sha256: sha256:{sha}\n    with: {{mode: ok}}\n"
    );
    assert_eq!(compile_errors(&yaml, None), "", "the genuine file loads");

    let mut tampered = bytes.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01;
    let errors = compile_errors(&yaml, Some(&tampered));
    assert!(errors.contains("sha256 mismatch"), "{errors}");
    assert!(
        errors.contains(&format!("the pipeline pins {sha}")),
        "{errors}"
    );
    assert!(errors.contains("refusing to load it"), "{errors}");
    // Reported at the pin, not at `uses`.
    assert!(errors.contains(":5:"), "{errors}");
}

#[test]
fn a_malformed_pin_is_reported_at_the_pin_and_a_missing_file_at_uses() {
    let pinned = |uses: &str| {
        format!(
            "name: pinned\nstages:\n  - id: plugin\n    uses: {uses}\n    sha256: abc\n    with: {{mode: ok}}\n"
        )
    };
    let errors = compile_errors(&pinned("./testkit.wasm"), None);
    assert!(errors.contains("invalid sha256 pin `abc`"), "{errors}");
    assert!(errors.contains(":5:"), "{errors}");

    let errors = compile_errors(&pinned("./missing.wasm"), None);
    assert!(errors.contains("no plugin file"), "{errors}");
    assert!(errors.contains(":4:"), "{errors}");
}

#[test]
fn parameters_are_checked_like_a_native_stage() {
    let yaml = "name: p\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    with:\n      mode: lop\n      sise: 4K\n";
    let errors = compile_errors(yaml, None);
    assert!(errors.contains("did you mean `loop`?"), "{errors}");
    assert!(
        errors.contains("`testkit` has no parameter `sise`"),
        "{errors}"
    );
    // The plugin's own `check` runs at validate time.
    let yaml = "name: p\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    with:\n      mode: exec\n      argv: []\n";
    let errors = compile_errors(yaml, None);
    assert!(
        errors.contains("parameter `argv`: mode=exec needs a command"),
        "{errors}"
    );
    // Grants for capabilities the plugin does not ask for are the engine's check;
    // here: an unknown program is fine at compile time, refused at run time.
}

#[test]
fn plan_shows_the_plugin_actions_and_what_it_may_do() {
    let dir = temp_dir("plan");
    std::fs::copy(fixture("testkit-0.1.0.wasm"), dir.join("testkit.wasm")).unwrap();
    let file = dir.join("p.yaml");
    std::fs::write(
        &file,
        "name: p\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    grants: {exec: [echo]}\n    with: {mode: exec, argv: [echo, hi]}\n",
    )
    .unwrap();
    let plan = compile_file(&file, &registry(limits()), &CompileOptions::default()).unwrap();
    let text = plan.render_text();
    assert!(text.contains("-> testkit mode=exec: echo hi"), "{text}");
    assert!(
        text.contains("asks for [exec, files, http]; allowed: exec [echo]"),
        "{text}"
    );
}

#[test]
fn files_that_are_not_plugins_are_refused_with_a_reason() {
    let cache = temp_dir("cache-bad");
    let l = loader(&cache, limits());
    let err = |name: &str| match l.load_file(&fixture(name), None) {
        Ok(_) => panic!("{name} loaded"),
        Err(e) => e.to_string(),
    };
    let e = err("core-module.wat");
    assert!(e.contains("is not a valid WebAssembly component"), "{e}");
    let e = err("not-a-plugin.wat");
    assert!(e.contains("does not export `pipeline:stage/plugin`"), "{e}");
    let e = err("future-version.wat");
    assert!(
        e.contains("is built against pipeline:stage@9.0.0, which this runner does not support (supported: 0.1.0, 0.2.0)"),
        "{e}"
    );
    let garbage = cache.join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x0d\0\x01\0garbage").unwrap();
    let e = match l.load_file(&garbage, None) {
        Ok(_) => panic!("garbage loaded"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("is not a valid WebAssembly component"), "{e}");
}

#[test]
fn plugins_are_found_by_name_on_the_plugin_path() {
    let project = temp_dir("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(project.join("plugins/wasm")).unwrap();
    std::fs::create_dir_all(project.join("suites")).unwrap();
    std::fs::copy(
        fixture("testkit-0.1.0.wasm"),
        project.join("plugins/wasm/testkit.wasm"),
    )
    .unwrap();
    let l = loader(&temp_dir("cache-path"), limits());
    // From a pipeline in a subfolder of the project.
    let found = l
        .load("testkit", &project.join("suites"), None)
        .unwrap()
        .unwrap();
    assert_eq!(found.description.name, "testkit");
    assert!(
        found.origin.ends_with("plugins/wasm/testkit.wasm"),
        "{}",
        found.origin
    );
    assert!(l.load("nothing-like-it", &project, None).unwrap().is_none());

    let user = temp_dir("user-plugins");
    std::fs::copy(fixture("testkit-0.1.0.wasm"), user.join("testkit.wasm")).unwrap();
    let l = loader(&temp_dir("cache-path2"), limits()).with_search_path(vec![user.clone()]);
    let found = l
        .load("testkit", &temp_dir("elsewhere"), None)
        .unwrap()
        .unwrap();
    assert!(
        found.origin.starts_with(user.to_str().unwrap()),
        "{}",
        found.origin
    );
}

/// Appends a custom section: a different file (new hash) with the same code.
fn with_custom_section(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let name = b"pipeline-test";
    let payload = b"changed";
    out.push(0); // custom section id
    out.push((1 + name.len() + payload.len()) as u8);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

#[test]
fn compiled_components_are_cached_and_a_changed_file_is_recompiled() {
    let cache = temp_dir("cache");
    let dir = temp_dir("cached-plugin");
    let file = dir.join("testkit.wasm");
    std::fs::copy(fixture("testkit-0.1.0.wasm"), &file).unwrap();

    let t = Instant::now();
    let first = loader(&cache, limits()).load_plugin(&file, None).unwrap();
    let cold = t.elapsed();
    assert_eq!(first.cache, CacheOutcome::Compiled);

    let t = Instant::now();
    let second = loader(&cache, limits()).load_plugin(&file, None).unwrap();
    let warm = t.elapsed();
    assert_eq!(second.cache, CacheOutcome::Hit);
    eprintln!("testkit load: cold {cold:?}, cached {warm:?}");
    assert!(warm < cold, "cached {warm:?} vs cold {cold:?}");

    std::fs::write(&file, with_custom_section(&std::fs::read(&file).unwrap())).unwrap();
    let changed = loader(&cache, limits()).load_plugin(&file, None).unwrap();
    assert_eq!(changed.cache, CacheOutcome::Compiled);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 2);
}

#[test]
fn ctrl_c_stops_a_running_plugin_and_cleanup_still_runs() {
    let generous = Limits {
        run_time: Duration::from_secs(300),
        ..limits()
    };
    let signals = Signals::default();
    let raiser = signals.clone();
    let started = Instant::now();
    let interrupt = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        raiser.raise();
    });
    let r = run_yaml_with(&one_stage("    with:\n      mode: loop"), generous, signals);
    interrupt.join().unwrap();
    assert_eq!(stage(&r, "plugin").status, StageStatus::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_cleanup_ran(&r);
}
