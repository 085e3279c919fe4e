//! Executes a plan: stages in order, then cleanup stages, ALWAYS (after
//! success, after a failure, after Ctrl-C). `results.json` is rewritten after
//! every stage, so whatever finished is on disk even if the runner is killed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::cancel::{CancelToken, Signals};
use crate::context::{Resource, sanitize};
use crate::exec::format_duration;
use crate::live_metrics::LiveMetrics;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::repetition;
use crate::report;
use crate::results::{PipelineInfo, RunResults, RunStatus, RunnerInfo, StageRecord, StageStatus};

mod stage_run;
mod stage_search;

pub struct RunOptions {
    /// `--out DIR`; default `runs/<run id>`.
    pub out_dir: Option<PathBuf>,
    pub runs_root: PathBuf,
    pub signals: Signals,
    pub progress: Progress,
    /// Figures for Prometheus while the run runs (`--metrics-listen`,
    /// `--metrics-push`).
    pub live: Option<LiveExport>,
}

/// Where a run's live figures go.
pub struct LiveExport {
    /// The view a `--metrics-listen` endpoint serves (already listening).
    pub metrics: Arc<LiveMetrics>,
    /// After the run, how long to wait for one more scrape (`None`: nobody scrapes).
    pub linger: Option<Duration>,
    /// A Pushgateway the run's figures are PUT to at the end.
    pub push: Option<String>,
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
    let StartedRun {
        mut runner,
        started,
        lock,
    } = start_run(plan, opts.out_dir, &opts.runs_root, opts.progress)?;
    if let Some(live) = opts.live {
        live.metrics.run_started(&plan.name, &runner.results.run_id);
        runner.live = Some(live);
    }
    let said = crate::cluster_flags::set(
        &plan.ceph,
        &runner.run_dir,
        &plan.cluster_flags,
        &mut runner.ledger,
    );
    for line in said {
        runner.progress.line(&line);
    }
    runner.save();
    // Benchmark stages: cancelled by the first signal.
    let cancel = opts.signals.token();
    let rounds = runner.run_rounds(&opts.signals, &cancel);
    if plan.repeat.max(1) > 1 {
        runner.summarize_rounds(&rounds.succeeded);
    }
    let outcome = finish_run(runner, started, &cancel, rounds.cleanup_cancelled);
    // Only now may `pipeline cleanup` take the run over.
    drop(lock);
    Ok(outcome)
}

/// A run whose folder is made and locked, with its first results.json.
struct StartedRun<'p> {
    runner: Runner<'p>,
    started: DateTime<Utc>,
    /// Held until the run ends: `pipeline cleanup` refuses a live run, and
    /// knows a run whose lock is free and status `running` died.
    lock: crate::run_lock::RunLock,
}

/// The start of a run: the hosts checked (nothing runs if they are not
/// ready), the run folder made and locked, the first results.json written,
/// and a warning for each earlier run that died.
fn start_run<'p>(
    plan: &'p Plan,
    out_dir: Option<PathBuf>,
    runs_root: &Path,
    progress: Progress,
) -> Result<StartedRun<'p>, RunError> {
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
    let run_dir = out_dir.unwrap_or_else(|| runs_root.join(&run_id));
    prepare_run_dir(plan, &run_dir)?;
    let run_dir = run_dir.canonicalize().unwrap_or(run_dir);
    let lock = crate::run_lock::RunLock::acquire(&run_dir, "pipeline run")?;
    let earlier = crate::recovery::dead_runs(runs_root, &run_dir);
    let results = new_results(plan, run_id, host, started);
    let mut runner = Runner::new(plan, run_dir, results, progress, String::new());
    runner.save();
    for dead in &earlier {
        runner
            .progress
            .line(&format!("warning: {}", dead.warning()));
    }
    runner.progress.line(&format!(
        "run {}: {} stage(s), {} cleanup",
        runner.results.run_id,
        plan.stages.len(),
        plan.cleanup.len()
    ));
    Ok(StartedRun {
        runner,
        started,
        lock,
    })
}

