//! What the load reports: the metrics both stages declare, and the
//! figures, histograms and notes of a finished run.

use pipeline_model::{Aggregate, Direction, Histogram, HistogramError, Metric, unit};
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{StageError, StageOutput};

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
        metrics: metrics(),
    }
}

/// A latency distribution's figures (`latency`, `ttfb`): mean, percentiles
/// from the HDR histogram of that name, maximum; `$p99_headline` says
/// whether its p99 is a headline figure.
macro_rules! distribution {
    ($name:literal, $what:literal, $p99_headline:expr) => {
        [
            MetricDecl::declare(
                concat!($name, "_mean"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::const_mean_weighted_by("ops"),
                concat!("Mean ", $what, ", per `op` and `phase`."),
            ),
            MetricDecl::declare(
                concat!($name, "_p50"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::const_histogram($name, 0.5),
                concat!("Median ", $what, " (HDR histogram `", $name, "`)."),
            ),
            MetricDecl::declare(
                concat!($name, "_p90"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::const_histogram($name, 0.9),
                concat!("p90 ", $what, "."),
            ),
            {
                let mut p99 = MetricDecl::declare(
                    concat!($name, "_p99"),
                    unit::MICROSECONDS,
                    Direction::Lower,
                    Aggregate::const_histogram($name, 0.99),
                    concat!("p99 ", $what, "."),
                );
                p99.headline = $p99_headline;
                p99
            },
            MetricDecl::declare(
                concat!($name, "_p99_9"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::const_histogram($name, 0.999),
                concat!("p99.9 ", $what, "."),
            ),
            MetricDecl::declare(
                concat!($name, "_max"),
                unit::MICROSECONDS,
                Direction::Lower,
                Aggregate::Max,
                concat!("Largest ", $what, "."),
            ),
        ]
    };
}

pub const OPS_PER_S: MetricDecl = MetricDecl::rate(
    "ops_per_s",
    unit::OPS_PER_S,
    "Requests completed per second, per `op` and `phase` (prefill, measure).",
)
.headline();
pub const BANDWIDTH: MetricDecl = MetricDecl::rate(
    "bandwidth",
    unit::MIB_PER_S,
    "Payload MiB/s, per `op` and `phase`.",
)
.headline();
pub const OPS: MetricDecl = MetricDecl::declare(
    "ops",
    unit::COUNT,
    Direction::None,
    Aggregate::Sum,
    "Operations completed, per `op` and `phase` (prefill, warmup, measure).",
);
pub const BYTES: MetricDecl = MetricDecl::declare(
    "bytes",
    unit::BYTES,
    Direction::None,
    Aggregate::Sum,
    "Payload bytes moved, per `op` and `phase`.",
);
pub const ERRORS: MetricDecl = MetricDecl::declare(
    "errors",
    unit::COUNT,
    Direction::Lower,
    Aggregate::Sum,
    "Failed requests, per `op`, `phase` and `kind` (http-STATUS, timeout, connection-reset, connect, data-mismatch, other).",
);
pub const LATENCY: [MetricDecl; 6] = distribution!("latency", "request latency", true);
pub const TTFB: [MetricDecl; 6] = distribution!("ttfb", "GET time to first byte", false);
pub const CLIENT_CPU_SECONDS: MetricDecl = MetricDecl::declare(
    "client_cpu_seconds",
    unit::SECONDS,
    Direction::Lower,
    Aggregate::Sum,
    "User+system CPU of the client process in the measured phase.",
);
pub const CLIENT_CPU_PER_1000_OPS: MetricDecl = MetricDecl::declare(
    "client_cpu_per_1000_ops",
    unit::SECONDS,
    Direction::Lower,
    Aggregate::None,
    "Client CPU seconds per 1000 measured operations.",
);
pub const GATEWAY_CPU_SECONDS: MetricDecl = MetricDecl::declare(
    "gateway_cpu_seconds",
    unit::SECONDS,
    Direction::Lower,
    Aggregate::Max,
    "User+system CPU of the radosgw processes of this machine in the measured phase, when the endpoint is on loopback.",
);
pub const GATEWAY_CPU_PER_1000_OPS: MetricDecl = MetricDecl::declare(
    "gateway_cpu_per_1000_ops",
    unit::SECONDS,
    Direction::Lower,
    Aggregate::None,
    "Gateway CPU seconds per 1000 measured operations.",
);
pub const STEADY_STATE: MetricDecl = MetricDecl::declare(
    "steady_state",
    unit::COUNT,
    Direction::None,
    Aggregate::Min,
    "With `steady_state`: 1 when it was reached (the run ended there), 0 when not.",
);
pub const TARGET_RATE: MetricDecl = MetricDecl::declare(
    "target_rate",
    unit::OPS_PER_S,
    Direction::None,
    Aggregate::Sum,
    "The `rate` asked for (only with one); ops_per_s is what was achieved.",
);
pub const PHASE_SECONDS: [MetricDecl; 3] = [
    MetricDecl::declare(
        "prefill_seconds",
        unit::SECONDS,
        Direction::None,
        Aggregate::Max,
        "Length of the prefill (objects written before the GETs).",
    ),
    MetricDecl::declare(
        "warmup_seconds",
        unit::SECONDS,
        Direction::None,
        Aggregate::Max,
        "Length of the warm-up excluded from the figures.",
    ),
    MetricDecl::declare(
        "measure_seconds",
        unit::SECONDS,
        Direction::None,
        Aggregate::Max,
        "Length of the measured phase.",
    ),
];

/// The metrics both stages report: the load's own, and those of a run on
/// several client hosts ([`super::super::clients::metrics`]).
pub fn metrics() -> Vec<MetricDecl> {
    let mut all = vec![
        OPS_PER_S,
        BANDWIDTH,
        OPS,
        BYTES,
        ERRORS,
        CLIENT_CPU_SECONDS,
        CLIENT_CPU_PER_1000_OPS,
        GATEWAY_CPU_SECONDS,
        GATEWAY_CPU_PER_1000_OPS,
        STEADY_STATE,
        TARGET_RATE,
    ];
    all.extend(LATENCY);
    all.extend(TTFB);
    all.extend(PHASE_SECONDS);
    all.extend(super::super::clients::metrics());
    all
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
    out.metrics.push(TARGET_RATE.value(rate));
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
    out.metrics
        .push(STEADY_STATE.value(if reached { 1.0 } else { 0.0 }));
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
    /// A value of `decl`, labelled with the operation and the phase. Only
    /// the measured phase's figures are headlines.
    fn m(&self, decl: &MetricDecl, value: f64) -> Metric {
        let mut m = decl
            .value(value)
            .label("op", self.op.as_str())
            .label("phase", self.phase.as_str());
        m.headline = decl.headline && self.phase == Phase::Measure;
        m
    }

    /// Operations, bytes and errors by kind.
    fn counts(&self) -> Vec<Metric> {
        let s = self.s;
        let mut metrics = vec![self.m(&OPS, s.ops as f64), self.m(&BYTES, s.bytes as f64)];
        for (kind, n) in &s.errors {
            metrics.push(self.m(&ERRORS, *n as f64).label("kind", kind.as_str()));
        }
        metrics
    }

    /// Operations and payload per second over the phase's `seconds`.
    fn rates(&self, seconds: f64) -> Vec<Metric> {
        let s = self.s;
        let mut metrics = vec![self.m(&OPS_PER_S, s.ops as f64 / seconds)];
        // HEAD and LIST move no payload: no bandwidth row for them.
        if s.bytes > 0 {
            metrics.push(self.m(&BANDWIDTH, s.bytes as f64 / MIB / seconds));
        }
        metrics
    }

    /// Mean, percentiles and maximum of a distribution (`latency`, `ttfb`).
    fn distribution(&self, name: &str, hdr: &hdrhistogram::Histogram<u64>) -> Vec<Metric> {
        let decls = if name == "latency" { &LATENCY } else { &TTFB };
        let values = [
            hdr.mean(),
            hdr.value_at_quantile(0.5) as f64,
            hdr.value_at_quantile(0.9) as f64,
            hdr.value_at_quantile(0.99) as f64,
            hdr.value_at_quantile(0.999) as f64,
            hdr.max() as f64,
        ];
        decls
            .iter()
            .zip(values)
            .map(|(decl, value)| self.m(decl, value))
            .collect()
    }
}

/// How long each phase lasted.
fn phase_seconds(timing: &Timing) -> Vec<Metric> {
    let [prefill, warmup, measure] = &PHASE_SECONDS;
    vec![
        prefill.value(timing.prefill.as_secs_f64()),
        warmup.value(timing.warmup.as_secs_f64()),
        measure.value(timing.measure.as_secs_f64()),
    ]
}

/// The gateway's (on loopback) and the client's CPU, also per 1000 measured operations.
fn cpu_figures(timing: &Timing, measured_ops: u64) -> Vec<Metric> {
    let mut metrics = Vec::new();
    if let Some(g) = timing.gateway_cpu_seconds {
        metrics.push(GATEWAY_CPU_SECONDS.value(g));
        if measured_ops > 0 {
            metrics.push(GATEWAY_CPU_PER_1000_OPS.value(g * 1000.0 / measured_ops as f64));
        }
    }
    metrics.push(CLIENT_CPU_SECONDS.value(timing.cpu_seconds));
    if measured_ops > 0 {
        let per_1000 = timing.cpu_seconds * 1000.0 / measured_ops as f64;
        metrics.push(CLIENT_CPU_PER_1000_OPS.value(per_1000));
    }
    metrics
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
