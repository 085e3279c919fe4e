//! `disk-baseline`: what each host's disks can do before Ceph is on them.
//! For every target on every host: dd sequential write and read with
//! O_DIRECT, then fio (libaio, direct=1) 4k random read and write and 1M
//! sequential read and write, all parsed by the shared parsers.
//!
//! Targets are files or raw block devices. A file target is created by the
//! stage and removed at the end, also when a test fails; a path that already
//! exists and is not a device is refused (the stage never overwrites a file it
//! did not create); a directory gets a file of the stage's own inside it
//! (named after the run and host, so hosts sharing a filesystem do not
//! collide). Writing a raw device destroys its data: a device is used only
//! when the pipeline lists it under `scratch_devices` — checked by `validate`
//! for paths under /dev/, and again on the host before anything is written
//! (any block device, wherever its path points, must be listed).

use std::path::{Component, Path};
use std::time::Duration;

use pipeline_model::{Aggregate, Direction, Measurement, unit};
use pipeline_stage_api::context::{SCRATCH_FILE, StageContext, scratch_file_name};
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::{MetricDecl, adopt_all};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, ByteSize, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ensure_ok, shell, slug};

pub struct DiskBaseline;

/// dd's figures (labels `test`=dd-write|dd-read, `target`). Across hosts
/// the rates and bytes add up; each host's elapsed time is its own.
pub const DD_METRICS: [MetricDecl; 3] = [
    MetricDecl::rate(
        "bandwidth",
        unit::BYTES_PER_S,
        "dd throughput (test=dd-write|dd-read, target=PATH).",
    )
    .headline(),
    MetricDecl::declare(
        "bytes",
        unit::BYTES,
        Direction::None,
        Aggregate::Sum,
        "Bytes dd copied.",
    ),
    MetricDecl::info("elapsed", unit::SECONDS, "Seconds dd took."),
];

/// Every metric: dd's, and fio's totals (test=fio-randread|fio-randwrite|
/// fio-seqread|fio-seqwrite, target=PATH), whose headline is the IOPS of
/// the random tests.
fn metrics() -> Vec<MetricDecl> {
    let fio = crate::fio::metrics().into_iter().map(|mut d| {
        d.headline = d.name.ends_with("_iops");
        d
    });
    DD_METRICS.iter().cloned().chain(fio).collect()
}

/// `with:` of a `disk-baseline` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Absolute paths on each host: a file to create (removed at the end), a directory (a file is created inside it), or a raw device listed in `scratch_devices`.
    pub targets: Vec<String>,
    /// Raw devices whose data may be DESTROYED. A device target not listed here is refused.
    #[serde(default)]
    pub scratch_devices: Vec<String>,
    /// Bytes dd writes and reads, and fio's region (file size).
    #[serde(default = "quarter_gib")]
    pub size: ByteSize,
    /// dd's block size (a multiple of 512 for O_DIRECT).
    #[serde(default = "one_mib")]
    pub block_size: ByteSize,
    /// Duration of each fio test (whole seconds).
    #[serde(default = "five_seconds")]
    pub runtime: Seconds,
    /// fio I/Os in flight (libaio).
    #[serde(default = "thirty_two")]
    pub iodepth: i64,
    /// Which tests to run (always in the order dd-write, dd-read, fio-randread, fio-randwrite, fio-seqread, fio-seqwrite).
    #[serde(default = "all_tests")]
    pub tests: Vec<Test>,
    /// Kill dd after this long (fio: runtime + this).
    #[serde(default = "ten_minutes")]
    pub command_timeout: Seconds,
}

/// One test; declared in the order they run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    DdWrite,
    DdRead,
    FioRandread,
    FioRandwrite,
    FioSeqread,
    FioSeqwrite,
}

