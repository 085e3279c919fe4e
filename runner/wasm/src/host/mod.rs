//! The runner's side of the `host` interface: what a plugin may ask for, and
//! the checks in front of each request. Version-neutral: each interface
//! version in [`crate::versions`] converts its WIT types and calls these.
//!
//! # How a guest reaches the stage context
//!
//! wasmtime's `Store<T>` needs `T: 'static`, so the store cannot hold the
//! `&mut StageContext` that `run` receives, yet commands must go through
//! `StageContext::run` (the same execution path as native stages: output
//! files in the run folder, the stage deadline, cancellation, process-group
//! kill, the command list in the results). The design:
//!
//! - `run` spawns a scoped worker thread that owns the `Store` and calls the
//!   guest;
//! - host functions that need the context ([`Request::Exec`],
//!   [`Request::Progress`]) send a request over a channel and, for exec, wait
//!   for the answer;
//! - the calling thread, which owns `&mut StageContext`, serves requests until
//!   the worker drops the store (the channel disconnects), and meanwhile
//!   relays Ctrl-C into the store's cancellation flag.
//!
//! Everything else (file access in the work folder, HTTP, logging, metrics)
//! needs no context and is done on the worker directly. `describe`, `check`
//! and `plan` run on the caller's thread with no channel: they cannot run
//! commands.

pub mod exec;
pub mod files;
pub mod http;
pub mod program;
pub mod quota;
pub mod wait;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pipeline_model::Metric;
use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::context::CommandOutput;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::grants::Grants;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::StageError;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::limits::{CallClock, Limits, MemoryCap};
use quota::{ProgressGate, Quota};

/// Which export is being called: host functions that act on the world are
/// only available during `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Describe,
    Check,
    Plan,
    Run,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Describe => "describe",
            Phase::Check => "check",
            Phase::Plan => "plan",
            Phase::Run => "run",
        }
    }
}

/// Why the host did not do what the guest asked.
#[derive(Debug, Clone, PartialEq)]
pub enum HostError {
    Denied(String),
    Failed(String),
    Timeout(String),
    Cancelled,
}

/// A request the worker thread sends to the thread that owns the stage context.
pub enum Request {
    Exec {
        label: String,
        spec: CommandSpec,
        reply: mpsc::Sender<Result<CommandOutput, StageError>>,
    },
    Progress(String),
}

/// Who the stage is (the `stage-info` host call).
#[derive(Debug, Clone)]
pub struct StageInfo {
    pub instance_id: String,
    pub run_id: String,
    /// Where `exec` runs commands (the stage context's host).
    pub host: String,
    pub ceph: CephConnection,
}

/// What a call needs besides the plugin: its phase, the grants, the stage's
/// folders and the channel to the stage context (during `run`).
pub struct CallSetup {
    pub phase: Phase,
    pub grants: Grants,
    pub work_dir: Option<PathBuf>,
    /// The run folder: `exec` never runs a program from inside it.
    pub run_dir: Option<PathBuf>,
    pub info: StageInfo,
    pub requests: Option<mpsc::Sender<Request>>,
    pub cancelled: Arc<AtomicBool>,
    pub deadline: Option<Instant>,
    /// The metrics the plugin declared (its `describe`): an interface whose
    /// values carry only a name (0.2.0) makes them from these.
    pub metrics: Vec<MetricDecl>,
}

impl CallSetup {
    /// For `describe`, `check` and `plan`: nothing granted, no context.
    pub fn offline(phase: Phase, ceph: CephConnection) -> Self {
        CallSetup {
            phase,
            grants: Grants::default(),
            work_dir: None,
            run_dir: None,
            info: StageInfo {
                instance_id: String::new(),
                run_id: String::new(),
                host: String::new(),
                ceph,
            },
            requests: None,
            cancelled: Arc::new(AtomicBool::new(false)),
            deadline: None,
            metrics: Vec::new(),
        }
    }
}

/// The data of one `Store`: one call of one plugin.
pub struct HostState {
    pub plugin: String,
    /// Capabilities the plugin declares (`exec`, `files`, `http`).
    pub capabilities: Vec<String>,
    pub setup: CallSetup,
    pub clock: CallClock,
    pub memory: MemoryCap,
    /// Metrics sent with `emit-metric`.
    pub metrics: Vec<Metric>,
    /// Every request refused, in order (the first [`REFUSALS_KEPT`]); the
    /// stage fails with them.
    pub refusals: Vec<String>,
    /// Refusals past the first [`REFUSALS_KEPT`], counted only (a flood of
    /// refused calls must not grow the host's memory).
    pub refusals_dropped: usize,
    /// What the plugin may hand the host ([`quota`]).
    pub quota: Quota,
    /// Bytes written to `plugin.log` so far, and whether it is full.
    log_written: u64,
    log_full: bool,
    progress_gate: ProgressGate,
    /// What the guest wrote to stderr (a Rust panic message, a Python traceback).
    pub stderr: MemoryOutputPipe,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Bytes of guest stderr kept (the end of a traceback is what matters).
const STDERR_CAPACITY: usize = 64 << 10;

/// Refusal messages kept for the stage's error; the rest are counted.
pub const REFUSALS_KEPT: usize = 16;

impl HostState {
    pub fn new(plugin: &str, capabilities: &[String], setup: CallSetup, limits: &Limits) -> Self {
        let budget = if setup.phase == Phase::Run {
            limits.run_time
        } else {
            limits.call_time
        };
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        // No preopened folders, no environment, no arguments, no sockets: the
        // plugin reaches the world only through the `host` interface.
        let wasi = wasmtime_wasi::WasiCtx::builder()
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        HostState {
            plugin: plugin.to_string(),
            capabilities: capabilities.to_vec(),
            clock: CallClock::new(budget, setup.deadline),
            setup,
            memory: MemoryCap { cap: limits.memory },
            metrics: Vec::new(),
            refusals: Vec::new(),
            refusals_dropped: 0,
            quota: Quota::default(),
            log_written: 0,
            log_full: false,
            progress_gate: ProgressGate::default(),
            stderr,
            wasi,
            table: ResourceTable::new(),
        }
    }

