//! `rados-bench`: `rados bench` write/seq/rand against a pool, parsed into
//! metrics (bandwidth in MiB/s — rados' "MB/sec" is 2^20 B/s — IOPS and
//! latency with their spreads) and the per-second series.
//!
//! Writes always use `--no-cleanup` (cleanup messages would land inside the
//! JSON output; and seq/rand need the objects) and a `--run-name` unique to
//! this run, so reads find exactly this run's objects and `ceph-cleanup`
//! removes exactly them.

use std::time::Duration;

use pipeline_engine::context::StageContext;
use pipeline_engine::exec::CommandSpec;
use pipeline_engine::params::{ParamSpec, ParamType, Params, ParamsExt};
use pipeline_engine::stage::{
    Action, MetricSpec, PlanContext, Stage, StageDescription, StageError, StageOutput,
};
use pipeline_model::unit;
use serde_json::json;

use super::{BENCH_OBJECTS, bench_run_name};

pub struct RadosBench;

fn argv(
    params: &Params,
    ceph: &pipeline_engine::ceph::CephConnection,
    run_name: &str,
) -> Vec<String> {
    let pool = params.str("pool").unwrap_or_default();
    let mode = params.str("mode").unwrap_or("write");
    let seconds = params.i64("seconds").unwrap_or(10).to_string();
    let threads = params.i64("concurrent_ops").unwrap_or(16).to_string();
    let mut args: Vec<String> = vec![
        "-p".into(),
        pool.into(),
        "bench".into(),
        seconds,
        mode.into(),
        "-t".into(),
        threads,
    ];
    if mode == "write" {
        args.extend([
            "-b".into(),
            params.u64("block_size").unwrap_or(4 << 20).to_string(),
        ]);
        if let Some(max) = params.i64("max_objects") {
            args.extend(["--max-objects".into(), max.to_string()]);
        }
    }
    args.extend(["--run-name".into(), run_name.into(), "--no-cleanup".into()]);
    if params.str("format") == Some("json") {
        args.extend(["--format".into(), "json".into()]);
    }
    args.extend(params.strings("extra_args"));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ceph.argv("rados", &refs)
}

fn run_name(params: &Params, run_id: &str) -> String {
    params
        .str("run_name")
        .map_or_else(|| bench_run_name(run_id), str::to_string)
}

impl Stage for RadosBench {
    fn describe(&self) -> StageDescription {
        StageDescription {
            capabilities: Vec::new(),
            per_host: true,
            requires: vec!["rados".into()],
            name: "rados-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary:
                "rados bench write/seq/rand on a pool: bandwidth, IOPS, latency, per-second series."
                    .into(),
            params: vec![
                ParamSpec::required(
                    "pool",
                    ParamType::String,
                    "Pool to benchmark (usually `{{ stages.POOL_STAGE.outputs.pool }}`).",
                ),
                ParamSpec::with_default(
                    "mode",
                    ParamType::enumeration(&["write", "seq", "rand"]),
                    json!("write"),
                    "Benchmark mode; seq and rand read what a write of this run left.",
                ),
                ParamSpec::with_default(
                    "seconds",
                    ParamType::Integer,
                    json!(10),
                    "Duration (seq ends early when the objects run out).",
                ),
                ParamSpec::with_default(
                    "block_size",
                    ParamType::Size,
                    json!(4 << 20),
                    "Object size for writes (rados -b).",
                ),
                ParamSpec::with_default(
                    "concurrent_ops",
                    ParamType::Integer,
                    json!(16),
                    "Operations in flight (rados -t).",
                ),
                ParamSpec::optional(
                    "max_objects",
                    ParamType::Integer,
                    "Stop a write after this many objects (bounds the data stored).",
                ),
                ParamSpec::optional(
                    "run_name",
                    ParamType::String,
                    "rados --run-name; default unique to this run, shared by its write and reads.",
                ),
                ParamSpec::with_default(
                    "format",
                    ParamType::enumeration(&["text", "json"]),
                    json!("text"),
                    "Output format to request and parse.",
                ),
                ParamSpec::with_default(
                    "extra_args",
                    ParamType::list(ParamType::String),
                    json!([]),
                    "More arguments for rados bench.",
                ),
                ParamSpec::optional(
                    "command_timeout",
                    ParamType::Duration,
                    "Kill rados after this long (default: 2 x seconds + 60 s; a full cluster hangs forever).",
                ),
            ],
            outputs: Vec::new(),
            metrics: vec![
                MetricSpec::new(
                    "bandwidth",
                    unit::MIB_PER_S,
                    "Average bandwidth (rados' MB/sec, which is MiB/s).",
                ),
                MetricSpec::new(
                    "iops_avg",
                    unit::OPS_PER_S,
                    "Average IOPS; also iops_stddev/min/max.",
                ),
                MetricSpec::new(
                    "latency_avg",
                    unit::SECONDS,
                    "Average latency; also latency_stddev/min/max.",
                ),
                MetricSpec::new("ops", unit::COUNT, "Operations completed."),
            ],
        }
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if params.i64("seconds").is_some_and(|s| s < 1) {
            p.push(("seconds".into(), "must be at least 1".into()));
        }
        if params.i64("concurrent_ops").is_some_and(|t| t < 1) {
            p.push(("concurrent_ops".into(), "must be at least 1".into()));
        }
        if params.u64("block_size") == Some(0) {
            p.push(("block_size".into(), "must be more than 0".into()));
        }
        p
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        let mut actions = vec![Action::command(
            format!("rados bench {}", params.str("mode").unwrap_or("write")),
            argv(params, ctx.ceph, &run_name(params, "<run id>")),
        )];
        if params.str("mode") == Some("write") {
            actions.push(Action::note(
                "objects are left for reads; ceph-cleanup removes them (rados cleanup --run-name)",
            ));
        }
        actions
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let pool = params.str("pool").unwrap_or_default().to_string();
        let mode = params.str("mode").unwrap_or("write").to_string();
        let run_name = run_name(params, &ctx.run_id);
        let seconds = params.i64("seconds").unwrap_or(10) as f64;
        let timeout = params
            .duration("command_timeout")
            .unwrap_or(Duration::from_secs_f64(seconds * 2.0 + 60.0));
        if mode == "write" {
            // Recorded before the write: a write killed halfway still leaves objects.
            ctx.record_created(BENCH_OBJECTS, &format!("{pool}/{run_name}"));
        }
        let spec = CommandSpec::new(argv(params, &ctx.ceph, &run_name)).timeout(timeout);
        let out = ctx.run(&format!("rados-bench-{mode}"), &spec)?;
        if !out.success() {
            return Err(StageError::CommandFailed {
                command: spec.display(),
                status: out.exit.to_string(),
                stderr_tail: out.tail(),
            });
        }
        let measurement = pipeline_parsers::rados_bench::parse(&out.stdout)
            .map_err(|e| StageError::failed(format!("cannot read rados bench output: {e}")))?;
        Ok(StageOutput {
            metrics: measurement.metrics,
            series: measurement.series,
            ..Default::default()
        })
    }
}