impl Test {
    /// Every test, in the order they run.
    pub const ALL: [Test; 6] = [
        Test::DdWrite,
        Test::DdRead,
        Test::FioRandread,
        Test::FioRandwrite,
        Test::FioSeqread,
        Test::FioSeqwrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Test::DdWrite => "dd-write",
            Test::DdRead => "dd-read",
            Test::FioRandread => "fio-randread",
            Test::FioRandwrite => "fio-randwrite",
            Test::FioSeqread => "fio-seqread",
            Test::FioSeqwrite => "fio-seqwrite",
        }
    }

    fn is_dd(self) -> bool {
        matches!(self, Test::DdWrite | Test::DdRead)
    }

    fn writes(self) -> bool {
        matches!(self, Test::DdWrite | Test::FioRandwrite | Test::FioSeqwrite)
    }

    /// fio's `rw` and block size for a fio test.
    fn fio_job(self) -> (&'static str, &'static str) {
        match self {
            Test::FioRandread => ("randread", "4k"),
            Test::FioRandwrite => ("randwrite", "4k"),
            Test::FioSeqread => ("read", "1M"),
            _ => ("write", "1M"),
        }
    }
}

fn quarter_gib() -> ByteSize {
    ByteSize::mib(256)
}

fn one_mib() -> ByteSize {
    ByteSize::mib(1)
}

fn five_seconds() -> Seconds {
    Seconds::secs(5)
}

fn thirty_two() -> i64 {
    32
}

fn all_tests() -> Vec<Test> {
    Test::ALL.to_vec()
}

fn ten_minutes() -> Seconds {
    Seconds::secs(600)
}

/// The config as the commands use it.
struct Settings {
    size: u64,
    block_size: u64,
    runtime: u64,
    iodepth: i64,
    tests: Vec<Test>,
    timeout: Duration,
}

impl Settings {
    fn from(config: &Config) -> Self {
        Settings {
            size: config.size.0,
            block_size: config.block_size.0.max(1),
            runtime: config.runtime.as_secs_f64().ceil().max(1.0) as u64,
            iodepth: config.iodepth,
            // Always in the canonical order: writes lay out what reads read.
            tests: Test::ALL
                .into_iter()
                .filter(|t| config.tests.contains(t))
                .collect(),
            timeout: config.command_timeout.0,
        }
    }

    fn count(&self) -> u64 {
        self.size.div_ceil(self.block_size)
    }

    fn command(&self, test: Test, path: &str) -> CommandSpec {
        match test {
            Test::DdWrite => CommandSpec::new(vec![
                "dd".into(),
                "if=/dev/zero".into(),
                format!("of={path}"),
                format!("bs={}", self.block_size),
                format!("count={}", self.count()),
                "oflag=direct".into(),
                "conv=fdatasync".into(),
            ])
            .env("LC_ALL", "C")
            .timeout(self.timeout),
            Test::DdRead => CommandSpec::new(vec![
                "dd".into(),
                format!("if={path}"),
                "of=/dev/null".into(),
                format!("bs={}", self.block_size),
                format!("count={}", self.count()),
                "iflag=direct".into(),
            ])
            .env("LC_ALL", "C")
            .timeout(self.timeout),
            _ => {
                let (rw, bs) = test.fio_job();
                CommandSpec::new(vec![
                    "fio".into(),
                    // json+: with latency bins, for percentiles over hosts.
                    "--output-format=json+".into(),
                    format!("--name={}", test.as_str()),
                    format!("--filename={path}"),
                    "--ioengine=libaio".into(),
                    "--direct=1".into(),
                    format!("--rw={rw}"),
                    format!("--bs={bs}"),
                    format!("--iodepth={}", self.iodepth),
                    format!("--size={}", self.size),
                    format!("--runtime={}", self.runtime),
                    "--time_based=1".into(),
                ])
                .timeout(self.timeout + Duration::from_secs(self.runtime))
            }
        }
    }
}

fn is_device_path(path: &str) -> bool {
    path.starts_with("/dev/")
}

