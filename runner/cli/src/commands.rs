//! One function per subcommand; each returns `Ok(())` or the [`CliError`]
//! that `main` prints and maps to the exit code.

use std::path::{Path, PathBuf};

use pipeline_engine::cancel::Signals;
use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::diagnostic::{Diagnostic, Diagnostics};
use pipeline_engine::progress::Progress;
use pipeline_engine::results::{RunResults, RunStatus};
use pipeline_engine::runner::{self, RunOptions};

use crate::error::CliError;

/// What a command returns.
pub type CliResult = Result<(), CliError>;

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

pub fn validate(files: &[PathBuf], check_hosts: bool, locked: bool) -> CliResult {
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
        Ok(())
    } else {
        Err(all.into())
    }
}

pub fn plan(file: &Path, sets: &[String], locked: bool) -> CliResult {
    let registry = registry();
    let options = CompileOptions {
        overrides: parse_sets(sets)?,
        locked,
        ..Default::default()
    };
    let plan = compile_file(file, &registry, &options)?;
    print!("{}", plan.render_text());
    Ok(())
}

/// For commands that run stages (`run`, `cleanup`): signal handlers first
/// (a Ctrl-C while compiling must not kill us mid-cleanup later), and the
/// runner made the subreaper of what stages start, so processes that leave
/// their process group (setsid) come back to it and are stopped after the
/// stage.
fn signals_and_subreaper() -> Result<Signals, CliError> {
    let signals = Signals::install()
        .map_err(|e| CliError::failed(format!("cannot install signal handlers: {e}")))?;
    if let Err(e) = pipeline_engine::orphans::adopt() {
        eprintln!("warning: cannot become the subreaper of the run's processes: {e}");
    }
    Ok(signals)
}

/// `run`'s `--metrics-listen`, `--metrics-linger`, `--metrics-push`.
pub struct LiveFlags {
    pub listen: Option<String>,
    pub linger: std::time::Duration,
    pub push: Option<String>,
}

/// The live export the flags ask for: the push URL checked and the
/// listener bound before anything runs (a taken port is an error now, not
/// a surprise after an hour of benchmark).
fn live_export(flags: LiveFlags) -> Result<Option<runner::LiveExport>, CliError> {
    if flags.listen.is_none() && flags.push.is_none() {
        return Ok(None);
    }
    if let Some(url) = &flags.push {
        pipeline_engine::http_url::parse(url).map_err(|e| {
            CliError::invalid(format!("--metrics-push {url}: the URL {e}"))
                .with_help("a Pushgateway's address, e.g. http://127.0.0.1:9091")
        })?;
    }
    let metrics = std::sync::Arc::new(pipeline_engine::live_metrics::LiveMetrics::new());
    let linger = match &flags.listen {
        Some(addr) => {
            let bound =
                pipeline_engine::live_metrics::listen(addr, std::sync::Arc::clone(&metrics))
                    .map_err(|e| CliError::failed(e.to_string()))?;
            eprintln!("metrics: http://{bound}/metrics");
            Some(flags.linger)
        }
        None => None,
    };
    Ok(Some(runner::LiveExport {
        metrics,
        linger,
        push: flags.push,
    }))
}

pub fn run(
    file: &Path,
    sets: &[String],
    out: Option<PathBuf>,
    only: &[String],
    locked: bool,
    live: LiveFlags,
) -> CliResult {
    let signals = signals_and_subreaper()?;
    let registry = registry();
    let options = CompileOptions {
        overrides: parse_sets(sets)?,
        only: only.to_vec(),
        locked,
        ..Default::default()
    };
    let plan = compile_file(file, &registry, &options)?;
    let live = live_export(live)?;
    let opts = RunOptions {
        out_dir: out,
        runs_root: PathBuf::from("runs"),
        signals,
        progress: Progress::auto(),
        live,
    };
    let outcome = runner::run(&plan, opts).map_err(|e| CliError::failed(e.to_string()))?;
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
        return Err(CliError::failed(format!(
            "results.json could not be written ({e}); {} holds the last complete version, from before that",
            outcome.run_dir.join("results.json").display()
        )));
    }
    // What the comparison with the baseline found, after the run's own lines.
    let mut notes = Vec::new();
    if let Some(c) = &r.comparison {
        if let Some(e) = &c.error {
            notes.push(format!("error: no comparison with {}: {e}", c.baseline));
        }
        if !c.regressions.is_empty() {
            notes.extend(crate::compare::environment_lines(&c.environment_changes));
        }
        notes.extend(c.regressions.iter().map(crate::compare::regression_line));
    }
    match r.status {
        RunStatus::Succeeded if notes.is_empty() => Ok(()),
        status => Err(CliError::Ended {
            notes,
            interrupted: status == RunStatus::Cancelled,
        }),
    }
}

