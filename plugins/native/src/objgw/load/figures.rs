//! What the load reports: the metrics both stages declare, and the
//! figures, histograms and notes of a finished run.

use std::time::Duration;

use pipeline_model::{Aggregate, Direction, Histogram, HistogramError, Metric, unit};
use pipeline_stage_api::stage::{MetricSpec, StageError, StageOutput};

use super::super::recorder::{MIB, Op, OpStats, Phase, Recorder, stored};
use super::config::{LoadConfig, SteadyState};
use super::cpu::usable_cores;
use super::phases::Timing;

/// What `s3-bench` and `swift-bench` say about themselves, but their name
/// and summary.
pub fn about(name: &'static str, summary: &'static str) -> pipeline_stage_api::typed::About {
    pipeline_stage_api::typed::About {
        name,
        summary,
        // It orchestrates its client hosts itself (`objgw::clients`).
        per_host: false,
        requires: Vec::new(),
        outputs: Vec::new(),
        metrics: metric_specs(),
    }
}

/// The metrics both stages report.
pub fn metric_specs() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new(
            "ops_per_s",
            unit::OPS_PER_S,
            "Operations per second, per `op` and `phase` (prefill, measure).",
        ),
        MetricSpec::new(
            "bandwidth",
            unit::MIB_PER_S,
            "Payload MiB/s, per `op` and `phase`.",
        ),
        MetricSpec::new(
            "ops",
            unit::COUNT,
            "Operations completed, per `op` and `phase` (prefill, warmup, measure).",
        ),
        MetricSpec::new(
            "bytes",
            unit::BYTES,
            "Payload bytes moved, per `op` and `phase`.",
        ),
        MetricSpec::new(
            "latency_mean",
            unit::MICROSECONDS,
            "Mean latency; also latency_p50/p90/p99/p99_9/max (from the HDR histogram `latency`).",
        ),
        MetricSpec::new(
            "ttfb_mean",
            unit::MICROSECONDS,
            "GET time to first byte; also ttfb_p50/p90/p99/p99_9/max (histogram `ttfb`).",
        ),
        MetricSpec::new(
            "errors",
            unit::COUNT,
            "Failed requests, per `op`, `phase` and `kind` (http-STATUS, timeout, connection-reset, connect, data-mismatch, other).",
        ),
        MetricSpec::new(
            "client_cpu_seconds",
            unit::SECONDS,
            "User+system CPU of the client process in the measured phase; also client_cpu_per_1000_ops.",
        ),
        MetricSpec::new(
            "gateway_cpu_seconds",
            unit::SECONDS,
            "User+system CPU of the radosgw processes of this machine in the measured phase, when the endpoint is on loopback; also gateway_cpu_per_1000_ops.",
        ),
        MetricSpec::new(
            "steady_state",
            unit::COUNT,
            "With `steady_state`: 1 when it was reached (the run ended there), 0 when not.",
        ),
        MetricSpec::new(
            "target_rate",
            unit::OPS_PER_S,
            "The `rate` asked for (only with one); ops_per_s is what was achieved.",
        ),
        MetricSpec::new(
            "warmup_seconds",
            unit::SECONDS,
            "Length of the warm-up excluded from the figures; also prefill_seconds, measure_seconds.",
        ),
    ]
}

/// The stage output of a finished run: its figures, series and notes.
pub(super) fn output(
    config: &LoadConfig,
    mut rec: Recorder,
    timing: &Timing,
) -> Result<StageOutput, StageError> {
    let mut out = StageOutput {
        series: rec.series(),
        ..Default::default()
    };
    let (metrics, histograms) = figures(&rec, timing)
        .map_err(|e| StageError::failed(format!("cannot store a latency histogram: {e}")))?;
    out.metrics = metrics;
    out.histograms = histograms;
    out.notes.push(config.describe_workload());
    if let Some(rate) = config.rate {
        add_target_rate(&mut out, config, rate, &rec, timing);
    }
    if let (Some(ss), Some(reached)) = (&config.steady_state, timing.steady) {
        add_steady_state(&mut out, ss, reached, timing);
    }
    if let Some(note) = client_bound(timing, config.worker_threads) {
        out.notes.push(note);
    }
    Ok(out)
}

/// The `rate` asked for, and whether the load kept to it.
fn add_target_rate(
    out: &mut StageOutput,
    config: &LoadConfig,
    rate: f64,
    rec: &Recorder,
    timing: &Timing,
) {
    out.metrics.push(
        Metric::new("target_rate", rate, unit::OPS_PER_S, Direction::None)
            .aggregate(Aggregate::Sum),
    );
    let (ops, errors) = rec.totals(Phase::Measure);
    let achieved = (ops + errors) as f64 / timing.measure.as_secs_f64().max(1e-9);
    out.notes.push(format!(
        "target rate {rate} ops/s, {achieved:.1} achieved: latencies count from each request's intended start (coordinated omission corrected)"
    ));
    if achieved < 0.95 * rate {
        out.notes.push(format!(
            "the load fell behind its schedule ({achieved:.1} of {rate} ops/s): requests waited for a free slot of the {} in flight, and their latencies include that wait",
            config.concurrency
        ));
    }
}

