//! `rados-bench`: `rados bench` write/seq/rand against a pool, parsed into
//! metrics (bandwidth in MiB/s — rados' "MB/sec" is 2^20 B/s — IOPS and
//! latency with their spreads) and the per-second series.
//!
//! Writes always use `--no-cleanup` (cleanup messages would land inside the
//! JSON output; and seq/rand need the objects) and a `--run-name` unique to
//! this run, so reads find exactly this run's objects. Run on another host,
//! or on several, each host has a run name of its own (the host's name at
//! the end): hosts writing at once must not share rados' metadata object,
//! and a read on the same hosts finds what its own host wrote. A write runs as
//! `sh -c 'echo PID HOST; exec rados …'`: rados names its objects
//! `benchmark_data_HOST_PID_objectN`, so the ledger gets exactly that prefix
//! (even when the write is killed before rados stores its metadata) and
//! `ceph-cleanup` removes exactly those objects. `rados cleanup --run-name`
//! would instead, without the metadata object, delete every
//! `benchmark_data_HOST*` object in the pool: other runs' too.

use std::time::Duration;

use pipeline_model::{Aggregate, Direction, unit};
use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::{MetricDecl, adopt_all};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, ByteSize, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{BENCH_METADATA, BENCH_OBJECTS, bench_run_name, only_here, per_host_name};

/// `with:` of a `rados-bench` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Pool to benchmark (usually `{{ stages.POOL_STAGE.outputs.pool }}`).
    pub pool: String,
    /// Benchmark mode; seq and rand read what a write of this run left.
    #[serde(default)]
    pub mode: Mode,
    /// Duration (seq ends early when the objects run out).
    #[serde(default = "ten")]
    pub seconds: u32,
    /// Object size for writes (rados -b).
    #[serde(default = "four_mib")]
    pub block_size: ByteSize,
    /// Operations in flight (rados -t).
    #[serde(default = "sixteen")]
    pub concurrent_ops: u32,
    /// Stop a write after this many objects (bounds the data stored).
    #[serde(default)]
    pub max_objects: Option<u64>,
    /// rados --run-name; default unique to this run, shared by its write and
    /// reads. On another host or on several, each host's ends in `-HOST`.
    #[serde(default)]
    pub run_name: Option<String>,
    /// Output format to request and parse.
    #[serde(default)]
    pub format: Format,
    /// More arguments for rados bench.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Kill rados after this long (default: 2 x seconds + 60 s; a full cluster hangs forever).
    #[serde(default)]
    pub command_timeout: Option<Seconds>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Write,
    Seq,
    Rand,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Write => "write",
            Mode::Seq => "seq",
            Mode::Rand => "rand",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    #[default]
    Text,
    Json,
}

fn ten() -> u32 {
    10
}

fn sixteen() -> u32 {
    16
}

fn four_mib() -> ByteSize {
    ByteSize::mib(4)
}

pub struct RadosBench;

/// The summary figures of `rados bench` (label `mode`), as its parser
/// reads them. Across hosts: bandwidth, IOPS and the op count add up; the
/// average latency is the mean over all ops; the latency extremes are the
/// extremes over hosts; standard deviations and the per-second extremes of
/// bandwidth and IOPS do not combine (the hosts' best seconds need not be
/// the same seconds).
pub const METRICS: &[MetricDecl] = &[
    MetricDecl::rate(
        "bandwidth",
        unit::MIB_PER_S,
        "Average bandwidth (rados' MB/sec, which is MiB/s).",
    )
    .headline(),
    MetricDecl::declare(
        "bandwidth_stddev",
        unit::MIB_PER_S,
        Direction::None,
        Aggregate::None,
        "Standard deviation of the per-second bandwidth.",
    ),
    MetricDecl::declare(
        "bandwidth_max",
        unit::MIB_PER_S,
        Direction::Higher,
        Aggregate::None,
        "Bandwidth of the best second.",
    ),
    MetricDecl::declare(
        "bandwidth_min",
        unit::MIB_PER_S,
        Direction::Higher,
        Aggregate::None,
        "Bandwidth of the worst second.",
    ),
    MetricDecl::rate("iops_avg", unit::IOPS, "Average IOPS.").headline(),
    MetricDecl::declare(
        "iops_stddev",
        unit::IOPS,
        Direction::None,
        Aggregate::None,
        "Standard deviation of the per-second IOPS.",
    ),
    MetricDecl::declare(
        "iops_max",
        unit::IOPS,
        Direction::Higher,
        Aggregate::None,
        "IOPS of the best second.",
    ),
    MetricDecl::declare(
        "iops_min",
        unit::IOPS,
        Direction::Higher,
        Aggregate::None,
        "IOPS of the worst second.",
    ),
    MetricDecl::declare(
        "latency_avg",
        unit::SECONDS,
        Direction::Lower,
        Aggregate::const_mean_weighted_by("ops"),
        "Average latency.",
    )
    .headline(),
    MetricDecl::declare(
        "latency_stddev",
        unit::SECONDS,
        Direction::None,
        Aggregate::None,
        "Standard deviation of the latency.",
    ),
    MetricDecl::declare(
        "latency_max",
        unit::SECONDS,
        Direction::Lower,
        Aggregate::Max,
        "Highest latency.",
    ),
    MetricDecl::declare(
        "latency_min",
        unit::SECONDS,
        Direction::Lower,
        Aggregate::Min,
        "Lowest latency.",
    ),
    MetricDecl::declare(
        "ops",
        unit::COUNT,
        Direction::None,
        Aggregate::Sum,
        "Operations completed.",
    ),
    MetricDecl::info("total_time", unit::SECONDS, "Total time run."),
    MetricDecl::info("op_size", unit::BYTES, "Bytes per operation."),
    MetricDecl::info("object_size", unit::BYTES, "Object size."),
];

