//! One function per subcommand; each returns the process exit code.

use std::path::{Path, PathBuf};

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::diagnostic::{Diagnostic, Diagnostics};
use pipeline_engine::progress::Progress;
use pipeline_engine::results::{RunResults, RunStatus};
use pipeline_engine::runner::{self, RunOptions};

/// Every stage a pipeline can use: the native ones, and (through a loader)
/// plugin files.
pub fn registry() -> pipeline_engine::registry::Registry {
    let mut r = pipeline_native::registry();
    // WASM plugins share the namespace: native names win, and no plugin may take one.
    // Creating the loader is free; the wasm engine starts only when a plugin loads.
    let loader = pipeline_wasm::WasmLoader::new().with_reserved_names(r.names());
    r.set_loader(std::sync::Arc::new(loader));
    r
}

pub const EXIT_OK: u8 = 0;
pub const EXIT_RUN_FAILED: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_INTERRUPTED: u8 = 130;

pub(crate) fn print_diagnostics(d: &Diagnostics) {
    // Diagnostics quote plugins (a `check` problem): no escapes reach the terminal.
    eprint!("{}", pipeline_engine::terminal::text(&d.to_string()));
    let n = d.len();
    eprintln!("\n{n} error{} found", if n == 1 { "" } else { "s" });
}

fn parse_sets(sets: &[String]) -> Result<Vec<(String, String)>, Diagnostics> {
    let mut out = Vec::new();
    let mut diags = Diagnostics::default();
    for s in sets {
        match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => out.push((k.trim().to_string(), v.to_string())),
            _ => diags.push(
                Diagnostic::error(format!("--set `{s}`: expected KEY=VALUE"))
                    .with_help("e.g. `--set pool_size=1`"),
            ),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(diags)
    }
}

pub fn validate(files: &[PathBuf], check_hosts: bool, locked: bool) -> u8 {
    let registry = registry();
    let mut all = Diagnostics::default();
    let options = CompileOptions {
        locked,
        ..Default::default()
    };
    for file in files {
        match compile_file(file, &registry, &options) {
            Ok(plan) => {
                let problems = if check_hosts {
                    pipeline_engine::preflight::check(&plan)
                } else {
                    Vec::new()
                };
                if problems.is_empty() {
                    println!(
                        "{}: ok ({} stage instance(s), {} cleanup{})",
                        file.display(),
                        plan.stages.len(),
                        plan.cleanup.len(),
                        if check_hosts { ", hosts ready" } else { "" }
                    );
                }
                for p in problems {
                    all.push(
                        Diagnostic::error(p)
                            .at(&plan.source, pipeline_engine::diagnostic::Loc::default()),
                    );
                }
            }
            Err(d) => all.extend(d),
        }
    }
    if all.is_empty() {
        EXIT_OK
    } else {
        print_diagnostics(&all);
        EXIT_INVALID
    }
}

pub fn plan(file: &Path, sets: &[String], locked: bool) -> u8 {
    let registry = registry();
    let overrides = match parse_sets(sets) {
        Ok(o) => o,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_INVALID;
        }
    };
    let options = CompileOptions {
        overrides,
        locked,
        ..Default::default()
    };
    match compile_file(file, &registry, &options) {
        Ok(plan) => {
            print!("{}", plan.render_text());
            EXIT_OK
        }
        Err(d) => {
            print_diagnostics(&d);
            EXIT_INVALID
        }
    }
}

/// For commands that run stages (`run`, `cleanup`): signal handlers first
/// (a Ctrl-C while compiling must not kill us mid-cleanup later), and the
/// runner made the subreaper of what stages start, so processes that leave
/// their process group (setsid) come back to it and are stopped after the
/// stage. `None` (after the error) when the handlers cannot be installed.
fn signals_and_subreaper() -> Option<Signals> {
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot install signal handlers: {e}");
            return None;
        }
    };
    if let Err(e) = pipeline_engine::orphans::adopt() {
        eprintln!("warning: cannot become the subreaper of the run's processes: {e}");
    }
    Some(signals)
}

