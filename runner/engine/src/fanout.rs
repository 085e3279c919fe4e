//! Per-host stages on several hosts: the outputs of each host's run are
//! merged into one stage result. Metrics and histograms keep a `host` label,
//! and for every metric measured on more than one host a `host=all` figure is
//! added by the metric's declared rule ([`pipeline_model::Aggregate`]): sums
//! of rates only when all hosts ran at once (one batch), maxima, minima,
//! (weighted) means, and percentiles taken from the hosts' merged histograms
//! (also kept, labelled `host=all`). A metric whose rule is `none` gets no
//! `host=all` figure. Hosts started together (`sync_start`) also get how
//! close together they started
//! ([`pipeline_stage_api::start_report::add_start_report`]).

use pipeline_model::combine::{Parts, combine};

use crate::hosts::Host;
use crate::stage::{StageError, StageOutput};

/// How the engine ran a per-host stage's hosts: in `count` sequential
/// batches of at most `parallel` hosts at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batches {
    pub count: usize,
    pub parallel: usize,
}

impl Batches {
    /// The batches of `hosts` hosts run `parallel` at a time.
    pub fn new(hosts: usize, parallel: usize) -> Self {
        let parallel = parallel.max(1);
        Batches {
            count: hosts.div_ceil(parallel),
            parallel,
        }
    }

    /// All hosts ran at the same time.
    fn concurrent(self) -> bool {
        self.count <= 1
    }
}