fn argv(config: &Config, ceph: &CephConnection, run_name: &str) -> Vec<String> {
    let mode = config.mode.as_str();
    let mut args: Vec<String> = vec![
        "-p".into(),
        config.pool.clone(),
        "bench".into(),
        config.seconds.to_string(),
        mode.into(),
        "-t".into(),
        config.concurrent_ops.to_string(),
    ];
    if config.mode == Mode::Write {
        args.extend(["-b".into(), config.block_size.0.to_string()]);
        if let Some(max) = config.max_objects {
            args.extend(["--max-objects".into(), max.to_string()]);
        }
    }
    args.extend(["--run-name".into(), run_name.into(), "--no-cleanup".into()]);
    if config.format == Format::Json {
        args.extend(["--format".into(), "json".into()]);
    }
    args.extend(config.extra_args.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ceph.argv("rados", &refs)
}

/// The first line a write prints (on stderr, before rados starts).
const PID_LINE: &str = "pipeline: rados bench pid";

/// `sh -c 'echo "… pid $$ host HOST" >&2; exec "$@"' sh ARGV`: `exec` keeps
/// the shell's pid, so the pid printed is the one rados puts in its object names.
fn announcing_pid(argv: Vec<String>) -> Vec<String> {
    let mut wrapped = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("echo \"{PID_LINE} $$ host $(uname -n)\" >&2; exec \"$@\""),
        "sh".to_string(),
    ];
    wrapped.extend(argv);
    wrapped
}

/// `benchmark_data_HOST_PID` from the pid line: rados' own object prefix
/// (`gethostname` into 29 bytes, then `_PID`).
pub(crate) fn object_prefix(stderr: &str) -> Option<String> {
    let line = stderr.lines().find_map(|l| l.strip_prefix(PID_LINE))?;
    let (pid, host) = line.trim().split_once(" host ")?;
    let pid: u32 = pid.trim().parse().ok()?;
    let host: String = host.trim().chars().take(29).collect();
    (!host.is_empty()).then(|| format!("benchmark_data_{host}_{pid}"))
}

/// The stderr a killed command left in the work folder (`NN-LABEL.stderr`,
/// `NN-HOST-LABEL.stderr` on another host; the last one).
fn last_stderr(work_dir: &std::path::Path, label: &str) -> Option<String> {
    let suffix = format!("-{label}.stderr");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(work_dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(&suffix))
        })
        .collect();
    files.sort();
    std::fs::read_to_string(files.last()?).ok()
}

fn run_name(config: &Config, run_id: &str) -> String {
    config
        .run_name
        .clone()
        .unwrap_or_else(|| bench_run_name(run_id))
}

