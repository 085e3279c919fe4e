//! `fio`: run fio jobs, one fio process per client (like one VM per RBD
//! volume in the field notes), always `--output-format=json+`, and report
//! read/write IOPS, bandwidth and completion-latency percentiles per client
//! and over all clients (percentiles from the clients' merged histograms).
//!
//! Engines: `rbd` (an image per client, created by this run in `pool`),
//! `rados` (objects in `pool`; fio's rados engine ignores CEPH_CONF, so the
//! conf is passed explicitly), `libaio` (a file or device given in options).

use pipeline_model::combine::{Parts, combine};
use pipeline_model::{Aggregate, Direction, Histogram, Measurement, Metric, unit};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::{MetricDecl, adopt_all};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, ByteSize, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ceph::{IMAGE, admin};

mod search;

pub struct Fio;

/// fio's figures of one I/O direction, as `pipeline_parsers::fio` names
/// them (`read_iops`, …; labels `job`, and `client` with several). Across
/// jobs, clients and hosts: rates and the I/O count add up, the mean
/// latency is weighted by the I/O count, and a percentile comes from the
/// merged latency histogram (json+; without the bins it does not combine).
/// The headlines are the figures over all jobs (and clients).
macro_rules! direction_metrics {
    ($dir:literal) => {
        [
            MetricDecl::rate(
                concat!($dir, "_iops"),
                unit::IOPS,
                concat!("I/Os per second (", $dir, ")."),
            )
            .headline(),
            MetricDecl::rate(
                concat!($dir, "_bandwidth"),
                unit::BYTES_PER_S,
                concat!("Bytes per second (", $dir, ")."),
            )
            .headline(),
            MetricDecl::declare(
                concat!($dir, "_ios"),
                unit::COUNT,
                Direction::None,
                Aggregate::Sum,
                concat!("I/Os completed (", $dir, ")."),
            ),
            MetricDecl::declare(
                concat!($dir, "_clat_mean"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::const_mean_weighted_by(concat!($dir, "_ios")),
                concat!("Mean completion latency (", $dir, ")."),
            )
            .headline(),
            percentile!($dir, "p50", 0.5),
            percentile!($dir, "p90", 0.9),
            percentile!($dir, "p99", 0.99).headline(),
            percentile!($dir, "p99_9", 0.999),
        ]
    };
}

macro_rules! percentile {
    ($dir:literal, $p:literal, $q:literal) => {
        MetricDecl::declare(
            concat!($dir, "_clat_", $p),
            unit::MICROSECONDS,
            Direction::Lower,
            Aggregate::const_histogram(concat!($dir, "_clat"), $q),
            concat!("Completion latency ", $p, " (", $dir, ")."),
        )
    };
}

/// The figures of reads.
pub const READ_METRICS: [MetricDecl; 8] = direction_metrics!("read");
/// The figures of writes.
pub const WRITE_METRICS: [MetricDecl; 8] = direction_metrics!("write");

/// Every figure fio's output gives.
pub fn metrics() -> Vec<MetricDecl> {
    READ_METRICS.iter().chain(&WRITE_METRICS).cloned().collect()
}

/// `with:` of a `fio` stage.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// fio ioengine.
    #[serde(default)]
    pub engine: Engine,
    /// Pool (rbd and rados engines).
    #[serde(default)]
    pub pool: Option<String>,
    /// fio processes run at once; with rbd, each on its own image.
    #[serde(default = "one")]
    pub clients: i64,
    /// rbd: images are PREFIX-0, PREFIX-1, ... (created by this run).
    #[serde(default = "default_image_prefix")]
    pub image_prefix: String,
    /// rbd: size of each image.
    #[serde(default = "one_gib")]
    pub image_size: ByteSize,
    /// Job name (inline options).
    #[serde(default = "default_name")]
    pub name: String,
    /// Inline job options as fio's --KEY=VALUE (rw, bs, iodepth, runtime, time_based, size, numjobs, direct, ...); `{client}` in a value is the client number.
    // In the order written: fio reads its options in order.
    #[serde(default)]
    pub options: Map<String, Value>,
    /// A fio job file, rendered as a template per client (`{{ client }}`, `{{ pool }}`, `{{ image }}`) instead of `options`.
    #[serde(default)]
    pub job_file: Option<String>,
    /// Kill fio after this long.
    #[serde(default = "fifteen_minutes")]
    pub command_timeout: Seconds,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    #[default]
    Rbd,
    Rados,
    Libaio,
}

impl Engine {
    fn as_str(self) -> &'static str {
        match self {
            Engine::Rbd => "rbd",
            Engine::Rados => "rados",
            Engine::Libaio => "libaio",
        }
    }
}

fn one() -> i64 {
    1
}