/// Whether `steady_state` was reached, and what that means for the figures.
fn add_steady_state(out: &mut StageOutput, ss: &SteadyState, reached: bool, timing: &Timing) {
    out.metrics.push(
        Metric::new(
            "steady_state",
            if reached { 1.0 } else { 0.0 },
            unit::COUNT,
            Direction::None,
        )
        .aggregate(Aggregate::Min),
    );
    out.notes.push(if reached {
        format!(
            "steady state reached after {:.1} s: every second of the last {} s within {}% of their mean; the measured phase ended there",
            timing.measure.as_secs_f64(),
            ss.window.as_secs_f64(),
            ss.within
        )
    } else {
        format!(
            "steady state NOT reached in {:.1} s (no {} s window within {}% of its mean): the figures may still be moving",
            timing.measure.as_secs_f64(),
            ss.window.as_secs_f64(),
            ss.within
        )
    });
}

/// A note when the client used (nearly) all the cores its runtime may use:
/// then the figures say more about the client than about the gateway.
pub(super) fn client_bound(timing: &Timing, worker_threads: u32) -> Option<String> {
    let cores = usable_cores(worker_threads);
    let busy = timing.cpu_seconds / timing.measure.as_secs_f64().max(1e-9);
    (busy >= 0.8 * cores).then(|| {
        format!(
            "the figures are client-bound: the client used {busy:.2} of the {cores:.0} core(s) its runtime may use (worker_threads: {worker_threads})"
        )
    })
}

/// Metrics and histograms of every phase and operation, then of the run.
pub(super) fn figures(
    rec: &Recorder,
    timing: &Timing,
) -> Result<(Vec<Metric>, Vec<Histogram>), HistogramError> {
    let mut metrics = Vec::new();
    let mut histograms = Vec::new();
    let mut measured_ops = 0;
    for (&(phase, op), s) in rec.phases() {
        let f = OpFigures { phase, op, s };
        metrics.extend(f.counts());
        let seconds = match phase {
            Phase::Prefill => timing.prefill,
            Phase::Warmup => continue,
            Phase::Measure => timing.measure,
        }
        .as_secs_f64();
        if phase == Phase::Measure {
            measured_ops += s.ops;
        }
        if s.ops == 0 || seconds <= 0.0 {
            continue;
        }
        metrics.extend(f.rates(seconds));
        let mut distributions = vec![("latency", &s.latency_us)];
        if !s.ttfb_us.is_empty() {
            distributions.push(("ttfb", &s.ttfb_us));
        }
        for (name, hdr) in distributions {
            metrics.extend(f.distribution(name, hdr));
            let h = stored(name, hdr)?;
            histograms.push(h.label("op", op.as_str()).label("phase", phase.as_str()));
        }
    }
    metrics.extend(phase_seconds(timing));
    metrics.extend(cpu_figures(timing, measured_ops));
    Ok((metrics, histograms))
}

/// The figures of one operation in one phase.
struct OpFigures<'a> {
    phase: Phase,
    op: Op,
    s: &'a OpStats,
}