/// The results of a run that has just started: no stage yet, status `running`.
fn new_results(
    plan: &Plan,
    run_id: String,
    host: crate::results::HostInfo,
    started: DateTime<Utc>,
) -> RunResults {
    RunResults {
        schema_version: crate::results::SCHEMA_VERSION,
        run_id,
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
        host_manifests: BTreeMap::new(),
        comparison: None,
    }
}

/// The end of a run: its status and times, the comparison with its
/// baseline, the last results.json and the report.
fn finish_run(
    mut runner: Runner<'_>,
    started: DateTime<Utc>,
    cancel: &CancelToken,
    cleanup_cancelled: bool,
) -> RunOutcome {
    // After the cleanup stages, whatever happened: the flags the run set.
    restore_cluster_flags(&mut runner);
    let interrupted = cancel.is_cancelled();
    let ended = Utc::now();
    runner.results.status = final_status(&runner.results, interrupted || cleanup_cancelled);
    runner.results.ended_at = Some(rfc3339(ended));
    runner.results.duration_s = Some((ended - started).num_milliseconds() as f64 / 1000.0);
    if let Some(planned) = &runner.plan.comparison {
        let comparison = crate::compare::with_baseline(planned, &runner.results, &runner.run_dir);
        runner.results.comparison = Some(comparison);
    }
    runner.save();
    // The run's SSH connection masters too: nothing of the run outlives it.
    crate::orphans::end_orphans(crate::orphans::Spare::Nothing);
    let report_path = runner.run_dir.join(report::REPORT_FILE);
    if let Err(e) = report::write_report(&runner.results, &runner.run_dir) {
        runner
            .progress
            .line(&format!("warning: could not write the report: {e}"));
    }
    if let Some(live) = &runner.live {
        export_at_end(live, &runner.progress);
    }
    RunOutcome {
        run_dir: runner.run_dir,
        report_path,
        results: runner.results,
        save_error: runner.save_error,
    }
}

/// The run's last figures to a Pushgateway, then a last scrape waited for.
/// Neither can fail the run: its folder is the record.
fn export_at_end(live: &LiveExport, progress: &Progress) {
    live.metrics.finish();
    if let Some(url) = &live.push {
        match crate::live_metrics::push(url, &live.metrics) {
            Ok(()) => progress.line(&format!("metrics pushed to {url}")),
            Err(e) => progress.line(&format!("warning: {e}")),
        }
    }
    if let Some(linger) = live.linger
        && !live.metrics.wait_for_scrape(linger)
    {
        progress.line(&format!(
            "warning: no scrape of --metrics-listen within {} of the run's end; the last stages' figures may be missing from Prometheus",
            format_duration(linger)
        ));
    }
}

/// How the run ended: `cancelled` when a signal cut it (or its cleanup)
/// short, whatever failed before; else `failed` when a stage or cleanup
/// stage failed without `continue_on_error`.
fn final_status(results: &RunResults, cancelled: bool) -> RunStatus {
    let blocking = |s: &StageRecord| s.status == StageStatus::Failed && !s.continue_on_error;
    if cancelled {
        RunStatus::Cancelled
    } else if results.stages.iter().any(blocking) || results.cleanup.iter().any(blocking) {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    }
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
    let mut runner = Runner::new(
        plan,
        run_dir.to_path_buf(),
        results,
        progress,
        suffix.to_string(),
    );
    let cancel = signals.token();
    for stage in &plan.cleanup {
        let mut record = if cancel.is_cancelled() {
            runner.skip_stage(stage, StageStatus::Cancelled, "cleanup was interrupted")
        } else {
            runner.run_stage(stage, &cancel)
        };
        record.id.push_str(suffix);
        record.notes.insert(
            0,
            "run again by `pipeline cleanup` after the run ended".into(),
        );
        kill_orphans(&mut record);
        runner.append_cleanup_record(record);
        runner.save();
    }
    restore_cluster_flags(&mut runner);
    runner.save();
    runner.results
}