/// Problems with one target that need no host to see.
fn target_problem(target: &str, scratch: &[String]) -> Option<String> {
    let path = Path::new(target);
    if !path.is_absolute() {
        return Some(format!("`{target}` is not an absolute path"));
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Some(format!("`{target}` contains `..`; give the path itself"));
    }
    if is_device_path(target) && !scratch.iter().any(|s| s == target) {
        return Some(format!(
            "`{target}` is a device path and is not listed in `scratch_devices`: writing it \
             destroys its data; list it there only if it is a scratch device"
        ));
    }
    None
}

/// What a target is on the host, found out before anything is written.
const PROBE: &str = "if [ -b \"$1\" ]; then echo block; elif [ -d \"$1\" ]; then echo directory; \
                     elif [ -e \"$1\" ] || [ -L \"$1\" ]; then echo exists; else echo missing; fi";

/// Where the tests of one target read and write.
struct Resolved {
    /// The path dd and fio use.
    path: String,
    /// Created by the stage (removed at the end).
    created_file: bool,
}

impl TypedStage for DiskBaseline {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "disk-baseline",
            summary: "dd sequential write/read and fio 4k random / 1M sequential read/write (O_DIRECT) on files or scratch devices of each host.",
            per_host: true,
            requires: vec!["dd", "fio"],
            outputs: Vec::new(),
            metrics: metrics(),
        }
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut p = Vec::new();
        let scratch = &config.scratch_devices;
        let targets = &config.targets;
        if targets.is_empty() {
            p.push((
                "targets".into(),
                "give at least one file, directory or scratch device".into(),
            ));
        }
        for (i, t) in targets.iter().enumerate() {
            if targets[..i].contains(t) {
                p.push(("targets".into(), format!("`{t}` is listed twice")));
            }
            if let Some(problem) = target_problem(t, scratch) {
                p.push(("targets".into(), problem));
            }
        }
        let s = Settings::from(config);
        if s.size == 0 {
            p.push(("size".into(), "must be more than 0".into()));
        }
        let block_size = config.block_size.0;
        if block_size == 0 || !block_size.is_multiple_of(512) {
            p.push((
                "block_size".into(),
                "must be a multiple of 512 (O_DIRECT)".into(),
            ));
        }
        if s.size > 0 && block_size > s.size {
            p.push(("block_size".into(), "is larger than `size`".into()));
        }
        if config.runtime.as_secs_f64() < 1.0 {
            p.push(("runtime".into(), "must be at least 1s".into()));
        }
        if !(1..=4096).contains(&s.iodepth) {
            p.push(("iodepth".into(), "must be between 1 and 4096".into()));
        }
        if s.tests.is_empty() {
            p.push(("tests".into(), "select at least one test".into()));
        }
        p
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        let s = Settings::from(config);
        let scratch = &config.scratch_devices;
        let mut actions = Vec::new();
        for target in &config.targets {
            let device = is_device_path(target);
            if device {
                actions.push(Action::note(format!(
                    "{target}: scratch device; its data is DESTROYED by the write tests"
                )));
                if !scratch.contains(target) {
                    actions.push(Action::note(format!(
                        "{target}: REFUSED (not in scratch_devices)"
                    )));
                    continue;
                }
            } else {
                actions.push(Action::note(format!(
                    "{target}: FILE = {target} if it does not exist, or {}/pipeline-disk-baseline-<run id>-<host>.bin \
                     if it is a directory; created by the stage and removed at the end (an existing file is refused)",
                    target.trim_end_matches('/')
                )));
            }
            let path = if device {
                target.clone()
            } else {
                "FILE".to_string()
            };
            for &test in &s.tests {
                let action = Action::command(
                    format!("{target}: {}", test.as_str()),
                    s.command(test, &path).argv,
                );
                actions.push(if device && test.writes() {
                    action.destructive()
                } else {
                    action
                });
            }
        }
        actions
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let s = Settings::from(config);
        let scratch = &config.scratch_devices;
        let mut output = StageOutput::default();
        for target in &config.targets {
            // `validate` said so already; said again here, where it matters.
            if let Some(problem) = target_problem(target, scratch) {
                return Err(StageError::Param {
                    name: "targets".into(),
                    message: problem,
                });
            }
            let resolved = resolve(ctx, target, scratch)?;
            // In the ledger before it exists: a runner killed mid-test
            // leaves `pipeline cleanup` the file to remove.
            let ledger_name = scratch_file_name(&ctx.host.name, &resolved.path);
            if resolved.created_file {
                ctx.record_created(SCRATCH_FILE, &ledger_name);
            }
            let measured = measure(ctx, &s, target, &resolved);
            let removed = if resolved.created_file {
                let removed = remove(ctx, target, &resolved.path);
                if removed.is_ok() {
                    ctx.mark_removed(SCRATCH_FILE, &ledger_name);
                }
                removed
            } else {
                Ok(())
            };
            let measured = measured?;
            let declared = adopt_all("disk-baseline", &metrics(), measured.metrics)?;
            output.metrics.extend(declared);
            output.histograms.extend(measured.histograms);
            removed?;
        }
        Ok(output)
    }
}

