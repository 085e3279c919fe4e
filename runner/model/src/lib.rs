//! The results data model: what a stage measures, in a shape every consumer
//! (results.json, the Markdown report, later run comparison and charts) reads
//! the same way.
//!
//! A [`Metric`] always carries a unit and a [`Direction`], because a later run
//! is compared against this one: "381 IOPS" means nothing without knowing that
//! more IOPS is better and that it was 4875 last time.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod aggregate;
pub mod combine;
pub mod histogram;
pub mod unit;

pub use aggregate::Aggregate;
pub use histogram::{Histogram, HistogramError};

/// Whether a larger value of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Throughput, IOPS: more is better.
    Higher,
    /// Latency, errors, retransmits: less is better.
    Lower,
    /// Informational (op size, object count): no better or worse.
    #[default]
    None,
}

/// Labels qualify a metric: `host`, `job`, `op` (read/write), `percentile`, ...
pub type Labels = BTreeMap<String, String>;

/// One measured figure.
// Unknown fields are ignored when reading, not refused (no
// `deny_unknown_fields`): results.json written by a newer pipeline may carry
// more about a metric than this one knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(from = "StoredMetric")]
pub struct Metric {
    /// Stable, machine-friendly name, e.g. `bandwidth`, `iops_avg`, `clat_p99`.
    pub name: String,
    pub value: f64,
    /// Unit of `value`; see [`unit`] for the spellings used by the native stages.
    pub unit: String,
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Shown in the report's summary table.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headline: bool,
    /// How the metric combines across hosts (see [`aggregate`]).
    pub aggregate: Aggregate,
    /// Set on a figure computed from others (the `host=all` row): `aggregate`
    /// is the rule that computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combined: Option<Combined>,
}

/// What a combined figure was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Combined {
    /// The label that told the parts apart (`host`, `client`, `job`); the
    /// combined figure has it set to `all`.
    pub over: String,
    /// How many parts' values it combined.
    pub count: usize,
    /// A sum of rates over only the window in which every part was
    /// measuring, this many seconds (object-gateway load from several
    /// client hosts); absent: over each part's own measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
}

/// One measured figure, as results.json stores it.
///
/// `aggregate` is how the metric combines across hosts. Files written before
/// it existed (schema version 1) lack it; it is then inferred from the unit:
/// rates (`.../s`, `IOPS`) `sum`, anything else `none`.
#[derive(Deserialize, JsonSchema)]
struct StoredMetric {
    /// Stable, machine-friendly name, e.g. `bandwidth`, `iops_avg`, `clat_p99`.
    name: String,
    value: f64,
    /// Unit of `value`, e.g. `B/s`, `IOPS`, `us`, `count`.
    unit: String,
    direction: Direction,
    #[serde(default)]
    labels: Labels,
    /// Shown in the report's summary table.
    #[serde(default)]
    headline: bool,
    /// How the metric combines across hosts: `sum` (rates of hosts that ran
    /// at the same time), `max`, `min`, `mean` (optionally weighted:
    /// `{"mean": {"weight": "ops"}}`), a quantile of the merged histogram
    /// (`{"histogram": {"name": "read_clat", "quantile": 0.99}}`) or `none`.
    /// When absent: `sum` for rates (`.../s`, `IOPS`), else `none`.
    #[serde(default)]
    aggregate: Option<Aggregate>,
    /// Set on a figure computed from others (the `host=all` row): over which
    /// label and how many values; `aggregate` is the rule that computed it.
    #[serde(default)]
    combined: Option<Combined>,
}

impl From<StoredMetric> for Metric {
    fn from(m: StoredMetric) -> Self {
        Metric {
            aggregate: m
                .aggregate
                .unwrap_or_else(|| Aggregate::inferred_from_unit(&m.unit)),
            name: m.name,
            value: m.value,
            unit: m.unit,
            direction: m.direction,
            labels: m.labels,
            headline: m.headline,
            combined: m.combined,
        }
    }
}

impl Metric {
    /// A metric whose rule is, until [`Metric::aggregate`] declares one,
    /// inferred from the unit: `sum` for rates, else `none`.
    pub fn new(name: impl Into<String>, value: f64, unit: &str, direction: Direction) -> Self {
        Metric {
            name: name.into(),
            value,
            unit: unit.to_string(),
            direction,
            labels: Labels::new(),
            headline: false,
            aggregate: Aggregate::inferred_from_unit(unit),
            combined: None,
        }
    }

