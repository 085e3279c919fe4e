//! What each OSD did beside a stage: per second, the difference of two
//! readings of its op counters (`perf dump osd`, [`pipeline_parsers::osd_perf`])
//! and the manager's commit and apply latency (`ceph osd perf`); over the
//! stage, each OSD's totals and mean latencies, and a note when one OSD was
//! much slower than the others (a failing disk, a busy host), which limits
//! every figure that touches its PGs.
//!
//! Mean latencies are totals divided by counts (Ceph's counters keep both),
//! never means of means, and no percentile is averaged: the OSD counters
//! have none.

use std::collections::BTreeMap;

use pipeline_parsers::osd_perf::{LatencySum, OsdCounters, OsdLatency};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClusterSample, is_zero, is_zero_f64};
use crate::bounded_series::{Merge, mean, mean_of_events};

/// One OSD over one second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OsdSample {
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub reads_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub writes_per_s: f64,
    /// Read-modify-write ops (omap updates, class calls).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub rmw_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub in_bytes_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub out_bytes_per_s: f64,
    /// Mean latency of the reads that completed in this second, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_ms: Option<f64>,
    /// Ops in progress at the reading (`op_wip`: the OSD's queue).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ops_in_progress: u64,
    /// The manager's view (`ceph osd perf`), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_latency_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_latency_ms: Option<f64>,
}

impl Merge for OsdSample {
    /// Rates: time-weighted means; latencies: weighted by the operations
    /// they are the means of; the queue: its longest.
    fn merge(&mut self, later: &Self, a: f64, b: f64) {
        self.read_latency_ms = mean_of_events(
            self.read_latency_ms,
            self.reads_per_s * a,
            later.read_latency_ms,
            later.reads_per_s * b,
        );
        self.write_latency_ms = mean_of_events(
            self.write_latency_ms,
            (self.writes_per_s + self.rmw_per_s) * a,
            later.write_latency_ms,
            (later.writes_per_s + later.rmw_per_s) * b,
        );
        self.commit_latency_ms =
            mean_of_events(self.commit_latency_ms, a, later.commit_latency_ms, b);
        self.apply_latency_ms = mean_of_events(self.apply_latency_ms, a, later.apply_latency_ms, b);
        self.reads_per_s = mean(self.reads_per_s, a, later.reads_per_s, b);
        self.writes_per_s = mean(self.writes_per_s, a, later.writes_per_s, b);
        self.rmw_per_s = mean(self.rmw_per_s, a, later.rmw_per_s, b);
        self.in_bytes_per_s = mean(self.in_bytes_per_s, a, later.in_bytes_per_s, b);
        self.out_bytes_per_s = mean(self.out_bytes_per_s, a, later.out_bytes_per_s, b);
        self.ops_in_progress = self.ops_in_progress.max(later.ops_in_progress);
    }
}

/// One OSD over the whole stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OsdActivity {
    pub osd: u32,
    pub reads: u64,
    pub writes: u64,
    /// Total read latency over reads, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_ms: Option<f64>,
    /// The longest queue seen at a reading.
    pub max_ops_in_progress: u64,
}

/// Each OSD's previous reading, to difference the next one against.
#[derive(Default)]
pub struct Deltas {
    previous: BTreeMap<u32, (f64, OsdCounters)>,
}

