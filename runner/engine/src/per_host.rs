//! One stage's run on its host(s): once on this machine, or once per target
//! host (`per_host` stages), at most `parallel` hosts at a time, each in its
//! own thread with its own work folder and a copy of the run's ledger. What
//! each host did to the ledger is merged back after; the hosts' outputs are
//! merged into one stage result by [`crate::fanout::merge`].

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cancel::CancelToken;
use crate::context::{ContextParts, Resource, StageContext, sanitize};
use crate::plan::PlannedStage;
use crate::results::{Artifact, CommandRecord};
use crate::stage::{StageError, StageOutput};

/// A stage's run on its host(s): the outcome, and what it did on the way.
pub(crate) struct Ran {
    pub(crate) outcome: Result<StageOutput, StageError>,
    pub(crate) commands: Vec<CommandRecord>,
    pub(crate) artifacts: Vec<Artifact>,
    /// The client tools each host ran.
    pub(crate) tools: Vec<(crate::hosts::Host, Vec<String>)>,
}

/// What one host's run of a stage needs.
pub(crate) struct HostJob<'a> {
    pub(crate) stage: &'a PlannedStage,
    pub(crate) params: &'a crate::params::Params,
    pub(crate) run_id: &'a str,
    pub(crate) run_dir: &'a Path,
    pub(crate) ceph: &'a crate::ceph::CephConnection,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancel: &'a CancelToken,
    pub(crate) progress: &'a (dyn Fn(&str) + Sync),
    pub(crate) redactor: &'a crate::secrets::Redactor,
    /// Where the stage's per-second figures go (`--metrics-listen`).
    pub(crate) live: Option<std::sync::Arc<crate::live_metrics::LiveMetrics>>,
}

/// One host's run of a stage, before it is merged with the other hosts'.
struct HostRun {
    host: crate::hosts::Host,
    outcome: Result<StageOutput, StageError>,
    commands: Vec<CommandRecord>,
    artifacts: Vec<Artifact>,
    ledger: Vec<Resource>,
    /// With `sync_start`: when its measured command did start, in its clock.
    started: Option<std::time::SystemTime>,
    /// The client tools it ran.
    tools: Vec<String>,
}

impl HostRun {
    fn crashed(host: crate::hosts::Host) -> Self {
        HostRun {
            host,
            outcome: Err(StageError::failed("the stage's thread crashed")),
            commands: Vec::new(),
            artifacts: Vec::new(),
            ledger: Vec::new(),
            started: None,
            tools: Vec::new(),
        }
    }
}

impl HostJob<'_> {
    /// A stage that runs once, on this machine (it may reach other hosts itself).
    pub(crate) fn run_here(&self, work_dir: &Path, ledger: &mut Vec<Resource>) -> Ran {
        let run = self.run(
            crate::hosts::Host::local(),
            work_dir.to_path_buf(),
            ledger,
            None,
        );
        Ran {
            outcome: run.outcome,
            commands: run.commands,
            artifacts: run.artifacts,
            tools: vec![(run.host, run.tools)],
        }
    }

    /// Once per host, at most `parallel` at a time; each host gets its own
    /// work folder and a copy of the ledger, merged back after. With
    /// `sync_start`, every host gets a seat at one start barrier (all hosts
    /// run in one batch: the plan was checked for it).
    pub(crate) fn run_on_each_host(&self, work_dir: &Path, ledger: &mut Vec<Resource>) -> Ran {
        let stage = self.stage;
        let (barrier, seats) = match stage
            .sync_start
            .then(|| crate::sync_start::prepare(&stage.targets))
            .transpose()
        {
            Ok(Some((barrier, seats))) => (Some(barrier), seats),
            Ok(None) => (None, Vec::new()),
            Err(e) => {
                return Ran {
                    outcome: Err(e),
                    commands: Vec::new(),
                    artifacts: Vec::new(),
                    tools: Vec::new(),
                };
            }
        };
        let mut seats = seats.into_iter();
        let mut results = Vec::new();
        let mut commands = Vec::new();
        let mut artifacts = Vec::new();
        let mut started = Vec::new();
        let mut tools = Vec::new();
        for chunk in stage.targets.chunks(stage.parallel.max(1)) {
            let before = ledger.clone();
            let runs: Vec<HostRun> = std::thread::scope(|scope| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|host| {
                        let mut ledger = before.clone();
                        let host_dir = work_dir.join(sanitize(&host.name));
                        let seat = seats.next();
                        scope.spawn(move || self.run(host.clone(), host_dir, &mut ledger, seat))
                    })
                    .collect();
                handles
                    .into_iter()
                    .zip(chunk)
                    .map(|(h, host)| h.join().unwrap_or_else(|_| HostRun::crashed(host.clone())))
                    .collect()
            });
            for run in runs {
                merge_ledger(ledger, &before, run.ledger);
                commands.extend(run.commands);
                artifacts.extend(run.artifacts);
                started.push(run.started);
                tools.push((run.host.clone(), run.tools));
                results.push((run.host, run.outcome));
            }
        }
        let batches = crate::fanout::Batches::new(stage.targets.len(), stage.parallel);
        let mut outcome = crate::fanout::merge(results, batches);
        if let (Ok(output), Some(report)) = (
            &mut outcome,
            barrier.and_then(|b| crate::sync_start::report(&b, &started)),
        ) {
            pipeline_stage_api::start_report::add_start_report(output, &report);
        }
        Ran {
            outcome,
            commands,
            artifacts,
            tools,
        }
    }

    /// One host's run; with a seat at the stage's start barrier (`sync_start`).
    fn run(
        &self,
        host: crate::hosts::Host,
        work_dir: PathBuf,
        ledger: &mut Vec<Resource>,
        seat: Option<pipeline_stage_api::start_barrier::StartSeat>,
    ) -> HostRun {
        let stage = self.stage;
        let mut ctx = StageContext::new(ContextParts {
            instance_id: stage.instance_id.clone(),
            run_id: self.run_id.to_string(),
            work_dir: work_dir.clone(),
            run_dir: self.run_dir.to_path_buf(),
            ceph: self.ceph.clone(),
            grants: stage.grants.clone(),
            deadline: self.deadline,
            timeout: stage.timeout,
            cancel: self.cancel.clone(),
            progress: self.progress,
            ledger: &mut *ledger,
            redactor: self.redactor,
            host: host.clone(),
            targets: stage.targets.clone(),
            client: stage.client.as_ref().and_then(|c| c.root.clone()),
        });
        if let Some(seat) = seat {
            ctx.join_start_barrier(seat);
        }
        if let Some(live) = &self.live {
            ctx.set_live(live.clone());
        }
        let outcome: Result<StageOutput, StageError> = match std::fs::create_dir_all(&work_dir) {
            Err(e) => Err(StageError::io(
                format!("creating {}", work_dir.display()),
                e,
            )),
            Ok(()) => std::panic::catch_unwind(AssertUnwindSafe(|| {
                stage.plugin.stage.run(self.params, &mut ctx)
            }))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(StageError::failed(format!(
                    "the stage crashed (a bug in `{}`): {what}",
                    stage.plugin.description.name
                )))
            }),
        };
        let outcome = outcome.and_then(|output| self.declared(output));
        let started = ctx.synchronized_start();
        let tools = ctx.tools_used();
        // Its seat goes with the context: hosts still waiting for this one
        // learn now that it will not come.
        let (commands, artifacts) = ctx.into_records();
        HostRun {
            host,
            outcome,
            commands,
            artifacts,
            ledger: ledger.clone(),
            started,
            tools,
        }
    }
}