fn default_image_prefix() -> String {
    "pipeline-fio".into()
}

fn one_gib() -> ByteSize {
    ByteSize::gib(1)
}

fn default_name() -> String {
    "bench".into()
}

fn fifteen_minutes() -> Seconds {
    Seconds::secs(900)
}

struct Client {
    index: i64,
    argv: Vec<String>,
}

fn image_name(config: &Config, client: i64) -> String {
    format!("{}-{client}", config.image_prefix)
}

/// The fio command line of one client. `job_file` is the rendered job file
/// path, when the stage uses one.
fn client_argv(
    config: &Config,
    ceph: &pipeline_stage_api::ceph::CephConnection,
    client: i64,
    job_file: Option<&str>,
) -> Vec<String> {
    // json+: the JSON plus each job's latency bins, from which the
    // percentiles over clients (and hosts) are computed.
    let mut argv = vec!["fio".to_string(), "--output-format=json+".to_string()];
    let pool = config.pool.as_deref().unwrap_or_default();
    let clientname = ceph
        .name
        .as_deref()
        .and_then(|n| n.strip_prefix("client."))
        .unwrap_or("admin");
    match config.engine {
        Engine::Rbd => argv.extend([
            "--ioengine=rbd".to_string(),
            format!("--clientname={clientname}"),
            format!("--pool={pool}"),
            format!("--rbdname={}", image_name(config, client)),
        ]),
        Engine::Rados => {
            argv.extend([
                "--ioengine=rados".to_string(),
                format!("--clientname={clientname}"),
                format!("--pool={pool}"),
            ]);
            if let Some(conf) = &ceph.conf {
                argv.push(format!("--conf={conf}"));
            }
        }
        Engine::Libaio => argv.push("--ioengine=libaio".to_string()),
    }
    match job_file {
        Some(file) => argv.push(file.to_string()),
        None => {
            argv.push(format!("--name={}", config.name));
            for (k, v) in &config.options {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                let v = v.replace("{client}", &client.to_string());
                argv.push(if v.is_empty() {
                    format!("--{k}")
                } else {
                    format!("--{k}={v}")
                });
            }
        }
    }
    argv
}

impl TypedStage for Fio {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "fio",
            summary: "fio with the rbd, rados or libaio engine, one process per client, JSON output parsed.",
            per_host: true,
            requires: vec!["fio"],
            outputs: Vec::new(),
            metrics: metrics(),
        }
    }

    fn sync_start(&self) -> bool {
        true
    }

    fn client_root(&self) -> bool {
        true
    }

    fn rate_search(&self) -> Option<pipeline_stage_api::rate_search::RateSearch> {
        Some(search::rate_search())
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut p = Vec::new();
        let engine = config.engine;
        if engine != Engine::Libaio && config.pool.as_deref().is_none_or(str::is_empty) {
            p.push((
                "pool".into(),
                format!("the {} engine needs `pool`", engine.as_str()),
            ));
        }
        if !(1..=256).contains(&config.clients) {
            p.push(("clients".into(), "must be between 1 and 256".into()));
        }
        let has_options = !config.options.is_empty();
        if has_options == config.job_file.is_some() {
            p.push((
                "options".into(),
                "give either inline `options` or a `job_file`".into(),
            ));
        }
        if engine == Engine::Libaio
            && !config.options.contains_key("filename")
            && !config.options.contains_key("directory")
        {
            p.push((
                "options".into(),
                "the libaio engine needs `filename` (a scratch file or device) or `directory`"
                    .into(),
            ));
        }
        p
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let mut config = config.clone();
        if !crate::ceph::only_here(ctx.targets) {
            config.image_prefix.push_str("-<host>");
        }
        let config = &config;
        let clients = config.clients;
        let mut actions = Vec::new();
        for c in 0..clients {
            if config.engine == Engine::Rbd {
                let mib = config.image_size.0.div_ceil(1 << 20);
                let image = format!(
                    "{}/{}",
                    config.pool.as_deref().unwrap_or_default(),
                    image_name(config, c)
                );
                actions.push(Action::command(
                    format!("client {c}: create image"),
                    ctx.ceph
                        .argv("rbd", &["create", &image, "--size", &format!("{mib}M")]),
                ));
            }
            let job = config.job_file.as_ref().map(|_| "<rendered job file>");
            actions.push(Action::command(
                format!("client {c}: fio"),
                client_argv(config, ctx.ceph, c, job),
            ));
        }
        actions
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        // Several hosts at once: rbd images of their own.
        let mut config = config.clone();
        config.image_prefix =
            crate::ceph::per_host_name(&config.image_prefix, &ctx.host, &ctx.targets);
        let config = &config;
        let clients: Vec<Client> = prepare_clients(config, ctx)?;
        let timeout = config.command_timeout.0;
        // Every client of every host at one instant (`sync_start`).
        let start_at = ctx.start_together()?;
        let commands: Vec<(String, CommandSpec)> = clients
            .iter()
            .map(|c| {
                let mut spec = CommandSpec::new(c.argv.clone()).timeout(timeout);
                spec.start_at = start_at;
                if let Some(conf) = &ctx.ceph.conf {
                    spec = spec.env("CEPH_CONF", conf); // the rbd engine reads it
                }
                (format!("fio-client-{}", c.index), spec)
            })
            .collect();
        let outputs = ctx.run_parallel(&commands)?;
        let mut output = StageOutput::default();
        let mut per_client = Vec::new();
        for (client, out) in clients.iter().zip(&outputs) {
            if !out.success() {
                return Err(StageError::CommandFailed {
                    command: format!("fio (client {})", client.index),
                    status: out.exit.to_string(),
                    stderr_tail: out.tail(),
                });
            }
            let stdout = out.whole_stdout(&format!("fio (client {})", client.index))?;
            let m = pipeline_parsers::fio::parse_json(stdout).map_err(|e| {
                StageError::failed(format!(
                    "cannot read fio output of client {}: {e}",
                    client.index
                ))
            })?;
            per_client.push(m);
        }
        let combined = combine_clients(per_client);
        output.metrics = adopt_all("fio", &metrics(), combined.metrics)?;
        output.histograms = combined.histograms;
        Ok(output)
    }
}

