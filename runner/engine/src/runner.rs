//! Executes a plan: stages in order, then cleanup stages, ALWAYS (after
//! success, after a failure, after Ctrl-C). `results.json` is rewritten after
//! every stage, so whatever finished is on disk even if the runner is killed.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};

use crate::cancel::{CancelToken, Signals};
use crate::context::{ContextParts, Resource, StageContext, sanitize};
use crate::exec::format_duration;
use crate::facts;
use crate::plan::{Plan, PlannedStage};
use crate::progress::Progress;
use crate::repetition;
use crate::report;
use crate::results::{
    Artifact, CommandCpu, CommandRecord, PipelineInfo, RunResults, RunStatus, RunnerInfo,
    StageRecord, StageStatus,
};
use crate::stage::{StageError, StageOutput};
use crate::template;

pub struct RunOptions {
    /// `--out DIR`; default `runs/<run id>`.
    pub out_dir: Option<PathBuf>,
    pub runs_root: PathBuf,
    pub signals: Signals,
    pub progress: Progress,
}

pub struct RunOutcome {
    pub run_dir: PathBuf,
    pub report_path: PathBuf,
    pub results: RunResults,
    /// results.json could not be (re)written at some point (a full disk):
    /// the file on disk is the last complete version, older than `results`.
    pub save_error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot prepare the run folder {path}: {source}")]
    RunDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} already holds a run (results.json); choose another --out folder")]
    RunDirTaken(PathBuf),
    #[error("the hosts are not ready; nothing was run:\n  - {}", .0.join("\n  - "))]
    Preflight(Vec<String>),
    #[error(transparent)]
    Lock(#[from] crate::run_lock::LockError),
}