/// Finds out on the host what `target` is, and where the tests go.
fn resolve(
    ctx: &mut StageContext,
    target: &str,
    scratch: &[String],
) -> Result<Resolved, StageError> {
    // (Per-host runs: the engine prefixes messages with the host's name.)
    let spec = shell(PROBE, &[target]).timeout(Duration::from_secs(60));
    let out = ctx.run(&format!("probe-{}", slug(target)), &spec)?;
    let host_ref = ctx.host.clone();
    let out = ensure_ok(&host_ref, &spec, out)?;
    let listed = scratch.iter().any(|s| s == target);
    match out.stdout.trim() {
        "block" if listed => Ok(Resolved {
            path: target.to_string(),
            created_file: false,
        }),
        "block" => Err(StageError::failed(format!(
            "{target} is a block device and is not listed in `scratch_devices`; \
             refusing to write it"
        ))),
        _ if listed => Err(StageError::failed(format!(
            "scratch device {target} is not a block device (missing?)"
        ))),
        "directory" => Ok(Resolved {
            path: format!(
                "{}/pipeline-disk-baseline-{}-{}.bin",
                target.trim_end_matches('/'),
                slug(&ctx.run_id),
                slug(&ctx.host.name)
            ),
            created_file: true,
        }),
        "missing" => Ok(Resolved {
            path: target.to_string(),
            created_file: true,
        }),
        "exists" => Err(StageError::failed(format!(
            "{target} already exists and is not a scratch device; the stage writes \
             only files it creates: give a path that does not exist, or a directory"
        ))),
        other => Err(StageError::failed(format!(
            "cannot tell what {target} is (probe printed `{other}`)"
        ))),
    }
}

/// Runs the selected tests on one target; metrics and histograms labelled
/// test= and target=.
fn measure(
    ctx: &mut StageContext,
    s: &Settings,
    target: &str,
    resolved: &Resolved,
) -> Result<Measurement, StageError> {
    let host = ctx.host.clone();
    let mut measured = Measurement::default();
    // dd-read of a new file needs data to read: lay it out (not measured).
    if resolved.created_file && s.tests.contains(&Test::DdRead) && !s.tests.contains(&Test::DdWrite)
    {
        let spec = s.command(Test::DdWrite, &resolved.path);
        let out = ctx.run(&format!("prepare-{}", slug(target)), &spec)?;
        ensure_ok(&host, &spec, out)?;
    }
    for &test in &s.tests {
        let name = test.as_str();
        let spec = s.command(test, &resolved.path);
        let out = ctx.run(&format!("{name}-{}", slug(target)), &spec)?;
        let out = ensure_ok(&host, &spec, out)?;
        let found = if test.is_dd() {
            dd_metrics(&out.stderr)
        } else {
            fio_metrics(test, out.whole_stdout(&spec.display())?)
        }
        .map_err(|e| StageError::failed(format!("{name} on {target}: {e}")))?;
        measured.metrics.extend(
            found
                .metrics
                .into_iter()
                .map(|m| m.label("test", name).label("target", target)),
        );
        measured.histograms.extend(
            found
                .histograms
                .into_iter()
                .map(|h| h.label("test", test.as_str()).label("target", target)),
        );
    }
    Ok(measured)
}

