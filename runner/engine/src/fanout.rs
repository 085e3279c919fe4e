//! Per-host stages on several hosts: the outputs of each host's run are
//! merged into one stage result. Metrics keep a `host` label, and for every
//! metric measured on more than one host an aggregate `host=all` is added:
//! rates (bandwidth, IOPS, anything per second) are summed — the hosts ran at
//! the same time — other figures (latencies, sizes) are averaged.

use std::collections::BTreeMap;

use pipeline_model::{Labels, Metric};

use crate::hosts::Host;
use crate::stage::{StageError, StageOutput};

pub fn merge(
    results: Vec<(Host, Result<StageOutput, StageError>)>,
) -> Result<StageOutput, StageError> {
    let hosts = results.len();
    let mut merged = StageOutput::default();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut cancelled = false;
    for (host, result) in results {
        match result {
            Ok(output) => {
                merged.metrics.extend(
                    output
                        .metrics
                        .into_iter()
                        .map(|m| m.label("host", host.name.clone())),
                );
                merged.notes.extend(
                    output
                        .notes
                        .into_iter()
                        .map(|n| format!("{}: {n}", host.name)),
                );
                for mut s in output.series {
                    s.labels.insert("host".into(), host.name.clone());
                    s.name = format!("{}-{}", s.name, host.name);
                    merged.series.push(s);
                }
                for (k, v) in output.outputs {
                    merged.outputs.entry(k).or_insert(v);
                }
                for (k, v) in output.environment {
                    merged.environment.insert(format!("{k} ({})", host.name), v);
                }
                if let Some(reason) = output.skipped {
                    skipped.push(format!("{}: {reason}", host.name));
                }
            }
            Err(StageError::Cancelled) => cancelled = true,
            Err(e) => failures.push(format!("{}: {e}", host.name)),
        }
    }
    if hosts > 1 {
        let aggregates = aggregate(&merged.metrics);
        for m in merged.metrics.iter_mut() {
            m.headline = false; // the aggregate is the headline
        }
        merged.metrics.extend(aggregates);
    }
    if cancelled {
        return Err(StageError::Cancelled);
    }
    if !failures.is_empty() {
        // Metrics of the hosts that succeeded are lost with an Err; keep the
        // failure message complete instead, naming every failed host.
        return Err(StageError::failed(failures.join("; ")));
    }
    if !skipped.is_empty() && skipped.len() == hosts {
        merged.skipped = Some(skipped.join("; "));
    } else {
        // Some hosts skipped: the stage succeeded, but say where it did not measure.
        merged
            .notes
            .extend(skipped.into_iter().map(|s| format!("skipped on {s}")));
    }
    Ok(merged)
}

fn is_rate(unit: &str) -> bool {
    unit.ends_with("/s") || unit == "IOPS"
}

/// A metric's identity apart from its host: name, unit, other labels.
type MetricKey = (String, String, Vec<(String, String)>);

fn aggregate(metrics: &[Metric]) -> Vec<Metric> {
    let mut groups: BTreeMap<MetricKey, Vec<&Metric>> = BTreeMap::new();
    for m in metrics {
        let mut labels: Labels = m.labels.clone();
        labels.remove("host");
        groups
            .entry((m.name.clone(), m.unit.clone(), labels.into_iter().collect()))
            .or_default()
            .push(m);
    }
    groups
        .into_iter()
        .filter(|(_, ms)| ms.len() > 1)
        .map(|((name, unit, labels), ms)| {
            let sum: f64 = ms.iter().map(|m| m.value).sum();
            let value = if is_rate(&unit) {
                sum
            } else {
                sum / ms.len() as f64
            };
            let mut m = Metric::new(name, value, &unit, ms[0].direction);
            m.labels = labels.into_iter().collect();
            m.labels.insert("host".into(), "all".into());
            // Headline when the stage made the per-host figure one (set
            // before the per-host copies lost the flag).
            m.headline = ms.iter().any(|x| x.headline);
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::Direction;

    fn host(name: &str) -> Host {
        Host {
            name: name.into(),
            address: Some(format!("{name}.example")),
            ..Host::local()
        }
    }

    fn output(bw: f64, lat: f64) -> StageOutput {
        StageOutput {
            metrics: vec![
                Metric::new("bandwidth", bw, "B/s", Direction::Higher).headline(),
                Metric::new("latency", lat, "ms", Direction::Lower),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn sums_rates_and_averages_the_rest() {
        let merged = merge(vec![
            (host("a"), Ok(output(100.0, 2.0))),
            (host("b"), Ok(output(50.0, 4.0))),
        ])
        .unwrap();
        let find = |name: &str, h: &str| {
            merged
                .metrics
                .iter()
                .find(|m| m.name == name && m.labels["host"] == h)
                .unwrap()
                .clone()
        };
        assert_eq!(find("bandwidth", "all").value, 150.0);
        assert!(find("bandwidth", "all").headline);
        assert!(!find("bandwidth", "a").headline);
        assert_eq!(find("latency", "all").value, 3.0);
    }

    #[test]
    fn a_failed_host_fails_the_stage_naming_it() {
        let err = merge(vec![
            (host("a"), Ok(output(1.0, 1.0))),
            (host("b"), Err(StageError::failed("boom"))),
        ])
        .unwrap_err();
        assert_eq!(err.to_string(), "b: boom");
    }
}