fn mean_ms(before: LatencySum, after: LatencySum) -> Option<f64> {
    let count = after.count.checked_sub(before.count)?;
    let sum = after.sum_s - before.sum_s;
    (count > 0 && sum >= 0.0).then(|| round3(1000.0 * sum / count as f64))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl Deltas {
    /// The second that ended at `t_s` for every OSD read then; an OSD read
    /// for the first time (or whose counters went backwards: restarted)
    /// only sets its baseline.
    pub fn sample(
        &mut self,
        t_s: f64,
        counters: &BTreeMap<u32, OsdCounters>,
        latencies: &[OsdLatency],
    ) -> BTreeMap<u32, OsdSample> {
        let mut out = BTreeMap::new();
        for (&osd, now) in counters {
            let Some((t0, before)) = self.previous.insert(osd, (t_s, *now)) else {
                continue;
            };
            let seconds = t_s - t0;
            let backwards = now.op_r < before.op_r
                || now.op_w < before.op_w
                || now.op_rw < before.op_rw
                || now.op_in_bytes < before.op_in_bytes
                || now.op_out_bytes < before.op_out_bytes;
            if seconds <= 0.0 || backwards {
                continue;
            }
            let rate = |a: u64, b: u64| ((a - b) as f64 / seconds).round();
            let manager = latencies.iter().find(|l| l.id == osd);
            out.insert(
                osd,
                OsdSample {
                    reads_per_s: rate(now.op_r, before.op_r),
                    writes_per_s: rate(now.op_w, before.op_w),
                    rmw_per_s: rate(now.op_rw, before.op_rw),
                    in_bytes_per_s: rate(now.op_in_bytes, before.op_in_bytes),
                    out_bytes_per_s: rate(now.op_out_bytes, before.op_out_bytes),
                    read_latency_ms: mean_ms(before.op_r_latency, now.op_r_latency),
                    write_latency_ms: mean_ms(before.op_w_latency, now.op_w_latency),
                    ops_in_progress: now.op_wip,
                    commit_latency_ms: manager.map(|l| l.commit_latency_ms),
                    apply_latency_ms: manager.map(|l| l.apply_latency_ms),
                },
            );
        }
        // OSDs no longer read (down) start afresh when they come back.
        self.previous.retain(|osd, _| counters.contains_key(osd));
        out
    }
}

/// Each OSD's totals over the samples, by OSD id. Ops of a second are its
/// rate times the second's length; a second's mean latency weighs by its ops,
/// so the result is the stage's total latency over its total ops.
/// The longest time between two samples that counts as covered by the
/// later one's rates: a sampler that stalled longer says nothing of the gap.
pub(super) fn max_gap_s(interval_s: f64) -> f64 {
    10.0_f64.max(2.0 * interval_s)
}

pub fn activity(samples: &[ClusterSample], interval_s: f64) -> Vec<OsdActivity> {
    #[derive(Default)]
    struct Sums {
        reads: f64,
        writes: f64,
        read_ms: f64,
        read_timed: f64,
        write_ms: f64,
        write_timed: f64,
        max_wip: u64,
    }
    let mut sums: BTreeMap<u32, Sums> = BTreeMap::new();
    let mut previous_t = 0.0;
    for s in samples {
        let seconds = (s.t_s - previous_t).clamp(0.0, max_gap_s(interval_s));
        previous_t = s.t_s;
        for (&osd, o) in &s.osd_ops {
            let e = sums.entry(osd).or_default();
            let (reads, writes) = (o.reads_per_s * seconds, o.writes_per_s * seconds);
            e.reads += reads;
            e.writes += writes;
            if let Some(ms) = o.read_latency_ms {
                e.read_ms += ms * reads;
                e.read_timed += reads;
            }
            if let Some(ms) = o.write_latency_ms {
                e.write_ms += ms * writes;
                e.write_timed += writes;
            }
            e.max_wip = e.max_wip.max(o.ops_in_progress);
        }
    }
    sums.into_iter()
        .map(|(osd, e)| OsdActivity {
            osd,
            reads: e.reads.round() as u64,
            writes: e.writes.round() as u64,
            read_latency_ms: (e.read_timed > 0.0).then(|| round3(e.read_ms / e.read_timed)),
            write_latency_ms: (e.write_timed > 0.0).then(|| round3(e.write_ms / e.write_timed)),
            max_ops_in_progress: e.max_wip,
        })
        .collect()
}

/// At least this many ops before an OSD's mean is compared with the others'.
const MIN_OPS: u64 = 100;
/// How many times the median OSD's mean latency makes an OSD "slow".
const SLOW_FACTOR: f64 = 3.0;

/// "osd.2's writes took 12.3 ms on average, 4.1× the median OSD's 3.0 ms":
/// an OSD whose mean latency was at least 3× the median of the OSDs that did
/// at least 100 such ops, among at least 3 of them.
pub fn slow_osds(activity: &[OsdActivity]) -> Vec<String> {
    let mut notes = Vec::new();
    for (kind, latency, ops) in [
        (
            "writes",
            (|a: &OsdActivity| a.write_latency_ms) as fn(&OsdActivity) -> Option<f64>,
            (|a: &OsdActivity| a.writes) as fn(&OsdActivity) -> u64,
        ),
        ("reads", |a| a.read_latency_ms, |a| a.reads),
    ] {
        let timed: Vec<(u32, f64)> = activity
            .iter()
            .filter(|a| ops(a) >= MIN_OPS)
            .filter_map(|a| latency(a).map(|ms| (a.osd, ms)))
            .collect();
        if timed.len() < 3 {
            continue;
        }
        let mut sorted: Vec<f64> = timed.iter().map(|(_, ms)| *ms).collect();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        if median <= 0.0 {
            continue;
        }
        for (osd, ms) in timed {
            if ms >= SLOW_FACTOR * median {
                notes.push(format!(
                    "osd.{osd}'s {kind} took {ms:.1} ms on average, {:.1}× the median OSD's {median:.1} ms",
                    ms / median
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(r: u64, w: u64, w_sum: f64, wip: u64) -> OsdCounters {
        OsdCounters {
            op_r: r,
            op_w: w,
            op_wip: wip,
            op_w_latency: LatencySum {
                count: w,
                sum_s: w_sum,
            },
            op_r_latency: LatencySum {
                count: r,
                sum_s: r as f64 * 0.001,
            },
            ..OsdCounters::default()
        }
    }

    #[test]
    fn two_readings_give_rates_and_the_mean_latency_between_them() {
        let mut d = Deltas::default();
        let one = |c| BTreeMap::from([(0, c)]);
        assert!(
            d.sample(1.0, &one(counters(10, 100, 1.0, 0)), &[])
                .is_empty()
        );
        let latency = [OsdLatency {
            id: 0,
            commit_latency_ms: 4.0,
            apply_latency_ms: 5.0,
        }];
        let s = d.sample(2.0, &one(counters(60, 300, 3.0, 7)), &latency);
        let s = &s[&0];
        assert_eq!((s.reads_per_s, s.writes_per_s), (50.0, 200.0));
        // 200 writes took 2 s in all: 10 ms each.
        assert_eq!(s.write_latency_ms, Some(10.0));
        assert_eq!(s.read_latency_ms, Some(1.0));
        assert_eq!((s.ops_in_progress, s.commit_latency_ms), (7, Some(4.0)));
        // A restarted OSD (counters back near zero) only sets a new baseline.
        assert!(d.sample(3.0, &one(counters(1, 1, 0.0, 0)), &[]).is_empty());
        // One that was not read (down) is forgotten, then starts afresh.
        assert!(d.sample(4.0, &BTreeMap::new(), &[]).is_empty());
        assert!(d.sample(5.0, &one(counters(9, 9, 0.1, 0)), &[]).is_empty());
    }

    fn activity_of(osd: u32, writes: u64, ms: f64) -> OsdActivity {
        OsdActivity {
            osd,
            writes,
            write_latency_ms: Some(ms),
            ..OsdActivity::default()
        }
    }

    #[test]
    fn one_slow_osd_among_three_is_named() {
        let notes = slow_osds(&[
            activity_of(0, 500, 3.0),
            activity_of(1, 500, 2.5),
            activity_of(2, 500, 12.3),
        ]);
        assert_eq!(
            notes,
            ["osd.2's writes took 12.3 ms on average, 4.1× the median OSD's 3.0 ms"]
        );
        // Too few ops, or too few OSDs, prove nothing.
        assert!(slow_osds(&[activity_of(0, 500, 3.0), activity_of(1, 500, 30.0)]).is_empty());
        assert!(
            slow_osds(&[
                activity_of(0, 50, 3.0),
                activity_of(1, 50, 3.0),
                activity_of(2, 50, 30.0)
            ])
            .is_empty()
        );
    }
}