/// dd's summary (stderr): bandwidth is the headline.
fn dd_metrics(stderr: &str) -> Result<Measurement, String> {
    pipeline_parsers::dd::parse(stderr).map_err(|e| e.to_string())
}

/// fio's totals (`job=all`, the label dropped: one job per test) and their
/// latency histograms; the headline is the 4k random IOPS.
fn fio_metrics(test: Test, stdout: &str) -> Result<Measurement, String> {
    let m = pipeline_parsers::fio::parse_json(stdout).map_err(|e| e.to_string())?;
    let headline = match test {
        Test::FioRandread => Some("read_iops"),
        Test::FioRandwrite => Some("write_iops"),
        _ => None,
    };
    let is_total =
        |labels: &pipeline_model::Labels| labels.get("job").map(String::as_str) == Some("all");
    Ok(Measurement {
        metrics: m
            .metrics
            .into_iter()
            .filter(|m| is_total(&m.labels))
            .map(|mut m| {
                m.labels.remove("job");
                m.headline = Some(m.name.as_str()) == headline;
                m
            })
            .collect(),
        histograms: m
            .histograms
            .into_iter()
            .filter(|h| is_total(&h.labels))
            .map(|mut h| {
                h.labels.remove("job");
                h
            })
            .collect(),
        ..Measurement::default()
    })
}

