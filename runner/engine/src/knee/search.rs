//! The search itself, as a state machine that knows nothing of stages:
//! given the steps so far, which rate to try next. It doubles from `start`
//! until a step fails (the SLO broken, or the load fell behind its
//! schedule), then bisects between the highest rate that passed and the
//! lowest that failed until they are within `precision` of each other;
//! the knee is the highest rate that passed. When `start` itself fails, it
//! halves (at most [`MAX_HALVINGS`] times) to find a rate that passes first.
//! The time budget is the driver's to watch: it ends the search with
//! [`Search::out_of_time`].

use super::config::PlannedSearch;

/// How often a failing `start` is halved before the search gives up.
pub const MAX_HALVINGS: u32 = 4;

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Run a step at this target rate.
    Step(f64),
    /// The search is over: hold at this rate (a share of the knee).
    Hold(f64),
    /// No rate passed: there is no knee to hold at.
    NoKnee,
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ended {
    /// The bracket around the knee is within the precision.
    Precise,
    /// The rate reached `max` and passed there: the knee is at least `max`.
    AtMax,
    /// The time budget ran out first.
    OutOfTime,
    /// `start` and its halvings all failed.
    NothingPassed,
}

#[derive(Debug, Clone)]
pub struct Search {
    config: PlannedSearch,
    /// Every step's target and whether it passed, in order.
    steps: Vec<(f64, bool)>,
    out_of_time: bool,
}

impl Search {
    pub fn new(config: PlannedSearch) -> Self {
        Search {
            config,
            steps: Vec::new(),
            out_of_time: false,
        }
    }

    /// The result of the step that [`next`](Self::next) asked for.
    pub fn record(&mut self, target: f64, passed: bool) {
        self.steps.push((target, passed));
    }

    /// The budget ran out: no more steps.
    pub fn out_of_time(&mut self) {
        self.out_of_time = true;
    }

    /// The highest rate that passed.
    pub fn knee(&self) -> Option<f64> {
        self.steps
            .iter()
            .filter(|s| s.1)
            .map(|s| s.0)
            .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))))
    }

    /// The lowest rate that failed above the knee (the step that shows the
    /// knee is one), if any.
    pub fn first_failure_above(&self) -> Option<f64> {
        let knee = self.knee().unwrap_or(0.0);
        self.steps
            .iter()
            .filter(|s| !s.1 && s.0 > knee)
            .map(|s| s.0)
            .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.min(r))))
    }

    pub fn steps(&self) -> usize {
        self.steps.len()
    }

    /// Why the search is over, or `None` while it is not.
    pub fn ended(&self) -> Option<Ended> {
        let c = &self.config;
        let (lo, hi) = (self.knee(), self.first_failure_above());
        let halvings = self.steps.iter().filter(|s| s.0 < c.start).count() as u32;
        match (lo, hi) {
            (Some(lo), Some(hi)) if (hi - lo) / lo <= c.precision => Some(Ended::Precise),
            (Some(lo), None) if lo >= c.max => Some(Ended::AtMax),
            (None, Some(_)) if halvings >= MAX_HALVINGS => Some(Ended::NothingPassed),
            _ if self.out_of_time => Some(if lo.is_some() {
                Ended::OutOfTime
            } else {
                Ended::NothingPassed
            }),
            _ => None,
        }
    }

    pub fn next(&self) -> Next {
        let c = &self.config;
        if self.ended().is_some() {
            return match self.knee() {
                Some(knee) => Next::Hold(knee * c.hold),
                None => Next::NoKnee,
            };
        }
        match (self.knee(), self.first_failure_above()) {
            (None, None) => Next::Step(c.start),
            // Still climbing: double, up to `max`.
            (Some(lo), None) => Next::Step((lo * 2.0).min(c.max)),
            // `start` failed: halve below the lowest failure.
            (None, Some(hi)) => Next::Step(hi / 2.0),
            (Some(lo), Some(hi)) => Next::Step((lo + hi) / 2.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(start: f64, max: f64, precision: f64) -> PlannedSearch {
        PlannedSearch {
            slo_metric: "latency_p99".into(),
            below_us: 50_000.0,
            start,
            max,
            precision,
            hold: 0.85,
            budget: Duration::from_secs(600),
        }
    }

    /// Runs the search against a system whose knee is `capacity`: every
    /// rate up to it passes.
    fn run(config: PlannedSearch, capacity: f64) -> (Search, Next, Vec<f64>) {
        let mut s = Search::new(config);
        let mut asked = Vec::new();
        loop {
            match s.next() {
                Next::Step(r) => {
                    asked.push(r);
                    s.record(r, r <= capacity);
                    assert!(asked.len() < 100, "the search does not end: {asked:?}");
                }
                done => return (s, done, asked),
            }
        }
    }

    #[test]
    fn doubles_then_bisects_to_the_precision() {
        let (s, done, asked) = run(config(100.0, 20_000.0, 0.05), 1234.0);
        assert_eq!(&asked[..5], [100.0, 200.0, 400.0, 800.0, 1600.0]);
        assert_eq!(asked[5], 1200.0, "bisects between 800 and 1600");
        let knee = s.knee().unwrap();
        let above = s.first_failure_above().unwrap();
        assert!(knee <= 1234.0 && above > 1234.0, "{knee} {above}");
        assert!((above - knee) / knee <= 0.05);
        assert_eq!(s.ended(), Some(Ended::Precise));
        assert_eq!(done, Next::Hold(knee * 0.85));
    }

    #[test]
    fn a_system_faster_than_max_is_held_at_max() {
        let (s, done, asked) = run(config(100.0, 1000.0, 0.05), 1e9);
        assert_eq!(asked, [100.0, 200.0, 400.0, 800.0, 1000.0]);
        assert_eq!(s.ended(), Some(Ended::AtMax));
        assert_eq!(done, Next::Hold(850.0));
    }

    #[test]
    fn a_failing_start_is_halved_then_bisected() {
        let (s, _, asked) = run(config(1000.0, 20_000.0, 0.05), 300.0);
        assert_eq!(&asked[..3], [1000.0, 500.0, 250.0]);
        assert!(s.knee().unwrap() <= 300.0);
        assert_eq!(s.ended(), Some(Ended::Precise));
        let (s, done, asked) = run(config(1000.0, 20_000.0, 0.05), 1.0);
        assert_eq!(asked, [1000.0, 500.0, 250.0, 125.0, 62.5]);
        assert_eq!(
            (s.ended(), done),
            (Some(Ended::NothingPassed), Next::NoKnee)
        );
    }

    #[test]
    fn the_budget_ends_it_with_the_best_so_far() {
        let mut s = Search::new(config(100.0, 20_000.0, 0.05));
        s.record(100.0, true);
        s.record(200.0, true);
        s.record(400.0, false);
        assert_eq!(s.next(), Next::Step(300.0));
        s.out_of_time();
        assert_eq!(s.ended(), Some(Ended::OutOfTime));
        assert_eq!(s.next(), Next::Hold(200.0 * 0.85));
    }
}