pub fn run(
    file: &Path,
    sets: &[String],
    out: Option<PathBuf>,
    only: &[String],
    locked: bool,
) -> u8 {
    let Some(signals) = signals_and_subreaper() else {
        return EXIT_RUN_FAILED;
    };
    let registry = registry();
    let overrides = match parse_sets(sets) {
        Ok(o) => o,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_INVALID;
        }
    };
    let options = CompileOptions {
        overrides,
        only: only.to_vec(),
        locked,
        ..Default::default()
    };
    let plan = match compile_file(file, &registry, &options) {
        Ok(p) => p,
        Err(d) => {
            print_diagnostics(&d);
            return EXIT_INVALID;
        }
    };
    let opts = RunOptions {
        out_dir: out,
        runs_root: PathBuf::from("runs"),
        signals,
        progress: Progress::auto(),
    };
    match runner::run(&plan, opts) {
        Ok(outcome) => {
            let r = &outcome.results;
            let failed = r
                .stages
                .iter()
                .chain(&r.cleanup)
                .filter(|s| s.status == pipeline_engine::results::StageStatus::Failed)
                .count();
            println!(
                "run {}: {}{}",
                r.run_id,
                r.status.as_str(),
                if failed > 0 {
                    format!(" ({failed} failed stage(s))")
                } else {
                    String::new()
                }
            );
            println!(
                "results: {}",
                outcome.run_dir.join("results.json").display()
            );
            println!("report: {}", outcome.report_path.display());
            if let Some(e) = &outcome.save_error {
                eprintln!(
                    "error: results.json could not be written ({e}); {} holds the last complete version, from before that",
                    outcome.run_dir.join("results.json").display()
                );
                return EXIT_RUN_FAILED;
            }
            if let Some(c) = &r.comparison {
                if let Some(e) = &c.error {
                    eprintln!("error: no comparison with {}: {e}", c.baseline);
                }
                if !c.regressions.is_empty() {
                    for line in crate::compare::environment_lines(&c.environment_changes) {
                        eprintln!("{line}");
                    }
                }
                for g in &c.regressions {
                    eprintln!("{}", crate::compare::regression_line(g));
                }
                if (c.error.is_some() || !c.regressions.is_empty())
                    && r.status == RunStatus::Succeeded
                {
                    return EXIT_RUN_FAILED;
                }
            }
            match r.status {
                RunStatus::Succeeded => EXIT_OK,
                RunStatus::Cancelled => EXIT_INTERRUPTED,
                _ => EXIT_RUN_FAILED,
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

/// `pipeline cleanup RUN_DIR`: removes what a run that could not clean up
/// left behind, with the suite's own cleanup stages.
pub fn cleanup(run_dir: &Path) -> u8 {
    use pipeline_engine::recovery::{self, RecoveryError};
    let Some(signals) = signals_and_subreaper() else {
        return EXIT_RUN_FAILED;
    };
    let registry = registry();
    match recovery::clean_up(run_dir, &registry, &signals, Progress::auto()) {
        Ok(done) => {
            if done.was_running {
                println!(
                    "{}: the run had stopped without finishing (its process is gone); its status is now `failed`",
                    run_dir.display()
                );
            }
            if done.removed.is_empty() && done.left.is_empty() {
                println!("{}: nothing to clean up", run_dir.display());
            }
            for r in &done.removed {
                println!("removed: {} `{}`", r.kind, r.name);
            }
            for (r, why) in &done.left {
                println!("left: {} `{}`: {why}", r.kind, r.name);
            }
            println!(
                "results: {}",
                run_dir
                    .join(pipeline_engine::results::RESULTS_FILE)
                    .display()
            );
            if done.left.is_empty() {
                EXIT_OK
            } else {
                EXIT_RUN_FAILED
            }
        }
        Err(RecoveryError::Suite(d)) => {
            eprintln!(
                "error: the suite saved in {} no longer compiles, so its cleanup stages cannot run:",
                run_dir.display()
            );
            print_diagnostics(&d);
            EXIT_INVALID
        }
        Err(e @ RecoveryError::Lock(_)) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

pub fn report(run_dir: &Path) -> u8 {
    let results = match RunResults::load(run_dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    match pipeline_engine::report::write_report(&results, run_dir) {
        Ok(()) => {
            println!(
                "report: {}",
                run_dir.join(pipeline_engine::report::REPORT_FILE).display()
            );
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

/// Native stages, then WASM plugins found on the plugin path.
fn all_plugins(
    registry: &pipeline_engine::registry::Registry,
) -> Vec<pipeline_engine::registry::RegisteredStage> {
    let mut all: Vec<_> = registry.iter().cloned().collect();
    if let Some(loader) = registry.loader() {
        for p in loader.discover() {
            if !all.iter().any(|n| n.description.name == p.description.name) {
                all.push(p);
            }
        }
    }
    all
}

pub fn plugins_list() -> u8 {
    let registry = registry();
    let all = all_plugins(&registry);
    let width = all
        .iter()
        .map(|p| p.description.name.len())
        .max()
        .unwrap_or(0);
    for p in &all {
        let (kind, from) = if p.origin == "native" {
            ("native", String::new())
        } else {
            let asks = &p.description.capabilities;
            let asks = if asks.is_empty() {
                String::new()
            } else {
                format!("; asks for {}", asks.join(", "))
            };
            ("wasm", format!(" ({}{asks})", p.origin))
        };
        println!(
            "{:width$}  {kind:6}  {}{from}",
            p.description.name, p.description.summary
        );
    }
    crate::registry_commands::list_cached();
    EXIT_OK
}

pub fn plugins_describe(name: &str) -> u8 {
    let registry = registry();
    if pipeline_oci::is_oci(name) {
        return match crate::registry_commands::fetch_for_describe(&registry, name) {
            Ok(p) => describe_plugin(p),
            Err(code) => code,
        };
    }
    let found = registry.get(name).cloned().map(Ok).or_else(|| {
        // A WASM plugin by name on the plugin path, or by file path.
        let cwd = Path::new(".");
        registry.resolve(name, cwd, None).transpose()
    });
    let p = match found {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            print_diagnostics(
                &Diagnostic::error(format!("cannot load plugin `{name}`: {e}")).into(),
            );
            return EXIT_INVALID;
        }
        None => {
            let all = all_plugins(&registry);
            let names = || all.iter().map(|p| p.description.name.as_str());
            let d = Diagnostic::error(format!("unknown plugin `{name}`"))
                .with_help_opt(pipeline_engine::diagnostic::did_you_mean(name, names()))
                .with_help_opt(Some(format!(
                    "available: {}",
                    names().collect::<Vec<_>>().join(", ")
                )));
            print_diagnostics(&d.into());
            return EXIT_INVALID;
        }
    };
    describe_plugin(p)
}

fn describe_plugin(p: pipeline_engine::registry::RegisteredStage) -> u8 {
    if p.origin != "native" {
        let d = &p.description;
        println!(
            "{} {} (WebAssembly plugin: {})",
            t(&d.name),
            t(&d.version),
            p.origin
        );
        println!("  {}\n", t(&d.summary));
        if let Some(sha) = &p.sha256 {
            println!(
                "sha256: {}  (pin it with `sha256:`)",
                sha.trim_start_matches("sha256:")
            );
        }
        println!(
            "capabilities: {}\n",
            if d.capabilities.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} (used only where a pipeline grants them: `grants: {{exec: [...], files: work, http: [...]}}`)",
                    d.capabilities.join(", ")
                )
            }
        );
        return describe_body(&p);
    }
    let d = &p.description;
    println!(
        "{} {} ({})\n  {}\n",
        t(&d.name),
        t(&d.version),
        p.origin,
        t(&d.summary)
    );
    describe_body(&p)
}

/// A plugin's own text (name, summary, docs) for the terminal: one line,
/// no escape sequences.
fn t(s: &str) -> String {
    pipeline_engine::terminal::line(s)
}

fn describe_body(p: &pipeline_engine::registry::RegisteredStage) -> u8 {
    let d = &p.description;
    println!("parameters:");
    for s in &d.params {
        let req = if s.required { "required" } else { "optional" };
        let default = s
            .default
            .as_ref()
            .map(|v| format!(", default {}", t(&v.to_string())))
            .unwrap_or_default();
        println!(
            "  {} ({}, {req}{default})\n      {}",
            t(&s.name),
            t(&s.ty.describe()),
            t(&s.doc)
        );
    }
    println!("\noutputs:");
    if d.outputs.is_empty() {
        println!("  (none)");
    }
    for o in &d.outputs {
        println!("  {}: {}", t(&o.name), t(&o.doc));
    }
    if let Some(param) = &d.metrics_from_param {
        println!(
            "\nmetrics: each entry of `{}` declares one (name, unit, direction, aggregate, headline)",
            t(param)
        );
    } else if !d.metrics.is_empty() {
        println!("\nmetrics:");
        for m in &d.metrics {
            println!("  {}\n      {}", t(&m.summary(d.metric_values)), t(&m.doc));
        }
    }
    EXIT_OK
}

pub fn plugins_new(name: &str, dir: Option<&Path>) -> u8 {
    let native: Vec<String> = pipeline_native::registry()
        .names()
        .map(str::to_string)
        .collect();
    match crate::plugin_scaffold::create(name, dir, &native) {
        Ok(root) => {
            println!("created {}", root.display());
            println!(
                "  cd {} && cargo build --release --target wasm32-wasip2",
                root.display()
            );
            println!("  pipeline run pipeline.yaml");
            println!("(needs the target once: rustup target add wasm32-wasip2)");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_INVALID
        }
    }
}

pub fn schema(results: bool) -> u8 {
    let schema = if results {
        pipeline_engine::results::results_schema()
    } else {
        // Native stages only: the committed schema must not depend on which
        // plugin files happen to be on the plugin path.
        let stages: Vec<(String, serde_json::Value)> = pipeline_native::registry()
            .iter()
            .filter_map(|s| Some((s.description.name.clone(), s.stage.config_schema()?)))
            .collect();
        pipeline_engine::config::editor_schema::pipeline_schema_with_stages(&stages)
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    EXIT_OK
}

pub fn parse(format: &str, file: &Path) -> u8 {
    let text = match std::fs::read(file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return EXIT_INVALID;
        }
    };
    match pipeline_parsers::parse(format, &text) {
        Ok(m) => {
            println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            EXIT_INVALID
        }
    }
}

fn sandbox_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(pipeline_sandbox::default_dir)
}

pub fn sandbox_up(
    dir: Option<PathBuf>,
    memstore: Option<String>,
    bluestore: bool,
    no_pool_delete: bool,
) -> u8 {
    let mut opts = pipeline_sandbox::SandboxOptions {
        dir: sandbox_dir(dir),
        allow_pool_delete: !no_pool_delete,
        ..Default::default()
    };
    if let Some(size) = memstore {
        match pipeline_engine::params::parse_size(&size) {
            Ok(bytes) => opts.memstore_bytes = bytes,
            Err(e) => {
                eprintln!("error: --memstore {size}: {e}");
                return EXIT_INVALID;
            }
        }
    }
    if bluestore {
        opts.objectstore = pipeline_sandbox::ObjectStore::Bluestore {
            size: pipeline_sandbox::DEFAULT_BLUESTORE_BYTES,
        };
    }
    let started = std::time::Instant::now();
    match pipeline_sandbox::up(&opts, &mut |line| eprintln!("sandbox: {line}")) {
        Ok(env) => {
            eprintln!(
                "sandbox ready in {:.1}s; use it with: eval \"$(pipeline sandbox env --dir {})\"",
                started.elapsed().as_secs_f64(),
                env.dir.display()
            );
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

pub fn sandbox_down(dir: Option<PathBuf>) -> u8 {
    match pipeline_sandbox::down(&sandbox_dir(dir), false) {
        Ok(report) => {
            println!("{}", report.to_string().trim_end());
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

pub fn sandbox_status(dir: Option<PathBuf>) -> u8 {
    match pipeline_sandbox::status(&sandbox_dir(dir)) {
        Ok(status) => {
            println!("{}", status.to_string().trim_end());
            if status.all_running() {
                EXIT_OK
            } else {
                EXIT_RUN_FAILED
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_RUN_FAILED
        }
    }
}

pub fn sandbox_env(dir: Option<PathBuf>, json: bool) -> u8 {
    match pipeline_sandbox::env(&sandbox_dir(dir)) {
        Ok(env) if json => {
            println!("{}", serde_json::to_string_pretty(&env).unwrap_or_default());
            EXIT_OK
        }
        Ok(env) => {
            print!("{}", env.to_shell());
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!("  = help: start one with `pipeline sandbox up`");
            EXIT_RUN_FAILED
        }
    }
}
