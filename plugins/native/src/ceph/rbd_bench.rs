//! `rbd-bench`: `rbd bench` on an image this run creates in a pool (the
//! image is recorded and removed by `ceph-cleanup`).

use pipeline_model::{Aggregate, Direction, unit};
use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::{MetricDecl, adopt_all};
use pipeline_stage_api::stage::{Action, OutputSpec, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, ByteSize, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{IMAGE, admin};

/// What `rbd bench` reports (label `mode`, the io type; with readwrite also
/// per `op`). Across hosts the rates and the op count add up.
pub const METRICS: &[MetricDecl] = &[
    MetricDecl::rate(
        "iops",
        unit::IOPS,
        "Operations per second (also per op with readwrite).",
    )
    .headline(),
    MetricDecl::rate("bandwidth", unit::BYTES_PER_S, "Bytes per second.").headline(),
    MetricDecl::declare(
        "ops",
        unit::COUNT,
        Direction::None,
        Aggregate::Sum,
        "Operations completed.",
    ),
    MetricDecl::info("elapsed", unit::SECONDS, "Seconds the benchmark ran."),
    MetricDecl::info("op_size", unit::BYTES, "Bytes per operation (io_size)."),
];

/// `with:` of an `rbd-bench` stage.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Pool (with the rbd application enabled).
    pub pool: String,
    /// Image name; created if missing, refused if it exists and this run did not create it.
    #[serde(default = "default_image")]
    pub image: String,
    /// Image size.
    #[serde(default = "one_gib")]
    pub image_size: ByteSize,
    /// rbd bench --io-type.
    #[serde(default)]
    pub io_type: IoType,
    /// rbd bench --io-pattern.
    #[serde(default)]
    pub io_pattern: IoPattern,
    /// Bytes per I/O.
    #[serde(default = "four_kib")]
    pub io_size: ByteSize,
    /// I/Os in flight.
    #[serde(default = "sixteen")]
    pub io_threads: u32,
    /// Total bytes to transfer.
    #[serde(default = "quarter_gib")]
    pub io_total: ByteSize,
    /// Read percentage for readwrite.
    #[serde(default)]
    pub rw_mix_read: Option<i64>,
    /// Kill rbd bench after this long.
    #[serde(default = "ten_minutes")]
    pub command_timeout: Seconds,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IoType {
    Read,
    #[default]
    Write,
    Readwrite,
    Rw,
}

impl IoType {
    fn as_str(self) -> &'static str {
        match self {
            IoType::Read => "read",
            IoType::Write => "write",
            IoType::Readwrite => "readwrite",
            IoType::Rw => "rw",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IoPattern {
    #[default]
    Seq,
    Rand,
    Full,
}

impl IoPattern {
    fn as_str(self) -> &'static str {
        match self {
            IoPattern::Seq => "seq",
            IoPattern::Rand => "rand",
            IoPattern::Full => "full",
        }
    }
}

fn default_image() -> String {
    "pipeline-bench".into()
}

fn one_gib() -> ByteSize {
    ByteSize::gib(1)
}

fn four_kib() -> ByteSize {
    ByteSize::kib(4)
}

fn sixteen() -> u32 {
    16
}

fn quarter_gib() -> ByteSize {
    ByteSize::mib(256)
}

fn ten_minutes() -> Seconds {
    Seconds::secs(600)
}

pub struct RbdBench;

fn image_spec(config: &Config) -> String {
    format!("{}/{}", config.pool, config.image)
}

fn create_args(config: &Config) -> Vec<String> {
    let mib = config.image_size.0.div_ceil(1 << 20);
    vec![
        "create".into(),
        image_spec(config),
        "--size".into(),
        format!("{mib}M"),
    ]
}

fn bench_argv(config: &Config, ceph: &CephConnection) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "bench".into(),
        "--io-type".into(),
        config.io_type.as_str().into(),
        "--io-pattern".into(),
        config.io_pattern.as_str().into(),
        "--io-size".into(),
        config.io_size.0.to_string(),
        "--io-threads".into(),
        config.io_threads.to_string(),
        "--io-total".into(),
        config.io_total.0.to_string(),
    ];
    if let Some(mix) = config.rw_mix_read {
        args.extend(["--rw-mix-read".into(), mix.to_string()]);
    }
    args.push(image_spec(config));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ceph.argv("rbd", &refs)
}