fn remove(ctx: &mut StageContext, target: &str, path: &str) -> Result<(), StageError> {
    let host = ctx.host.clone();
    let spec = shell("rm -f -- \"$1\"", &[path]).timeout(Duration::from_secs(60));
    let out = ctx
        .run_tidy_on(&host, &format!("remove-{}", slug(target)), &spec)
        .map_err(|e| StageError::failed(format!("{path} is left behind: {e}")))?;
    ensure_ok(&host, &spec, out).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: serde_json::Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn devices_must_be_marked_scratch() {
        let problems = DiskBaseline.check(&params(json!({"targets": ["/dev/sdb", "/tmp/f"]})));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "targets");
        assert!(
            problems[0]
                .1
                .contains("`/dev/sdb` is a device path and is not listed in `scratch_devices`")
        );
        let ok = params(json!({"targets": ["/dev/sdb"], "scratch_devices": ["/dev/sdb"]}));
        assert!(DiskBaseline.check(&ok).is_empty());
        for bad in ["tmp/f", "/tmp/../dev/sda"] {
            assert!(
                !DiskBaseline
                    .check(&params(json!({"targets": [bad]})))
                    .is_empty(),
                "{bad}"
            );
        }
        assert!(
            !DiskBaseline
                .check(&params(json!({"targets": []})))
                .is_empty()
        );
        assert!(
            !DiskBaseline
                .check(&params(json!({"targets": ["/tmp/f"], "block_size": 1000})))
                .is_empty()
        );
    }

    #[test]
    fn plan_marks_device_writes_destructive() {
        let ceph = pipeline_stage_api::ceph::CephConnection::default();
        let ctx = PlanContext {
            instance_id: "d",
            ceph: &ceph,
            targets: &[],
        };
        let p = params(json!({"targets": ["/dev/vdb", "/tmp/x"], "scratch_devices": ["/dev/vdb"]}));
        let actions = DiskBaseline.plan(&p, &ctx);
        let destructive: Vec<&str> = actions
            .iter()
            .filter(|a| a.destructive)
            .map(|a| a.summary.as_str())
            .collect();
        assert_eq!(
            destructive,
            [
                "/dev/vdb: dd-write",
                "/dev/vdb: fio-randwrite",
                "/dev/vdb: fio-seqwrite"
            ]
        );
        let dd = actions
            .iter()
            .find(|a| a.summary == "/tmp/x: dd-write")
            .unwrap();
        assert_eq!(
            dd.command.as_ref().unwrap().join(" "),
            "dd if=/dev/zero of=FILE bs=1048576 count=256 oflag=direct conv=fdatasync"
        );
        let fio = actions
            .iter()
            .find(|a| a.summary == "/tmp/x: fio-randread")
            .unwrap();
        assert_eq!(
            fio.command.as_ref().unwrap().join(" "),
            "fio --output-format=json+ --name=fio-randread --filename=FILE --ioengine=libaio \
             --direct=1 --rw=randread --bs=4k --iodepth=32 --size=268435456 --runtime=5 --time_based=1"
        );
    }

    #[test]
    fn tests_run_in_canonical_order() {
        let s = Settings::from(&params(
            json!({"targets": ["/tmp/x"], "tests": ["fio-randread", "dd-write"]}),
        ));
        assert_eq!(s.tests, [Test::DdWrite, Test::FioRandread]);
        assert_eq!(
            s.command(Test::DdRead, "/f").env,
            [("LC_ALL".to_string(), "C".to_string())]
        );
    }

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../parsers/tests/data")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn metrics_from_real_outputs() {
        let dd = dd_metrics(&fixture("dd-coreutils-write-local.txt")).unwrap();
        let bw = dd.metrics.iter().find(|m| m.name == "bandwidth").unwrap();
        assert!(bw.headline && bw.value > 0.0 && bw.unit == "B/s");
        let fio = fio_metrics(Test::FioRandread, &fixture("fio-3.33-randread-local.json")).unwrap();
        assert!(fio.metrics.iter().all(|m| !m.labels.contains_key("job")));
        let heads: Vec<&str> = fio
            .metrics
            .iter()
            .filter(|m| m.headline)
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(heads, ["read_iops"]);
        assert!(fio_metrics(Test::FioRandread, &fixture("fio-3.33-job-error-local.json")).is_err());
        // json+: the totals' latency histograms come along, without `job`.
        let fio = fio_metrics(
            Test::FioRandread,
            &fixture("fio-3.33-randread-64k-jsonplus-local.json"),
        )
        .unwrap();
        let names: Vec<&str> = fio.histograms.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["read_clat"]);
        assert!(fio.histograms[0].labels.is_empty());
    }

    /// What dd and fio print (real outputs), as each test reports it, is
    /// what the stage declares.
    #[test]
    fn what_dd_and_fio_print_is_declared() {
        let decls = metrics();
        let mut seen = std::collections::BTreeSet::new();
        for (name, text) in crate::parser_fixtures("dd-coreutils-") {
            let Ok(m) = dd_metrics(&text) else { continue };
            let adopted = adopt_all("disk-baseline", &decls, m.metrics.clone())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(adopted, m.metrics);
            seen.extend(adopted.into_iter().map(|m| m.name));
        }
        for (name, text) in crate::parser_fixtures("fio-3.33-") {
            for test in [Test::FioRandread, Test::FioRandwrite, Test::FioSeqread] {
                let Ok(m) = fio_metrics(test, &text) else {
                    assert!(name.contains("job-error"), "{name}");
                    continue;
                };
                let adopted = adopt_all("disk-baseline", &decls, m.metrics.clone())
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(adopted, m.metrics);
                seen.extend(adopted.into_iter().map(|m| m.name));
            }
        }
        for d in &decls {
            assert!(seen.contains(&*d.name), "no output measures `{}`", d.name);
        }
    }
}
