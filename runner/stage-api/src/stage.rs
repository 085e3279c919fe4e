//! The one interface every stage implements, native or (later) WASM: describe
//! itself, say what it would do (`pipeline plan`), and run.
//!
//! A stage's *configuration* (its validated [`Params`]) is separate from the
//! running stage: the engine checks parameters against [`StageDescription::params`]
//! before anything runs, so `run` gets values of the declared types.

use std::collections::BTreeMap;

use pipeline_model::{Histogram, Metric, Series};
use serde::Serialize;

use crate::context::StageContext;
use crate::metric::{Declared, MetricDecl, MetricError};
use crate::params::{ParamSpec, Params};

/// What `pipeline plugins describe` shows.
#[derive(Debug, Clone, Serialize)]
pub struct StageDescription {
    pub name: String,
    pub version: String,
    /// One line: what the stage does.
    pub summary: String,
    pub params: Vec<ParamSpec>,
    /// Values later stages can use as `{{ stages.ID.outputs.NAME }}`.
    pub outputs: Vec<OutputSpec>,
    /// Metrics the stage reports: the engine fails a run that reports any
    /// other (see [`crate::metric`]).
    pub metrics: Vec<MetricDecl>,
    /// How the values relate to the declarations: made from them, or (WASM
    /// interface 0.1.0) bringing their own direction and headline mark.
    #[serde(skip)]
    pub metric_values: Declared,
    /// The parameter whose entries declare the metrics, for a stage whose
    /// metrics the pipeline names (`exec`'s `metrics`); see
    /// [`Stage::declared_metrics`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_from_param: Option<String>,
    /// Capabilities a sandboxed plugin asks for (`exec`, `files`, `http`);
    /// empty for native stages, which are trusted code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// `true`: the engine runs the stage once per target host (in parallel) and
    /// labels its metrics `host=NAME`. `false`: the stage gets all targets and
    /// orchestrates them itself (iperf3: servers here, clients there).
    pub per_host: bool,
    /// `true`: the stage calls [`StageContext::start_together`] right before
    /// its measured command, so `sync_start: true` on a stage of several
    /// hosts starts them all at one instant.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sync_start: bool,
    /// Programs the stage runs on its target hosts; checked before the run starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// `true`: the stage's commands may run from a client root (`client:`
    /// on the stage; see [`crate::client_root`]): they are client tools
    /// working on the cluster and the run folder only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_root: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct OutputSpec {
    pub name: String,
    pub doc: String,
}

impl OutputSpec {
    pub fn new(name: &str, doc: &str) -> Self {
        OutputSpec {
            name: name.into(),
            doc: doc.into(),
        }
    }
}

/// One thing a stage would do, as `pipeline plan` lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Action {
    pub summary: String,
    /// The external command, when the action is one (argv, no shell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Deletes or overwrites data: shown prominently by `plan`.
    pub destructive: bool,
}

impl Action {
    pub fn command(summary: impl Into<String>, argv: Vec<String>) -> Self {
        Action {
            summary: summary.into(),
            command: Some(argv),
            destructive: false,
        }
    }

    pub fn note(summary: impl Into<String>) -> Self {
        Action {
            summary: summary.into(),
            command: None,
            destructive: false,
        }
    }

    pub fn destructive(mut self) -> Self {
        self.destructive = true;
        self
    }
}

/// What a finished stage hands back.
#[derive(Debug, Clone, Default)]
pub struct StageOutput {
    pub metrics: Vec<Metric>,
    /// Saved by the engine as JSON artifacts next to the raw outputs.
    pub series: Vec<Series>,
    /// Distributions the `histogram` rules of `metrics` refer to (stored in
    /// results.json).
    pub histograms: Vec<Histogram>,
    pub outputs: BTreeMap<String, serde_json::Value>,
    /// Facts about the system under test (cluster versions, `ceph df`, ...):
    /// merged into the results' `environment` section.
    pub environment: BTreeMap<String, serde_json::Value>,
    /// Remarks for the report (e.g. a host where a per-host stage was skipped).
    pub notes: Vec<String>,
    /// Set when the stage decided not to measure (e.g. drop-caches not permitted
    /// and the pipeline allowed that): the stage is recorded as skipped.
    pub skipped: Option<String>,
}