/// `pipeline cleanup RUN_DIR`: removes what a run that could not clean up
/// left behind, with the suite's own cleanup stages.
pub fn cleanup(run_dir: &Path) -> CliResult {
    use pipeline_engine::recovery::{self, RecoveryError};
    let signals = signals_and_subreaper()?;
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
                Ok(())
            } else {
                Err(CliError::ended())
            }
        }
        Err(RecoveryError::Suite(d)) => Err(CliError::Diagnostics {
            context: Some(format!(
                "the suite saved in {} no longer compiles, so its cleanup stages cannot run:",
                run_dir.display()
            )),
            diagnostics: d,
        }),
        Err(e @ RecoveryError::Lock(_)) => Err(CliError::failed(e.to_string())),
        Err(e) => Err(CliError::invalid(e.to_string())),
    }
}

pub fn report(run_dir: &Path) -> CliResult {
    let results = RunResults::load(run_dir).map_err(|e| CliError::invalid(e.to_string()))?;
    pipeline_engine::report::write_report(&results, run_dir)
        .map_err(|e| CliError::invalid(e.to_string()))?;
    println!(
        "report: {}",
        run_dir.join(pipeline_engine::report::REPORT_FILE).display()
    );
    Ok(())
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

pub fn plugins_list() -> CliResult {
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
    Ok(())
}

pub fn plugins_describe(name: &str) -> CliResult {
    let registry = registry();
    if pipeline_oci::is_oci(name) {
        let p = crate::registry_commands::fetch_for_describe(&registry, name)?;
        describe_plugin(p);
        return Ok(());
    }
    let found = registry.get(name).cloned().map(Ok).or_else(|| {
        // A WASM plugin by name on the plugin path, or by file path.
        let cwd = Path::new(".");
        registry.resolve(name, cwd, None).transpose()
    });
    let p = match found {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            return Err(Diagnostics::from(Diagnostic::error(format!(
                "cannot load plugin `{name}`: {e}"
            )))
            .into());
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
            return Err(Diagnostics::from(d).into());
        }
    };
    describe_plugin(p);
    Ok(())
}

