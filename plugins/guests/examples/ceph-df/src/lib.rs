//! `ceph-df`: runs `ceph <cluster args> df -f json` through the runner and
//! turns it into capacity metrics: raw usage of the cluster and, per pool,
//! stored bytes, objects, % used and what can still be written. Built
//! against `pipeline:stage@0.2.0` (the SDK's root API): each metric is
//! declared once below and every value is made from its declaration.

use pipeline_plugin_sdk::*;
use serde_json::Value as Json;

// What it reports. Capacity is information, neither better nor worse; the
// figures are the cluster's, the same from every host, so they do not add up
// across hosts (no rule: `Aggregate::None`).
const RAW_USED_PERCENT: MetricSpec =
    MetricSpec::info("raw_used_percent", "%", "raw capacity used").headline();
const RAW_TOTAL: MetricSpec = MetricSpec::info("raw_total", "B", "raw capacity");
const RAW_AVAIL: MetricSpec = MetricSpec::info("raw_avail", "B", "raw capacity available");
const POOL_STORED: MetricSpec =
    MetricSpec::info("pool_stored", "B", "bytes stored in a pool (label pool)");
const POOL_OBJECTS: MetricSpec = MetricSpec::info("pool_objects", "count", "objects in a pool");
const POOL_USED_PERCENT: MetricSpec = MetricSpec::info(
    "pool_used_percent",
    "%",
    "share of the pool's possible capacity in use",
);
const POOL_MAX_AVAIL: MetricSpec = MetricSpec::info(
    "pool_max_avail",
    "B",
    "bytes that can still be written to the pool",
);

struct CephDf;

impl Plugin for CephDf {
    fn describe() -> Description {
        Description::new(
            "ceph-df",
            "0.1.0",
            "Cluster and per-pool capacity utilization from `ceph df`",
        )
        .param(ParamSpec::optional(
            "pools",
            ParamType::list_of(ScalarType::Text),
            "only these pools (default: every pool)",
        ))
        .param(ParamSpec::with_default(
            "max_raw_used_percent",
            ParamType::number(),
            Value::Number(100.0),
            "fail the stage when the cluster's raw usage is above this (guards benchmarks on a full cluster)",
        ))
        .output("raw_used_percent", "raw capacity used, in percent")
        .metric(RAW_USED_PERCENT)
        .metric(RAW_TOTAL)
        .metric(RAW_AVAIL)
        .metric(POOL_STORED)
        .metric(POOL_OBJECTS)
        .metric(POOL_USED_PERCENT)
        .metric(POOL_MAX_AVAIL)
        .capability(Capability::Exec)
    }

    fn plan(_params: &Params, cluster: &Cluster) -> Vec<Action> {
        let mut argv = vec!["ceph".to_string()];
        argv.extend(cluster.cli_args.iter().cloned());
        argv.extend(["df".into(), "-f".into(), "json".into()]);
        vec![Action {
            summary: "cluster capacity".into(),
            command: Some(argv),
            destructive: false,
        }]
    }

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {
        host.progress("ceph df");
        let text = host.ceph_tool("ceph", &["df", "-f", "json"])?;
        let df: Json = serde_json::from_str(&text)
            .map_err(|e| Error::failed(format!("`ceph df -f json` printed invalid JSON: {e}")))?;
        let wanted = params.strings("pools");
        let mut out = parse(&df, &wanted)?;
        let used = out.1;
        let limit = params.f64("max_raw_used_percent").unwrap_or(100.0);
        if used > limit {
            return Err(Error::failed(format!(
                "the cluster's raw usage is {used:.1}%, above max_raw_used_percent={limit}"
            )));
        }
        out.0 = out.0.output("raw_used_percent", Value::Number(used));
        host.info(&format!("raw usage {used:.4}%"));
        Ok(out.0)
    }
}

/// Metrics of a `ceph df -f json` document, and the raw usage in percent.
fn parse(df: &Json, wanted: &[String]) -> Result<(Output, f64), Error> {
    let num = |v: &Json, key: &str| v.get(key).and_then(Json::as_f64);
    let stats = df
        .get("stats")
        .ok_or_else(|| Error::failed("`ceph df` output has no `stats`"))?;
    let total = num(stats, "total_bytes").unwrap_or(0.0);
    let avail = num(stats, "total_avail_bytes").unwrap_or(0.0);
    let used_ratio = num(stats, "total_used_raw_ratio").unwrap_or(0.0);
    let used = used_ratio * 100.0;
    let mut out = Output::new()
        .metric(RAW_USED_PERCENT.value(used))
        .metric(RAW_TOTAL.value(total))
        .metric(RAW_AVAIL.value(avail));
    let pools = df
        .get("pools")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    for pool in &pools {
        let name = pool.get("name").and_then(Json::as_str).unwrap_or("?");
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        let Some(s) = pool.get("stats") else { continue };
        let metric = |m: &MetricSpec, v: f64| m.value(v).label("pool", name);
        out.push_metric(metric(&POOL_STORED, num(s, "stored").unwrap_or(0.0)));
        out.push_metric(metric(&POOL_OBJECTS, num(s, "objects").unwrap_or(0.0)));
        // Ceph reports a ratio (0..1) under the name percent_used.
        out.push_metric(metric(
            &POOL_USED_PERCENT,
            num(s, "percent_used").unwrap_or(0.0) * 100.0,
        ));
        out.push_metric(metric(&POOL_MAX_AVAIL, num(s, "max_avail").unwrap_or(0.0)));
    }
    for w in wanted {
        if !pools
            .iter()
            .any(|p| p.get("name").and_then(Json::as_str) == Some(w))
        {
            return Err(Error::invalid_param(
                "pools",
                &format!("no pool `{w}` in `ceph df`"),
            ));
        }
    }
    Ok((out, used))
}

export_plugin!(CephDf);