/// Unsets the OSD flags the run set (`cluster.flags`), saying so.
fn restore_cluster_flags(runner: &mut Runner<'_>) {
    let (said, _) =
        crate::cluster_flags::restore(&runner.plan.ceph, &runner.run_dir, &mut runner.ledger);
    for line in said {
        runner.progress.line(&line);
    }
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
    /// The cluster watch's sampler, started at the first watched stage and
    /// stopped when the runner is dropped.
    cluster_sampler: Option<crate::cluster_watch::Sampler>,
    /// Where live figures go (`--metrics-listen`, `--metrics-push`).
    live: Option<LiveExport>,
}

/// What the suite's rounds leave for the end of the run.
struct RoundsRun {
    /// A further signal cut a round's cleanup short.
    cleanup_cancelled: bool,
    /// Per stage instance: in how many rounds it succeeded.
    succeeded: BTreeMap<String, u32>,
}

impl<'p> Runner<'p> {
    /// A runner that adds to `results` (a new run's, or those of the run
    /// `pipeline cleanup` finishes), from the ledger they hold.
    fn new(
        plan: &'p Plan,
        run_dir: PathBuf,
        results: RunResults,
        progress: Progress,
        stage_dir_suffix: String,
    ) -> Self {
        Runner {
            plan,
            run_ctx: serde_json::json!({
                "id": results.run_id,
                "dir": run_dir.display().to_string(),
                "name": plan.name,
            }),
            run_dir,
            stage_values: serde_json::Map::new(),
            ledger: results.created.clone(),
            progress,
            round: None,
            stage_dir_suffix,
            folders: plan.stage_folders(),
            save_error: None,
            versions: Default::default(),
            cluster_sampler: None,
            live: None,
            results,
        }
    }

    /// The whole suite, `plan.repeat` times (once unless the suite says),
    /// each round its stages and then its cleanup. A round that was
    /// interrupted, had a blocking failure or had its cleanup cut short is
    /// the last.
    fn run_rounds(&mut self, signals: &Signals, cancel: &CancelToken) -> RoundsRun {
        let plan = self.plan;
        let rounds = plan.repeat.max(1);
        let mut done = RoundsRun {
            cleanup_cancelled: false,
            succeeded: BTreeMap::new(),
        };
        for round in 1..=rounds {
            if round > 1 {
                self.progress.line(&format!(
                    "repetition {round} of {rounds} of the whole suite{}",
                    if plan.repeat_pause.is_zero() {
                        String::new()
                    } else {
                        format!(", after {}", format_duration(plan.repeat_pause))
                    }
                ));
                if !pause(plan.repeat_pause, cancel) {
                    break;
                }
            }
            self.round = (rounds > 1).then_some((round, rounds));
            let blocking_failure = self.run_round_stages(cancel, &mut done.succeeded);
            let interrupted = cancel.is_cancelled();
            done.cleanup_cancelled |= self.run_round_cleanup(signals, interrupted);
            if interrupted || done.cleanup_cancelled || blocking_failure.is_some() {
                break;
            }
        }
        done
    }

    /// One round's benchmark stages, in order: after a failure that does
    /// not `continue_on_error` the rest are skipped, after a signal
    /// cancelled. Counts each stage that succeeded in `succeeded`; returns
    /// the stage whose failure stopped the round.
    fn run_round_stages(
        &mut self,
        cancel: &CancelToken,
        succeeded: &mut BTreeMap<String, u32>,
    ) -> Option<String> {
        let mut blocking_failure: Option<String> = None;
        for stage in &self.plan.stages {
            let mut record = if cancel.is_cancelled() {
                self.skip_stage(stage, StageStatus::Cancelled, "the run was interrupted")
            } else if let Some(failed) = &blocking_failure {
                self.skip_stage(
                    stage,
                    StageStatus::Skipped,
                    &format!("stage `{failed}` failed"),
                )
            } else {
                self.run_stage(stage, cancel)
            };
            if record.status == StageStatus::Failed
                && !stage.continue_on_error
                && blocking_failure.is_none()
            {
                blocking_failure = Some(record.id.clone());
            }
            if record.status == StageStatus::Succeeded {
                *succeeded.entry(record.id.clone()).or_default() += 1;
            }
            kill_orphans(&mut record);
            self.live_stage_finished(&record);
            self.append_stage_record(record);
            self.save();
        }
        blocking_failure
    }