pub fn run(plan: &Plan, opts: RunOptions) -> Result<RunOutcome, RunError> {
    let problems = crate::preflight::check(plan);
    if !problems.is_empty() {
        return Err(RunError::Preflight(problems));
    }
    let started = Utc::now();
    let host = crate::host::host_info();
    let run_id = format!(
        "{}-{}-{}",
        started.format("%Y%m%dT%H%M%SZ"),
        unique_tag(&host.hostname),
        sanitize(&plan.name)
    );
    let run_dir = opts
        .out_dir
        .clone()
        .unwrap_or_else(|| opts.runs_root.join(&run_id));
    prepare_run_dir(plan, &run_dir)?;
    let run_dir = run_dir.canonicalize().unwrap_or(run_dir);
    // Held until the run ends: `pipeline cleanup` refuses a live run, and
    // knows a run whose lock is free and status `running` died.
    let _lock = crate::run_lock::RunLock::acquire(&run_dir, "pipeline run")?;
    let earlier = crate::recovery::dead_runs(&opts.runs_root, &run_dir);
    let mut runner = Runner {
        plan,
        run_dir: run_dir.clone(),
        run_ctx: serde_json::json!({"id": run_id, "dir": run_dir.display().to_string(), "name": plan.name}),
        stage_values: serde_json::Map::new(),
        ledger: Vec::new(),
        progress: opts.progress,
        round: None,
        stage_dir_suffix: String::new(),
        folders: plan.stage_folders(),
        save_error: None,
        versions: Default::default(),
        results: RunResults {
            schema_version: crate::results::SCHEMA_VERSION,
            run_id: run_id.clone(),
            pipeline: PipelineInfo {
                name: plan.name.clone(),
                description: plan.description.clone(),
                file: plan.source.path.display().to_string(),
                git: crate::host::git_info(&plan.source.path),
                report_title: plan.report.title.clone(),
                summary_metrics: plan.report.summary_metrics.clone(),
            },
            runner: RunnerInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
            },
            host,
            started_at: rfc3339(started),
            ended_at: None,
            duration_s: None,
            status: RunStatus::Running,
            vars: plan
                .vars
                .iter()
                .map(|(k, v)| (k.clone(), plan.redactor.redact_json(v)))
                .collect(),
            stages: Vec::new(),
            cleanup: Vec::new(),
            created: Vec::new(),
            environment: BTreeMap::new(),
            comparison: None,
        },
    };
    runner.save();
    for dead in &earlier {
        runner
            .progress
            .line(&format!("warning: {}", dead.warning()));
    }
    runner.progress.line(&format!(
        "run {run_id}: {} stage(s), {} cleanup",
        plan.stages.len(),
        plan.cleanup.len()
    ));

    // Benchmark stages: cancelled by the first signal.
    let cancel = opts.signals.token();
    let mut cleanup_cancelled = false;
    // The whole suite, `plan.repeat` times (once unless the suite says).
    let rounds = plan.repeat.max(1);
    let mut succeeded_rounds: BTreeMap<String, u32> = BTreeMap::new();
    for round in 1..=rounds {
        if round > 1 {
            runner.progress.line(&format!(
                "repetition {round} of {rounds} of the whole suite{}",
                if plan.repeat_pause.is_zero() {
                    String::new()
                } else {
                    format!(", after {}", format_duration(plan.repeat_pause))
                }
            ));
            if !pause(plan.repeat_pause, &cancel) {
                break;
            }
        }
        runner.round = (rounds > 1).then_some((round, rounds));
        let mut blocking_failure: Option<String> = None;
        for stage in &plan.stages {
            let record = if cancel.is_cancelled() {
                runner.not_run(stage, StageStatus::Cancelled, "the run was interrupted")
            } else if let Some(failed) = &blocking_failure {
                runner.not_run(
                    stage,
                    StageStatus::Skipped,
                    &format!("stage `{failed}` failed"),
                )
            } else {
                runner.run_stage(stage, &cancel)
            };
            if record.status == StageStatus::Failed
                && !stage.continue_on_error
                && blocking_failure.is_none()
            {
                blocking_failure = Some(record.id.clone());
            }
            if record.status == StageStatus::Succeeded {
                *succeeded_rounds.entry(record.id.clone()).or_default() += 1;
            }
            runner.keep(record, false);
            runner.save();
        }
        let interrupted = cancel.is_cancelled();

        // Cleanup stages: always run; only a further signal cancels them.
        let cleanup_cancel = opts.signals.token();
        if !plan.cleanup.is_empty() {
            runner.progress.line(if interrupted {
                "interrupted: running cleanup (Ctrl-C again to abort it)"
            } else {
                "cleanup"
            });
        }
        for stage in &plan.cleanup {
            let record = if cleanup_cancel.is_cancelled() {
                runner.not_run(stage, StageStatus::Cancelled, "cleanup was interrupted")
            } else {
                runner.run_stage(stage, &cleanup_cancel)
            };
            runner.keep(record, true);
            runner.save();
        }
        cleanup_cancelled |= cleanup_cancel.is_cancelled();
        if interrupted || cleanup_cancelled || blocking_failure.is_some() {
            break;
        }
    }
    if rounds > 1 {
        let max_cv = plan
            .report
            .max_cv
            .as_ref()
            .map_or(repetition::DEFAULT_MAX_CV_PERCENT, |v| v.value);
        for record in &mut runner.results.stages {
            let completed = succeeded_rounds.get(&record.id).copied().unwrap_or(0);
            record.repetitions = Some(repetition::summarize(
                record,
                rounds,
                completed,
                plan.repeat_pause.as_secs_f64(),
                max_cv,
            ));
        }
        runner.save();
    }
    let interrupted = cancel.is_cancelled();
    let cleanup_cancel_fired = cleanup_cancelled;

    let ended = Utc::now();
    let failed = runner
        .results
        .stages
        .iter()
        .any(|s| s.status == StageStatus::Failed && !s.continue_on_error)
        || runner
            .results
            .cleanup
            .iter()
            .any(|s| s.status == StageStatus::Failed && !s.continue_on_error);
    runner.results.status = if interrupted || cleanup_cancel_fired {
        RunStatus::Cancelled
    } else if failed {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    };
    runner.results.ended_at = Some(rfc3339(ended));
    runner.results.duration_s = Some((ended - started).num_milliseconds() as f64 / 1000.0);
    if let Some(planned) = &plan.comparison {
        let comparison = crate::compare::with_baseline(planned, &runner.results, &run_dir);
        runner.results.comparison = Some(comparison);
    }
    runner.save();
    // The run's SSH connection masters too: nothing of the run outlives it.
    crate::orphans::end_orphans(crate::orphans::Spare::Nothing);
    let report_path = run_dir.join(report::REPORT_FILE);
    if let Err(e) = report::write_report(&runner.results, &run_dir) {
        runner
            .progress
            .line(&format!("warning: could not write the report: {e}"));
    }
    Ok(RunOutcome {
        run_dir,
        report_path,
        results: runner.results,
        save_error: runner.save_error,
    })
}

