//! A stage's per-second telemetry in bounded memory, whatever the stage's
//! length. Up to [`MAX_POINTS`] seconds are kept as read; past that,
//! adjacent points merge pairwise (each point then spans 2 s, then 4 s, ...)
//! and new seconds are merged into points of that width as they come. So a
//! 10-minute stage keeps every second, an hour-long one 2-to-4-second
//! points, and the runner's memory for it stops growing after 10 minutes
//! (README, "What limited each figure": measured with
//! benches/telemetry-hour.sh).
//!
//! The first sample is never merged: it is the state the stage began with,
//! which the cluster verdict compares every later health check against.
//! What a merge keeps is the sample type's own rule ([`Merge`]): rates and
//! shares are time-weighted means, counts are summed, a queue keeps its
//! longest and the cluster its worst PG and health state, so a condition
//! that held for one second is still in the point that spans it.

/// Points kept at most (besides the first sample and the one being filled).
pub const MAX_POINTS: usize = 600;

/// How two consecutive points of a series become one.
pub trait Merge {
    /// `self` (the mean of `self_s` seconds) followed by `later` (of
    /// `later_s`) as one point that ends where `later` ends.
    fn merge(&mut self, later: &Self, self_s: f64, later_s: f64);
}

/// Time-weighted mean of two values.
pub fn mean(a: f64, a_s: f64, b: f64, b_s: f64) -> f64 {
    let total = a_s + b_s;
    if total <= 0.0 {
        return b;
    }
    (a * a_s + b * b_s) / total
}

/// A mean weighted by how many events each value stands for (a latency by
/// the operations it is the mean of); `None` where neither had any.
pub fn mean_of_events(a: Option<f64>, a_events: f64, b: Option<f64>, b_events: f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a_events + b_events > 0.0 => {
            Some((a * a_events + b * b_events) / (a_events + b_events))
        }
        (Some(a), Some(b)) => Some((a + b) / 2.0),
        (a, b) => b.or(a),
    }
}

/// Per-name samples (devices, interfaces, daemons, processes) of two
/// consecutive points: a name missing from one did nothing in it.
pub fn merge_maps<K: Ord + Clone, V: Merge + Default + Clone>(
    mine: &mut std::collections::BTreeMap<K, V>,
    later: &std::collections::BTreeMap<K, V>,
    a: f64,
    b: f64,
) {
    for key in later.keys() {
        mine.entry(key.clone()).or_default();
    }
    for (key, v) in mine.iter_mut() {
        let l = later.get(key).cloned().unwrap_or_default();
        v.merge(&l, a, b);
    }
}

#[derive(Debug, Clone)]
pub struct BoundedSeries<T> {
    points: Vec<T>,
    /// Seconds (samples) each point after the first spans.
    width: u64,
    /// The point being filled, with how many samples are in it.
    filling: Option<(T, u64)>,
    max_points: usize,
}

impl<T: Merge> Default for BoundedSeries<T> {
    fn default() -> Self {
        Self::new(MAX_POINTS)
    }
}

impl<T: Merge> BoundedSeries<T> {
    /// `max_points` is rounded up to an even number: pairs merge.
    pub fn new(max_points: usize) -> Self {
        BoundedSeries {
            points: Vec::new(),
            width: 1,
            filling: None,
            max_points: (max_points.max(2) + 1) & !1,
        }
    }

    pub fn push(&mut self, sample: T) {
        if self.points.is_empty() {
            self.points.push(sample);
            return;
        }
        let (point, n) = match self.filling.take() {
            None => (sample, 1),
            Some((mut point, n)) => {
                point.merge(&sample, n as f64, 1.0);
                (point, n + 1)
            }
        };
        if n < self.width {
            self.filling = Some((point, n));
            return;
        }
        if self.points.len() > self.max_points {
            // Full: the points halve, and this one is the first half of
            // the next point of the new width.
            self.halve();
            self.filling = Some((point, n));
            return;
        }
        self.points.push(point);
    }

    /// Every point after the first merged with its neighbour: half as many, twice as wide.
    fn halve(&mut self) {
        let w = self.width as f64;
        let rest = self.points.split_off(1);
        let mut rest = rest.into_iter();
        while let Some(mut a) = rest.next() {
            if let Some(b) = rest.next() {
                a.merge(&b, w, w);
            }
            self.points.push(a);
        }
        self.width *= 2;
    }

    /// Points kept so far, the one being filled included.
    pub fn len(&self) -> usize {
        self.points.len() + usize::from(self.filling.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The points (the last one possibly narrower than the others) and the
    /// seconds each point after the first spans.
    pub fn finish(mut self) -> (Vec<T>, u64) {
        if let Some((point, _)) = self.filling.take() {
            self.points.push(point);
        }
        (self.points, self.width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second's reading: when it ends, a rate, a count and a peak.
    #[derive(Debug, Clone, PartialEq)]
    struct Reading {
        t_s: f64,
        rate: f64,
        count: u64,
        peak: u64,
    }

    impl Merge for Reading {
        fn merge(&mut self, later: &Self, self_s: f64, later_s: f64) {
            self.t_s = later.t_s;
            self.rate = mean(self.rate, self_s, later.rate, later_s);
            self.count += later.count;
            self.peak = self.peak.max(later.peak);
        }
    }

    fn second(t: u64) -> Reading {
        Reading {
            t_s: t as f64,
            rate: t as f64,
            count: 1,
            peak: if t == 777 { 50 } else { 1 },
        }
    }

    #[test]
    fn a_short_stage_keeps_every_second() {
        let mut s = BoundedSeries::new(10);
        for t in 0..11 {
            s.push(second(t));
        }
        let (points, width) = s.finish();
        assert_eq!(width, 1);
        assert_eq!(points, (0..11).map(second).collect::<Vec<_>>());
    }

    #[test]
    fn a_long_stage_stays_within_the_bound_and_loses_no_count_or_peak() {
        let mut s = BoundedSeries::new(10);
        let mut most = 0;
        for t in 0..1000 {
            s.push(second(t));
            most = most.max(s.len());
        }
        assert!(most <= 12, "{most} points kept at once");
        let (points, width) = s.finish();
        // 999 seconds after the first in at most 10 points: 128 s each.
        assert_eq!(width, 128);
        assert_eq!(points[0], second(0), "the first sample is kept as read");
        assert_eq!(points.iter().map(|p| p.count).sum::<u64>(), 1000);
        assert_eq!(points.iter().map(|p| p.peak).max(), Some(50));
        assert_eq!(points.last().map(|p| p.t_s), Some(999.0));
        assert!(points.windows(2).all(|w| w[0].t_s < w[1].t_s));
        // Each full point's rate is the mean of its seconds: 1..=128 → 64.5.
        assert_eq!(points[1].rate, 64.5);
        assert_eq!(points[1].t_s, 128.0);
    }

    #[test]
    fn latencies_are_weighted_by_their_operations() {
        assert_eq!(mean_of_events(Some(10.0), 3.0, Some(2.0), 1.0), Some(8.0));
        assert_eq!(mean_of_events(None, 0.0, Some(2.0), 1.0), Some(2.0));
        assert_eq!(mean_of_events(Some(4.0), 0.0, None, 0.0), Some(4.0));
        assert_eq!(mean(1.0, 1.0, 4.0, 2.0), 3.0);
    }
}