    /// One round's cleanup stages: they always run (after success, a
    /// failure or Ctrl-C); only a further signal cancels them. `true`: it
    /// came.
    fn run_round_cleanup(&mut self, signals: &Signals, interrupted: bool) -> bool {
        let cleanup_cancel = signals.token();
        if !self.plan.cleanup.is_empty() {
            self.progress.line(if interrupted {
                "interrupted: running cleanup (Ctrl-C again to abort it)"
            } else {
                "cleanup"
            });
        }
        for stage in &self.plan.cleanup {
            let mut record = if cleanup_cancel.is_cancelled() {
                self.skip_stage(stage, StageStatus::Cancelled, "cleanup was interrupted")
            } else {
                self.run_stage(stage, &cleanup_cancel)
            };
            kill_orphans(&mut record);
            self.live_stage_finished(&record);
            self.append_cleanup_record(record);
            self.save();
        }
        cleanup_cancel.is_cancelled()
    }

    /// With the suite's `repeat:`, each stage's summary over the rounds:
    /// how many it completed, and how much its figures varied.
    fn summarize_rounds(&mut self, succeeded: &BTreeMap<String, u32>) {
        let plan = self.plan;
        let rounds = plan.repeat.max(1);
        let max_cv = max_cv_percent(plan);
        for record in &mut self.results.stages {
            let completed = succeeded.get(&record.id).copied().unwrap_or(0);
            record.repetitions = Some(repetition::summarize(
                record,
                rounds,
                completed,
                plan.repeat_pause.as_secs_f64(),
                max_cv,
            ));
        }
        self.save();
    }

    /// The live view of the run (`--metrics-listen`), when there is one.
    fn live_metrics(&self) -> Option<Arc<LiveMetrics>> {
        self.live.as_ref().map(|l| Arc::clone(&l.metrics))
    }

    fn live_stage_finished(&self, record: &StageRecord) {
        if let Some(live) = &self.live {
            live.metrics.stage_finished(record);
        }
    }

    /// Adds a finished benchmark stage's record to the results.
    fn append_stage_record(&mut self, record: StageRecord) {
        append_record(&mut self.results.stages, self.round, record);
    }

    /// Adds a finished cleanup stage's record to the results.
    fn append_cleanup_record(&mut self, record: StageRecord) {
        append_record(&mut self.results.cleanup, self.round, record);
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
}

/// Adds a finished stage's record to `list`. With the suite's `repeat:` a
/// stage has one record over all rounds of the suite: each round's figures
/// go in with their `repetition` label.
fn append_record(list: &mut Vec<StageRecord>, round: Option<(u32, u32)>, record: StageRecord) {
    let Some((round, rounds)) = round else {
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
    merged.duration_s = Some(merged.duration_s.unwrap_or(0.0) + record.duration_s.unwrap_or(0.0));
    repetition::absorb(merged, record, round, rounds);
}

/// Stops the processes a finished stage left running, and names them in
/// its record. Call it only between stages: no command runs then, so any
/// child the runner has is a process the stage left behind outside its
/// commands' process groups. The SSH connection masters are spared for the
/// next stage.
fn kill_orphans(record: &mut StageRecord) {
    let ended = crate::orphans::end_orphans(crate::orphans::Spare::SshMasters);
    if !ended.is_empty() {
        record.notes.push(format!(
            "stopped {} process(es) the stage left running: {}",
            ended.len(),
            ended.join(", ")
        ));
    }
}

/// The suite's `report.max_cv` (default 10%): repeated figures whose
/// coefficient of variation is above it are flagged as too noisy to trust.
fn max_cv_percent(plan: &Plan) -> f64 {
    plan.report
        .max_cv
        .as_ref()
        .map_or(repetition::DEFAULT_MAX_CV_PERCENT, |v| v.value)
}

/// Waits `duration` unless the run is interrupted first (`false`).
fn pause(duration: Duration, cancel: &CancelToken) -> bool {
    cancel.sleep(duration)
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