/// Runs the suite's cleanup stages again for a run that ended without
/// removing everything (killed, or its cleanup failed): from the run's own
/// ledger, under its run id, so the same ownership rules apply. Their
/// records join the run's cleanup list; their folders are
/// `stages/<id><suffix>`. The caller holds the run's lock.
pub fn clean_up_again(
    plan: &Plan,
    run_dir: &Path,
    results: RunResults,
    suffix: &str,
    signals: &Signals,
    progress: Progress,
) -> RunResults {
    let mut runner = Runner {
        plan,
        run_dir: run_dir.to_path_buf(),
        run_ctx: serde_json::json!({
            "id": results.run_id,
            "dir": run_dir.display().to_string(),
            "name": plan.name,
        }),
        stage_values: serde_json::Map::new(),
        ledger: results.created.clone(),
        progress,
        round: None,
        stage_dir_suffix: suffix.to_string(),
        folders: plan.stage_folders(),
        save_error: None,
        versions: Default::default(),
        results,
    };
    let cancel = signals.token();
    for stage in &plan.cleanup {
        let mut record = if cancel.is_cancelled() {
            runner.not_run(stage, StageStatus::Cancelled, "cleanup was interrupted")
        } else {
            runner.run_stage(stage, &cancel)
        };
        record.id.push_str(suffix);
        record.notes.insert(
            0,
            "run again by `pipeline cleanup` after the run ended".into(),
        );
        runner.keep(record, true);
        runner.save();
    }
    runner.results
}

fn prepare_run_dir(plan: &Plan, run_dir: &Path) -> Result<(), RunError> {
    let err = |source| RunError::RunDir {
        path: run_dir.to_path_buf(),
        source,
    };
    if run_dir.join(crate::results::RESULTS_FILE).exists() {
        return Err(RunError::RunDirTaken(run_dir.to_path_buf()));
    }
    std::fs::create_dir_all(run_dir.join("stages")).map_err(err)?;
    // The suite as given, and as resolved (what `pipeline plan` shows).
    std::fs::write(run_dir.join("pipeline.yaml"), &plan.source.text).map_err(err)?;
    // Beside it, the lock its registry plugins were resolved by: running the
    // run folder's pipeline.yaml again runs the same plugin bytes.
    if let Some(lock) = &plan.lock_text {
        std::fs::write(run_dir.join("pipeline.lock"), lock).map_err(err)?;
    }
    std::fs::write(run_dir.join("plan.txt"), plan.render_text()).map_err(err)?;
    Ok(())
}

struct Runner<'p> {
    plan: &'p Plan,
    run_dir: PathBuf,
    run_ctx: serde_json::Value,
    /// `stages.ID` for templates: outputs and status of finished stages.
    stage_values: serde_json::Map<String, serde_json::Value>,
    ledger: Vec<Resource>,
    progress: Progress,
    results: RunResults,
    /// With the suite's `repeat:`: which run of the whole suite this is, of how many.
    round: Option<(u32, u32)>,
    /// Appended to each stage's folder name (`pipeline cleanup` runs the
    /// cleanup stages again beside the run's own folders, never into them).
    stage_dir_suffix: String,
    /// Each stage instance's folder under `stages/` (see `Plan::stage_folders`).
    folders: BTreeMap<String, String>,
    /// The first failure to write results.json.
    save_error: Option<String>,
    /// The client versions read so far, by host and client root.
    versions: crate::client_versions::VersionCache,
}