fn describe_plugin(p: pipeline_engine::registry::RegisteredStage) {
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

fn describe_body(p: &pipeline_engine::registry::RegisteredStage) {
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
}

pub fn plugins_new(name: &str, dir: Option<&Path>) -> CliResult {
    let native: Vec<String> = pipeline_native::registry()
        .names()
        .map(str::to_string)
        .collect();
    let root = crate::plugin_scaffold::create(name, dir, &native)
        .map_err(|e| CliError::invalid(e.to_string()))?;
    println!("created {}", root.display());
    println!(
        "  cd {} && cargo build --release --target wasm32-wasip2",
        root.display()
    );
    println!("  pipeline run pipeline.yaml");
    println!("(needs the target once: rustup target add wasm32-wasip2)");
    Ok(())
}

pub fn schema(results: bool) -> CliResult {
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
    Ok(())
}

pub fn parse(format: &str, file: &Path) -> CliResult {
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::invalid(format!("cannot read {}: {e}", file.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    let m = pipeline_parsers::parse(format, &text)
        .map_err(|e| CliError::invalid(format!("{}: {e}", file.display())))?;
    println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
    Ok(())
}

fn sandbox_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(pipeline_sandbox::default_dir)
}

/// `sandbox up`'s lab options: several hosts, each a network namespace (needs root).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LabArgs {
    /// Build a lab of N cluster hosts (network namespaces on 198.18.0.0/24, each with its
    /// own sshd and OSDs; bluestore unless --memstore is given). Needs root.
    #[arg(long, value_name = "N")]
    hosts: Option<u32>,
    /// Client hosts of the lab (sshd only) [default: 2].
    #[arg(long, value_name = "M", requires = "hosts")]
    clients: Option<u32>,
    /// OSDs on each cluster host of the lab [default: 2].
    #[arg(long, value_name = "K", requires = "hosts")]
    osds_per_host: Option<u32>,
    /// Rate and delay of every lab link, as tc writes them [default: 10gbit,0.1ms].
    #[arg(long, value_name = "RATE[,DELAY]", requires = "hosts")]
    link: Option<String>,
}

impl LabArgs {
    fn spec(&self) -> Result<Option<pipeline_sandbox::lab::LabSpec>, CliError> {
        let Some(hosts) = self.hosts else {
            return Ok(None);
        };
        let default = pipeline_sandbox::lab::LabSpec::default();
        let link = match &self.link {
            Some(text) => pipeline_sandbox::lab::LinkShape::parse(text)
                .map_err(|e| CliError::invalid(e.to_string()))?,
            None => default.link,
        };
        Ok(Some(pipeline_sandbox::lab::LabSpec {
            cluster_hosts: hosts,
            client_hosts: self.clients.unwrap_or(default.client_hosts),
            osds_per_host: self.osds_per_host.unwrap_or(default.osds_per_host),
            link,
        }))
    }
}

/// A lab starts 2-16 OSDs on bluestore with sshds: more than the single sandbox's 60 s.
const LAB_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(240);

pub fn sandbox_up(
    dir: Option<PathBuf>,
    memstore: Option<String>,
    bluestore: bool,
    no_pool_delete: bool,
    lab: LabArgs,
) -> CliResult {
    let mut opts = pipeline_sandbox::SandboxOptions {
        dir: sandbox_dir(dir),
        allow_pool_delete: !no_pool_delete,
        lab: lab.spec()?,
        ..Default::default()
    };
    if opts.lab.is_some() {
        opts.ready_timeout = LAB_READY_TIMEOUT;
        if memstore.is_none() {
            opts.objectstore = pipeline_sandbox::ObjectStore::Bluestore {
                size: pipeline_sandbox::DEFAULT_BLUESTORE_BYTES,
            };
        }
    }
    if let Some(size) = memstore {
        opts.memstore_bytes = pipeline_engine::params::parse_size(&size)
            .map_err(|e| CliError::invalid(format!("--memstore {size}: {e}")))?;
    }
    if bluestore {
        opts.objectstore = pipeline_sandbox::ObjectStore::Bluestore {
            size: pipeline_sandbox::DEFAULT_BLUESTORE_BYTES,
        };
    }
    let started = std::time::Instant::now();
    let env = pipeline_sandbox::up(&opts, &mut |line| eprintln!("sandbox: {line}"))
        .map_err(|e| CliError::failed(e.to_string()))?;
    eprintln!(
        "sandbox ready in {:.1}s; use it with: eval \"$(pipeline sandbox env --dir {})\"",
        started.elapsed().as_secs_f64(),
        env.dir.display()
    );
    Ok(())
}

/// What `sandbox fault` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultAction {
    /// Every OSD of --host stops (SIGTERM).
    StopOsds,
    /// The OSDs of --host start again.
    StartOsds,
    /// --host's link goes down.
    CutLink,
    /// --host's link runs at --rate.
    DegradeLink,
    /// --host's link is up again at the lab's rate.
    RestoreLink,
    /// radosgw stops and starts again.
    RestartRgw,
    /// --host disappears: everything in its namespace is killed.
    StopHost,
    /// --host's sshd and daemons start again.
    StartHost,
    /// Each OSD of --host reads and writes its disk at most --iops times a second.
    SlowDisk,
    /// The OSDs of --host use their disks at full speed again.
    RestoreDisk,
}

