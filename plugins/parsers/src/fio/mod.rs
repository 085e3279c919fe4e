//! fio's `--output-format=json` and `json+` output.
//!
//! Metrics per job (label `job` = the job name) and over all jobs (label
//! `job=all`, the headline figures), for each of `read` and `write` that did
//! any I/O: `{dir}_iops`, `{dir}_bandwidth` (B/s), `{dir}_ios` (I/Os
//! completed), `{dir}_clat_mean` and `{dir}_clat_p50`/`_p90`/`_p99`/`_p99_9`
//! (microseconds).
//!
//! json+ adds fio's latency bins, which become the histogram `{dir}_clat`
//! (ns) of each job: the percentiles then declare the `histogram` rule, and
//! the `job=all` percentiles of several jobs come from their merged
//! histogram. Plain json has no bins: the percentiles declare `none`, and
//! there are no `job=all` percentiles over several jobs (a percentile of
//! percentiles means nothing).
//!
//! fio prints warnings and errors (`fio: pid=0, err=22/…`) before the JSON
//! on the same stream; they are skipped. A job whose `error` is non-zero
//! makes the whole output an error: its figures are not a measurement.

mod direction;

use pipeline_model::combine::{Parts, combine};
use pipeline_model::{Aggregate, Direction, Histogram, Measurement, Metric, unit};
use serde_json::Value;

use crate::error::ParseError;
use crate::scan::{json_document, json_number};
use direction::DirStats;

const TOOL: &str = "fio";
const DIRECTIONS: [&str; 2] = ["read", "write"];

/// Parses fio JSON output (optionally preceded by non-JSON lines).
pub fn parse_json(text: &str) -> Result<Measurement, ParseError> {
    let doc = json_document(TOOL, text)?;
    let Some(jobs) = doc.get("jobs").and_then(Value::as_array) else {
        return Err(ParseError::missing(
            TOOL,
            "a JSON document with a \"jobs\" array",
            text,
        ));
    };
    for job in jobs {
        let error = job.get("error").and_then(json_number).unwrap_or(0.0);
        if error != 0.0 {
            return Err(ParseError::tool(
                TOOL,
                format!("job {:?} failed with error {error}", job_name(job)),
            ));
        }
    }

    let names = labels(jobs);
    let mut metrics = Vec::new();
    let mut histograms = Vec::new();
    for dir in DIRECTIONS {
        for (job, name) in jobs.iter().zip(&names) {
            let Some(stats) = job.get(dir).and_then(direction::read) else {
                continue;
            };
            // Bins that do not make a histogram are as good as none.
            let histogram = stats.clat_bins_ns.as_ref().and_then(|bins| {
                Histogram::from_counts(clat_histogram(dir), unit::NANOSECONDS, bins.clone()).ok()
            });
            metrics.extend(direction_metrics(dir, &stats, name, histogram.is_some()));
            histograms.extend(histogram.map(|h| h.label("job", name.as_str())));
        }
    }
    if metrics.is_empty() {
        return Err(ParseError::missing(
            TOOL,
            "a job with read or write I/O (total_ios > 0)",
            text,
        ));
    }
    // The jobs of one fio process run at the same time (fio's `stonewall`
    // would serialize them, which the benchmark stages do not use). A
    // direction only one job did is copied: that job's figures are all.
    let jobs = Parts {
        over: "job",
        concurrent: true,
        at_least: 1,
    };
    let all = combine(&metrics, &histograms, jobs);
    metrics.extend(all.metrics.into_iter().map(|m| {
        if is_headline(&m.name) {
            m.headline()
        } else {
            m
        }
    }));
    histograms.extend(all.histograms);
    Ok(Measurement {
        metrics,
        series: Vec::new(),
        histograms,
    })
}

/// The name of the completion-latency histogram of `dir`.
fn clat_histogram(dir: &str) -> String {
    format!("{dir}_clat")
}

/// The `job=all` figures in the report's summary.
fn is_headline(name: &str) -> bool {
    ["_iops", "_bandwidth", "_clat_mean", "_clat_p99"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

fn job_name(job: &Value) -> &str {
    job.get("jobname").and_then(Value::as_str).unwrap_or("?")
}

/// The `job` label of each job: its name, or `name.N` (N counting from 0)
/// when several jobs share a name, as with `numjobs=4` without
/// `group_reporting`.
fn labels(jobs: &[Value]) -> Vec<String> {
    let names: Vec<&str> = jobs.iter().map(job_name).collect();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            if names.iter().filter(|n| *n == name).count() > 1 {
                let nth = names[..i].iter().filter(|n| *n == name).count();
                format!("{name}.{nth}")
            } else {
                name.to_string()
            }
        })
        .collect()
}

/// One job's metrics of one direction. Rules: rates and the I/O count add
/// up; the mean latency is weighted by the I/O count (a mean over all I/Os);
/// a percentile is taken from the merged histogram when fio gave its bins
/// (`has_histogram`), else it does not combine.
fn direction_metrics(dir: &str, s: &DirStats, job: &str, has_histogram: bool) -> Vec<Metric> {
    let ios = format!("{dir}_ios");
    let metric = |name: String, value: f64, unit: &str, direction: Direction, rule: Aggregate| {
        Metric::new(name, value, unit, direction)
            .aggregate(rule)
            .label("job", job)
    };
    let mut out = vec![
        metric(
            format!("{dir}_iops"),
            s.iops,
            unit::IOPS,
            Direction::Higher,
            Aggregate::Sum,
        ),
        metric(
            format!("{dir}_bandwidth"),
            s.bw_bytes,
            unit::BYTES_PER_S,
            Direction::Higher,
            Aggregate::Sum,
        ),
        metric(
            ios.clone(),
            s.ios,
            unit::COUNT,
            Direction::None,
            Aggregate::Sum,
        ),
    ];
    if let Some(mean) = s.clat_mean_us {
        out.push(metric(
            format!("{dir}_clat_mean"),
            mean,
            unit::MICROSECONDS,
            Direction::Lower,
            Aggregate::mean_weighted_by(ios),
        ));
    }
    for (suffix, v) in &s.clat_pct_us {
        let rule = match direction::quantile(suffix) {
            Some(q) if has_histogram => Aggregate::histogram(clat_histogram(dir), q),
            _ => Aggregate::None,
        };
        out.push(metric(
            format!("{dir}_clat_{suffix}"),
            *v,
            unit::MICROSECONDS,
            Direction::Lower,
            rule,
        ));
    }
    out
}