impl Runner<'_> {
    /// Adds a finished stage's record to the results (`cleanup`: to the
    /// cleanup list). With the suite's `repeat:` a stage has one record over
    /// all runs of the suite: each run's figures go in with their
    /// `repetition` label.
    fn keep(&mut self, mut record: StageRecord, cleanup: bool) {
        // No command runs now: any child the runner has is a process the
        // stage left behind outside its commands' process groups.
        let ended = crate::orphans::end_orphans(crate::orphans::Spare::SshMasters);
        if !ended.is_empty() {
            record.notes.push(format!(
                "stopped {} process(es) the stage left running: {}",
                ended.len(),
                ended.join(", ")
            ));
        }
        let list = if cleanup {
            &mut self.results.cleanup
        } else {
            &mut self.results.stages
        };
        let Some((round, rounds)) = self.round else {
            list.push(record);
            return;
        };
        let i = match list.iter().position(|r| r.id == record.id) {
            Some(i) => i,
            None => {
                let mut first = repetition::emptied(&record);
                first.status = StageStatus::Succeeded;
                first.error = None;
                first.skip_reason = None;
                first.duration_s = Some(0.0);
                list.push(first);
                list.len() - 1
            }
        };
        let merged = &mut list[i];
        merged.ended_at = record.ended_at.clone();
        merged.duration_s =
            Some(merged.duration_s.unwrap_or(0.0) + record.duration_s.unwrap_or(0.0));
        repetition::absorb(merged, record, round, rounds);
    }

    fn save(&mut self) {
        self.results.created = self.ledger.clone();
        if let Err(e) = self.results.save(&self.run_dir) {
            self.progress
                .line(&format!("warning: could not write results.json: {e}"));
            // The run goes on (cleanup must run); it fails at the end.
            self.save_error.get_or_insert_with(|| e.to_string());
        }
    }

    fn record(&self, stage: &PlannedStage, status: StageStatus) -> StageRecord {
        StageRecord {
            id: stage.instance_id.clone(),
            stage: stage.stage_id.clone(),
            plugin: stage.plugin.description.name.clone(),
            plugin_file: (stage.plugin.origin != "native").then(|| stage.plugin.origin.clone()),
            plugin_sha256: stage.plugin.sha256.clone(),
            description: stage.description.clone(),
            matrix: stage.matrix.clone(),
            params: self
                .plan
                .redactor
                .redact_json(&serde_json::Value::Object(stage.with.clone())),
            status,
            started_at: None,
            ended_at: None,
            duration_s: None,
            error: None,
            skip_reason: None,
            continue_on_error: stage.continue_on_error,
            notes: Vec::new(),
            metrics: Vec::new(),
            histograms: Vec::new(),
            outputs: BTreeMap::new(),
            artifacts: Vec::new(),
            commands: Vec::new(),
            command_cpu: None,
            repetitions: None,
            client_versions: Vec::new(),
        }
    }

    fn not_run(&mut self, stage: &PlannedStage, status: StageStatus, reason: &str) -> StageRecord {
        let mut record = self.record(stage, status);
        record.skip_reason = Some(reason.to_string());
        self.progress.line(&format!(
            "{} {} ({reason})",
            status.as_str(),
            stage.instance_id
        ));
        self.remember(stage, status, &BTreeMap::new());
        record
    }

    fn remember(
        &mut self,
        stage: &PlannedStage,
        status: StageStatus,
        outputs: &BTreeMap<String, serde_json::Value>,
    ) {
        self.stage_values.insert(
            stage.stage_id.clone(),
            serde_json::json!({"status": status.as_str(), "outputs": outputs}),
        );
    }

    /// One stage instance, step by step: its `when`, its parameters, its run
    /// on its host(s), its series files, and the outcome into its record.
    fn run_stage(&mut self, stage: &PlannedStage, cancel: &CancelToken) -> StageRecord {
        let env = template::environment();
        let ctx = self.plan.template_context(
            &self.run_ctx,
            &stage.matrix,
            &serde_json::Value::Object(self.stage_values.clone()),
        );
        let mut record = self.record(stage, StageStatus::Succeeded);
        match evaluate_when(stage, &env, &ctx) {
            Ok(None) => {}
            Ok(Some(skip_reason)) => {
                return self.not_run(stage, StageStatus::Skipped, &skip_reason);
            }
            Err(error) => return self.failed_before_start(stage, record, error),
        }
        let params = match stage.resolve_params(&env, &ctx) {
            Ok(p) => p,
            Err(problems) => {
                let error =
                    StageError::failed(format!("invalid parameters: {}", problems.join("; ")));
                return self.failed_before_start(stage, record, error);
            }
        };
        record.params = self
            .plan
            .redactor
            .redact_json(&serde_json::Value::Object(params.clone()));

        let stage_dir = self.run_dir.join("stages").join(
            self.folders
                .get(&stage.instance_id)
                .cloned()
                .unwrap_or_else(|| sanitize(&stage.instance_id))
                + &self.stage_dir_suffix,
        );
        let clock = Instant::now();
        record.started_at = Some(rfc3339(Utc::now()));
        let bar = self
            .progress
            .start(&stage.instance_id, &stage.plugin.description.name);
        let show = |m: &str| bar.message(m);
        let planned = stage.repeat.max(1);
        let mut completed = 0;
        let mut tools = ToolsUsed::default();
        for k in 1..=planned {
            if k > 1 {
                show(&format!(
                    "repetition {k}/{planned} in {:?}",
                    stage.repeat_pause
                ));
                if !pause(stage.repeat_pause, cancel) {
                    record.status = StageStatus::Cancelled;
                    record.error = Some(format!(
                        "interrupted after {completed} of {planned} repetitions"
                    ));
                    break;
                }
            }
            // Each repetition has its own folder: their outputs never mix.
            let work_dir = match (planned, self.round) {
                (1, None) => stage_dir.clone(),
                (1, Some((round, _))) => stage_dir.join(format!("repetition-{round}")),
                _ => stage_dir.join(format!("repetition-{k}")),
            };
            let started = Instant::now();
            let job = HostJob {
                stage,
                params: &params,
                run_id: &self.results.run_id,
                run_dir: &self.run_dir,
                ceph: &self.plan.ceph,
                // `timeout:` applies to each repetition.
                deadline: stage.timeout.map(|t| started + t),
                cancel,
                progress: &show,
                redactor: &self.plan.redactor,
            };
            let ran = if stage.fans_out() {
                job.run_on_each_host(&work_dir, &mut self.ledger)
            } else {
                job.run_here(&work_dir, &mut self.ledger)
            };
            tools.add(&ran.tools);
            if planned == 1 {
                self.record_outcome(&mut record, ran, &work_dir);
                completed = 1;
                break;
            }
            let mut one = repetition::emptied(&record);
            self.record_outcome(&mut one, ran, &work_dir);
            let succeeded = one.status == StageStatus::Succeeded;
            repetition::absorb(&mut record, one, k, planned);
            if !succeeded {
                break;
            }
            completed = k;
        }
        if planned > 1 {
            let max_cv = self
                .plan
                .report
                .max_cv
                .as_ref()
                .map_or(repetition::DEFAULT_MAX_CV_PERCENT, |v| v.value);
            record.repetitions = Some(repetition::summarize(
                &record,
                planned,
                completed,
                stage.repeat_pause.as_secs_f64(),
                max_cv,
            ));
        }
        let elapsed = clock.elapsed();
        record.ended_at = Some(rfc3339(Utc::now()));
        record.duration_s = Some(elapsed.as_secs_f64());
        if !cancel.is_cancelled() && !tools.by_host.is_empty() {
            show("reading the client tools' versions");
            self.record_client_versions(stage, &mut record, &tools, cancel);
        }
        bar.finish(&finish_line(&record, elapsed));
        self.remember(stage, record.status, &record.outputs);
        record
    }

    /// The versions of the client tools the stage ran, per host (probed
    /// once per host and client root, after the stage's own commands).
    fn record_client_versions(
        &mut self,
        stage: &PlannedStage,
        record: &mut StageRecord,
        tools: &ToolsUsed,
        cancel: &CancelToken,
    ) {
        let ctx = crate::client_versions::ProbeContext {
            run_dir: &self.run_dir,
            ceph: &self.plan.ceph,
            cancel,
        };
        for (host, used) in &tools.by_host {
            let (versions, note) = self
                .versions
                .versions(host, stage.client.as_ref(), used, &ctx);
            record.client_versions.push(versions);
            record.notes.extend(note);
        }
    }

    /// A stage that failed before it started (its `when` or parameters).
    fn failed_before_start(
        &mut self,
        stage: &PlannedStage,
        mut record: StageRecord,
        error: StageError,
    ) -> StageRecord {
        self.record_failure(&mut record, error);
        self.progress.line(&format!(
            "failed {}: {}",
            stage.instance_id,
            record.error.as_deref().unwrap_or_default()
        ));
        self.remember(stage, record.status, &BTreeMap::new());
        record
    }

    /// The one place a stage's failure goes into its record.
    fn record_failure(&self, record: &mut StageRecord, error: StageError) {
        match error {
            StageError::Cancelled => {
                record.status = StageStatus::Cancelled;
                record.error = Some("interrupted".into());
            }
            e => {
                record.status = StageStatus::Failed;
                record.error = Some(self.plan.redactor.redact(&e.to_string()));
            }
        }
    }

    /// What the stage returned (or the error it failed with), its commands
    /// and their CPU, and its series files, into the record.
    fn record_outcome(&mut self, record: &mut StageRecord, ran: Ran, work_dir: &Path) {
        let Ran {
            outcome,
            commands,
            mut artifacts,
            tools: _,
        } = ran;
        record.command_cpu = CommandCpu::of(&commands);
        record.commands = commands;
        match outcome {
            Ok(mut output) => {
                // The one place every stage's output is finished: only
                // finite numbers reach results.json.
                let dropped = output.drop_non_finite();
                output.notes.extend(dropped);
                artifacts.extend(self.save_series(&output.series, work_dir));
                // A plugin's facts never overwrite those of native stages.
                let facts = facts::namespaced(record, output.environment);
                self.results.environment.extend(facts);
                record.metrics = output.metrics;
                record.histograms = output.histograms;
                // Whatever a stage returns may quote a secret it was given.
                let redactor = &self.plan.redactor;
                record.outputs = output
                    .outputs
                    .iter()
                    .map(|(k, v)| (k.clone(), redactor.redact_json(v)))
                    .collect();
                record.notes = output.notes.iter().map(|n| redactor.redact(n)).collect();
                if let Some(reason) = output.skipped {
                    record.status = StageStatus::Skipped;
                    record.skip_reason = Some(redactor.redact(&reason));
                }
            }
            Err(e) => self.record_failure(record, e),
        }
        record.artifacts = artifacts;
    }

    /// Each series as `series-NAME.json` in the work folder, listed as an
    /// artifact. File names are injective (see `report::charts::names`): two
    /// series never share a file, whatever their names hold, so the charts
    /// drawn from these files later have every series.
    fn save_series(&self, series: &[pipeline_model::Series], work_dir: &Path) -> Vec<Artifact> {
        let mut saved = Vec::new();
        let files = crate::report::charts::names::series_files(series.iter().map(|s| &*s.name));
        for (s, file) in series.iter().zip(files) {
            let path = work_dir.join(file);
            if let Ok(text) = serde_json::to_string_pretty(s)
                // Never through a link a command left in its place.
                && pipeline_stage_api::safe_fs::write(
                    &path,
                    text.as_bytes(),
                    pipeline_stage_api::safe_fs::Existing::Replace,
                )
                .is_ok()
            {
                saved.push(Artifact {
                    name: format!("series: {}", s.name),
                    path: path
                        .strip_prefix(&self.run_dir)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                });
            }
        }
        saved
    }
}