fn prepare_clients(config: &Config, ctx: &mut StageContext) -> Result<Vec<Client>, StageError> {
    let n = config.clients;
    let pool = config.pool.clone().unwrap_or_default();
    let job_template = match config.job_file.as_deref() {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| StageError::io(format!("reading job file {path}"), e))?,
        ),
        None => None,
    };
    let mut clients = Vec::new();
    for c in 0..n {
        let image =
            (config.engine == Engine::Rbd).then(|| format!("{pool}/{}", image_name(config, c)));
        if let Some(image) = &image
            && !ctx.was_created(IMAGE, image)
        {
            let mib = config.image_size.0.div_ceil(1 << 20);
            let spec = admin(
                &ctx.ceph,
                "rbd",
                &["create", image, "--size", &format!("{mib}M")],
            );
            let out = ctx.run(&format!("rbd-create-{c}"), &spec)?;
            if !out.success() {
                let hint = if out.stderr.contains("exists") {
                    " (an image of that name exists and this run did not create it; choose another image_prefix)"
                } else {
                    ""
                };
                return Err(StageError::failed(format!(
                    "cannot create image {image}: {}{hint}",
                    out.tail()
                )));
            }
            ctx.record_created(IMAGE, image);
        }
        let job_file = match &job_template {
            Some(text) => {
                let rendered = render_job_file(
                    text,
                    &[
                        ("client", c.to_string()),
                        ("pool", pool.clone()),
                        ("image", image_name(config, c)),
                    ],
                )
                .map_err(|e| StageError::failed(format!("job file template: {e}")))?;
                let path = ctx.write_artifact(&format!("client-{c}.fio"), rendered.as_bytes())?;
                Some(path.to_string_lossy().to_string())
            }
            None => None,
        };
        clients.push(Client {
            index: c,
            argv: client_argv(config, &ctx.ceph, c, job_file.as_deref()),
        });
    }
    Ok(clients)
}

/// Fills `{{ client }}`, `{{ pool }}` and `{{ image }}` into a job file. Only
/// these names exist; anything else in `{{ }}` is an error, not silently kept.
fn render_job_file(text: &str, vars: &[(&str, String)]) -> Result<String, String> {
    let placeholder = regex::Regex::new(r"\{\{\s*([^{}]*?)\s*\}\}").expect("valid regex");
    let mut unknown = None;
    let rendered = placeholder.replace_all(text, |caps: &regex::Captures| {
        let name = &caps[1];
        match vars.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => v.clone(),
            None => {
                unknown.get_or_insert_with(|| name.to_string());
                caps[0].to_string()
            }
        }
    });
    match unknown {
        Some(name) => Err(format!(
            "unknown variable `{name}` (a job file can use client, pool and image)"
        )),
        None => Ok(rendered.into_owned()),
    }
}

