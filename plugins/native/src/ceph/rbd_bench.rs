//! `rbd-bench`: `rbd bench` on an image this run creates in a pool (the
//! image is recorded and removed by `ceph-cleanup`).

use std::time::Duration;

use pipeline_model::unit;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::params::{ParamSpec, ParamType, Params, ParamsExt};
use pipeline_stage_api::stage::{
    Action, MetricSpec, OutputSpec, PlanContext, Stage, StageDescription, StageError, StageOutput,
};
use serde_json::json;

use super::{IMAGE, admin};

pub struct RbdBench;

fn image_spec(params: &Params) -> String {
    format!(
        "{}/{}",
        params.str("pool").unwrap_or_default(),
        params.str("image").unwrap_or("pipeline-bench")
    )
}

fn create_args(params: &Params) -> Vec<String> {
    let mib = params
        .u64("image_size")
        .unwrap_or(1 << 30)
        .div_ceil(1 << 20);
    vec![
        "create".into(),
        image_spec(params),
        "--size".into(),
        format!("{mib}M"),
    ]
}

fn bench_argv(params: &Params, ceph: &pipeline_stage_api::ceph::CephConnection) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "bench".into(),
        "--io-type".into(),
        params.str("io_type").unwrap_or("write").into(),
        "--io-pattern".into(),
        params.str("io_pattern").unwrap_or("seq").into(),
        "--io-size".into(),
        params.u64("io_size").unwrap_or(4096).to_string(),
        "--io-threads".into(),
        params.i64("io_threads").unwrap_or(16).to_string(),
        "--io-total".into(),
        params.u64("io_total").unwrap_or(256 << 20).to_string(),
    ];
    if let Some(mix) = params.i64("rw_mix_read") {
        args.extend(["--rw-mix-read".into(), mix.to_string()]);
    }
    args.push(image_spec(params));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ceph.argv("rbd", &refs)
}

impl Stage for RbdBench {
    fn describe(&self) -> StageDescription {
        StageDescription {
            capabilities: Vec::new(),
            per_host: true,
            requires: vec!["rbd".into()],
            name: "rbd-bench".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary:
                "rbd bench on an image created by this run: IOPS, bandwidth, per-second series."
                    .into(),
            params: vec![
                ParamSpec::required(
                    "pool",
                    ParamType::String,
                    "Pool (with the rbd application enabled).",
                ),
                ParamSpec::with_default(
                    "image",
                    ParamType::String,
                    json!("pipeline-bench"),
                    "Image name; created if missing, refused if it exists and this run did not create it.",
                ),
                ParamSpec::with_default(
                    "image_size",
                    ParamType::Size,
                    json!(1u64 << 30),
                    "Image size.",
                ),
                ParamSpec::with_default(
                    "io_type",
                    ParamType::enumeration(&["read", "write", "readwrite", "rw"]),
                    json!("write"),
                    "rbd bench --io-type.",
                ),
                ParamSpec::with_default(
                    "io_pattern",
                    ParamType::enumeration(&["seq", "rand", "full"]),
                    json!("seq"),
                    "rbd bench --io-pattern.",
                ),
                ParamSpec::with_default("io_size", ParamType::Size, json!(4096), "Bytes per I/O."),
                ParamSpec::with_default(
                    "io_threads",
                    ParamType::Integer,
                    json!(16),
                    "I/Os in flight.",
                ),
                ParamSpec::with_default(
                    "io_total",
                    ParamType::Size,
                    json!(256u64 << 20),
                    "Total bytes to transfer.",
                ),
                ParamSpec::optional(
                    "rw_mix_read",
                    ParamType::Integer,
                    "Read percentage for readwrite.",
                ),
                ParamSpec::with_default(
                    "command_timeout",
                    ParamType::Duration,
                    json!(600),
                    "Kill rbd bench after this long.",
                ),
            ],
            outputs: vec![OutputSpec::new("image", "`pool/image` benchmarked.")],
            metrics: vec![
                MetricSpec::new("iops", unit::OPS_PER_S, "Operations per second."),
                MetricSpec::new("bandwidth", unit::BYTES_PER_S, "Bytes per second."),
            ],
        }
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if params.u64("io_size") == Some(0) {
            p.push(("io_size".into(), "must be more than 0".into()));
        }
        if let (Some(total), Some(size)) = (params.u64("io_total"), params.u64("io_size"))
            && total < size
        {
            p.push(("io_total".into(), "must be at least io_size".into()));
        }
        if params
            .i64("rw_mix_read")
            .is_some_and(|m| !(0..=100).contains(&m))
        {
            p.push(("rw_mix_read".into(), "is a percentage, 0..100".into()));
        }
        p
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        let create: Vec<String> = create_args(params);
        let refs: Vec<&str> = create.iter().map(String::as_str).collect();
        vec![
            Action::command(
                "create image (unless this run created it)",
                ctx.ceph.argv("rbd", &refs),
            ),
            Action::command("rbd bench", bench_argv(params, ctx.ceph)),
        ]
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let image = image_spec(params);
        if !ctx.was_created(IMAGE, &image) {
            let pool = params.str("pool").unwrap_or_default();
            let ls = admin(&ctx.ceph, "rbd", &["ls", pool, "--format", "json"]);
            let out = ctx.run_ok("rbd-ls", &ls)?;
            let images: Vec<String> = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
            if images.iter().any(|i| image.ends_with(&format!("/{i}"))) {
                return Err(StageError::failed(format!(
                    "image `{image}` already exists and this run did not create it; it is left untouched. Choose another `image` name"
                )));
            }
            let args = create_args(params);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let spec = admin(&ctx.ceph, "rbd", &refs);
            ctx.run_ok("rbd-create", &spec)?;
            ctx.record_created(IMAGE, &image);
        }
        let timeout = params
            .duration("command_timeout")
            .unwrap_or(Duration::from_secs(600));
        let spec = CommandSpec::new(bench_argv(params, &ctx.ceph)).timeout(timeout);
        let out = ctx.run_ok("rbd-bench", &spec)?;
        let measurement = pipeline_parsers::rbd_bench::parse(&out.stdout)
            .map_err(|e| StageError::failed(format!("cannot read rbd bench output: {e}")))?;
        let mut output = StageOutput {
            metrics: measurement.metrics,
            series: measurement.series,
            ..Default::default()
        };
        output.outputs.insert("image".into(), json!(image));
        Ok(output)
    }
}
