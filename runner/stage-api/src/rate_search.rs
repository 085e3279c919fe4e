//! What a stage that follows a target rate tells the engine, so that a
//! suite's `search:` can find its knee (the engine's `knee` module runs the
//! search): where the rate goes in its parameters, which of its figures say
//! what a step achieved, and the metrics the search adds to its record.
//!
//! A step is one ordinary run of the stage at one target rate; the engine
//! reads the step's figures by the names given here, at the level of the
//! whole stage (`host=all`, `client=all`, `job=all` where the parts carry
//! those labels; the measured phase where there are phases).

use std::borrow::Cow;

use pipeline_model::{Aggregate, Direction, unit};

use crate::metric::MetricDecl;
use crate::params::Params;

/// The figures of a step, by name, in a stage that can be searched.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSearchSpec {
    /// Unit of the target and achieved rates (`ops/s`, `IOPS`).
    pub rate_unit: &'static str,
    /// Rates whose sum (over operations, directions) is the achieved rate.
    pub achieved: &'static [&'static str],
    /// Operations completed in the same measurement as `achieved`: with
    /// it, the achieved rate's Poisson noise is known (see the engine's
    /// `knee::step`).
    pub completed: &'static [&'static str],
    /// Failed operations (summed).
    pub errors: &'static [&'static str],
    /// The median latency the curve shows (the worst of these).
    pub median: &'static [&'static str],
    /// Where latency is counted from, for the report's method note.
    pub latency_from: &'static str,
}

/// Sets the target rate (for one run of the stage: with `per_host` the
/// engine divides the total over the hosts first) in a stage's parameters;
/// returns the rate set, which may be rounded (fio takes whole IOPS per job).
pub type SetRate = fn(&mut Params, f64) -> f64;

/// What in a stage's parameters keeps it from being searched (parameter,
/// problem), e.g. fio's job file, whose rate the engine cannot set.
pub type CheckSearchable = fn(&Params) -> Vec<(String, String)>;

/// A stage the engine can search: its figures and how its rate is set.
#[derive(Debug, Clone)]
pub struct RateSearch {
    pub spec: RateSearchSpec,
    pub set_rate: SetRate,
    pub check: CheckSearchable,
}

/// For a stage whose every configuration can be searched.
pub fn always_searchable(_params: &Params) -> Vec<(String, String)> {
    Vec::new()
}

/// The metrics a search adds, in `rate_unit`: the knee, the curve (one
/// value per step, label `search_step`), the SLO's limit and what the
/// search did. The final hold's figures are the stage's own metrics.
pub fn metrics(rate_unit: &'static str) -> Vec<MetricDecl> {
    let rate = |name: &'static str, direction, doc: &'static str| MetricDecl {
        name: Cow::Borrowed(name),
        unit: Cow::Borrowed(rate_unit),
        direction,
        aggregate: Aggregate::None,
        headline: false,
        doc: Cow::Borrowed(doc),
    };
    let mut knee = rate(
        "knee",
        Direction::Higher,
        "The highest target rate whose step held the SLO and kept to its schedule (`search:`).",
    );
    knee.headline = true;
    vec![
        knee,
        rate(
            "search_target_rate",
            Direction::None,
            "A search step's target rate (label `search_step`).",
        ),
        rate(
            "search_achieved_rate",
            Direction::None,
            "What a search step achieved (label `search_step`).",
        ),
        rate(
            "hold_target_rate",
            Direction::None,
            "The final hold's target rate (a fraction of the knee); the stage's other figures are the hold's.",
        ),
        MetricDecl::info(
            "search_latency_p50",
            unit::MICROSECONDS,
            "A search step's median latency (label `search_step`).",
        ),
        MetricDecl::info(
            "search_slo_latency",
            unit::MICROSECONDS,
            "A search step's value of the SLO metric (label `search_step`).",
        ),
        MetricDecl::info(
            "search_errors",
            unit::COUNT,
            "A search step's failed operations (label `search_step`).",
        ),
        MetricDecl::info(
            "search_passed",
            unit::COUNT,
            "1 when a search step held the SLO and its schedule, else 0 (label `search_step`).",
        ),
        MetricDecl::info(
            "search_slo_limit",
            unit::MICROSECONDS,
            "The SLO's limit: the SLO metric must stay below it (label `metric`).",
        ),
        MetricDecl::declare(
            "knee_slo_latency",
            unit::MICROSECONDS,
            Direction::Lower,
            Aggregate::None,
            "The SLO metric's value at the knee's step (label `metric`).",
        ),
        MetricDecl::info(
            "search_steps",
            unit::COUNT,
            "Steps the search ran (the hold not counted).",
        ),
        MetricDecl::info(
            "search_seconds",
            unit::SECONDS,
            "Time the search's steps took (the hold not counted).",
        ),
        MetricDecl::info(
            "search_precision_reached",
            unit::COUNT,
            "1 when the knee is known to the asked precision, 0 when the budget or `max` ended the search first.",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_the_one_headline_and_is_in_the_stages_unit() {
        let m = metrics(unit::IOPS);
        let headlines: Vec<&str> = m.iter().filter(|d| d.headline).map(|d| &*d.name).collect();
        assert_eq!(headlines, ["knee"]);
        assert_eq!(m[0].unit, "IOPS");
        assert_eq!(m[0].direction, Direction::Higher);
        let names: std::collections::BTreeSet<&str> = m.iter().map(|d| &*d.name).collect();
        assert_eq!(names.len(), m.len(), "each declared once");
    }
}
