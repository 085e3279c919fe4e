//! [`WasmStage`]: a loaded plugin behind the engine's `Stage` trait, so the
//! engine validates its parameters, plans, runs and reports it exactly like
//! a native stage.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::params::Params;
use pipeline_stage_api::stage::{
    Action, PlanContext, Stage, StageDescription, StageError, StageOutput,
};
use wasmtime::{Engine, Store};

use crate::cache::CacheOutcome;
use crate::host::{CallSetup, HostState, Phase, Request, StageInfo};
use crate::limits::{Limits, Stopped};
use crate::versions::{Bindings, RunOutput};

/// A plugin file, compiled and linked, with its description.
pub struct Plugin {
    pub path: PathBuf,
    pub sha256: String,
    /// The interface version it was built against (`0.1.0`).
    pub interface: String,
    pub description: StageDescription,
    pub limits: Limits,
    pub cache: CacheOutcome,
    pub(crate) bindings: Bindings,
    pub(crate) engine: &'static Engine,
}

impl Plugin {
    /// The name used in messages: the described name once known.
    pub fn name(&self) -> &str {
        &self.description.name
    }

    /// One call in a fresh store (a fresh instance: no state leaks between calls).
    pub(crate) fn call<R>(
        &self,
        name: &str,
        setup: CallSetup,
        f: impl FnOnce(&Bindings, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> (wasmtime::Result<R>, HostState) {
        call(
            self.engine,
            &self.bindings,
            name,
            &self.description.capabilities,
            &self.limits,
            setup,
            f,
        )
    }
}

pub(crate) fn call<R>(
    engine: &Engine,
    bindings: &Bindings,
    name: &str,
    capabilities: &[String],
    limits: &Limits,
    setup: CallSetup,
    f: impl FnOnce(&Bindings, &mut Store<HostState>) -> wasmtime::Result<R>,
) -> (wasmtime::Result<R>, HostState) {
    let mut store = HostState::new(name, capabilities, setup, limits).into_store(engine);
    let result = f(bindings, &mut store);
    (result, store.into_data())
}

/// A user-facing account of a failed call: stopped by a limit, trapped
/// (with the guest's stderr, e.g. a panic message), or malformed output.
pub fn explain(plugin: &str, phase: Phase, err: &wasmtime::Error, state: &HostState) -> String {
    let mut message = if let Some(stop) = err.downcast_ref::<Stopped>() {
        format!("plugin `{plugin}` {stop} (in `{}`)", phase.as_str())
    } else if let Some(what) = crate::diagnose::explain(err) {
        format!("plugin `{plugin}` {what} (in `{}`)", phase.as_str())
    } else if let Some(trap) = err.downcast_ref::<wasmtime::Trap>() {
        format!("plugin `{plugin}` crashed in `{}`: {trap}", phase.as_str())
    } else {
        format!(
            "plugin `{plugin}` failed in `{}`: {}",
            phase.as_str(),
            err.root_cause()
        )
    };
    let tail = state.stderr_tail();
    if !tail.is_empty() {
        message.push_str(&format!("; its stderr ends with:\n{tail}"));
    }
    message
}

/// A WASM plugin as an engine stage.
#[derive(Clone)]
pub struct WasmStage {
    pub plugin: Arc<Plugin>,
}

impl Stage for WasmStage {
    fn describe(&self) -> StageDescription {
        self.plugin.description.clone()
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        let p = &self.plugin;
        let setup = CallSetup::offline(Phase::Check, Default::default());
        match p.call(p.name(), setup, |b, s| {
            b.check(s, &p.description.params, params)
        }) {
            (Ok(problems), state) => problems
                .into_iter()
                .map(|(name, message)| (state.quota.message(name), state.quota.message(message)))
                .collect(),
            (Err(e), state) => vec![(
                params.keys().next().cloned().unwrap_or_default(),
                explain(p.name(), Phase::Check, &e, &state),
            )],
        }
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        let p = &self.plugin;
        let setup = CallSetup::offline(Phase::Plan, ctx.ceph.clone());
        match p.call(p.name(), setup, |b, s| {
            b.plan(s, &p.description.params, params, ctx.ceph)
        }) {
            // `pipeline plan` prints these: each within the message limit.
            (Ok(actions), state) => actions
                .into_iter()
                .map(|a| Action {
                    summary: state.quota.message(a.summary),
                    ..a
                })
                .collect(),
            (Err(e), state) => vec![Action::note(explain(p.name(), Phase::Plan, &e, &state))],
        }
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let p = &self.plugin;
        let (tx, rx) = mpsc::channel();
        let cancelled = Arc::new(AtomicBool::new(ctx.is_cancelled()));
        let setup = CallSetup {
            phase: Phase::Run,
            grants: ctx.grants.clone(),
            work_dir: Some(ctx.work_dir.clone()),
            run_dir: Some(ctx.run_dir.clone()),
            info: StageInfo {
                instance_id: ctx.instance_id.clone(),
                run_id: ctx.run_id.clone(),
                host: ctx.host.name.clone(),
                ceph: ctx.ceph.clone(),
            },
            requests: Some(tx),
            cancelled: cancelled.clone(),
            deadline: ctx.deadline(),
            metrics: p.description.metrics.clone(),
        };
        // A plugin's command may print gigabytes: the file keeps them all,
        // the guest gets the first `exec_output_bytes`.
        ctx.limit_read_back(Some(crate::host::quota::Quota::default().exec_output_bytes));
        // See `crate::host` for why the guest runs on a worker thread.
        let joined = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let (result, mut state) = p.call(p.name(), setup, |b, s| {
                    b.run(s, &p.description.params, params)
                });
                // Dropping the last sender ends the serving loop below.
                state.setup.requests = None;
                (result, state)
            });
            loop {
                // On every turn, not only when idle: a plugin flooding
                // requests must not keep Ctrl-C from reaching it.
                if ctx.is_cancelled() {
                    cancelled.store(true, Ordering::Relaxed);
                }
                match rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(Request::Exec { label, spec, reply }) => {
                        let _ = reply.send(ctx.run(&label, &spec));
                    }
                    Ok(Request::Progress(message)) => ctx.progress(&message),
                    Err(RecvTimeoutError::Timeout) => {}
                    // The worker dropped its store: the call is over.
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            worker.join()
        });
        let Ok((result, state)) = joined else {
            return Err(StageError::failed(format!(
                "the host of plugin `{}` crashed (a bug in the runner)",
                p.name()
            )));
        };
        finish(p.name(), ctx, result, state)
    }
}