impl TypedStage for RadosBench {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "rados-bench",
            summary: "rados bench write/seq/rand on a pool: bandwidth, IOPS, latency, per-second series.",
            per_host: true,
            requires: vec!["rados"],
            outputs: Vec::new(),
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
        if config.seconds < 1 {
            p.push(("seconds".into(), "must be at least 1".into()));
        }
        if config.concurrent_ops < 1 {
            p.push(("concurrent_ops".into(), "must be at least 1".into()));
        }
        if config.block_size.0 == 0 {
            p.push(("block_size".into(), "must be more than 0".into()));
        }
        p
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let mut name = run_name(config, "<run id>");
        if !only_here(ctx.targets) {
            name.push_str("-<host>");
        }
        let mut actions = vec![Action::command(
            format!("rados bench {}", config.mode.as_str()),
            argv(config, ctx.ceph, &name),
        )];
        if config.mode == Mode::Write {
            actions.push(Action::note(
                "runs as `sh -c 'echo PID HOST; exec rados …'` to learn its object prefix; objects are left for reads; ceph-cleanup removes exactly those with that prefix",
            ));
        }
        actions
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let pool = &config.pool;
        let mode = config.mode.as_str();
        let run_name = per_host_name(&run_name(config, &ctx.run_id), &ctx.host, &ctx.targets);
        let timeout = config.command_timeout.map_or(
            Duration::from_secs(u64::from(config.seconds) * 2 + 60),
            |t| t.0,
        );
        let label = format!("rados-bench-{mode}");
        let rados = argv(config, &ctx.ceph, &run_name);
        let mut spec = if config.mode == Mode::Write {
            CommandSpec::new(announcing_pid(rados))
        } else {
            CommandSpec::new(rados)
        }
        .timeout(timeout);
        let out = if config.mode == Mode::Write {
            // Recorded before the write: rados may store it at any point.
            ctx.record_created(BENCH_METADATA, &format!("{pool}/{run_name}"));
            spec.start_at = ctx.start_together()?;
            let result = ctx.run(&label, &spec);
            // Also after a timeout or Ctrl-C: a write killed halfway leaves objects.
            let stderr = match &result {
                Ok(out) => Some(out.stderr.clone()),
                Err(_) => last_stderr(&ctx.work_dir, &label),
            };
            if let Some(prefix) = stderr.as_deref().and_then(object_prefix) {
                ctx.record_created(BENCH_OBJECTS, &format!("{pool}/{prefix}"));
            }
            result?
        } else {
            spec.start_at = ctx.start_together()?;
            ctx.run(&label, &spec)?
        };
        if !out.success() {
            return Err(StageError::CommandFailed {
                command: spec.display(),
                status: out.exit.to_string(),
                stderr_tail: out.tail(),
            });
        }
        let measurement = pipeline_parsers::rados_bench::parse(out.whole_stdout(&spec.display())?)
            .map_err(|e| StageError::failed(format!("cannot read rados bench output: {e}")))?;
        Ok(StageOutput {
            metrics: adopt_all("rados-bench", METRICS, measurement.metrics)?,
            series: measurement.series,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::object_prefix;
    use crate::ceph::per_host_name as host_run_name;
    use pipeline_stage_api::hosts::Host;

    #[test]
    fn each_host_of_several_has_its_own_run_name() {
        let node = |name: &str| Host {
            name: name.into(),
            address: Some("10.0.0.1".into()),
            ..Host::local()
        };
        let here = [Host::local()];
        // This machine alone: the run's own name (what earlier runs used).
        assert_eq!(host_run_name("pipeline-r", &here[0], &here), "pipeline-r");
        // Another host, alone or among several; and this machine among others.
        let one = [node("node1")];
        assert_eq!(
            host_run_name("pipeline-r", &one[0], &one),
            "pipeline-r-node1"
        );
        let mixed = [Host::local(), node("rack 2/a")];
        assert_eq!(
            host_run_name("pipeline-r", &mixed[0], &mixed),
            "pipeline-r-local"
        );
        assert_eq!(
            host_run_name("pipeline-r", &mixed[1], &mixed),
            "pipeline-r-rack_2_a"
        );
    }

    /// Every figure of real rados bench outputs (16.2, 18.2, 20.2; text and
    /// JSON; write, seq, rand) is one the stage declares, as it declares it;
    /// and each declaration is measured by some output.
    #[test]
    fn what_rados_bench_prints_is_declared() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, text) in crate::parser_fixtures("rados-bench-") {
            let Ok(m) = pipeline_parsers::rados_bench::parse(&text) else {
                assert!(name.contains("no-data"), "{name} does not parse");
                continue;
            };
            let adopted = super::adopt_all("rados-bench", super::METRICS, m.metrics.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(adopted, m.metrics, "{name}");
            seen.extend(adopted.into_iter().map(|m| m.name));
        }
        for d in super::METRICS {
            assert!(seen.contains(&*d.name), "no output measures `{}`", d.name);
        }
    }

    #[test]
    fn object_prefix_is_rados_own() {
        // rados bench on the sandbox host `vm` (pid 12940) named its objects
        // `benchmark_data_vm_12940_object0`, `..._object1`, ...
        let stderr = "pipeline: rados bench pid 12940 host vm\nhints = 1\n";
        assert_eq!(
            object_prefix(stderr).as_deref(),
            Some("benchmark_data_vm_12940")
        );
        // gethostname() into a 30-byte buffer: at most 29 characters.
        let long = "pipeline: rados bench pid 7 host client-0123456789-0123456789-0123456789\n";
        assert_eq!(
            object_prefix(long).as_deref(),
            Some("benchmark_data_client-0123456789-0123456789-_7")
        );
        assert_eq!(object_prefix("hints = 1\n"), None);
        assert_eq!(object_prefix("pipeline: rados bench pid x host vm\n"), None);
    }
}