impl OpFigures<'_> {
    /// A metric labelled with the operation and the phase.
    fn m(
        &self,
        name: &str,
        value: f64,
        unit: &str,
        direction: Direction,
        rule: Aggregate,
    ) -> Metric {
        Metric::new(name, value, unit, direction)
            .aggregate(rule)
            .label("op", self.op.as_str())
            .label("phase", self.phase.as_str())
    }

    /// Headlines are the measured phase's.
    fn headline(&self, m: Metric) -> Metric {
        if self.phase == Phase::Measure {
            m.headline()
        } else {
            m
        }
    }

    /// Operations, bytes and errors by kind.
    fn counts(&self) -> Vec<Metric> {
        let s = self.s;
        let mut metrics = vec![
            self.m(
                "ops",
                s.ops as f64,
                unit::COUNT,
                Direction::None,
                Aggregate::Sum,
            ),
            self.m(
                "bytes",
                s.bytes as f64,
                unit::BYTES,
                Direction::None,
                Aggregate::Sum,
            ),
        ];
        for (kind, n) in &s.errors {
            let e = self.m(
                "errors",
                *n as f64,
                unit::COUNT,
                Direction::Lower,
                Aggregate::Sum,
            );
            metrics.push(e.label("kind", kind.as_str()));
        }
        metrics
    }

    /// Operations and payload per second over the phase's `seconds`.
    fn rates(&self, seconds: f64) -> Vec<Metric> {
        let s = self.s;
        let rate = s.ops as f64 / seconds;
        let mib_s = s.bytes as f64 / MIB / seconds;
        let mut metrics = vec![self.headline(self.m(
            "ops_per_s",
            rate,
            unit::OPS_PER_S,
            Direction::Higher,
            Aggregate::Sum,
        ))];
        // HEAD and LIST move no payload: no bandwidth row for them.
        if s.bytes > 0 {
            metrics.push(self.headline(self.m(
                "bandwidth",
                mib_s,
                unit::MIB_PER_S,
                Direction::Higher,
                Aggregate::Sum,
            )));
        }
        metrics
    }

    /// Mean, percentiles and maximum of a distribution (`latency`, `ttfb`).
    fn distribution(&self, name: &str, hdr: &hdrhistogram::Histogram<u64>) -> Vec<Metric> {
        let us = |suffix: &str, value: f64, rule: Aggregate| {
            self.m(
                &format!("{name}_{suffix}"),
                value,
                unit::MICROSECONDS,
                Direction::Lower,
                rule,
            )
        };
        let mut metrics = vec![us("mean", hdr.mean(), Aggregate::mean_weighted_by("ops"))];
        for (suffix, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99_9", 0.999)] {
            let p = us(
                suffix,
                hdr.value_at_quantile(q) as f64,
                Aggregate::histogram(name, q),
            );
            let p = if suffix == "p99" && name == "latency" {
                self.headline(p)
            } else {
                p
            };
            metrics.push(p);
        }
        metrics.push(us("max", hdr.max() as f64, Aggregate::Max));
        metrics
    }
}

/// How long each phase lasted.
fn phase_seconds(timing: &Timing) -> Vec<Metric> {
    let seconds = |name: &str, d: Duration| {
        Metric::new(name, d.as_secs_f64(), unit::SECONDS, Direction::None).aggregate(Aggregate::Max)
    };
    vec![
        seconds("prefill_seconds", timing.prefill),
        seconds("warmup_seconds", timing.warmup),
        seconds("measure_seconds", timing.measure),
    ]
}

/// The gateway's (on loopback) and the client's CPU, also per 1000 measured operations.
fn cpu_figures(timing: &Timing, measured_ops: u64) -> Vec<Metric> {
    let mut metrics = Vec::new();
    if let Some(g) = timing.gateway_cpu_seconds {
        metrics.push(
            Metric::new("gateway_cpu_seconds", g, unit::SECONDS, Direction::Lower)
                .aggregate(Aggregate::Max),
        );
        if measured_ops > 0 {
            metrics.push(
                Metric::new(
                    "gateway_cpu_per_1000_ops",
                    g * 1000.0 / measured_ops as f64,
                    unit::SECONDS,
                    Direction::Lower,
                )
                .aggregate(Aggregate::None),
            );
        }
    }
    let cpu = Metric::new(
        "client_cpu_seconds",
        timing.cpu_seconds,
        unit::SECONDS,
        Direction::Lower,
    );
    metrics.push(cpu.aggregate(Aggregate::Sum));
    if measured_ops > 0 {
        let per_1000 = timing.cpu_seconds * 1000.0 / measured_ops as f64;
        let m = Metric::new(
            "client_cpu_per_1000_ops",
            per_1000,
            unit::SECONDS,
            Direction::Lower,
        );
        metrics.push(m.aggregate(Aggregate::None));
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objgw::recorder::Op;

    #[test]
    fn figures_carry_rules_and_histograms() {
        let mut rec = Recorder::default();
        for ms in [1, 2, 3, 4] {
            let d = Duration::from_millis(ms);
            rec.success(
                Phase::Measure,
                Op::Get,
                4096,
                d,
                Some(d / 2),
                Duration::ZERO,
            );
        }
        let timing = Timing {
            prefill: Duration::ZERO,
            warmup: Duration::ZERO,
            measure: Duration::from_secs(2),
            cpu_seconds: 0.5,
            steady: None,
            gateway_cpu_seconds: Some(1.0),
            measure_start_unix_ns: 0,
            issuing_end_unix_ns: 2_000_000_000,
        };
        let (metrics, histograms) = figures(&rec, &timing).unwrap();
        let find = |name: &str| metrics.iter().find(|m| m.name == name).unwrap();
        assert_eq!(find("ops_per_s").value, 2.0);
        assert_eq!(
            find("latency_p99").aggregate,
            Aggregate::histogram("latency", 0.99)
        );
        assert_eq!(find("client_cpu_per_1000_ops").value, 125.0);
        assert_eq!(find("gateway_cpu_per_1000_ops").value, 250.0);
        assert_eq!(histograms.len(), 2);
        assert_eq!(histograms[1].name, "ttfb");
        assert!(client_bound(&timing, 2).is_none());
    }
}