    /// Declares how the metric combines across hosts (builder style).
    pub fn aggregate(mut self, rule: Aggregate) -> Self {
        self.aggregate = rule;
        self
    }

    /// For a combined figure: how it was computed, e.g. `sum of 2 hosts`.
    pub fn combination(&self) -> Option<String> {
        let c = self.combined.as_ref()?;
        let rule = self.aggregate.describe(&c.over, c.count);
        Some(match c.window_s {
            Some(s) => format!("{rule} over the {s:.2} s all of them measured in"),
            None => rule,
        })
    }

    /// Adds a label (builder style).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Marks the metric for the report's summary table.
    pub fn headline(mut self) -> Self {
        self.headline = true;
        self
    }

    /// `name{k=v,...}`: how a metric is named in logs and the report.
    pub fn display_name(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

/// A time series (e.g. rados bench's per-second "cur MB/s"), kept as a stage
/// artifact so a report or comparison can chart it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Series {
    pub name: String,
    pub unit: String,
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// `[seconds since the start of the measurement, value]`.
    pub points: Vec<[f64; 2]>,
}

impl Series {
    pub fn new(name: impl Into<String>, unit: &str, direction: Direction) -> Self {
        Series {
            name: name.into(),
            unit: unit.to_string(),
            direction,
            labels: Labels::new(),
            points: Vec::new(),
        }
    }
}

/// What a parser extracts from one tool output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Measurement {
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
    /// Distributions the `histogram` rules of `metrics` refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<Histogram>,
}

/// Something this run created on the cluster (or a host), recorded when it was
/// created so that cleanup removes exactly these and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Resource {
    /// `pool`, `image`, `objects`, `bucket`, `file`, ...
    pub kind: String,
    /// Pool name; `pool/image` for images; the pool for `objects`.
    pub name: String,
    /// Instance id of the stage that created it.
    pub created_by: String,
    /// Set when a cleanup stage removed it.
    #[serde(default)]
    pub removed: bool,
}

/// A file a stage left in the run folder.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    pub name: String,
    /// Relative to the run folder.
    pub path: String,
}

/// An external command a stage ran.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CommandRecord {
    /// Shell-quoted, secrets redacted.
    pub command: String,
    /// `exit code 0`, `signal 9`, `timeout after 5.0s`, ...
    pub exit: String,
    pub duration_s: f64,
    /// Raw output files, relative to the run folder.
    pub stdout: String,
    pub stderr: String,
    /// The inventory host it ran on over SSH; absent: this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// User CPU seconds of the command and the processes it waited for:
    /// measured by this machine's kernel for a local command, reported by
    /// the remote shell over SSH. Absent when unknown (the remote session
    /// was killed before it reported; results of older runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_s: Option<f64>,
    /// System CPU seconds, like `cpu_user_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_sys_s: Option<f64>,
    /// Variables set for the command (`NAME=value`, secrets redacted): for
    /// a plugin's command, exactly what it asked for and was granted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

impl CommandRecord {
    /// User plus system CPU seconds, when known.
    pub fn cpu_s(&self) -> Option<f64> {
        Some(self.cpu_user_s? + self.cpu_sys_s?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_without_a_rule_read_as_version_1_files_behave() {
        let rate = r#"{"name":"bw","value":1.0,"unit":"MiB/s","direction":"higher"}"#;
        let latency = r#"{"name":"lat","value":1.0,"unit":"s","direction":"lower"}"#;
        let rate: Metric = serde_json::from_str(rate).unwrap();
        let latency: Metric = serde_json::from_str(latency).unwrap();
        assert_eq!(rate.aggregate, Aggregate::Sum);
        assert_eq!(latency.aggregate, Aggregate::None);
        // Fields from a newer writer are ignored (results stay readable forward).
        let newer = r#"{"name":"x","value":1.0,"unit":"s","direction":"lower","agg":"sum"}"#;
        assert_eq!(serde_json::from_str::<Metric>(newer).unwrap().name, "x");
    }

    #[test]
    fn the_rule_is_written_and_read_back() {
        let m = Metric::new("latency_avg", 0.5, unit::SECONDS, Direction::Lower)
            .aggregate(Aggregate::mean_weighted_by("ops"))
            .label("mode", "write");
        let text = serde_json::to_string(&m).unwrap();
        assert!(
            text.contains(r#""aggregate":{"mean":{"weight":"ops"}}"#),
            "{text}"
        );
        assert!(!text.contains("combined"), "{text}");
        assert_eq!(serde_json::from_str::<Metric>(&text).unwrap(), m);
    }
}
