//! The steps of a search as the stage's record keeps them: one value per
//! step of each curve metric (label `search_step`), the knee and what the
//! search did, and a note per step in words.

use pipeline_model::Metric;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::rate_search::{self, RateSearchSpec};

use super::config::PlannedSearch;
use super::search::Ended;
use super::step::{StepFigures, Verdict};

/// The label of a curve metric's step (1, 2, ...).
pub const STEP_LABEL: &str = "search_step";

/// One step as it ran.
#[derive(Debug, Clone)]
pub struct Step {
    pub figures: StepFigures,
    pub verdict: Verdict,
}

/// The search's metrics and notes, from its steps.
pub struct Curve<'a> {
    pub search: &'a PlannedSearch,
    pub spec: &'a RateSearchSpec,
    pub steps: &'a [Step],
    pub knee: Option<f64>,
    pub ended: Ended,
    pub seconds: f64,
    /// The final hold's target as set (fio rounds to whole IOPS per job).
    pub hold_rate: Option<f64>,
}

impl Curve<'_> {
    fn decl(&self, name: &str) -> MetricDecl {
        rate_search::metrics(self.spec.rate_unit)
            .into_iter()
            .find(|d| d.name == name)
            .expect("a search metric")
    }

    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = Vec::new();
        let slo = self.search.slo_metric.as_str();
        for (i, s) in self.steps.iter().enumerate() {
            let k = (i + 1).to_string();
            let f = &s.figures;
            let mut push = |name: &str, v: Option<f64>| {
                if let Some(v) = v {
                    out.push(self.decl(name).value(v).label(STEP_LABEL, k.as_str()));
                }
            };
            push("search_target_rate", Some(f.target));
            push("search_achieved_rate", Some(f.achieved));
            push("search_latency_p50", f.median_us);
            push("search_slo_latency", f.slo_us);
            push("search_errors", Some(f.errors));
            push(
                "search_passed",
                Some(if s.verdict.passed() { 1.0 } else { 0.0 }),
            );
        }
        out.push(
            self.decl("search_slo_limit")
                .value(self.search.below_us)
                .label("metric", slo),
        );
        if let Some(knee) = self.knee {
            out.push(self.decl("knee").value(knee));
            let at = self
                .steps
                .iter()
                .find(|s| s.verdict.passed() && s.figures.target == knee);
            if let Some(v) = at.and_then(|s| s.figures.slo_us) {
                out.push(self.decl("knee_slo_latency").value(v).label("metric", slo));
            }
        }
        if let Some(hold) = self.hold_rate {
            out.push(self.decl("hold_target_rate").value(hold));
        }
        out.push(self.decl("search_steps").value(self.steps.len() as f64));
        out.push(self.decl("search_seconds").value(self.seconds));
        let precise = matches!(self.ended, Ended::Precise);
        out.push(
            self.decl("search_precision_reached")
                .value(if precise { 1.0 } else { 0.0 }),
        );
        out
    }

    /// The knee in words, how the search ended, and each step.
    pub fn notes(&self) -> Vec<String> {
        let unit = self.spec.rate_unit;
        let s = self.search;
        let slo = format!("{} < {}", s.slo_metric, ms(s.below_us));
        let mut notes = Vec::new();
        let above = self.knee.and_then(|k| {
            self.steps
                .iter()
                .filter(|st| !st.verdict.passed() && st.figures.target > k)
                .min_by(|a, b| a.figures.target.total_cmp(&b.figures.target))
        });
        notes.push(match (self.knee, above) {
            (Some(k), Some(a)) => format!(
                "knee {} {unit}: the highest target rate that held {slo} on schedule; {} {unit} did not ({})",
                rate(k), rate(a.figures.target), why(&a.verdict, &a.figures, s)
            ),
            (Some(k), None) => format!("knee {} {unit}: the highest target rate that held {slo} on schedule", rate(k)),
            (None, _) => format!("no knee: no target rate tried held {slo} on schedule"),
        });
        notes.push(match self.ended {
            Ended::Precise => format!(
                "search: {} steps in {:.0} s, the knee known to within {:.0}%; the stage's figures are the final hold at {:.0}% of it",
                self.steps.len(), self.seconds, s.precision * 100.0, s.hold * 100.0
            ),
            Ended::AtMax => format!(
                "search: the target reached max ({} {unit}) and held there: the knee is at least that; raise `max` to find it",
                rate(s.max)
            ),
            Ended::OutOfTime => format!(
                "search: the budget ({:.0} s) ran out after {} steps, before the precision ({:.0}%) was reached: the knee lies between the figures above",
                s.budget.as_secs_f64(), self.steps.len(), s.precision * 100.0
            ),
            Ended::NothingPassed => "search: the start rate and its halvings all failed; lower `start`".to_string(),
        });
        notes.push(format!(
            "search: latency counted from {}",
            self.spec.latency_from
        ));
        for (i, st) in self.steps.iter().enumerate() {
            let f = &st.figures;
            notes.push(format!(
                "step {}: target {} {unit}, achieved {}, {} {}, errors {}: {}",
                i + 1,
                rate(f.target),
                rate(f.achieved),
                s.slo_metric,
                f.slo_us.map_or("none".into(), ms),
                f.errors,
                if st.verdict.passed() {
                    "passed".to_string()
                } else {
                    why(&st.verdict, f, s)
                }
            ));
        }
        notes
    }
}

fn why(v: &Verdict, f: &StepFigures, s: &PlannedSearch) -> String {
    match v {
        Verdict::Passed => "passed".into(),
        Verdict::SloBroken => format!(
            "{} {} is not below {}",
            s.slo_metric,
            f.slo_us.map_or("?".into(), ms),
            ms(s.below_us)
        ),
        Verdict::Behind { least } => format!(
            "fell behind its schedule ({} achieved, {} needed)",
            rate(f.achieved),
            rate(*least)
        ),
        Verdict::NoLatency => format!("no {} reported", s.slo_metric),
        Verdict::Failed(e) => format!("the stage failed: {e}"),
    }
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn ms(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} us")
    }
}