/// Waits `duration` unless the run is interrupted first (`false`).
fn pause(duration: Duration, cancel: &CancelToken) -> bool {
    cancel.sleep(duration)
}

/// `Ok(None)`: run the stage; `Ok(Some(reason))`: skip it; `Err`: `when`
/// could not be evaluated.
fn evaluate_when(
    stage: &PlannedStage,
    env: &minijinja::Environment<'_>,
    ctx: &minijinja::Value,
) -> Result<Option<String>, StageError> {
    let Some(when) = &stage.when else {
        return Ok(None);
    };
    match template::eval_bool(env, when, ctx) {
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some(format!("`when: {when}` is false"))),
        Err(e) => Err(StageError::failed(format!(
            "cannot evaluate `when: {when}`: {e}"
        ))),
    }
}

/// A stage's run on its host(s): the outcome, and what it did on the way.
struct Ran {
    outcome: Result<StageOutput, StageError>,
    commands: Vec<CommandRecord>,
    artifacts: Vec<Artifact>,
    /// The client tools each host ran.
    tools: Vec<(crate::hosts::Host, Vec<String>)>,
}

/// The client tools a stage ran on each host, over its repetitions.
#[derive(Default)]
struct ToolsUsed {
    by_host: Vec<(crate::hosts::Host, Vec<String>)>,
}