/// Labels each client's metrics and histograms, and adds the figures over
/// all clients of each client's totals (`client=all`, `job=all`) by each
/// metric's rule: IOPS and bandwidth add up (the clients run at the same
/// time), percentiles come from the clients' merged latency histograms.
fn combine_clients(per_client: Vec<Measurement>) -> Measurement {
    if per_client.len() <= 1 {
        return per_client.into_iter().next().unwrap_or_default();
    }
    let mut out = Measurement::default();
    for (c, m) in per_client.into_iter().enumerate() {
        let client = c.to_string();
        out.metrics.extend(
            m.metrics
                .into_iter()
                .map(|m| m.label("client", client.as_str())),
        );
        out.histograms.extend(
            m.histograms
                .into_iter()
                .map(|h| h.label("client", client.as_str())),
        );
    }
    let is_total =
        |labels: &pipeline_model::Labels| labels.get("job").map(String::as_str) == Some("all");
    let totals: Vec<Metric> = out
        .metrics
        .iter()
        .filter(|m| is_total(&m.labels))
        .cloned()
        .collect();
    let histograms: Vec<Histogram> = out
        .histograms
        .iter()
        .filter(|h| is_total(&h.labels))
        .cloned()
        .collect();
    let clients = Parts {
        over: "client",
        concurrent: true,
        at_least: 2,
    };
    let all = combine(&totals, &histograms, clients);
    for m in out.metrics.iter_mut() {
        m.headline = false; // the client=all figure is the headline
    }
    out.metrics.extend(all.metrics);
    out.histograms.extend(all.histograms);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two real json+ outputs as two clients: the `client=all` totals sum
    /// the rates and take the p99 of the merged latency histograms.
    #[test]
    fn clients_combine_by_each_metrics_rule() {
        let outputs = [
            include_str!("../../parsers/tests/data/fio-3.33-randrw-jsonplus-local.json"),
            include_str!("../../parsers/tests/data/fio-3.33-randread-64k-jsonplus-local.json"),
        ];
        let per_client: Vec<Measurement> = outputs
            .iter()
            .map(|o| pipeline_parsers::fio::parse_json(o).unwrap())
            .collect();
        let merged = Histogram::merge(per_client.iter().map(|m| {
            m.histograms
                .iter()
                .find(|h| h.name == "read_clat" && h.labels["job"] == "all")
                .unwrap()
        }))
        .unwrap()
        .unwrap();
        let iops: f64 = per_client
            .iter()
            .map(|m| {
                m.metrics
                    .iter()
                    .find(|x| x.name == "read_iops" && x.labels["job"] == "all")
                    .unwrap()
                    .value
            })
            .sum();
        let out = combine_clients(per_client);
        let all = |name: &str| {
            out.metrics
                .iter()
                .find(|m| {
                    m.name == name && m.labels.get("client").map(String::as_str) == Some("all")
                })
                .unwrap()
        };
        assert_eq!(all("read_iops").value, iops);
        assert!(all("read_iops").headline);
        assert_eq!(
            all("read_clat_p99").value,
            merged.value_at_quantile(0.99).unwrap() / 1000.0
        );
        assert_eq!(
            all("read_clat_p99").combination().as_deref(),
            Some("p99 of merged histograms of 2 clients")
        );
        assert!(
            out.metrics
                .iter()
                .filter(|m| m.headline)
                .all(|m| m.labels["client"] == "all")
        );
        assert!(out.histograms.iter().any(|h| h.labels["client"] == "all"));
    }

    /// Every figure of real fio outputs (3.33, 3.39, 3.41; json and json+;
    /// one and two jobs; as one client and as two) is one the stage
    /// declares, as it declares it; and each declaration is measured.
    #[test]
    fn what_fio_prints_is_declared() {
        let decls = metrics();
        let mut seen = std::collections::BTreeSet::new();
        let outputs: Vec<Measurement> = crate::parser_fixtures("fio-")
            .into_iter()
            .filter(|(name, _)| !name.contains("job-error"))
            .map(|(name, text)| {
                pipeline_parsers::fio::parse_json(&text)
                    .unwrap_or_else(|e| panic!("{name} does not parse: {e}"))
            })
            .collect();
        let two = combine_clients(outputs[..2].to_vec());
        for m in outputs.into_iter().chain([two]) {
            let one = combine_clients(vec![m]);
            let adopted = adopt_all("fio", &decls, one.metrics.clone()).unwrap();
            assert_eq!(adopted, one.metrics);
            seen.extend(adopted.into_iter().map(|m| m.name));
        }
        for d in &decls {
            assert!(seen.contains(&*d.name), "no output measures `{}`", d.name);
        }
    }

    #[test]
    fn job_file_placeholders() {
        let vars = [("client", "1".to_string()), ("pool", "p".to_string())];
        assert_eq!(
            render_job_file("rbdname={{ pool }}-{{client}}", &vars).unwrap(),
            "rbdname=p-1"
        );
        let e = render_job_file("x={{ poool }}", &vars).unwrap_err();
        assert!(e.contains("unknown variable `poool`"), "{e}");
    }
}