#[derive(Debug, Clone, clap::Args)]
pub struct FaultArgs {
    /// The fault, or the action that undoes one.
    #[arg(value_enum)]
    action: FaultAction,
    /// The lab host it concerns (node1, client2, ...).
    #[arg(long)]
    host: Option<String>,
    /// For degrade-link: the link's new rate, e.g. 10mbit.
    #[arg(long)]
    rate: Option<String>,
    /// For slow-disk: reads (and writes) a second each OSD's disk serves, e.g. 40.
    #[arg(long)]
    iops: Option<u64>,
}

impl FaultArgs {
    fn fault(&self) -> Result<pipeline_sandbox::lab::Fault, CliError> {
        use pipeline_sandbox::lab::Fault;
        let host = || {
            self.host.clone().ok_or_else(|| {
                CliError::invalid(format!("`{:?}` needs --host NAME", self.action))
                    .with_help("the lab's hosts are in $PIPELINE_LAB_INVENTORY")
            })
        };
        Ok(match self.action {
            FaultAction::StopOsds => Fault::StopOsds { host: host()? },
            FaultAction::StartOsds => Fault::StartOsds { host: host()? },
            FaultAction::CutLink => Fault::CutLink { host: host()? },
            FaultAction::RestoreLink => Fault::RestoreLink { host: host()? },
            FaultAction::RestartRgw => Fault::RestartRgw,
            FaultAction::StopHost => Fault::StopHost { host: host()? },
            FaultAction::StartHost => Fault::StartHost { host: host()? },
            FaultAction::RestoreDisk => Fault::RestoreDisk { host: host()? },
            FaultAction::SlowDisk => match self.iops {
                Some(iops) if iops > 0 => Fault::SlowDisk {
                    host: host()?,
                    iops,
                },
                _ => {
                    return Err(CliError::invalid(
                        "slow-disk needs --iops N (N > 0), e.g. --iops 40",
                    ));
                }
            },
            FaultAction::DegradeLink => {
                let rate = self.rate.as_deref().ok_or_else(|| {
                    CliError::invalid("degrade-link needs --rate RATE, e.g. --rate 10mbit")
                })?;
                let shape = pipeline_sandbox::lab::LinkShape::parse(rate)
                    .map_err(|e| CliError::invalid(e.to_string().replace("--link", "--rate")))?;
                Fault::DegradeLink {
                    host: host()?,
                    rate_bits: shape.rate_bits,
                }
            }
        })
    }
}

pub fn sandbox_fault(dir: Option<PathBuf>, args: FaultArgs) -> CliResult {
    let fault = args.fault()?;
    let outcome = pipeline_sandbox::lab::inject(&sandbox_dir(dir), &fault)
        .map_err(|e| CliError::failed(e.to_string()))?;
    println!("{}", outcome.done);
    // For a runner that runs this from a stage's `during:`: the daemons started
    // here are not that stage's orphans.
    for pid in outcome.started {
        println!("{} {pid}", pipeline_engine::orphans::SPARE_PID_PREFIX);
    }
    Ok(())
}

pub fn sandbox_down(dir: Option<PathBuf>) -> CliResult {
    let report = pipeline_sandbox::down(&sandbox_dir(dir), false)
        .map_err(|e| CliError::failed(e.to_string()))?;
    println!("{}", report.to_string().trim_end());
    Ok(())
}

pub fn sandbox_status(dir: Option<PathBuf>) -> CliResult {
    let status =
        pipeline_sandbox::status(&sandbox_dir(dir)).map_err(|e| CliError::failed(e.to_string()))?;
    println!("{}", status.to_string().trim_end());
    if status.all_running() {
        Ok(())
    } else {
        Err(CliError::ended())
    }
}

pub fn sandbox_env(dir: Option<PathBuf>, json: bool) -> CliResult {
    let env = pipeline_sandbox::env(&sandbox_dir(dir)).map_err(|e| {
        CliError::failed(e.to_string()).with_help("start one with `pipeline sandbox up`")
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&env).unwrap_or_default());
    } else {
        print!("{}", env.to_shell());
    }
    Ok(())
}
