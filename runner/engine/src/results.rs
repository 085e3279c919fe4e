//! `results.json`: the machine-readable record of a run, written atomically
//! after every stage so a killed runner keeps what finished. Its shape is
//! published as `schemas/results.schema.json`.

use std::collections::BTreeMap;
use std::path::Path;

use pipeline_model::Metric;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use pipeline_model::{Artifact, CommandRecord, Resource};

pub const RESULTS_FILE: &str = "results.json";
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunResults {
    pub schema_version: u32,
    /// `<UTC timestamp>-<pipeline name>`, also the run folder's default name.
    pub run_id: String,
    pub pipeline: PipelineInfo,
    pub runner: RunnerInfo,
    pub host: HostInfo,
    /// RFC 3339, UTC.
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    pub status: RunStatus,
    /// Resolved variables (secrets redacted).
    #[serde(default)]
    pub vars: BTreeMap<String, serde_json::Value>,
    /// The benchmark stages, one record per stage instance (matrix expanded).
    pub stages: Vec<StageRecord>,
    /// The cleanup stages, which always run.
    #[serde(default)]
    pub cleanup: Vec<StageRecord>,
    /// Everything this run created (pools, images, ...), and whether cleanup removed it.
    #[serde(default)]
    pub created: Vec<Resource>,
    /// Facts about the system under test, gathered by stages such as `ceph-info`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PipelineInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The suite file as given on the command line.
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
    /// `report.title` of the suite, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_title: Option<String>,
    /// `report.summary_metrics`: shown in the summary table besides headline metrics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary_metrics: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GitInfo {
    pub commit: String,
    /// The suite file has uncommitted changes.
    pub dirty: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunnerInfo {
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpus: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StageStatus {
    Succeeded,
    Failed,
    Skipped,
    Cancelled,
}

impl StageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Succeeded => "succeeded",
            StageStatus::Failed => "failed",
            StageStatus::Skipped => "skipped",
            StageStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StageRecord {
    /// Instance id: the stage id, plus matrix values, e.g. `rados-write[bs=4M]`.
    pub id: String,
    /// The `id` in the pipeline file.
    pub stage: String,
    pub plugin: String,
    /// For a plugin loaded from a file (WASM), where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub matrix: BTreeMap<String, serde_json::Value>,
    /// Resolved parameters (secrets redacted).
    pub params: serde_json::Value,
    pub status: StageStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the stage was skipped (`when` was false, or the stage said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continue_on_error: bool,
    /// Remarks from the stage (e.g. hosts where it did not measure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRecord>,
    /// The CPU time its commands used (absent: no commands, or an older runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_cpu: Option<CommandCpu>,
}

/// CPU time (user + system) of a stage's commands, summed over the commands
/// whose CPU is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CommandCpu {
    /// Seconds used by commands on this machine (where benchmark clients
    /// such as rados bench and fio run).
    pub local_s: f64,
    /// Seconds used by commands on other hosts, as their shells reported.
    pub remote_s: f64,
    /// Commands whose CPU is unknown, not in the sums.
    pub unknown: usize,
}

impl CommandCpu {
    pub fn of(commands: &[CommandRecord]) -> Option<CommandCpu> {
        if commands.is_empty() {
            return None;
        }
        let mut cpu = CommandCpu {
            local_s: 0.0,
            remote_s: 0.0,
            unknown: 0,
        };
        for c in commands {
            match (c.cpu_s(), &c.host) {
                (Some(s), None) => cpu.local_s += s,
                (Some(s), Some(_)) => cpu.remote_s += s,
                (None, _) => cpu.unknown += 1,
            }
        }
        Some(cpu)
    }
}

impl RunResults {
    pub fn load(run_dir: &Path) -> Result<Self, String> {
        let path = run_dir.join(RESULTS_FILE);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes `results.json` via a temporary file and rename, so readers (and a
    /// runner killed mid-write) never see a half-written file.
    pub fn save(&self, run_dir: &Path) -> std::io::Result<()> {
        let tmp = run_dir.join(".results.json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, text + "\n")?;
        let file = std::fs::File::open(&tmp)?;
        file.sync_all()?;
        std::fs::rename(&tmp, run_dir.join(RESULTS_FILE))
    }
}

/// The JSON Schema of results.json.
pub fn results_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RunResults)).unwrap_or_default()
}