pub fn merge(
    results: Vec<(Host, Result<StageOutput, StageError>)>,
    batches: Batches,
) -> Result<StageOutput, StageError> {
    let hosts = results.len();
    let mut merged = StageOutput::default();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut cancelled = false;
    for (host, result) in results {
        match result {
            Ok(output) => {
                let mut part = output.for_host(&host.name);
                if let Some(reason) = part.skipped.take() {
                    skipped.push(reason);
                }
                merged.merge_from(part);
            }
            Err(StageError::Cancelled) => cancelled = true,
            Err(e) => failures.push(format!("{}: {e}", host.name)),
        }
    }
    if hosts > 1 {
        add_host_all(&mut merged, hosts, batches);
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

/// Adds the `host=all` figures (and merged histograms) to `merged`, and a
/// note for what could not be combined.
fn add_host_all(merged: &mut StageOutput, hosts: usize, batches: Batches) {
    let parts = Parts {
        over: "host",
        concurrent: batches.concurrent(),
        at_least: 2,
    };
    let all = combine(&merged.metrics, &merged.histograms, parts);
    if !all.unsummed.is_empty() {
        merged.notes.push(format!(
            "the {hosts} hosts ran in {} sequential batches of `parallel: {}`, so rates were \
             not summed into host=all ({})",
            batches.count,
            batches.parallel,
            all.unsummed.join(", ")
        ));
    }
    // The host=all figure is the headline; where there is none (rates of
    // hosts in sequential batches), the hosts' own figures stay headlines.
    merged.absorb_host_all(all);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::{Aggregate, Direction, Histogram, Metric};

    fn host(name: &str) -> Host {
        Host {
            name: name.into(),
            address: Some(format!("{name}.example")),
            ..Host::local()
        }
    }

    /// What a rados-bench-like stage reports on one host.
    fn output(bw: f64, ops: f64, lat_avg: f64, lat_max: f64, lat_min: f64) -> StageOutput {
        StageOutput {
            metrics: vec![
                Metric::new("bandwidth", bw, "B/s", Direction::Higher)
                    .aggregate(Aggregate::Sum)
                    .headline(),
                Metric::new("ops", ops, "count", Direction::None).aggregate(Aggregate::Sum),
                Metric::new("latency_avg", lat_avg, "ms", Direction::Lower)
                    .aggregate(Aggregate::mean_weighted_by("ops")),
                Metric::new("latency_max", lat_max, "ms", Direction::Lower)
                    .aggregate(Aggregate::Max),
                Metric::new("latency_min", lat_min, "ms", Direction::Lower)
                    .aggregate(Aggregate::Min),
                Metric::new("latency_stddev", 1.0, "ms", Direction::None)
                    .aggregate(Aggregate::None),
                Metric::new("load", lat_avg * 10.0, "%", Direction::None)
                    .aggregate(Aggregate::Mean { weight: None }),
            ],
            ..Default::default()
        }
    }

    fn two_hosts() -> Vec<(Host, Result<StageOutput, StageError>)> {
        vec![
            (host("a"), Ok(output(100.0, 300.0, 2.0, 9.0, 1.0))),
            (host("b"), Ok(output(50.0, 100.0, 4.0, 12.0, 0.5))),
        ]
    }

    fn find<'a>(out: &'a StageOutput, name: &str, h: &str) -> Option<&'a Metric> {
        out.metrics
            .iter()
            .find(|m| m.name == name && m.labels["host"] == h)
    }

    fn all(out: &StageOutput, name: &str) -> f64 {
        find(out, name, "all").unwrap().value
    }

    #[test]
    fn each_rule_for_hosts_that_ran_together() {
        let merged = merge(two_hosts(), Batches::new(2, 2)).unwrap();
        assert_eq!(all(&merged, "bandwidth"), 150.0);
        assert_eq!(all(&merged, "ops"), 400.0);
        assert_eq!(
            all(&merged, "latency_avg"),
            (300.0 * 2.0 + 100.0 * 4.0) / 400.0
        );
        assert_eq!(all(&merged, "latency_max"), 12.0);
        assert_eq!(all(&merged, "latency_min"), 0.5);
        assert_eq!(all(&merged, "load"), 30.0);
        assert!(find(&merged, "latency_stddev", "all").is_none());
        let bw = find(&merged, "bandwidth", "all").unwrap();
        assert!(bw.headline);
        assert!(!find(&merged, "bandwidth", "a").unwrap().headline);
        assert_eq!(bw.combination().as_deref(), Some("sum of 2 hosts"));
        assert_eq!(
            find(&merged, "latency_max", "all")
                .unwrap()
                .combination()
                .as_deref(),
            Some("max of 2 hosts")
        );
        assert!(merged.notes.is_empty(), "{:?}", merged.notes);
    }

    /// `parallel: 1` on 2 hosts: they ran one after the other, so their
    /// rates were measured over different windows and do not add up.
    #[test]
    fn hosts_in_sequential_batches_are_not_summed() {
        let batches = Batches::new(2, 1);
        assert_eq!(
            batches,
            Batches {
                count: 2,
                parallel: 1
            }
        );
        let merged = merge(two_hosts(), batches).unwrap();
        assert!(find(&merged, "bandwidth", "all").is_none());
        // Without a host=all figure the hosts' own stay in the summary.
        assert!(find(&merged, "bandwidth", "a").unwrap().headline);
        assert!(find(&merged, "ops", "all").is_none());
        // Rules that do not assume overlap still apply.
        assert_eq!(all(&merged, "latency_max"), 12.0);
        assert_eq!(
            all(&merged, "latency_avg"),
            (300.0 * 2.0 + 100.0 * 4.0) / 400.0
        );
        assert_eq!(
            merged.notes,
            [
                "the 2 hosts ran in 2 sequential batches of `parallel: 1`, so rates were not \
              summed into host=all (bandwidth, ops)"
            ]
        );
        assert_eq!(Batches::new(5, 4).count, 2);
        assert_eq!(Batches::new(3, 0).count, 3);
    }

    /// Latency samples of one host, in µs, from a fixed pseudo-random walk.
    fn samples(seed: u64, scale: u64, n: usize) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                scale + (x >> 33) % (scale * 4)
            })
            .collect()
    }

    fn with_latencies(values: &[u64]) -> StageOutput {
        let h = Histogram::from_values("clat", "us", values.iter().copied()).unwrap();
        let p99 = h.value_at_quantile(0.99).unwrap();
        StageOutput {
            metrics: vec![
                Metric::new("clat_p99", p99, "us", Direction::Lower)
                    .aggregate(Aggregate::histogram("clat", 0.99)),
            ],
            histograms: vec![h],
            ..Default::default()
        }
    }

    #[test]
    fn p99_of_two_hosts_is_that_of_their_merged_samples() {
        let a = samples(1, 100, 5000);
        let b = samples(2, 1000, 1000);
        let merged = merge(
            vec![
                (host("a"), Ok(with_latencies(&a))),
                (host("b"), Ok(with_latencies(&b))),
            ],
            Batches::new(2, 2),
        )
        .unwrap();
        let everything: Vec<u64> = a.iter().chain(&b).copied().collect();
        let expected = Histogram::from_values("clat", "us", everything)
            .unwrap()
            .value_at_quantile(0.99)
            .unwrap();
        let p99 = find(&merged, "clat_p99", "all").unwrap();
        assert_eq!(p99.value, expected);
        let mean_of_p99s = (find(&merged, "clat_p99", "a").unwrap().value
            + find(&merged, "clat_p99", "b").unwrap().value)
            / 2.0;
        assert!(
            (p99.value - mean_of_p99s).abs() > 0.1 * expected,
            "{} vs mean {mean_of_p99s}",
            p99.value
        );
        assert_eq!(
            p99.combination().as_deref(),
            Some("p99 of merged histograms of 2 hosts")
        );
        // The merged histogram is kept next to the hosts' own.
        let hosts: Vec<&str> = merged
            .histograms
            .iter()
            .map(|h| h.labels["host"].as_str())
            .collect();
        assert_eq!(hosts, ["a", "b", "all"]);
        assert_eq!(merged.histograms[2].count, 6000);
    }

    #[test]
    fn a_percentile_without_histograms_gets_no_host_all_figure() {
        let p99 = |v: f64| StageOutput {
            metrics: vec![
                Metric::new("clat_p99", v, "us", Direction::Lower)
                    .aggregate(Aggregate::histogram("clat", 0.99)),
            ],
            ..Default::default()
        };
        let merged = merge(
            vec![(host("a"), Ok(p99(1.0))), (host("b"), Ok(p99(3.0)))],
            Batches::new(2, 2),
        )
        .unwrap();
        assert!(find(&merged, "clat_p99", "all").is_none());
        assert_eq!(
            merged.notes,
            ["no host=all figure for clat_p99: no histogram `clat` for host a"]
        );
    }

    #[test]
    fn a_failed_host_fails_the_stage_naming_it() {
        let err = merge(
            vec![
                (host("a"), Ok(output(1.0, 1.0, 1.0, 1.0, 1.0))),
                (host("b"), Err(StageError::failed("boom"))),
            ],
            Batches::new(2, 2),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "b: boom");
    }
}