    /// A store with the limits armed: memory cap, and the epoch callback that
    /// stops the guest (see [`crate::limits`]).
    pub fn into_store(self, engine: &Engine) -> Store<HostState> {
        let mut store = Store::new(engine, self);
        store.limiter(|s| &mut s.memory);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            let s = ctx.data();
            match s.clock.check(s.setup.cancelled.load(Ordering::Relaxed)) {
                Some(stop) => Err(wasmtime::Error::new(stop)),
                None => Ok(UpdateDeadline::Continue(1)),
            }
        });
        store
    }

    /// Whether the plugin may use `capability`: declared AND granted.
    /// `Err` is the refusal message (also recorded).
    fn require(&mut self, capability: &str, granted: bool, tried: &str) -> Result<(), HostError> {
        let message = if self.setup.phase != Phase::Run {
            Some(format!(
                "plugin `{}` tried to {tried} during `{}`; the host does that only during `run`",
                self.plugin,
                self.setup.phase.as_str()
            ))
        } else if !self.capabilities.iter().any(|c| c == capability) {
            Some(format!(
                "plugin `{}` tried to {tried}, but it does not declare the `{capability}` capability",
                self.plugin
            ))
        } else if !granted {
            Some(format!(
                "plugin `{}` tried to {tried}, but the pipeline grants it no `{capability}` (add `grants: {{{capability}: ...}}` to the stage)",
                self.plugin
            ))
        } else {
            None
        };
        match message {
            Some(m) => Err(self.refuse(m)),
            None => Ok(()),
        }
    }

    /// Records a refusal; the stage will fail with it whatever the guest does next.
    pub fn refuse(&mut self, message: String) -> HostError {
        self.log("refused", &message);
        if self.refusals.len() < REFUSALS_KEPT {
            self.refusals.push(message.clone());
        } else {
            self.refusals_dropped += 1;
        }
        HostError::Denied(message)
    }

    /// Appends to `plugin.log` in the work folder (only during `run`), up
    /// to [`Quota::log_bytes`]: then one marker line, and nothing more.
    pub fn log(&mut self, level: &str, message: &str) {
        let Some(dir) = &self.setup.work_dir else {
            return;
        };
        if self.log_full {
            return;
        }
        let cut = quota::clip(message, self.quota.message_bytes);
        let mut line = format!("{level:7} {cut}");
        if cut.len() < message.len() {
            line.push_str(&format!(
                " [... cut: {} bytes, over the limit of {} per message (`message_bytes`)]",
                message.len(),
                self.quota.message_bytes
            ));
        }
        line.push('\n');
        if self.log_written + line.len() as u64 > self.quota.log_bytes {
            self.log_full = true;
            line = format!(
                "[plugin.log truncated: it reached its limit of {} bytes (`log_bytes`); later messages are dropped]\n",
                self.quota.log_bytes
            );
        }
        // Never through a link left in its place (see `safe_fs`).
        if let Ok(mut f) = pipeline_stage_api::safe_fs::append(&dir.join("plugin.log"))
            && f.write_all(line.as_bytes()).is_ok()
        {
            self.log_written += line.len() as u64;
        }
    }

    /// A status line for the terminal: shortened to
    /// [`Quota::progress_bytes`], at most one per
    /// [`Quota::progress_interval`] (the engine strips control characters).
    pub fn progress(&mut self, message: &str) {
        if !self
            .progress_gate
            .admit(Instant::now(), self.quota.progress_interval)
        {
            return;
        }
        if let Some(tx) = &self.setup.requests {
            let shown = quota::shorten(message, self.quota.progress_bytes);
            let _ = tx.send(Request::Progress(shown));
        }
    }

    /// A metric reported during `run`: checked now (name, labels, a finite
    /// value) and counted against [`Quota::metrics`].
    pub fn emit_metric(&mut self, metric: Metric) {
        if self.metrics.len() >= self.quota.metrics {
            let message = format!(
                "plugin `{}` emitted more than {} metrics, the limit per stage (`metrics`)",
                self.plugin, self.quota.metrics
            );
            self.refuse(message);
            return;
        }
        match self.quota.metric(&metric) {
            Ok(()) => self.metrics.push(metric),
            Err(e) => {
                let message = format!(
                    "plugin `{}` emitted a metric the host refuses: {e}",
                    self.plugin
                );
                self.refuse(message);
            }
        }
    }

    /// Runs `f` as host time: not counted against the guest's compute budget.
    pub fn timed<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let started = Instant::now();
        let r = f(self);
        self.clock.in_host += started.elapsed();
        r
    }

    /// The guest's stderr, last lines, for error messages.
    pub fn stderr_tail(&self) -> String {
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }
}

/// Time left before the stage's deadline, if it has one.
pub fn remaining(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}
