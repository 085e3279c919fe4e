//! `results.json`: the machine-readable record of a run, written atomically
//! after every stage so a killed runner keeps what finished. Its shape is
//! published as `schemas/results.schema.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pipeline_model::{Histogram, Metric};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use pipeline_model::{Artifact, CommandRecord, Resource};

pub const RESULTS_FILE: &str = "results.json";
/// The largest results.json `pipeline report`, `compare`, `history` and
/// `cleanup` read. Real ones are kilobytes to a few MiB (a 10-stage suite
/// repeated 10 times on 10 hosts stays far below): every stage output in
/// them is bounded, and raw outputs and series are files of their own.
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;
/// The shape of results.json this binary writes, and the newest it reads.
/// Readers ignore fields they do not know, so adding an optional field needs
/// no new version; anything an older reader would misread (a new status, a
/// field whose meaning changes, a required field) does.
///
/// 2: metrics declare `aggregate` (their rule across hosts) and may carry
/// `combined`; stages may have `histograms`. Version 1 files still load (a
/// missing `aggregate` is inferred from the unit).
pub const SCHEMA_VERSION: u32 = 2;

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
    /// What each watched host is (kernel, CPU, memory, MTUs, sysctls), as
    /// the first stage that watched it read it ([`crate::host_watch::manifest`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_manifests: BTreeMap<String, crate::host_watch::manifest::HostManifest>,
    /// The comparison with the suite's baseline (`report.compare_to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::compare::RunComparison>,
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