impl ToolsUsed {
    fn add(&mut self, ran: &[(crate::hosts::Host, Vec<String>)]) {
        for (host, tools) in ran.iter().filter(|(_, t)| !t.is_empty()) {
            let at = match self.by_host.iter().position(|(h, _)| h.name == host.name) {
                Some(i) => i,
                None => {
                    self.by_host.push((host.clone(), Vec::new()));
                    self.by_host.len() - 1
                }
            };
            let known = &mut self.by_host[at].1;
            for tool in tools {
                if !known.contains(tool) {
                    known.push(tool.clone());
                }
            }
        }
    }
}

/// What one host's run of a stage needs.
struct HostJob<'a> {
    stage: &'a PlannedStage,
    params: &'a crate::params::Params,
    run_id: &'a str,
    run_dir: &'a Path,
    ceph: &'a crate::ceph::CephConnection,
    deadline: Option<Instant>,
    cancel: &'a CancelToken,
    progress: &'a (dyn Fn(&str) + Sync),
    redactor: &'a crate::secrets::Redactor,
}

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
    fn run_here(&self, work_dir: &Path, ledger: &mut Vec<Resource>) -> Ran {
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
    fn run_on_each_host(&self, work_dir: &Path, ledger: &mut Vec<Resource>) -> Ran {
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

fn finish_line(record: &StageRecord, elapsed: Duration) -> String {
    let mark = match record.status {
        StageStatus::Succeeded => "ok",
        StageStatus::Failed if record.continue_on_error => "FAILED (continuing)",
        StageStatus::Failed => "FAILED",
        StageStatus::Skipped => "skipped",
        StageStatus::Cancelled => "cancelled",
    };
    let mut line = format!("{mark:>9} {} in {}", record.id, format_duration(elapsed));
    let headline: Vec<String> = record
        .metrics
        .iter()
        .filter(|m| m.headline)
        .take(4)
        .map(|m| {
            format!(
                "{}={}",
                m.display_name(),
                crate::report::format_value(m.value, &m.unit)
            )
        })
        .collect();
    if !headline.is_empty() {
        line.push_str(&format!(": {}", headline.join(", ")));
    }
    if let Some(e) = &record.error {
        line.push_str(&format!(": {e}"));
    }
    if let Some(r) = &record.skip_reason {
        line.push_str(&format!(" ({r})"));
    }
    line
}

/// Six hex digits that tell apart two runs of one suite started in the same
/// second (on one client, or on several against one cluster): the run id
/// names what a run creates (bench run names, buckets, key prefixes), and
/// two runs must never share those. From this process's id, the host name
/// and the clock's nanoseconds.
fn unique_tag(hostname: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = format!("{}:{hostname}:{nanos}", std::process::id());
    format!(
        "{:06x}",
        crate::report::charts::names::fnv1a(seed.as_bytes()) & 0xff_ffff
    )
}

fn rfc3339(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
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