impl TypedStage for RbdBench {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "rbd-bench",
            summary: "rbd bench on an image created by this run: IOPS, bandwidth, per-second series.",
            per_host: true,
            requires: vec!["rbd"],
            outputs: vec![OutputSpec::new("image", "`pool/image` benchmarked.")],
            metrics: METRICS.to_vec(),
        }
    }

    fn sync_start(&self) -> bool {
        true
    }

    fn client_root(&self) -> bool {
        true
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if config.io_size.0 == 0 {
            p.push(("io_size".into(), "must be more than 0".into()));
        }
        if config.io_threads < 1 {
            p.push(("io_threads".into(), "must be at least 1".into()));
        }
        if config.io_total < config.io_size {
            p.push(("io_total".into(), "must be at least io_size".into()));
        }
        if config.rw_mix_read.is_some_and(|m| !(0..=100).contains(&m)) {
            p.push(("rw_mix_read".into(), "is a percentage, 0..100".into()));
        }
        p
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let mut config = config.clone();
        if !super::only_here(ctx.targets) {
            config.image.push_str("-<host>");
        }
        let config = &config;
        let create: Vec<String> = create_args(config);
        let refs: Vec<&str> = create.iter().map(String::as_str).collect();
        vec![
            Action::command(
                "create image (unless this run created it)",
                ctx.ceph.argv("rbd", &refs),
            ),
            Action::command("rbd bench", bench_argv(config, ctx.ceph)),
        ]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        // Several hosts at once: an image each (they would fight over one's lock).
        let mut config = config.clone();
        config.image = super::per_host_name(&config.image, &ctx.host, &ctx.targets);
        let config = &config;
        let image = image_spec(config);
        if !ctx.was_created(IMAGE, &image) {
            let ls = admin(&ctx.ceph, "rbd", &["ls", &config.pool, "--format", "json"]);
            let out = ctx.run_ok("rbd-ls", &ls)?;
            let images: Vec<String> =
                serde_json::from_str(out.whole_stdout(&ls.display())?.trim()).unwrap_or_default();
            if images.iter().any(|i| image.ends_with(&format!("/{i}"))) {
                return Err(StageError::failed(format!(
                    "image `{image}` already exists and this run did not create it; it is left untouched. Choose another `image` name"
                )));
            }
            let args = create_args(config);
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let spec = admin(&ctx.ceph, "rbd", &refs);
            ctx.run_ok("rbd-create", &spec)?;
            ctx.record_created(IMAGE, &image);
        }
        let mut spec =
            CommandSpec::new(bench_argv(config, &ctx.ceph)).timeout(config.command_timeout.0);
        spec.start_at = ctx.start_together()?;
        let out = ctx.run_ok("rbd-bench", &spec)?;
        let measurement = pipeline_parsers::rbd_bench::parse(out.whole_stdout(&spec.display())?)
            .map_err(|e| StageError::failed(format!("cannot read rbd bench output: {e}")))?;
        let mut output = StageOutput {
            metrics: adopt_all("rbd-bench", METRICS, measurement.metrics)?,
            series: measurement.series,
            ..Default::default()
        };
        output.outputs.insert("image".into(), json!(image));
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    /// Every figure of real rbd bench outputs (16.2, 18.2, 20.2; bench and
    /// bench-write) is one the stage declares, as it declares it; and each
    /// declaration is measured by some output.
    #[test]
    fn what_rbd_bench_prints_is_declared() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, text) in crate::parser_fixtures("rbd-bench-") {
            let Ok(m) = pipeline_parsers::rbd_bench::parse(&text) else {
                assert!(name.contains("no-image"), "{name} does not parse");
                continue;
            };
            let adopted = super::adopt_all("rbd-bench", super::METRICS, m.metrics.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(adopted, m.metrics, "{name}");
            seen.extend(adopted.into_iter().map(|m| m.name));
        }
        for d in super::METRICS {
            assert!(seen.contains(&*d.name), "no output measures `{}`", d.name);
        }
    }
}
