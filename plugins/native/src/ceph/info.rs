//! `ceph-info`: what the cluster under test was, recorded with the results
//! (versions, status, OSD tree, capacity, pools, the monitors' configuration
//! database) so that a later run knows
//! what it is compared against.

use pipeline_model::unit;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, OutputSpec, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admin;

pub struct CephInfo;

// States of the cluster, not work done: never combined across hosts.
pub const OSDS_UP: MetricDecl = MetricDecl::info("osds_up", unit::COUNT, "OSDs up.");
pub const RAW_BYTES_TOTAL: MetricDecl =
    MetricDecl::info("raw_bytes_total", unit::BYTES, "Raw capacity.");
pub const RAW_BYTES_USED: MetricDecl =
    MetricDecl::info("raw_bytes_used", unit::BYTES, "Raw capacity used.");

/// `with:` of a `ceph-info` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fail unless the cluster reports HEALTH_OK (benchmarks of a degraded cluster mislead).
    #[serde(default)]
    pub require_health_ok: bool,
}

/// (environment key, `ceph` arguments).
const QUERIES: &[(&str, &[&str])] = &[
    ("ceph versions", &["versions"]),
    ("ceph status", &["status"]),
    ("ceph osd tree", &["osd", "tree"]),
    // Each OSD's hostname and disks: a saturated disk is named by its OSD.
    ("ceph osd metadata", &["osd", "metadata"]),
    ("ceph df", &["df"]),
    ("ceph osd pool ls detail", &["osd", "pool", "ls", "detail"]),
    // The settings the monitors hold (not ceph.conf's): what `pipeline
    // compare` lists when two runs' clusters were set up differently.
    ("ceph config dump", &["config", "dump"]),
];

impl TypedStage for CephInfo {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "ceph-info",
            summary: "Record the cluster: versions, status, OSD tree and metadata, df, pool details, config dump.",
            per_host: true,
            requires: vec!["ceph"],
            outputs: vec![
                OutputSpec::new("fsid", "Cluster id."),
                OutputSpec::new("version", "The Ceph version the monitors run."),
                OutputSpec::new("health", "HEALTH_OK, HEALTH_WARN or HEALTH_ERR."),
            ],
            metrics: vec![OSDS_UP, RAW_BYTES_TOTAL, RAW_BYTES_USED],
        }
    }

    fn plan(&self, _config: &Config, ctx: &PlanContext) -> Vec<Action> {
        QUERIES
            .iter()
            .map(|(name, args)| {
                let mut a: Vec<&str> = args.to_vec();
                a.extend(["--format", "json"]);
                Action::command(*name, ctx.ceph.argv("ceph", &a))
            })
            .collect()
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let mut output = StageOutput::default();
        for (name, args) in QUERIES {
            let mut a: Vec<&str> = args.to_vec();
            a.extend(["--format", "json"]);
            let spec = admin(&ctx.ceph, "ceph", &a);
            let out = ctx.run_ok(&name.replace(' ', "-"), &spec)?;
            let value: Value = serde_json::from_str(out.whole_stdout(&spec.display())?.trim())
                .map_err(|e| StageError::failed(format!("`{name}` did not print JSON: {e}")))?;
            output.environment.insert((*name).to_string(), value);
        }
        let status = &output.environment["ceph status"];
        let health = status
            .pointer("/health/status")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        output.outputs.insert(
            "fsid".into(),
            status.get("fsid").cloned().unwrap_or(Value::Null),
        );
        output.outputs.insert("health".into(), json!(health));
        let version = output.environment["ceph versions"]
            .pointer("/mon")
            .and_then(Value::as_object)
            .and_then(|m| m.keys().next().cloned())
            .unwrap_or_default();
        output.outputs.insert("version".into(), json!(version));
        let num = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_f64);
        if let Some(up) =
            num(status, "/osdmap/num_up_osds").or_else(|| num(status, "/osdmap/osdmap/num_up_osds"))
        {
            output.metrics.push(OSDS_UP.value(up));
        }
        let df = &output.environment["ceph df"];
        for (decl, pointer) in [
            (RAW_BYTES_TOTAL, "/stats/total_bytes"),
            (RAW_BYTES_USED, "/stats/total_used_raw_bytes"),
        ] {
            if let Some(v) = num(df, pointer) {
                output.metrics.push(decl.value(v));
            }
        }
        if config.require_health_ok && health != "HEALTH_OK" {
            return Err(StageError::failed(format!(
                "the cluster reports {health}; `require_health_ok` is set"
            )));
        }
        Ok(output)
    }
}
