//! The pipeline file as written: deserialized from YAML with locations, not
//! yet checked. `crate::compile` turns it into a checked `Plan`.

pub mod editor_schema;
pub mod node;
pub mod parse;
pub mod shape;
pub mod spanned;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use node::{Node, NodeValue};
pub use spanned::Sp;

/// A benchmark suite: stages run in order, then cleanup stages always run.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Pipeline",
    description = "A pipeline runner suite (`pipeline run FILE`)."
)]
pub struct PipelineConfig {
    /// Short name; used in the run folder name and the report title.
    pub name: Sp<String>,
    /// What the suite measures and why; shown at the top of the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Variables for templates (`{{ vars.NAME }}`); `--set NAME=VALUE` overrides them.
    #[serde(default)]
    #[schemars(with = "std::collections::BTreeMap<String, Node>")]
    pub vars: Option<Node>,
    /// Environment variables the suite reads (`{{ env.NAME }}`). Only these are
    /// visible. Each entry is a name, or `{name, default, secret}`.
    #[serde(default)]
    #[schemars(with = "Vec<EnvVarConfig>")]
    pub env: Vec<Node>,
    /// How stages reach the Ceph cluster.
    #[serde(default)]
    pub cluster: Option<crate::ceph::ClusterConfig>,
    /// Hosts and groups stages can run on (`on:`). Default: this machine only.
    #[serde(default)]
    pub inventory: Option<crate::hosts::InventoryConfig>,
    /// Client tool sets that stages can run from (`client:` on a stage), by
    /// name, e.g. `{"16.2": {}, "18.2": {root: /var/cache/pipeline/roots/trixie}}`:
    /// this machine's own tools, or a Debian root with another Ceph release.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, ClientConfig>>")]
    pub clients: Option<Node>,
    /// The benchmark stages, run in order.
    pub stages: Vec<StageConfig>,
    /// Stages that ALWAYS run at the end: after success, after a failure, after Ctrl-C.
    #[serde(default)]
    pub cleanup: Vec<StageConfig>,
    /// Run the whole suite this many times (default 1): every stage, then
    /// cleanup, then again from the first stage. Each stage's figures carry
    /// the label `repetition`, as with a stage's own `repeat:` (which cannot
    /// be combined with this).
    #[serde(default)]
    pub repeat: Option<Sp<u32>>,
    /// Pause between runs of the whole suite, e.g. `1m`.
    #[serde(default)]
    pub repeat_pause: Option<Sp<String>>,
    /// Report options.
    #[serde(default)]
    pub report: ReportConfig,
}

/// One of the suite's clients.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// A folder of this machine holding a Debian root with the client tools
    /// (`rados`, `rbd`, `fio`, librados, librbd) of another Ceph release
    /// (`scripts/ceph-root.sh 18.2` builds one); the stage's commands run
    /// there through chroot, against the same cluster. May read `env` and
    /// `vars`. Absent: this machine's own tools.
    #[serde(default)]
    pub root: Option<String>,
}

/// A stage's `client:`: a name of the suite's `clients:`, or a root of its own.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum StageClientSchema {
    /// A name of `clients:`, or a template giving one (`"{{ matrix.client }}"`).
    Name(String),
    /// A root of the stage's own (see `clients:`).
    Root(StageClientRoot),
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct StageClientRoot {
    /// A folder of this machine holding a Debian root with the client tools
    /// of another Ceph release; may be a template.
    root: String,
}

/// A variable name, or `{name: NAME, default: VALUE, secret: true}`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum EnvVarConfig {
    /// Just the name: required to be set.
    Name(Sp<String>),
    /// Name with options.
    Detailed(EnvVarDetail),
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVarDetail {
    pub name: Sp<String>,
    /// Used when the variable is not set; without it, an unset variable is an error.
    #[serde(default)]
    pub default: Option<String>,
    /// Redacted (`***`) wherever it would appear in results, plan output and the report.
    #[serde(default)]
    pub secret: bool,
}

