//! `fio`: run fio jobs, one fio process per client (like one VM per RBD
//! volume in the field notes), always `--output-format=json+`, and report
//! read/write IOPS, bandwidth and completion-latency percentiles per client
//! and over all clients (percentiles from the clients' merged histograms).
//!
//! Engines: `rbd` (an image per client, created by this run in `pool`),
//! `rados` (objects in `pool`; fio's rados engine ignores CEPH_CONF, so the
//! conf is passed explicitly), `libaio` (a file or device given in options).

use std::time::Duration;

use pipeline_model::combine::{Parts, combine};
use pipeline_model::{Histogram, Measurement, Metric, unit};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::params::{ParamSpec, ParamType, Params, ParamsExt};
use pipeline_stage_api::stage::{
    Action, MetricSpec, PlanContext, Stage, StageDescription, StageError, StageOutput,
};
use serde_json::{Value, json};

use crate::ceph::{IMAGE, admin};

pub struct Fio;

struct Client {
    index: i64,
    argv: Vec<String>,
}

fn engine(params: &Params) -> &str {
    params.str("engine").unwrap_or("rbd")
}

fn image_name(params: &Params, client: i64) -> String {
    format!(
        "{}-{client}",
        params.str("image_prefix").unwrap_or("pipeline-fio")
    )
}

