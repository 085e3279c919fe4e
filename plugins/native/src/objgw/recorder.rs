//! What the workers measure, kept in constant memory: per phase and
//! operation an HDR histogram of latencies (and of time to first byte for
//! GET), counts of ops, bytes and errors by kind; for the measured phase a
//! per-second series whose current second is the only histogram kept for it.

use std::collections::BTreeMap;
use std::time::Duration;

use pipeline_model::{Direction, Histogram, HistogramError, Series, unit};

type Hdr = hdrhistogram::Histogram<u64>;

fn new_hdr() -> Hdr {
    // Three significant digits, growing as needed (a stalled gateway can
    // answer after minutes).
    let mut h = Hdr::new(3).expect("3 significant digits is a valid HDR precision");
    h.auto(true);
    h
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Get,
    Put,
    Delete,
    Head,
    List,
    /// One part of a multipart PUT (the whole object counts as a `put`).
    PutPart,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::Delete => "delete",
            Op::Head => "head",
            Op::List => "list",
            Op::PutPart => "put-part",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Prefill,
    Warmup,
    Measure,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prefill => "prefill",
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
        }
    }
}

/// One operation's figures in one phase.
pub struct OpStats {
    pub ops: u64,
    pub bytes: u64,
    pub latency_us: Hdr,
    pub ttfb_us: Hdr,
    pub errors: BTreeMap<String, u64>,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            ops: 0,
            bytes: 0,
            latency_us: new_hdr(),
            ttfb_us: new_hdr(),
            errors: BTreeMap::new(),
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// A histogram of microseconds as results.json stores it.
pub fn stored(name: &str, hdr: &Hdr) -> Result<Histogram, HistogramError> {
    Histogram::from_counts(
        name,
        unit::MICROSECONDS,
        hdr.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value())),
    )
}

/// The second being filled for the per-second series of one operation.
struct CurrentSecond {
    index: u64,
    ops: u64,
    bytes: u64,
    latency_us: Hdr,
}

struct PerSecond {
    current: Option<CurrentSecond>,
    ops: Vec<[f64; 2]>,
    mib_s: Vec<[f64; 2]>,
    p99_us: Vec<[f64; 2]>,
}

impl PerSecond {
    fn new() -> Self {
        PerSecond {
            current: None,
            ops: Vec::new(),
            mib_s: Vec::new(),
            p99_us: Vec::new(),
        }
    }

    fn record(&mut self, second: u64, bytes: u64, latency: Duration) {
        if self.current.as_ref().is_some_and(|c| c.index < second) {
            self.flush();
        }
        let current = self.current.get_or_insert_with(|| CurrentSecond {
            index: second,
            ops: 0,
            bytes: 0,
            latency_us: new_hdr(),
        });
        // A request finishing late (out of order) counts in the second being filled.
        current.ops += 1;
        current.bytes += bytes;
        let _ = current.latency_us.record(micros(latency));
    }

    fn flush(&mut self) {
        if let Some(c) = self.current.take() {
            let t = (c.index + 1) as f64;
            self.ops.push([t, c.ops as f64]);
            self.mib_s.push([t, c.bytes as f64 / MIB]);
            self.p99_us
                .push([t, c.latency_us.value_at_quantile(0.99) as f64]);
        }
    }
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Longest measured phase kept in tenths of a second (a day): later
/// completions count in the last tenth.
const MAX_TENTHS: usize = 864_000;

#[derive(Default)]
pub struct Recorder {
    stats: BTreeMap<(Phase, Op), OpStats>,
    per_second: BTreeMap<Op, PerSecond>,
    /// Per operation, `[ops, bytes]` completed in each 100 ms of the
    /// measured phase: what several hosts' common window is summed from.
    tenths: BTreeMap<Op, Vec<[u64; 2]>>,
}

impl Recorder {
    /// A finished request; `since` is how far into the measured phase it
    /// finished (only used for that phase).
    pub fn success(
        &mut self,
        phase: Phase,
        op: Op,
        bytes: u64,
        latency: Duration,
        ttfb: Option<Duration>,
        since: Duration,
    ) {
        let s = self.stats.entry((phase, op)).or_insert_with(OpStats::new);
        s.ops += 1;
        s.bytes += bytes;
        let _ = s.latency_us.record(micros(latency));
        if let Some(t) = ttfb {
            let _ = s.ttfb_us.record(micros(t));
        }
        if phase == Phase::Measure {
            self.per_second
                .entry(op)
                .or_insert_with(PerSecond::new)
                .record(since.as_secs(), bytes, latency);
            let tenth = ((since.as_millis() / 100) as usize).min(MAX_TENTHS - 1);
            let bins = self.tenths.entry(op).or_default();
            if bins.len() <= tenth {
                bins.resize(tenth + 1, [0, 0]);
            }
            bins[tenth][0] += 1;
            bins[tenth][1] += bytes;
        }
    }

    /// `[ops, bytes]` per 100 ms of the measured phase, by operation name.
    pub fn tenths(&self) -> BTreeMap<String, Vec<[u64; 2]>> {
        self.tenths
            .iter()
            .map(|(op, bins)| (op.as_str().to_string(), bins.clone()))
            .collect()
    }

