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
    /// Metrics the stage reports (documentation; the list is not enforced).
    pub metrics: Vec<MetricSpec>,
    /// Capabilities a sandboxed plugin asks for (`exec`, `files`, `http`);
    /// empty for native stages, which are trusted code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// `true`: the engine runs the stage once per target host (in parallel) and
    /// labels its metrics `host=NAME`. `false`: the stage gets all targets and
    /// orchestrates them itself (iperf3: servers here, clients there).
    pub per_host: bool,
    /// Programs the stage runs on its target hosts; checked before the run starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
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

#[derive(Debug, Clone, Serialize)]
pub struct MetricSpec {
    pub name: String,
    pub unit: String,
    pub doc: String,
}

impl MetricSpec {
    pub fn new(name: &str, unit: &str, doc: &str) -> Self {
        MetricSpec {
            name: name.into(),
            unit: unit.into(),
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

    /// The JSON Schema of the `with:` mapping, for editors (`pipeline
    /// schema`). Typed stages derive it from their config struct; the
    /// engine's checks use [`StageDescription::params`], not this.
    fn config_schema(&self) -> Option<serde_json::Value> {
        None
    }
}