impl RunStatus {
    /// As results.json spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
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
    /// `sha256:<hex>` of the plugin file's bytes, so the run can be reproduced
    /// with exactly the plugin it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_sha256: Option<String>,
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
    /// Distributions (HDR histograms) that `histogram` rules of the metrics
    /// refer to, e.g. latencies per host and merged over hosts (`host=all`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<Histogram>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRecord>,
    /// The CPU time its commands used (absent: no commands, or an older runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_cpu: Option<CommandCpu>,
    /// For `repeat: N`: how many ran, and each metric over the repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<crate::repetition::Repetitions>,
    /// The client tools (rados, rbd, fio) the stage ran, per host, with
    /// their versions and the librados/librbd they load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_versions: Vec<crate::client_versions::ClientVersions>,
    /// What the stage's `during:` timeline did, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::during::StageEvent>,
    /// The cluster's state while the stage ran, sampled once a second, and
    /// its flag when the figures were measured on a cluster that was not
    /// clean ([`crate::cluster_watch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster_watch::ClusterWatch>,
    /// The CPUs, disks and NICs of the hosts the stage ran on, sampled once
    /// a second, and what limited its figures ([`crate::host_watch`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::host_watch::HostWatch>,
    /// The hosts were watched long enough to judge and none had a CPU, disk
    /// or NIC at its limit: "none saturated: latency-bound"
    /// ([`crate::host_watch::latency_bound`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latency_bound: bool,
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

/// Why a results.json could not be read. Each names the file; a problem
/// inside it also its line and column.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}:{column}: not valid JSON: {message}", .path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}:{line}:{column}: the file ends in the middle of the JSON document (truncated?)", .path.display())]
    Truncated {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    #[error("{} is not a pipeline results file: {reason}", .path.display())]
    NotResults { path: PathBuf, reason: String },
    #[error("{} is {} MiB, more than a results file holds (at most {} MiB: raw outputs and series live in their own files); it was not written by pipeline, or was altered", .path.display(), .bytes >> 20, MAX_RESULTS_BYTES >> 20)]
    TooLarge { path: PathBuf, bytes: u64 },
    /// Written by a newer pipeline, in a shape this one may misread.
    #[error("{}", too_new_message(path, *found, written_by.as_deref()))]
    TooNew {
        path: PathBuf,
        found: u64,
        /// `runner.version` of the file, when it has one.
        written_by: Option<String>,
    },
    /// Valid JSON of a supported version, but not the shape of results.json.
    #[error("{}:{line}:{column}: {message}", .path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

fn too_new_message(path: &Path, found: u64, written_by: Option<&str>) -> String {
    let (by, remedy) = match written_by {
        Some(v) => (format!("pipeline {v}"), format!("pipeline {v} or newer")),
        None => ("a newer pipeline".into(), "a newer pipeline".into()),
    };
    format!(
        "{} was written by {by} (results schema {found}); this pipeline ({}) reads results schema {SCHEMA_VERSION} and older: use {remedy} to read it",
        path.display(),
        env!("CARGO_PKG_VERSION"),
    )
}

impl RunResults {
    /// Reads `RUN_DIR/results.json` of this or an older schema version.
    /// Fields this version does not know are ignored; a file of a newer
    /// version is refused before its shape is looked at, so it gets a
    /// message about versions rather than about fields.
    pub fn load(run_dir: &Path) -> Result<Self, ResultsError> {
        Self::load_file(&run_dir.join(RESULTS_FILE))
    }

    /// A results file by its own path (`compare` takes either).
    pub fn load_file(path: &Path) -> Result<Self, ResultsError> {
        let path = path.to_path_buf();
        let read_error = |source| ResultsError::Read {
            path: path.clone(),
            source,
        };
        // Refused before it is read: parsing a file of hundreds of MiB takes
        // gigabytes of memory and minutes.
        let bytes = std::fs::metadata(&path).map_err(read_error)?.len();
        if bytes > MAX_RESULTS_BYTES {
            return Err(ResultsError::TooLarge { path, bytes });
        }
        let text = std::fs::read_to_string(&path).map_err(read_error)?;
        Self::parse(&text, &path)
    }

    /// Parses the text of a results file; `path` is only named in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ResultsError> {
        let document: serde_json::Value =
            serde_json::from_str(text).map_err(|e| syntax_error(path, &e))?;
        check_version(&document, path)?;
        serde_json::from_str(text).map_err(|e| ResultsError::Invalid {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: message_without_location(&e),
        })
    }

    /// Writes `results.json` via a temporary file and rename, so readers (and a
    /// runner killed mid-write) never see a half-written file.
    /// Writes results.json atomically: a temporary file, synced, renamed
    /// over it. On any failure (a full disk) the previous complete file
    /// stays and the temporary one is removed.
    pub fn save(&self, run_dir: &Path) -> std::io::Result<()> {
        let tmp = run_dir.join(".results.json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let written = std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|()| std::fs::rename(&tmp, run_dir.join(RESULTS_FILE)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

fn syntax_error(path: &Path, e: &serde_json::Error) -> ResultsError {
    let path = path.to_path_buf();
    let (line, column) = (e.line(), e.column());
    if e.is_eof() {
        ResultsError::Truncated { path, line, column }
    } else {
        ResultsError::Syntax {
            path,
            line,
            column,
            message: message_without_location(e),
        }
    }
}

/// serde_json ends its messages with " at line L column C"; the errors put
/// the location first, as `file:line:col`.
fn message_without_location(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    text.strip_suffix(&suffix).unwrap_or(&text).to_string()
}

/// The version is read from the bare JSON first: a newer file may not fit
/// this version's types at all.
fn check_version(document: &serde_json::Value, path: &Path) -> Result<(), ResultsError> {
    let not_results = |reason: &str| ResultsError::NotResults {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    let serde_json::Value::Object(fields) = document else {
        return Err(not_results("it is not a JSON object"));
    };
    let found = match fields.get("schema_version") {
        None => return Err(not_results("it has no `schema_version`")),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| not_results("`schema_version` is not a whole number"))?,
    };
    if found > u64::from(SCHEMA_VERSION) {
        return Err(ResultsError::TooNew {
            path: path.to_path_buf(),
            found,
            written_by: document
                .pointer("/runner/version")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
        });
    }
    Ok(())
}

/// The JSON Schema of results.json.
pub fn results_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RunResults)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal(schema_version: u64) -> serde_json::Value {
        json!({
            "schema_version": schema_version,
            "run_id": "20261130T093415Z-smoke",
            "pipeline": {"name": "smoke", "file": "pipelines/smoke.yaml"},
            "runner": {"version": "0.1.0"},
            "host": {"hostname": "vm", "os": "Debian", "kernel": "6.1", "cpus": 2},
            "started_at": "2026-11-30T09:34:15Z",
            "status": "succeeded",
            "stages": [{
                "id": "a", "stage": "a", "plugin": "exec", "params": {},
                "status": "succeeded",
                "metrics": [{"name": "x", "value": 1.0, "unit": "s", "direction": "lower"}]
            }]
        })
    }

    fn parse(text: &str) -> Result<RunResults, ResultsError> {
        RunResults::parse(text, Path::new("runs/x/results.json"))
    }

    #[test]
    fn fields_it_does_not_know_are_ignored() {
        let mut doc = minimal(SCHEMA_VERSION.into());
        doc["comparison"] = json!({"baseline": "runs/y"});
        doc["stages"][0]["retries"] = json!(2);
        doc["stages"][0]["metrics"][0]["aggregate"] = json!("sum");
        let r = parse(&doc.to_string()).unwrap();
        assert_eq!(r.stages[0].metrics[0].name, "x");
    }

    #[test]
    fn a_newer_version_is_refused_naming_the_version_and_writer() {
        let newer = u64::from(SCHEMA_VERSION) + 1;
        let mut doc = minimal(newer);
        doc["runner"]["version"] = json!("9.9.9");
        // A field the newer writer made required in a shape we cannot read.
        doc["stages"] = json!({"by_id": {}});
        let e = parse(&doc.to_string()).unwrap_err();
        assert!(
            matches!(&e, ResultsError::TooNew { found, written_by: Some(v), .. } if *found == newer && v == "9.9.9"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "runs/x/results.json was written by pipeline 9.9.9 (results schema {newer}); this pipeline ({}) reads results schema {SCHEMA_VERSION} and older: use pipeline 9.9.9 or newer to read it",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn a_newer_version_without_a_runner_still_names_the_version() {
        let newer = u64::from(SCHEMA_VERSION) + 1;
        let e = parse(&json!({"schema_version": newer}).to_string()).unwrap_err();
        assert!(
            e.to_string()
                .contains("was written by a newer pipeline (results schema")
        );
    }

    #[test]
    fn broken_files_name_the_line_and_column() {
        let text = serde_json::to_string_pretty(&minimal(SCHEMA_VERSION.into())).unwrap();
        let e = parse(&text[..text.len() / 2]).unwrap_err();
        assert!(matches!(e, ResultsError::Truncated { .. }), "{e:?}");
        assert!(e.to_string().starts_with("runs/x/results.json:"), "{e}");

        let e = parse("{\n  \"schema_version\": 1,\n  oops\n}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "runs/x/results.json:3:3: not valid JSON: key must be a string"
        );

        let mut doc = minimal(SCHEMA_VERSION.into());
        doc["stages"][0]["status"] = json!("exploded");
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let e = parse(&text).unwrap_err();
        assert!(matches!(e, ResultsError::Invalid { .. }), "{e:?}");
        assert!(e.to_string().contains("unknown variant `exploded`"), "{e}");
    }

    #[test]
    fn a_results_file_too_large_to_be_real_is_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("results-too-large-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Sparse: the size is what counts, nothing is written.
        let file = std::fs::File::create(dir.join(RESULTS_FILE)).unwrap();
        file.set_len(MAX_RESULTS_BYTES + 1).unwrap();
        let e = RunResults::load(&dir).unwrap_err().to_string();
        assert!(e.ends_with("is 64 MiB, more than a results file holds (at most 64 MiB: raw outputs and series live in their own files); it was not written by pipeline, or was altered"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_that_is_not_a_results_file() {
        let e = parse("[1, 2]").unwrap_err();
        assert_eq!(
            e.to_string(),
            "runs/x/results.json is not a pipeline results file: it is not a JSON object"
        );
        let e = parse("{\"run_id\": \"x\"}").unwrap_err();
        assert!(e.to_string().ends_with("it has no `schema_version`"), "{e}");
    }
}