/// Turns what the guest returned, and what the host saw, into the stage's outcome.
fn finish(
    name: &str,
    ctx: &mut StageContext,
    result: wasmtime::Result<Result<RunOutput, StageError>>,
    state: HostState,
) -> Result<StageOutput, StageError> {
    // A refused request fails the stage, whatever the guest made of the refusal.
    if let Some(first) = state.refusals.first() {
        let more = state.refusals.len() - 1 + state.refusals_dropped;
        return Err(StageError::failed(if more > 0 {
            format!("{first} (and {more} more refused request(s); see plugin.log)")
        } else {
            first.clone()
        }));
    }
    // Interrupted: a host call the interruption ended (an HTTP wait) returned
    // an error the guest may have passed on as its own failure.
    if state.setup.cancelled.load(Ordering::Relaxed) && !matches!(result, Ok(Ok(_))) {
        return Err(StageError::Cancelled);
    }
    let outcome = match result {
        Err(e) => {
            if e.downcast_ref::<Stopped>() == Some(&Stopped::Cancelled) {
                return Err(StageError::Cancelled);
            }
            return Err(StageError::failed(explain(name, Phase::Run, &e, &state)));
        }
        Ok(outcome) => outcome,
    };
    let RunOutput {
        mut output,
        artifacts,
    } = outcome.map_err(|e| state.quota.stage_error(e))?;
    // Checked before anything is written: a flood fails the stage, not the run.
    if let Err(e) = state.quota.output(state.metrics.len(), &output, &artifacts) {
        return Err(StageError::failed(format!(
            "plugin `{name}` returned more than the runner accepts: {e}"
        )));
    }
    for (artifact, bytes) in artifacts {
        ctx.write_artifact(&artifact, &bytes)?;
    }
    let mut metrics = state.metrics;
    metrics.append(&mut output.metrics);
    output.metrics = metrics;
    Ok(output)
}