impl HostJob<'_> {
    /// The output of one run of the stage, if every metric in it is one the
    /// stage declares, as it declares it (native stages and WASM plugins
    /// alike): what results.json holds is what `plugins describe` shows.
    /// A plugin built against interface 0.1.0, which did not require
    /// declarations, keeps such metrics, each with a note saying so.
    fn declared(&self, mut output: StageOutput) -> Result<StageOutput, StageError> {
        use pipeline_stage_api::metric::{self, Declared};
        let plugin = &self.stage.plugin;
        let decls = plugin.stage.declared_metrics(self.params);
        let name = &plugin.description.name;
        let values = plugin.description.metric_values;
        let problems = metric::problems(name, &decls, values, &output.metrics);
        match values {
            Declared::Fully => {
                if let Some(first) = problems.into_iter().next() {
                    return Err(first.into());
                }
            }
            Declared::WithoutDirection => output.notes.extend(problems.into_iter().map(|e| {
                format!(
                    "{e}: kept, as plugins built against pipeline:stage@0.1.0 may; one built against 0.2.0 is held to its declarations"
                )
            })),
        }
        Ok(output)
    }
}

/// Brings a host run's ledger changes (new resources, removals, a removed
/// resource created again) into the run's: only what differs from the
/// ledger the host run started from (`before`), so hosts that did not touch
/// a resource do not undo what another host did to it.
fn merge_ledger(main: &mut Vec<Resource>, before: &[Resource], from_host: Vec<Resource>) {
    for r in from_host {
        let same = |m: &Resource| m.kind == r.kind && m.name == r.name;
        if before
            .iter()
            .find(|m| same(m))
            .is_some_and(|b| b.removed == r.removed)
        {
            continue;
        }
        match main.iter_mut().find(|m| same(m)) {
            Some(existing) => existing.removed = r.removed,
            None => main.push(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(name: &str, removed: bool) -> Resource {
        Resource {
            kind: "file".into(),
            name: name.into(),
            created_by: "s".into(),
            removed,
        }
    }

    /// Hosts run from copies of the ledger; only what a host changed comes
    /// back, so one host's removal or re-creation is not undone by another
    /// host that never touched the resource.
    #[test]
    fn host_ledgers_merge_only_their_changes() {
        let before = vec![resource("a", true), resource("b", false)];
        let mut main = before.clone();
        // Host 1 created `a` again and removed `b`; host 2 touched nothing
        // and created `c`.
        merge_ledger(
            &mut main,
            &before,
            vec![resource("a", false), resource("b", true)],
        );
        merge_ledger(
            &mut main,
            &before,
            vec![
                resource("a", true),
                resource("b", false),
                resource("c", false),
            ],
        );
        let state: Vec<(&str, bool)> = main.iter().map(|r| (r.name.as_str(), r.removed)).collect();
        assert_eq!(state, [("a", false), ("b", true), ("c", false)]);
    }
}
