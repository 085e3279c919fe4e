//! `pipeline`: the command line. Parsing arguments, printing, and exit codes
//! live here; everything else is in `pipeline-engine`.
//!
//! Exit codes: 0 success, 1 the run failed, 2 invalid input, 130 interrupted.

mod commands;
mod compare;
mod error;
mod generate;
mod plugin_scaffold;
mod publish;
mod registry_commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pipeline",
    version,
    about = "Benchmark Ceph clusters the same way every time."
)]
#[command(
    after_help = "Exit codes: 0 success, 1 run failed (compare: a regression), 2 invalid input, 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check pipeline files; print every problem at once.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also check that every host answers over SSH and has the programs its stages need.
        #[arg(long)]
        check_hosts: bool,
        /// Registry plugins only as the suite's lock file pins them (fails when
        /// the lock is missing or stale).
        #[arg(long)]
        locked: bool,
    },
    /// Print the fully expanded plan without running anything.
    Plan {
        file: PathBuf,
        /// Override a variable: `--set pool_size=1`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Registry plugins only as the suite's lock file pins them.
        #[arg(long)]
        locked: bool,
    },
    /// Run a pipeline and write its run folder (results.json, report.md, raw outputs).
    Run {
        file: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Run folder (default: runs/<UTC timestamp>-<6 hex>-<name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these stages (cleanup always runs).
        #[arg(long = "only", value_name = "ID")]
        only: Vec<String>,
        /// Registry plugins only as the suite's lock file (SUITE.lock) pins
        /// them: fail when the lock is missing or stale.
        #[arg(long)]
        locked: bool,
        /// Serve the run's figures for Prometheus at http://ADDR/metrics
        /// while it runs (OpenMetrics): the running stage, its per-second
        /// series, the watched hosts' telemetry, finished stages' figures.
        #[arg(long, value_name = "ADDR")]
        metrics_listen: Option<String>,
        /// With --metrics-listen: after the run, wait up to this many seconds
        /// for one more scrape, so the last stages' figures are not missed.
        #[arg(
            long,
            value_name = "SECONDS",
            default_value_t = 30,
            requires = "metrics_listen"
        )]
        metrics_linger: u64,
        /// At the end of the run, PUT its figures to this Prometheus
        /// Pushgateway (http://HOST:PORT), grouped by suite and run id.
        #[arg(long, value_name = "URL")]
        metrics_push: Option<String>,
    },
    /// Resolve the suite's `oci://` plugins to digests, pull them into the
    /// cache, and write SUITE.lock next to it (entries already locked are kept).
    Lock {
        file: PathBuf,
        /// Resolve every reference anew (take what the tags point to now).
        #[arg(long)]
        update: bool,
    },
    /// Re-render report.md of a run folder from its results.json.
    Report { run_dir: PathBuf },
    /// Remove what a run created and did not remove (it was killed, or its
    /// cleanup failed), with the suite's own cleanup stages; idempotent.
    Cleanup { run_dir: PathBuf },
    /// Past runs in a runs folder.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// One metric across the runs of a runs folder, oldest first, with the
    /// runs where a comparison gate would have fired.
    History {
        /// The runs folder (default: runs).
        #[arg(default_value = "runs")]
        dir: PathBuf,
        #[arg(long)]
        metric: String,
        /// Only this stage (its id, or an instance id such as `rados-read[mode=seq]`).
        #[arg(long)]
        stage: Option<String>,
        /// The gate's threshold in percent.
        #[arg(long, default_value_t = 5.0)]
        threshold: f64,
        #[arg(long, value_enum, default_value = "markdown")]
        format: compare::HistoryFormat,
        /// Also draw the history as an SVG line chart into FILE (a line per
        /// stage instance, the runs where the gate would have fired ringed).
        #[arg(long, value_name = "FILE")]
        chart: Option<PathBuf>,
        /// Read the runs from a history database (`pipeline publish`)
        /// instead of a runs folder: postgres://USER@HOST:PORT/DB.
        #[arg(long, value_name = "URL", conflicts_with = "dir")]
        db: Option<String>,
    },
    /// Publish run folders into a PostgreSQL history database (the
    /// folders stay the source of truth; publishing a run again changes
    /// nothing).
    Publish {
        /// Run folders.
        #[arg(required = true)]
        run_dirs: Vec<PathBuf>,
        /// postgres://USER[:PASSWORD]@HOST:PORT/DB (never printed with its password).
        #[arg(long, value_name = "URL")]
        to: String,
    },
    /// Compare a baseline run with candidate runs, metric by metric; exit 1
    /// when a metric is worse past its threshold.
    Compare {
        /// Run folder (or its results.json) to compare against.
        baseline: PathBuf,
        /// Run folders (or results.json files); one column each.
        #[arg(required = true)]
        candidates: Vec<PathBuf>,
        /// `METRIC=PERCENT`: how large a change counts (default 5%; `*` globs;
        /// `default=3%` changes the default), e.g. `bandwidth=-5%` `'latency_*=+10%'`.
        #[arg(long = "threshold", value_name = "METRIC=PERCENT")]
        thresholds: Vec<String>,
        /// Judge stages measured while the cluster was not clean (PGs not
        /// active+clean, a health check raised) like any other; by default
        /// their figures are shown but not judged.
        #[arg(long)]
        allow_unhealthy: bool,
        /// `junit`: one test case per gated metric, a failure for each
        /// regression (the exit code is the same), for a CI job's test report.
        #[arg(long, value_enum, default_value = "markdown")]
        format: compare::Format,
        /// Write to FILE instead of printing.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List or describe the available stages.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Print the JSON Schema of pipeline files (or of results.json with --results).
    Schema {
        #[arg(long)]
        results: bool,
    },
    /// Print the normalized metrics (JSON) of a saved tool output.
    Parse {
        /// rados-bench, rbd-bench, fio-json, dd, iperf3-json, iperf-text, swift-bench, rgw-perf
        format: String,
        file: PathBuf,
    },
    /// Print the man page or a shell completion script (what the Debian
    /// package installs).
    Generate {
        #[command(subcommand)]
        command: GenerateCommand,
    },
    /// A throw-away single-node Ceph cluster on 127.0.0.1 for trying suites.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// The load generator on a client host: started by the runner over SSH
    /// for `s3-bench`/`swift-bench` on `on:` hosts; reads its job on stdin
    /// and speaks the worker protocol (docs/worker-protocol.md) on stdout.
    #[command(hide = true)]
    Worker {
        /// What the worker is for (`INSTANCE@HOST`): names it in `ps`.
        #[arg(long = "for")]
        for_: Option<String>,
    },
    /// Runs a command of a stage with `client:` inside its client root: a
    /// private mount namespace, bind mounts of what the tools need, chroot,
    /// exec (started by the runner; nothing stays mounted after it).
    #[command(hide = true, name = "client-exec")]
    ClientExec {
        /// The client root.
        #[arg(long)]
        root: PathBuf,
        /// A host path to show at the same path inside the root.
        #[arg(long = "bind")]
        binds: Vec<PathBuf>,
        /// The working folder inside the root (default /).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum GenerateCommand {
    /// The man page of `pipeline` on stdout; with --out, one page per command
    /// (pipeline.1, pipeline-run.1, ...) written into DIR.
    Man {
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The completion script for SHELL on stdout.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum RunsCommand {
    /// Every run (id, suite, date, status, suite commit, duration), oldest first.
    List {
        /// The runs folder (default: runs).
        #[arg(default_value = "runs")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Native stages and WASM plugins on the plugin path, with where each comes from.
    List,
    /// Parameters, outputs, metrics (and for a WASM plugin: file, sha256, capabilities).
    Describe { name: String },
    /// Publish a WASM plugin to an OCI registry: `pipeline plugins push
    /// plugin.wasm oci://HOST[:PORT]/NAMESPACE/NAME:TAG`.
    Push { file: PathBuf, reference: String },
    /// Fetch a plugin from an OCI registry into the plugin cache (by tag or digest).
    Pull { reference: String },
    /// Create a WASM plugin crate (Rust) with a test pipeline.
    New {
        name: String,
        /// Folder to create it in (default: the current folder).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Start the cluster and wait until it is ready.
    Up {
        /// Sandbox folder (default $PIPELINE_SANDBOX_DIR or /tmp/pipeline-sandbox).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Memory per memstore OSD, e.g. 4G.
        #[arg(long)]
        memstore: Option<String>,
        /// Use bluestore on sparse files instead of memstore.
        #[arg(long)]
        bluestore: bool,
        /// Start with pool deletion disallowed (mon_allow_pool_delete = false).
        #[arg(long)]
        no_pool_delete: bool,
        #[command(flatten)]
        lab: commands::LabArgs,
    },
    /// Inject a fault into a running sandbox, or undo one (usually from a
    /// stage's `during:`): `pipeline sandbox fault stop-osds --host node2`.
    Fault {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[command(flatten)]
        fault: commands::FaultArgs,
    },
    /// Stop the daemons this sandbox started.
    Down {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Which daemons run, and cluster health.
    Status {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print settings a shell can source: `eval "$(pipeline sandbox env)"`.
    Env {
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(
        cli.command,
        Command::Run { .. }
            | Command::Cleanup { .. }
            | Command::Sandbox { .. }
            // A worker whose runner is gone still removes what it wrote.
            | Command::Worker { .. }
    ) {
        quiet_broken_pipe();
    }
    let result = match cli.command {
        Command::Validate {
            files,
            check_hosts,
            locked,
        } => commands::validate(&files, check_hosts, locked),
        Command::Plan { file, set, locked } => commands::plan(&file, &set, locked),
        Command::Run {
            file,
            set,
            out,
            only,
            locked,
            metrics_listen,
            metrics_linger,
            metrics_push,
        } => commands::run(
            &file,
            &set,
            out,
            &only,
            locked,
            commands::LiveFlags {
                listen: metrics_listen,
                linger: std::time::Duration::from_secs(metrics_linger),
                push: metrics_push,
            },
        ),
        Command::Lock { file, update } => registry_commands::lock(&file, update),
        Command::Report { run_dir } => commands::report(&run_dir),
        Command::Cleanup { run_dir } => commands::cleanup(&run_dir),
        Command::Runs {
            command: RunsCommand::List { dir },
        } => compare::runs_list(&dir),
        Command::History {
            dir,
            metric,
            stage,
            threshold,
            format,
            chart,
            db,
        } => compare::history(
            match &db {
                Some(url) => compare::HistorySource::Db(url),
                None => compare::HistorySource::Folder(&dir),
            },
            &metric,
            stage.as_deref(),
            threshold,
            format,
            chart.as_deref(),
        ),
        Command::Publish { run_dirs, to } => publish::publish(&run_dirs, &to),
        Command::Compare {
            baseline,
            candidates,
            thresholds,
            allow_unhealthy,
            format,
            out,
        } => compare::run(
            &baseline,
            &candidates,
            &thresholds,
            allow_unhealthy,
            format,
            out.as_deref(),
        ),
        Command::Plugins {
            command: PluginsCommand::List,
        } => commands::plugins_list(),
        Command::Plugins {
            command: PluginsCommand::Describe { name },
        } => commands::plugins_describe(&name),
        Command::Plugins {
            command: PluginsCommand::New { name, dir },
        } => commands::plugins_new(&name, dir.as_deref()),
        Command::Plugins {
            command: PluginsCommand::Push { file, reference },
        } => registry_commands::push(&file, &reference),
        Command::Plugins {
            command: PluginsCommand::Pull { reference },
        } => registry_commands::pull(&reference),
        Command::Schema { results } => commands::schema(results),
        Command::Parse { format, file } => commands::parse(&format, &file),
        Command::Generate {
            command: GenerateCommand::Man { out },
        } => generate::man(Cli::command(), out.as_deref()),
        Command::Generate {
            command: GenerateCommand::Completions { shell },
        } => generate::completions(Cli::command(), shell),
        Command::Worker { for_: _ } => {
            let code = pipeline_engine::remote_worker::serve(
                &pipeline_native::worker_kinds(),
                Box::new(std::io::stdin()),
                Box::new(std::io::stdout()),
            );
            // The worker speaks its protocol on stdout; its code says how it ended.
            match code as u8 {
                0 => Ok(()),
                code => Err(error::CliError::Exited {
                    code,
                    message: None,
                }),
            }
        }
        Command::ClientExec {
            root,
            binds,
            cwd,
            command,
        } => {
            // Returns only when the root could not be entered or the
            // program not started.
            let error =
                pipeline_engine::client_root::enter(&root, &binds, cwd.as_deref(), &command);
            Err(error::CliError::Exited {
                code: error.exit_code(),
                message: Some(error.to_string()),
            })
        }
        Command::Sandbox { command } => match command {
            SandboxCommand::Up {
                dir,
                memstore,
                bluestore,
                no_pool_delete,
                lab,
            } => commands::sandbox_up(dir, memstore, bluestore, no_pool_delete, lab),
            SandboxCommand::Down { dir } => commands::sandbox_down(dir),
            SandboxCommand::Fault { dir, fault } => commands::sandbox_fault(dir, fault),
            SandboxCommand::Status { dir } => commands::sandbox_status(dir),
            SandboxCommand::Env { dir, json } => commands::sandbox_env(dir, json),
        },
    };
    // The one place an error is printed and becomes the exit code.
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", e.render());
            ExitCode::from(e.exit_code())
        }
    }
}

/// `pipeline plugins describe X | head`: a command that only prints ends
/// quietly when its reader goes away, as Unix tools do, instead of panicking
/// in `println!`. Not for `run`, `cleanup` and `sandbox`: there a closed pipe
/// to a child must stay an error the runner handles, never a silent death
/// that skips cleanup.
fn quiet_broken_pipe() {
    // SAFETY: before any thread is started; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