/// The fio command line of one client. `job_file` is the rendered job file
/// path, when the stage uses one.
fn client_argv(
    params: &Params,
    ceph: &pipeline_stage_api::ceph::CephConnection,
    client: i64,
    job_file: Option<&str>,
) -> Vec<String> {
    // json+: the JSON plus each job's latency bins, from which the
    // percentiles over clients (and hosts) are computed.
    let mut argv = vec!["fio".to_string(), "--output-format=json+".to_string()];
    let pool = params.str("pool").unwrap_or_default();
    let clientname = ceph
        .name
        .as_deref()
        .and_then(|n| n.strip_prefix("client."))
        .unwrap_or("admin");
    match engine(params) {
        "rbd" => argv.extend([
            "--ioengine=rbd".to_string(),
            format!("--clientname={clientname}"),
            format!("--pool={pool}"),
            format!("--rbdname={}", image_name(params, client)),
        ]),
        "rados" => {
            argv.extend([
                "--ioengine=rados".to_string(),
                format!("--clientname={clientname}"),
                format!("--pool={pool}"),
            ]);
            if let Some(conf) = &ceph.conf {
                argv.push(format!("--conf={conf}"));
            }
        }
        _ => argv.push("--ioengine=libaio".to_string()),
    }
    match job_file {
        Some(file) => argv.push(file.to_string()),
        None => {
            argv.push(format!("--name={}", params.str("name").unwrap_or("bench")));
            if let Some(Value::Object(options)) = params.get("options") {
                for (k, v) in options {
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
    }
    argv
}

impl Stage for Fio {
    fn describe(&self) -> StageDescription {
        StageDescription {
            capabilities: Vec::new(),
            per_host: true,
            requires: vec!["fio".into()],
            name: "fio".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary: "fio with the rbd, rados or libaio engine, one process per client, JSON output parsed.".into(),
            params: vec![
                ParamSpec::with_default("engine", ParamType::enumeration(&["rbd", "rados", "libaio"]), json!("rbd"), "fio ioengine."),
                ParamSpec::optional("pool", ParamType::String, "Pool (rbd and rados engines)."),
                ParamSpec::with_default("clients", ParamType::Integer, json!(1), "fio processes run at once; with rbd, each on its own image."),
                ParamSpec::with_default("image_prefix", ParamType::String, json!("pipeline-fio"), "rbd: images are PREFIX-0, PREFIX-1, ... (created by this run)."),
                ParamSpec::with_default("image_size", ParamType::Size, json!(1u64 << 30), "rbd: size of each image."),
                ParamSpec::with_default("name", ParamType::String, json!("bench"), "Job name (inline options)."),
                ParamSpec::with_default(
                    "options",
                    ParamType::Map,
                    json!({}),
                    "Inline job options as fio's --KEY=VALUE (rw, bs, iodepth, runtime, time_based, size, numjobs, direct, ...); `{client}` in a value is the client number.",
                ),
                ParamSpec::optional("job_file", ParamType::String, "A fio job file, rendered as a template per client (`{{ client }}`, `{{ pool }}`, `{{ image }}`) instead of `options`."),
                ParamSpec::with_default("command_timeout", ParamType::Duration, json!(900), "Kill fio after this long."),
            ],
            outputs: Vec::new(),
            metrics: vec![
                MetricSpec::new("read_iops", unit::OPS_PER_S, "Read IOPS (also write_iops); label job, client."),
                MetricSpec::new("read_bandwidth", unit::BYTES_PER_S, "Read bandwidth (also write_bandwidth)."),
                MetricSpec::new("read_clat_p99", unit::MICROSECONDS, "Completion latency percentiles p50/p90/p99/p99_9 and mean."),
            ],
        }
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        let mut p = Vec::new();
        let engine = engine(params);
        if (engine == "rbd" || engine == "rados") && params.str("pool").is_none_or(str::is_empty) {
            p.push(("pool".into(), format!("the {engine} engine needs `pool`")));
        }
        if !params
            .i64("clients")
            .is_some_and(|c| (1..=256).contains(&c))
        {
            p.push(("clients".into(), "must be between 1 and 256".into()));
        }
        let has_options = params
            .get("options")
            .and_then(Value::as_object)
            .is_some_and(|o| !o.is_empty());
        if has_options == params.get("job_file").is_some() {
            p.push((
                "options".into(),
                "give either inline `options` or a `job_file`".into(),
            ));
        }
        if engine == "libaio"
            && let Some(Value::Object(o)) = params.get("options")
            && !o.contains_key("filename")
            && !o.contains_key("directory")
        {
            p.push((
                "options".into(),
                "the libaio engine needs `filename` (a scratch file or device) or `directory`"
                    .into(),
            ));
        }
        p
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        let clients = params.i64("clients").unwrap_or(1);
        let mut actions = Vec::new();
        for c in 0..clients {
            if engine(params) == "rbd" {
                let mib = params
                    .u64("image_size")
                    .unwrap_or(1 << 30)
                    .div_ceil(1 << 20);
                let image = format!(
                    "{}/{}",
                    params.str("pool").unwrap_or_default(),
                    image_name(params, c)
                );
                actions.push(Action::command(
                    format!("client {c}: create image"),
                    ctx.ceph
                        .argv("rbd", &["create", &image, "--size", &format!("{mib}M")]),
                ));
            }
            let job = params.get("job_file").map(|_| "<rendered job file>");
            actions.push(Action::command(
                format!("client {c}: fio"),
                client_argv(params, ctx.ceph, c, job),
            ));
        }
        actions
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let clients: Vec<Client> = prepare_clients(params, ctx)?;
        let timeout = params
            .duration("command_timeout")
            .unwrap_or(Duration::from_secs(900));
        let commands: Vec<(String, CommandSpec)> = clients
            .iter()
            .map(|c| {
                let mut spec = CommandSpec::new(c.argv.clone()).timeout(timeout);
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
            let m = pipeline_parsers::fio::parse_json(&out.stdout).map_err(|e| {
                StageError::failed(format!(
                    "cannot read fio output of client {}: {e}",
                    client.index
                ))
            })?;
            per_client.push(m);
        }
        let combined = combine_clients(per_client);
        output.metrics = combined.metrics;
        output.histograms = combined.histograms;
        Ok(output)
    }
}

fn prepare_clients(params: &Params, ctx: &mut StageContext) -> Result<Vec<Client>, StageError> {
    let n = params.i64("clients").unwrap_or(1);
    let pool = params.str("pool").unwrap_or_default().to_string();
    let job_template = match params.str("job_file") {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| StageError::io(format!("reading job file {path}"), e))?,
        ),
        None => None,
    };
    let mut clients = Vec::new();
    for c in 0..n {
        let image = (engine(params) == "rbd").then(|| format!("{pool}/{}", image_name(params, c)));
        if let Some(image) = &image
            && !ctx.was_created(IMAGE, image)
        {
            let mib = params
                .u64("image_size")
                .unwrap_or(1 << 30)
                .div_ceil(1 << 20);
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
                        ("image", image_name(params, c)),
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
            argv: client_argv(params, &ctx.ceph, c, job_file.as_deref()),
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
