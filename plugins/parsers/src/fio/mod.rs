//! fio's `--output-format=json` output.
//!
//! Metrics per job (label `job` = the job name) and over all jobs (label
//! `job=all`, the headline figures), for each of `read` and `write` that did
//! any I/O: `{dir}_iops`, `{dir}_bandwidth` (B/s), `{dir}_clat_mean` and
//! `{dir}_clat_p50`/`_p90`/`_p99`/`_p99_9` (microseconds).
//!
//! fio prints warnings and errors (`fio: pid=0, err=22/…`) before the JSON
//! on the same stream; they are skipped. A job whose `error` is non-zero
//! makes the whole output an error: its figures are not a measurement.

mod direction;

use pipeline_model::{Direction, Measurement, Metric, unit};
use serde_json::Value;

use crate::error::ParseError;
use crate::scan::{json_document, json_number};
use direction::{DirStats, PERCENTILES};

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
    for dir in DIRECTIONS {
        let per_job: Vec<(&str, DirStats)> = jobs
            .iter()
            .zip(&names)
            .filter_map(|(job, name)| Some((name.as_str(), direction::read(job.get(dir)?)?)))
            .collect();
        if per_job.is_empty() {
            continue;
        }
        for (name, stats) in &per_job {
            metrics.extend(direction_metrics(dir, stats, name, false));
        }
        let all = sum(per_job.iter().map(|(_, s)| s));
        metrics.extend(direction_metrics(dir, &all, "all", true));
    }
    if metrics.is_empty() {
        return Err(ParseError::missing(
            TOOL,
            "a job with read or write I/O (total_ios > 0)",
            text,
        ));
    }
    Ok(Measurement {
        metrics,
        series: Vec::new(),
    })
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

/// The figures over all jobs: IOPS and bandwidth add up; the latency mean
/// is the mean over all I/Os (weighted by each job's I/O count). fio's JSON
/// has no merged latency histogram, so a summed percentile is the maximum
/// of the jobs' percentiles: an upper bound of the true percentile.
fn sum<'a>(stats: impl Iterator<Item = &'a DirStats> + Clone) -> DirStats {
    let with_mean = stats
        .clone()
        .filter_map(|s| s.clat_mean_us.map(|m| (s.ios, m)));
    let weight: f64 = with_mean.clone().map(|(w, _)| w).sum();
    let clat_mean_us = (weight > 0.0).then(|| with_mean.map(|(w, m)| w * m).sum::<f64>() / weight);
    let clat_pct_us = PERCENTILES
        .iter()
        .filter_map(|(_, suffix)| {
            stats
                .clone()
                .filter_map(|s| {
                    s.clat_pct_us
                        .iter()
                        .find(|(k, _)| k == suffix)
                        .map(|(_, v)| *v)
                })
                .reduce(f64::max)
                .map(|v| (*suffix, v))
        })
        .collect();
    DirStats {
        ios: stats.clone().map(|s| s.ios).sum(),
        iops: stats.clone().map(|s| s.iops).sum(),
        bw_bytes: stats.map(|s| s.bw_bytes).sum(),
        clat_mean_us,
        clat_pct_us,
    }
}

fn direction_metrics(dir: &str, s: &DirStats, job: &str, headline: bool) -> Vec<Metric> {
    let metric = |name: String, value: f64, unit: &str, direction: Direction, top: bool| {
        let m = Metric::new(name, value, unit, direction).label("job", job);
        if headline && top { m.headline() } else { m }
    };
    let mut out = vec![
        metric(
            format!("{dir}_iops"),
            s.iops,
            unit::OPS_PER_S,
            Direction::Higher,
            true,
        ),
        metric(
            format!("{dir}_bandwidth"),
            s.bw_bytes,
            unit::BYTES_PER_S,
            Direction::Higher,
            true,
        ),
    ];
    if let Some(mean) = s.clat_mean_us {
        out.push(metric(
            format!("{dir}_clat_mean"),
            mean,
            unit::MICROSECONDS,
            Direction::Lower,
            true,
        ));
    }
    for (suffix, v) in &s.clat_pct_us {
        let top = *suffix == "p99";
        out.push(metric(
            format!("{dir}_clat_{suffix}"),
            *v,
            unit::MICROSECONDS,
            Direction::Lower,
            top,
        ));
    }
    out
}