    pub fn error(&mut self, phase: Phase, op: Op, kind: String) {
        let s = self.stats.entry((phase, op)).or_insert_with(OpStats::new);
        *s.errors.entry(kind).or_default() += 1;
    }

    pub fn get(&self, phase: Phase, op: Op) -> Option<&OpStats> {
        self.stats.get(&(phase, op))
    }

    pub fn phases(&self) -> impl Iterator<Item = (&(Phase, Op), &OpStats)> {
        self.stats.iter()
    }

    /// Operations completed in each finished second of the measured phase,
    /// all operations together, from its first second on (0 where none did).
    pub fn ops_per_second(&self) -> Vec<f64> {
        let mut by_second: BTreeMap<usize, f64> = BTreeMap::new();
        for p in self.per_second.values() {
            for [t, ops] in &p.ops {
                *by_second.entry(*t as usize).or_default() += ops;
            }
        }
        let last = by_second.keys().next_back().copied().unwrap_or(0);
        (1..=last)
            .map(|t| by_second.get(&t).copied().unwrap_or(0.0))
            .collect()
    }

    /// Each operation's last finished second of the measured phase, as the
    /// points of [`series`](Self::series) will have it: `(series name, unit,
    /// t_s, value)`, under the same names.
    pub fn last_seconds(&self) -> Vec<(String, &'static str, f64, f64)> {
        let mut out = Vec::new();
        for (op, per) in &self.per_second {
            let last = |points: &Vec<[f64; 2]>| points.last().copied();
            for (name, unit, point) in [
                ("ops_per_s", unit::OPS_PER_S, last(&per.ops)),
                ("bandwidth", unit::MIB_PER_S, last(&per.mib_s)),
                ("latency_p99", unit::MICROSECONDS, last(&per.p99_us)),
            ] {
                if let Some([t, value]) = point {
                    out.push((format!("{}_{name}", op.as_str()), unit, t, value));
                }
            }
        }
        out
    }

    /// `(ops, errors)` of a phase over all operations.
    pub fn totals(&self, phase: Phase) -> (u64, u64) {
        self.stats
            .iter()
            .filter(|((p, _), _)| *p == phase)
            .fold((0, 0), |(ops, errors), (_, s)| {
                (ops + s.ops, errors + s.error_count())
            })
    }

    /// Errors of a phase by `op:kind`, for a failure message.
    pub fn error_summary(&self, phase: Phase) -> String {
        let parts: Vec<String> = self
            .stats
            .iter()
            .filter(|((p, _), _)| *p == phase)
            .flat_map(|((_, op), s)| {
                s.errors
                    .iter()
                    .map(move |(kind, n)| format!("{} {kind}: {n}", op.as_str()))
            })
            .collect();
        parts.join(", ")
    }

    /// The measured phase's per-second series (ops/s, MiB/s, p99 latency)
    /// of every operation.
    pub fn series(&mut self) -> Vec<Series> {
        let mut out = Vec::new();
        for (op, per) in &mut self.per_second {
            per.flush();
            // The op is in the name too: the engine files a series by its name.
            let mut make = |name: &str, unit: &str, direction, points: &Vec<[f64; 2]>| {
                let mut s = Series::new(format!("{}_{name}", op.as_str()), unit, direction);
                s.labels.insert("op".into(), op.as_str().into());
                s.points = points.clone();
                out.push(s);
            };
            make("ops_per_s", unit::OPS_PER_S, Direction::Higher, &per.ops);
            make("bandwidth", unit::MIB_PER_S, Direction::Higher, &per.mib_s);
            make(
                "latency_p99",
                unit::MICROSECONDS,
                Direction::Lower,
                &per.p99_us,
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_bytes_errors_and_seconds_are_counted() {
        let mut r = Recorder::default();
        let ms = Duration::from_millis;
        r.success(Phase::Measure, Op::Put, 4096, ms(2), None, ms(10));
        r.success(Phase::Measure, Op::Put, 4096, ms(4), None, ms(250));
        r.success(Phase::Measure, Op::Put, 4096, ms(3), None, ms(1010));
        r.success(Phase::Prefill, Op::Put, 4096, ms(3), None, ms(0));
        r.error(Phase::Measure, Op::Get, "http-404".into());
        let put = r.get(Phase::Measure, Op::Put).unwrap();
        assert_eq!((put.ops, put.bytes), (3, 3 * 4096));
        assert_eq!(
            put.latency_us.max(),
            put.latency_us.highest_equivalent(4000)
        );
        assert_eq!(r.totals(Phase::Measure), (3, 1));
        assert_eq!(r.error_summary(Phase::Measure), "get http-404: 1");
        let h = stored("latency", &put.latency_us).unwrap();
        assert_eq!(h.count, 3);
        let series = r.series();
        let ops = series.iter().find(|s| s.name == "put_ops_per_s").unwrap();
        assert_eq!(ops.points, vec![[1.0, 2.0], [2.0, 1.0]]);
        // Tenths of a second: the measured phase only.
        let tenths = r.tenths();
        let put = &tenths["put"];
        assert_eq!(put.len(), 11);
        assert_eq!((put[0], put[2], put[10]), ([1, 4096], [1, 4096], [1, 4096]));
        assert_eq!(put.iter().map(|b| b[0]).sum::<u64>(), 3);
    }
}
