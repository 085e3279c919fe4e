//! Class 1 of the hostile-plugin review: environment variables. A plugin
//! sets only variables the pipeline grants by name, with valid names, and a
//! granted program starts from a minimal environment (nothing of the
//! runner's own beyond PATH, HOME, locale...). Uses the `hostile-env` guest.

use pipeline_engine::cancel::Signals;
use pipeline_engine::results::{RunResults, StageStatus};
use pipeline_stage_api::exec::MINIMAL_ENV;

mod common;
use common::*;

fn run(grants: &str, argv: &str, env: &str) -> (RunResults, std::path::PathBuf) {
    let yaml = format!(
        "name: env-test\nstages:\n  - id: plugin\n    uses: ./hostile_env.wasm\n    grants: {grants}\n    with:\n      argv: {argv}\n      env: {env}\ncleanup:\n  - id: after\n    uses: exec\n    with:\n      command: [echo, cleanup ran]\n"
    );
    run_plugin_yaml(&guest("hostile-env"), &yaml, limits(), Signals::default())
}

#[test]
fn bash_env_set_by_a_plugin_is_refused_and_nothing_runs() {
    // BASH_ENV makes a non-interactive bash source a file first: with a
    // grant of `bash -c true` the plugin would run any code it wrote.
    let dir = temp_dir("bash-env");
    let marker = dir.join("owned");
    let evil = dir.join("evil.sh");
    std::fs::write(&evil, format!("touch {}\n", marker.display())).unwrap();
    let (r, _) = run(
        "{exec: [bash]}",
        "[bash, -c, 'true']",
        &format!("['BASH_ENV={}']", evil.display()),
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Failed);
    assert_eq!(
        s.error.as_deref(),
        Some(
            "plugin `hostile-env` tried to set the environment variable `BASH_ENV` for `bash`: the pipeline does not grant it (grants.env: [])"
        )
    );
    assert!(s.commands.is_empty(), "nothing ran: {:?}", s.commands);
    assert!(!marker.exists(), "BASH_ENV was read");
    assert_cleanup_ran(&r);
}

#[test]
fn interpreter_hooks_and_env_options_are_refused_even_when_granted_names_differ() {
    for (name, value) in [
        ("PYTHONPATH", "/tmp"),
        ("PYTHONWARNINGS", "ignore"),
        ("PERL5OPT", "-Mstrict"),
        ("NODE_OPTIONS", "--require /tmp/x.js"),
        ("GCONV_PATH", "/tmp"),
        ("IFS", "x"),
        ("BASH_FUNC_echo%%", "() { id; }"),
        // GNU env on a remote host would read these as options.
        ("-S", "id"),
        ("-i", ""),
        ("PATH", "/tmp"),
        ("LD_PRELOAD", "/tmp/x.so"),
    ] {
        let (r, _) = run(
            "{exec: [env], env: [CEPH_ARGS]}",
            "[env]",
            &format!("['{name}={value}']"),
        );
        let s = stage(&r, "plugin");
        assert_eq!(s.status, StageStatus::Failed, "{name}");
        let e = s.error.as_deref().unwrap_or_default();
        assert!(
            e.starts_with("plugin `hostile-env` tried to set the environment variable"),
            "{name}: {e}"
        );
        assert!(s.commands.is_empty(), "{name}: nothing ran");
    }
}

#[test]
fn a_granted_program_sees_the_minimal_environment_and_the_granted_variable() {
    // The test process has many variables (CARGO_*, RUST_*...): none of
    // them may reach the plugin's program.
    let (r, _) = run(
        "{exec: [env], env: [CEPH_ARGS]}",
        "[env]",
        "['CEPH_ARGS=--id admin']",
    );
    let s = stage(&r, "plugin");
    assert_eq!(s.status, StageStatus::Succeeded, "{:?}", s.error);
    let stdout = s.outputs["stdout"].as_str().unwrap();
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    assert!(names.contains(&"CEPH_ARGS"), "{stdout}");
    assert!(stdout.contains("CEPH_ARGS=--id admin\n"), "{stdout}");
    for name in &names {
        assert!(
            *name == "CEPH_ARGS" || MINIMAL_ENV.contains(name),
            "`{name}` leaked into the plugin's program:\n{stdout}"
        );
    }
    assert!(
        std::env::vars().any(|(k, _)| k.starts_with("CARGO")),
        "the test itself must have variables that could leak"
    );
    // What the plugin set is on record.
    assert_eq!(s.commands.len(), 1);
    assert_eq!(s.commands[0].env, vec!["CEPH_ARGS=--id admin".to_string()]);
}

#[test]
fn grants_of_unusable_variables_are_compile_errors() {
    let yaml = |grants: &str| {
        format!(
            "name: env-test\nstages:\n  - id: plugin\n    uses: ./testkit.wasm\n    grants: {grants}\n    with:\n      mode: ok\n"
        )
    };
    let e = compile_errors(&yaml("{exec: [env], env: [PATH, 'A-B', LD_PRELOAD]}"), None);
    assert!(
        e.contains("grants.env: `PATH` decides which program runs; a plugin may not set it"),
        "{e}"
    );
    assert!(
        e.contains("grants.env: `A-B` is not a variable name"),
        "{e}"
    );
    assert!(
        e.contains("grants.env: `LD_PRELOAD` decides which program runs"),
        "{e}"
    );
    let e = compile_errors(&yaml("{env: [CEPH_ARGS]}"), None);
    assert!(
        e.contains(
            "grants.env sets variables for programs the plugin runs, but no program is granted"
        ),
        "{e}"
    );
}
