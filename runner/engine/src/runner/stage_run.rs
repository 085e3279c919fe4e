//! One stage instance's run, step by step: its `when` and parameters,
//! its repetitions on its host(s) ([`crate::per_host`]), the versions of
//! the client tools it ran, and the outcome into its record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::{Runner, max_cv_percent, pause, rfc3339};
use crate::cancel::CancelToken;
use crate::context::sanitize;
use crate::exec::format_duration;
use crate::facts;
use crate::per_host::{HostJob, Ran};
use crate::plan::PlannedStage;
use crate::repetition;
use crate::results::{Artifact, CommandCpu, StageRecord, StageStatus};
use crate::stage::StageError;
use crate::template;

/// How a stage's start went: its parameters are ready, or it is done
/// already (skipped by its `when`, or failed there or in its parameters).
enum StageStart {
    Run {
        record: StageRecord,
        params: crate::params::Params,
        /// `during:` with its words rendered.
        during: Vec<crate::during::PlannedAction>,
    },
    Done(StageRecord),
}

impl Runner<'_> {
    /// A stage's record before it runs: what it is, with its parameters as
    /// written (secrets redacted).
    fn new_record(&self, stage: &PlannedStage, status: StageStatus) -> StageRecord {
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
            events: Vec::new(),
            cluster: None,
            hosts: Vec::new(),
            latency_bound: false,
        }
    }

    /// The record of a stage that does not run (`Skipped` or `Cancelled`),
    /// with the reason.
    fn skipped_record(
        &self,
        stage: &PlannedStage,
        status: StageStatus,
        reason: &str,
    ) -> StageRecord {
        let mut record = self.new_record(stage, status);
        record.skip_reason = Some(reason.to_string());
        record
    }

    /// Passes over a stage (`Skipped` or `Cancelled`): says so on the
    /// progress line, and gives later stages' templates its status.
    pub(super) fn skip_stage(
        &mut self,
        stage: &PlannedStage,
        status: StageStatus,
        reason: &str,
    ) -> StageRecord {
        let record = self.skipped_record(stage, status, reason);
        self.progress.line(&format!(
            "{} {} ({reason})",
            status.as_str(),
            stage.instance_id
        ));
        self.remember_for_templates(stage, status, &BTreeMap::new());
        record
    }

    /// `stages.ID.status` and `stages.ID.outputs` for the templates of the
    /// stages after this one.
    fn remember_for_templates(
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

    /// One stage instance, step by step: its `when` and parameters, its
    /// repetitions on its host(s), the versions of the client tools it ran,
    /// and the outcome into its record.
    pub(super) fn run_stage(&mut self, stage: &PlannedStage, cancel: &CancelToken) -> StageRecord {
        let (mut record, params, during) = match self.start_stage(stage) {
            StageStart::Run {
                record,
                params,
                during,
            } => (record, params, during),
            StageStart::Done(record) => return record,
        };
        let clock = Instant::now();
        record.started_at = Some(rfc3339(Utc::now()));
        let bar = self
            .progress
            .start(&stage.instance_id, &stage.plugin.description.name);
        let show = |m: &str| bar.message(m);
        if let Some(live) = self.live_metrics() {
            live.stage_started(&stage.instance_id, &stage.plugin.description.name);
        }
        let during_dir = self.stage_dir(stage).join("during");
        let conn = self.watches_cluster(stage).then(|| self.plan.ceph.clone());
        let watch_host = self.plan.watch_hosts && is_benchmark(stage);
        let watch_osds = self.plan.watch_osds;
        let mut sampler = self.cluster_sampler.take();
        // Where the stage runs, then the cluster's own hosts: a figure is
        // as often limited by an OSD host's disk or NIC as by the client.
        let mut watched_hosts = stage.targets.clone();
        for host in &self.plan.cluster_hosts {
            if !watched_hosts.iter().any(|h| h.name == host.name) {
                watched_hosts.push(host.clone());
            }
        }
        let live = self.live_metrics();
        let osds =
            crate::host_watch::osd_disks::OsdDisks::from_environment(&self.results.environment);
        let (((tools, watch), host), events) =
            crate::during::beside(&during, &during_dir, &show, || {
                let mut run = || self.run_repetitions(stage, &params, &mut record, cancel, &show);
                let mut watched = || match &conn {
                    Some(conn) => {
                        let (tools, watch) =
                            crate::cluster_watch::beside(&mut sampler, conn, watch_osds, &mut run);
                        (tools, Some(watch))
                    }
                    None => (run(), None),
                };
                if watch_host {
                    // Gateways on inventory hosts are cluster telemetry too: read with the cluster's.
                    // The same path on the host as here (a cluster's hosts share their layout).
                    let gateway_conf = conn.as_ref().map(|c| {
                        c.conf
                            .clone()
                            .or_else(|| std::env::var("CEPH_CONF").ok())
                            .unwrap_or_else(|| "/etc/ceph/ceph.conf".into())
                    });
                    crate::host_watch::beside_live(
                        &watched_hosts,
                        live.clone(),
                        &osds,
                        gateway_conf.as_deref(),
                        watched,
                    )
                } else {
                    (watched(), Vec::new())
                }
            });
        self.cluster_sampler = sampler;
        record_events(&mut record, events);
        if let Some(mut watch) = watch {
            let remote: Vec<_> = host
                .iter()
                .flat_map(|h| {
                    h.gateways
                        .iter()
                        .map(|g| crate::cluster_watch::gateways::GatewayActivity {
                            host: Some(h.host.clone()),
                            ..g.clone()
                        })
                })
                .collect();
            crate::cluster_watch::gateways::take_over_remote(&mut watch, &remote);
            record_cluster_watch(&mut record, watch);
        }
        for watch in &host {
            if let Some(m) = &watch.manifest {
                self.results
                    .host_manifests
                    .entry(watch.host.clone())
                    .or_insert_with(|| m.clone());
            }
        }
        record_host_watch(&mut record, host);
        let elapsed = clock.elapsed();
        record.ended_at = Some(rfc3339(Utc::now()));
        record.duration_s = Some(elapsed.as_secs_f64());
        if !cancel.is_cancelled() && !tools.by_host.is_empty() {
            show("reading the client tools' versions");
            self.record_client_versions(stage, &mut record, &tools, cancel);
        }
        bar.finish(&finish_line(&record, elapsed));
        self.remember_for_templates(stage, record.status, &record.outputs);
        record
    }

    /// Whether the cluster is watched beside `stage`: a stage with headline
    /// figures (a benchmark, not a step such as `ceph-pool`), in a suite
    /// that did not turn the watch off, with a cluster to watch.
    fn watches_cluster(&self, stage: &PlannedStage) -> bool {
        let conf_exists = self
            .plan
            .ceph
            .conf
            .as_deref()
            .unwrap_or("/etc/ceph/ceph.conf");
        self.plan.cluster_watch && is_benchmark(stage) && Path::new(conf_exists).exists()
    }

    /// A stage's `when`, then its parameters rendered and checked against
    /// the plugin's types. A stage skipped or failed here is `Done`.
    fn start_stage(&mut self, stage: &PlannedStage) -> StageStart {
        let env = template::environment();
        let ctx = self.plan.template_context(
            &self.run_ctx,
            &stage.matrix,
            &serde_json::Value::Object(self.stage_values.clone()),
        );
        let mut record = self.new_record(stage, StageStatus::Succeeded);
        match evaluate_when(stage, &env, &ctx) {
            Ok(None) => {}
            Ok(Some(skip_reason)) => {
                return StageStart::Done(self.skip_stage(
                    stage,
                    StageStatus::Skipped,
                    &skip_reason,
                ));
            }
            Err(error) => return StageStart::Done(self.fail_before_start(stage, record, error)),
        }
        let params = match stage.resolve_params(&env, &ctx) {
            Ok(p) => p,
            Err(problems) => {
                let error =
                    StageError::failed(format!("invalid parameters: {}", problems.join("; ")));
                return StageStart::Done(self.fail_before_start(stage, record, error));
            }
        };
        record.params = self
            .plan
            .redactor
            .redact_json(&serde_json::Value::Object(params.clone()));
        let during = match render_during(stage, &env, &ctx) {
            Ok(during) => during,
            Err(error) => return StageStart::Done(self.fail_before_start(stage, record, error)),
        };
        StageStart::Run {
            record,
            params,
            during,
        }
    }

    /// The stage's repetitions (its `repeat:`, once by default), each in a
    /// folder of its own, into `record`; the first that does not succeed is
    /// the last. Returns the client tools they ran.
    fn run_repetitions(
        &mut self,
        stage: &PlannedStage,
        params: &crate::params::Params,
        record: &mut StageRecord,
        cancel: &CancelToken,
        show: &(dyn Fn(&str) + Sync),
    ) -> ToolsUsed {
        let stage_dir = self.stage_dir(stage);
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
            let work_dir = repetition_dir(&stage_dir, k, planned, self.round);
            let ran = self.run_measured(stage, params, &work_dir, cancel, show);
            tools.add(&ran.tools);
            if planned == 1 {
                self.record_outcome(record, ran, &work_dir);
                completed = 1;
                break;
            }
            let mut one = repetition::emptied(record);
            self.record_outcome(&mut one, ran, &work_dir);
            let succeeded = one.status == StageStatus::Succeeded;
            repetition::absorb(record, one, k, planned);
            if !succeeded {
                break;
            }
            completed = k;
        }
        if planned > 1 {
            record.repetitions = Some(repetition::summarize(
                record,
                planned,
                completed,
                stage.repeat_pause.as_secs_f64(),
                max_cv_percent(self.plan),
            ));
        }
        tools
    }

    /// The stage's folder under `stages/` (see `Plan::stage_folders`).
    fn stage_dir(&self, stage: &PlannedStage) -> PathBuf {
        self.run_dir.join("stages").join(
            self.folders
                .get(&stage.instance_id)
                .cloned()
                .unwrap_or_else(|| sanitize(&stage.instance_id))
                + &self.stage_dir_suffix,
        )
    }

    /// One repetition of the stage: here, or on each of its hosts.
    pub(super) fn run_once(
        &mut self,
        stage: &PlannedStage,
        params: &crate::params::Params,
        work_dir: &Path,
        cancel: &CancelToken,
        show: &(dyn Fn(&str) + Sync),
    ) -> Ran {
        let started = Instant::now();
        let job = HostJob {
            stage,
            params,
            run_id: &self.results.run_id,
            run_dir: &self.run_dir,
            ceph: &self.plan.ceph,
            // `timeout:` applies to each repetition.
            deadline: stage.timeout.map(|t| started + t),
            cancel,
            progress: show,
            redactor: &self.plan.redactor,
            live: self.live_metrics(),
        };
        if stage.fans_out() {
            job.run_on_each_host(work_dir, &mut self.ledger)
        } else {
            job.run_here(work_dir, &mut self.ledger)
        }
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

    /// Fails a stage before it started (its `when` or parameters): the
    /// error into its record and on the progress line, and its status for
    /// later stages' templates.
    fn fail_before_start(
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
        self.remember_for_templates(stage, record.status, &BTreeMap::new());
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

/// The work folder of repetition `k` of `planned`: each repetition (of the
/// stage, or of the suite with its `repeat:`) has its own, so their outputs
/// never mix.
/// `during:` with every word rendered like the stage's parameters.
fn render_during(
    stage: &PlannedStage,
    env: &minijinja::Environment<'_>,
    ctx: &minijinja::Value,
) -> Result<Vec<crate::during::PlannedAction>, StageError> {
    let render = |words: &[String], name: &str| -> Result<Vec<String>, StageError> {
        words
            .iter()
            .map(|w| {
                template::render(env, w, ctx)
                    .map_err(|e| StageError::failed(format!("`during` action `{name}`: {e}")))
            })
            .collect()
    };
    stage
        .during
        .iter()
        .map(|a| {
            Ok(crate::during::PlannedAction {
                run: render(&a.run, &a.name)?,
                undo: a.undo.as_deref().map(|u| render(u, &a.name)).transpose()?,
                ..a.clone()
            })
        })
        .collect()
}

/// The timeline's events into the record; a command that failed fails a
/// stage that had not failed already (its figures are not what the suite
/// asked for, or the fault outlived it).
/// The watch into the record of a stage that reported figures; its flag,
/// or why the cluster could not be watched, also as a note.
/// A stage with headline figures: a benchmark, not a step such as `ceph-pool`.
fn is_benchmark(stage: &PlannedStage) -> bool {
    stage.plugin.description.metrics.iter().any(|m| m.headline)
}

/// Whether a stage's telemetry goes into its record: beside figures, and
/// for a stage that failed or was cancelled (Ctrl-C) part way, whose
/// cluster and hosts are what a person looks at first to learn why.
fn keeps_telemetry(record: &StageRecord) -> bool {
    !record.metrics.is_empty()
        || matches!(record.status, StageStatus::Failed | StageStatus::Cancelled)
}

fn record_host_watch(record: &mut StageRecord, watches: Vec<crate::host_watch::HostWatch>) {
    if !keeps_telemetry(record) {
        return;
    }
    for w in &watches {
        if let Some(error) = &w.error {
            record.notes.push(if w.samples.is_empty() {
                format!("{}'s CPU, disks and NICs were not watched: {error}", w.host)
            } else {
                format!("the watch of {} ended early: {error}", w.host)
            });
        }
    }
    // Nothing to call latency-bound without figures (a stage cancelled early).
    record.latency_bound = !record.metrics.is_empty() && crate::host_watch::latency_bound(&watches);
    record.hosts = watches;
}

fn record_cluster_watch(record: &mut StageRecord, watch: crate::cluster_watch::ClusterWatch) {
    if !keeps_telemetry(record) {
        return;
    }
    // A flag is the report's and compare's to show (`cluster.unhealthy`).
    if watch.samples.is_empty()
        && let Some(error) = &watch.error
    {
        record
            .notes
            .push(format!("the cluster's state was not watched: {error}"));
    }
    record.cluster = Some(watch);
}

fn record_events(record: &mut StageRecord, events: Vec<crate::during::StageEvent>) {
    let failed: Vec<String> = events
        .iter()
        .filter(|e| !e.ok)
        .map(|e| format!("`during` {} of `{}`: {}", e.action, e.name, e.outcome))
        .collect();
    if !failed.is_empty() && record.status == StageStatus::Succeeded {
        record.status = StageStatus::Failed;
        record.error = Some(failed.join("; "));
    } else if !failed.is_empty() {
        record.notes.extend(failed);
    }
    record.events = events;
}

fn repetition_dir(stage_dir: &Path, k: u32, planned: u32, round: Option<(u32, u32)>) -> PathBuf {
    match (planned, round) {
        (1, None) => stage_dir.to_path_buf(),
        (1, Some((round, _))) => stage_dir.join(format!("repetition-{round}")),
        _ => stage_dir.join(format!("repetition-{k}")),
    }
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
    if let Some(unhealthy) = record.cluster.as_ref().and_then(|c| c.unhealthy.as_ref()) {
        line.push_str(&format!(" [cluster not clean: {unhealthy}]"));
    }
    for limit in record.hosts.iter().flat_map(|h| &h.limited_by) {
        line.push_str(&format!(" [limited by {limit}]"));
    }
    if record.latency_bound {
        line.push_str(" [none saturated: latency-bound]");
    }
    line
}