impl StageOutput {
    /// This output as one host's part of a stage that ran on several:
    /// metrics, histograms and series labelled `host=NAME` (series named
    /// after it too, as the engine files series by name), notes and
    /// environment facts prefixed with it.
    pub fn for_host(self, host: &str) -> StageOutput {
        StageOutput {
            metrics: self
                .metrics
                .into_iter()
                .map(|m| m.label("host", host))
                .collect(),
            histograms: self
                .histograms
                .into_iter()
                .map(|h| h.label("host", host))
                .collect(),
            series: self
                .series
                .into_iter()
                .map(|mut s| {
                    s.labels.insert("host".into(), host.into());
                    s.name = format!("{}-{host}", s.name);
                    s
                })
                .collect(),
            outputs: self.outputs,
            environment: self
                .environment
                .into_iter()
                .map(|(k, v)| (format!("{k} ({host})"), v))
                .collect(),
            notes: self
                .notes
                .into_iter()
                .map(|n| format!("{host}: {n}"))
                .collect(),
            skipped: self.skipped.map(|s| format!("{host}: {s}")),
        }
    }

    /// Adds another part's figures, notes and facts (the first value of an
    /// output wins).
    pub fn merge_from(&mut self, part: StageOutput) {
        self.metrics.extend(part.metrics);
        self.histograms.extend(part.histograms);
        self.series.extend(part.series);
        self.notes.extend(part.notes);
        self.environment.extend(part.environment);
        for (k, v) in part.outputs {
            self.outputs.entry(k).or_insert(v);
        }
    }

    /// Adds the `host=all` figures a [`combine`](pipeline_model::combine::combine)
    /// over `host` computed: each becomes the headline in place of the
    /// hosts' own (where there is none, the hosts' figures stay headlines),
    /// and what could not be combined is noted.
    pub fn absorb_host_all(&mut self, all: pipeline_model::combine::Combination) {
        for m in self.metrics.iter_mut() {
            let has_all = all.metrics.iter().any(|a| {
                a.name == m.name
                    && a.unit == m.unit
                    && a.labels
                        .iter()
                        .all(|(k, v)| k == "host" || m.labels.get(k) == Some(v))
                    && a.labels.len() == m.labels.len()
            });
            if has_all {
                m.headline = false;
            }
        }
        self.metrics.extend(all.metrics);
        self.histograms.extend(all.histograms);
        for problem in all.problems {
            self.notes.push(format!("no host=all figure for {problem}"));
        }
    }
}

/// Why a stage failed. Messages are shown to the user as they are.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("{0}")]
    Failed(String),
    #[error("`{command}` failed ({status}){}", tail_suffix(.stderr_tail))]
    CommandFailed {
        command: String,
        status: String,
        stderr_tail: String,
    },
    #[error("timed out after {0}")]
    Timeout(String),
    #[error("cancelled")]
    Cancelled,
    #[error("invalid parameter `{name}`: {message}")]
    Param { name: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A metric the stage does not declare, or declares otherwise.
    #[error(transparent)]
    Metric(#[from] MetricError),
}

fn tail_suffix(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", tail.trim())
    }
}

impl StageError {
    pub fn failed(message: impl Into<String>) -> Self {
        StageError::Failed(message.into())
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StageError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Inputs `plan` can use besides the parameters.
pub struct PlanContext<'a> {
    pub instance_id: &'a str,
    pub ceph: &'a crate::ceph::CephConnection,
    /// The hosts the stage's `on:` names (this machine by default).
    pub targets: &'a [crate::hosts::Host],
}

/// A stage plugin.
pub trait Stage: Send + Sync {
    fn describe(&self) -> StageDescription;

    /// Checks that need more than types (e.g. "`mode: seq` needs a prior write").
    /// Returned messages name the parameter: `(param, message)`.
    fn check(&self, _params: &Params) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The actions `run` would take with these parameters, for `pipeline plan`.
    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action>;

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError>;

    /// The metrics a run with these parameters may report: those
    /// [`describe`](Stage::describe) lists, unless the parameters declare
    /// them ([`StageDescription::metrics_from_param`]). The engine checks a
    /// run's metrics against these.
    fn declared_metrics(&self, _params: &Params) -> Vec<MetricDecl> {
        self.describe().metrics
    }

    /// The JSON Schema of the `with:` mapping, for editors (`pipeline
    /// schema`). Typed stages derive it from their config struct; the
    /// engine's checks use [`StageDescription::params`], not this.
    fn config_schema(&self) -> Option<serde_json::Value> {
        None
    }

    /// Whether a suite's `search:` can find the stage's knee: a stage that
    /// follows a target rate says how the rate is set and which figures
    /// tell what a step achieved (native stages only).
    fn rate_search(&self) -> Option<crate::rate_search::RateSearch> {
        None
    }
}
