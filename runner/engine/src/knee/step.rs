//! One step of a search: its figures, read from the stage's output by the
//! names its [`RateSearchSpec`] gives, and the verdict on them.
//!
//! The figures are those of the whole stage: where the metrics have parts
//! (`host`, `client`, `job`) and one of them is `all`, that one; where
//! there are phases, the measured one. Rates add up over operations and
//! directions; a latency is the worst of them.
//!
//! A step passes when the SLO metric is below its limit AND the load kept
//! to its schedule: it achieved at least 95% of its target, less three
//! standard deviations of the count a Poisson process of that rate gives
//! over the step's measured time (fio's `rate_process=poisson` draws its
//! schedule so; a fixed schedule only has less noise). A load that fell
//! behind was not offered the rate asked for, so its latency says nothing
//! of that rate: a closed loop's latency once the slots are all busy.

use pipeline_model::Metric;
use pipeline_stage_api::rate_search::RateSearchSpec;
use pipeline_stage_api::stage::StageOutput;

/// The labels that tell a stage's parts apart; `all` is the whole.
const PART_LABELS: [&str; 3] = ["host", "client", "job"];

/// What one step measured.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFigures {
    pub target: f64,
    pub achieved: f64,
    /// Operations completed in the measurement (`achieved` × its seconds).
    pub completed: f64,
    pub errors: f64,
    pub median_us: Option<f64>,
    pub slo_us: Option<f64>,
}

/// The verdict on a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Passed,
    /// The SLO metric at or above its limit.
    SloBroken,
    /// Achieved less than the schedule allows for noise.
    Behind {
        least: f64,
    },
    /// The step reported no value of the SLO metric.
    NoLatency,
    /// The stage failed at this rate (errors above its tolerance, ...).
    Failed(String),
}

impl Verdict {
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Passed)
    }
}

impl StepFigures {
    /// The figures of a step's output.
    pub fn read(output: &StageOutput, spec: &RateSearchSpec, slo: &str, target: f64) -> Self {
        // From +0 (f64's `sum` starts at -0, which would print as `-0`).
        let sum = |names: &[&str]| -> f64 {
            names
                .iter()
                .flat_map(|n| whole(&output.metrics, n))
                .fold(0.0, |a, v| a + v)
        };
        let worst = |names: &[&str]| -> Option<f64> {
            names
                .iter()
                .flat_map(|n| whole(&output.metrics, n))
                .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))))
        };
        StepFigures {
            target,
            achieved: sum(spec.achieved),
            completed: sum(spec.completed),
            errors: sum(spec.errors),
            median_us: worst(spec.median),
            slo_us: worst(&[slo]),
        }
    }

    /// The least achieved rate that still kept to the schedule.
    pub fn least_on_schedule(&self) -> f64 {
        let seconds = if self.achieved > 0.0 {
            self.completed / self.achieved
        } else {
            0.0
        };
        let noise = if seconds > 0.0 {
            3.0 * (self.target / seconds).sqrt()
        } else {
            0.0
        };
        (0.95 * self.target - noise).max(0.0)
    }

    pub fn verdict(&self, below_us: f64) -> Verdict {
        let least = self.least_on_schedule();
        if self.achieved < least {
            return Verdict::Behind { least };
        }
        match self.slo_us {
            None => Verdict::NoLatency,
            Some(v) if v >= below_us => Verdict::SloBroken,
            Some(_) => Verdict::Passed,
        }
    }
}

/// The values of metric `name` for the whole stage (see the module's doc).
fn whole(metrics: &[Metric], name: &str) -> Vec<f64> {
    let mut of: Vec<&Metric> = metrics.iter().filter(|m| m.name == name).collect();
    for part in PART_LABELS {
        let is_all = |m: &&Metric| m.labels.get(part).map(String::as_str) == Some("all");
        if of.iter().any(is_all) {
            of.retain(is_all);
        }
    }
    if of
        .iter()
        .any(|m| m.labels.get("phase").map(String::as_str) == Some("measure"))
    {
        of.retain(|m| m.labels.get("phase").is_none_or(|p| p == "measure"));
    }
    of.iter().map(|m| m.value).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::{Direction, unit};

    const SPEC: RateSearchSpec = RateSearchSpec {
        rate_unit: unit::OPS_PER_S,
        achieved: &["ops_per_s"],
        completed: &["ops"],
        errors: &["errors"],
        median: &["latency_p50"],
        latency_from: "",
    };

    fn m(name: &str, value: f64, labels: &[(&str, &str)]) -> Metric {
        let mut m = Metric::new(name.to_string(), value, unit::COUNT, Direction::None);
        for (k, v) in labels {
            m = m.label(*k, *v);
        }
        m
    }

    #[test]
    fn figures_are_the_whole_stages_in_its_measured_phase() {
        let out = StageOutput {
            metrics: vec![
                m(
                    "ops_per_s",
                    400.0,
                    &[("host", "a"), ("op", "get"), ("phase", "measure")],
                ),
                m(
                    "ops_per_s",
                    500.0,
                    &[("host", "b"), ("op", "get"), ("phase", "measure")],
                ),
                m(
                    "ops_per_s",
                    900.0,
                    &[("host", "all"), ("op", "get"), ("phase", "measure")],
                ),
                m(
                    "ops_per_s",
                    99.0,
                    &[("host", "all"), ("op", "put"), ("phase", "prefill")],
                ),
                m(
                    "ops",
                    9000.0,
                    &[("host", "all"), ("op", "get"), ("phase", "measure")],
                ),
                m(
                    "latency_p99",
                    30_000.0,
                    &[("host", "all"), ("op", "get"), ("phase", "measure")],
                ),
                m(
                    "latency_p99",
                    90_000.0,
                    &[("host", "a"), ("op", "get"), ("phase", "measure")],
                ),
            ],
            ..Default::default()
        };
        let f = StepFigures::read(&out, &SPEC, "latency_p99", 1000.0);
        assert_eq!(
            (f.achieved, f.completed, f.slo_us),
            (900.0, 9000.0, Some(30_000.0))
        );
        assert_eq!(f.median_us, None);
        // 10 s at 1000/s: at least 950 - 3*sqrt(100) = 920.
        assert_eq!(f.least_on_schedule(), 920.0);
        assert!(matches!(f.verdict(50_000.0), Verdict::Behind { .. }));
        let on_time = StepFigures {
            achieved: 930.0,
            completed: 9300.0,
            ..f.clone()
        };
        assert_eq!(on_time.verdict(50_000.0), Verdict::Passed);
        assert_eq!(
            on_time.verdict(30_000.0),
            Verdict::SloBroken,
            "at the limit is not below it"
        );
        let mute = StepFigures {
            slo_us: None,
            ..on_time
        };
        assert_eq!(mute.verdict(50_000.0), Verdict::NoLatency);
    }
}