/// One stage: a plugin invocation, possibly expanded over a matrix.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// Unique id; other stages refer to its outputs as `{{ stages.ID.outputs.KEY }}`.
    pub id: Sp<String>,
    /// Plugin name (`pipeline plugins list`), a `.wasm` path, or a registry
    /// reference `oci://HOST[:PORT]/NAMESPACE/NAME:TAG` (or `@sha256:…`).
    pub uses: Sp<String>,
    /// Human description, shown in the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Plugin parameters; values may be templates.
    #[serde(default, rename = "with")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, Node>>")]
    pub with: Option<Node>,
    /// Run once per combination of these value lists; `exclude` removes combinations.
    #[serde(default)]
    #[schemars(with = "Option<MatrixSchema>")]
    pub matrix: Option<Node>,
    /// Wall-clock limit per stage instance, e.g. `90s`, `5m`, `1h30m`.
    #[serde(default)]
    pub timeout: Option<Sp<String>>,
    /// When this stage fails, record the failure and go on: the run is not marked failed.
    #[serde(default)]
    pub continue_on_error: bool,
    /// A template expression; the stage is skipped when it is false, e.g. `vars.with_rbd`.
    #[serde(default)]
    pub when: Option<Sp<String>>,
    /// Hosts to run on: a group or host name, or a list of them (default: this
    /// machine). Per-host stages run once per host, in parallel.
    #[serde(default)]
    #[schemars(with = "Option<OnSchema>")]
    pub on: Option<Node>,
    /// At most this many hosts at once (default 16).
    #[serde(default)]
    pub parallel: Option<Sp<u32>>,
    /// Run the stage's client tools (rados, rbd, fio) from one of the suite's
    /// `clients:` (a name; a template such as `"{{ matrix.client }}"` puts
    /// the client in the matrix), or from `{root: PATH}`. On this machine;
    /// for rados-bench, rbd-bench and fio.
    #[serde(default)]
    #[schemars(with = "Option<StageClientSchema>")]
    pub client: Option<Node>,
    /// Start the measured tool on every host at the same instant, which
    /// the runner picks once all hosts are ready (clocks compared over
    /// SSH). For stages that support it (rados-bench, rbd-bench, fio), with
    /// all hosts at once (`parallel` at least their number).
    #[serde(default)]
    pub sync_start: Option<Sp<bool>>,
    /// Run each instance this many times in a row (default 1). Every
    /// repetition's metrics are kept (label `repetition`); the report leads
    /// with the median and the spread, and `pipeline compare` tests them.
    #[serde(default)]
    pub repeat: Option<Sp<u32>>,
    /// Pause between repetitions, e.g. `10s` (default none).
    #[serde(default)]
    pub repeat_pause: Option<Sp<String>>,
    /// Find the knee: the highest target rate that holds a latency SLO, e.g.
    /// `{slo: {metric: latency_p99, below: 50ms}, start: 100, max: 20000,
    /// precision: 5%}` (s3-bench, swift-bench, fio). The stage's figures
    /// are then a final hold at `hold` (85%) of the knee.
    #[serde(default)]
    pub search: Option<Sp<crate::knee::SearchConfig>>,
    /// Pin a plugin file: its SHA-256 (hex). A mismatch refuses to load it.
    #[serde(default)]
    pub sha256: Option<Sp<String>>,
    /// What a WASM plugin may do. It gets a capability only when its
    /// description asks for it AND this grants it; everything else is refused.
    #[serde(default)]
    pub grants: Option<Sp<Grants>>,
    /// Actions on a timeline beside the stage, e.g. a fault injected at
    /// `at: 5s` and undone at `undo_at: 15s` (or when the stage ends).
    #[serde(default)]
    pub during: Vec<crate::during::DuringConfig>,
}

pub use pipeline_stage_api::grants::{FilesGrant, Grants};

/// Schema-only description of `on`.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum OnSchema {
    One(String),
    Many(Vec<String>),
}

/// One instance per combination of the axes' values, e.g.
/// `matrix: {bs: [4K, 4M], threads: [1, 16]}`; `exclude` drops combinations.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct MatrixSchema {
    /// Combinations to drop: each entry is a partial `{axis: value}` mapping.
    exclude: Option<Vec<std::collections::BTreeMap<String, Node>>>,
    #[serde(flatten)]
    axes: std::collections::BTreeMap<String, Vec<Node>>,
}

/// Report options.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportConfig {
    /// Report title; defaults to the pipeline name.
    #[serde(default)]
    pub title: Option<String>,
    /// Metric names shown in the summary table in addition to each stage's headline metrics.
    #[serde(default)]
    pub summary_metrics: Vec<String>,
    /// Coefficient of variation, in percent, above which a repeated figure
    /// is flagged as too noisy to trust (default 10).
    #[serde(default)]
    pub max_cv: Option<Sp<f64>>,
    /// A baseline run (its folder or results.json; relative paths from the
    /// suite's folder): the run compares itself with it, adds the comparison
    /// to its report, and exits 1 on a regression (`pipeline compare`).
    #[serde(default)]
    pub compare_to: Option<Sp<String>>,
    /// How large a change counts, by metric name (`*` globs; `default` for
    /// the rest; 5% unless set), e.g. `{bandwidth: -5%, "latency_*": +10%}`.
    /// Named metrics are gated besides each stage's headline metrics.
    #[serde(default)]
    pub thresholds: BTreeMap<String, Sp<String>>,
}

/// The JSON Schema of pipeline files, as `validate` checks them. Editors get
/// it with the stages' parameters added ([`editor_schema`]).
pub fn pipeline_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(PipelineConfig)).unwrap_or_default()
}
