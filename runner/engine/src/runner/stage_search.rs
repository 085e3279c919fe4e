//! A stage's `search:` run: its steps, each an ordinary run of the stage at
//! one target rate in a folder of its own (`step-K/`), then the final hold
//! (`hold/`), as one [`Ran`] whose output is the hold's with the search's
//! curve and knee added (see [`crate::knee`]).

use std::path::Path;
use std::time::Instant;

use super::Runner;
use crate::cancel::CancelToken;
use crate::knee::PlannedSearch;
use crate::knee::curve::{Curve, Step};
use crate::knee::search::{Ended, Next, Search};
use crate::knee::step::{StepFigures, Verdict};
use crate::per_host::Ran;
use crate::plan::PlannedStage;
use crate::stage::StageError;

impl Runner<'_> {
    /// One run of the stage, or its search when it has one.
    pub(super) fn run_measured(
        &mut self,
        stage: &PlannedStage,
        params: &crate::params::Params,
        work_dir: &Path,
        cancel: &CancelToken,
        show: &(dyn Fn(&str) + Sync),
    ) -> Ran {
        match &stage.search {
            Some(search) => self.run_search(stage, search, params, work_dir, cancel, show),
            None => self.run_once(stage, params, work_dir, cancel, show),
        }
    }

    fn run_search(
        &mut self,
        stage: &PlannedStage,
        planned: &PlannedSearch,
        params: &crate::params::Params,
        work_dir: &Path,
        cancel: &CancelToken,
        show: &(dyn Fn(&str) + Sync),
    ) -> Ran {
        let mut all = Ran {
            outcome: Ok(Default::default()),
            commands: Vec::new(),
            artifacts: Vec::new(),
            tools: Vec::new(),
        };
        let Some(rate_search) = stage.plugin.stage.rate_search() else {
            all.outcome = Err(StageError::failed("this stage cannot be searched"));
            return all;
        };
        let spec = &rate_search.spec;
        // A per-host stage runs once per host: each gets its share.
        let parts = if stage.fans_out() {
            stage.targets.len().max(1)
        } else {
            1
        } as f64;
        let at_rate = |rate: f64| {
            let mut p = params.clone();
            let each = (rate_search.set_rate)(&mut p, rate / parts);
            (p, each * parts)
        };
        let mut search = Search::new(planned.clone());
        let mut steps: Vec<Step> = Vec::new();
        let started = Instant::now();
        let mut longest = std::time::Duration::ZERO;
        let hold = loop {
            if started.elapsed() + longest > planned.budget {
                search.out_of_time();
            }
            let rate = match search.next() {
                Next::Step(rate) => rate,
                Next::Hold(rate) => break Some(rate),
                Next::NoKnee => break None,
            };
            let k = steps.len() + 1;
            let (p, target) = at_rate(rate);
            show(&format!(
                "search step {k}: target {target:.0} {}",
                spec.rate_unit
            ));
            let step_started = Instant::now();
            let ran = self.run_once(stage, &p, &work_dir.join(format!("step-{k}")), cancel, show);
            longest = longest.max(step_started.elapsed());
            let outcome = absorb(&mut all, ran);
            let figures = match outcome {
                Ok(out) => StepFigures::read(&out, spec, &planned.slo_metric, target),
                Err(e) => {
                    // Interrupted, or failing at the first rate (the suite
                    // is wrong, not the rate too high): the stage fails.
                    if k == 1 || matches!(e, StageError::Cancelled | StageError::Timeout(_)) {
                        all.outcome = Err(e);
                        return all;
                    }
                    let failed = StepFigures {
                        target,
                        achieved: 0.0,
                        completed: 0.0,
                        errors: 0.0,
                        median_us: None,
                        slo_us: None,
                    };
                    steps.push(Step {
                        figures: failed,
                        verdict: Verdict::Failed(e.to_string()),
                    });
                    search.record(target, false);
                    continue;
                }
            };
            let verdict = figures.verdict(planned.below_us);
            search.record(target, verdict.passed());
            steps.push(Step { figures, verdict });
        };
        let seconds = started.elapsed().as_secs_f64();
        // The recorded targets are the effective ones: the knee is one of them.
        let ended = search.ended().unwrap_or(Ended::OutOfTime);
        let hold = hold.map(at_rate);
        let curve = Curve {
            search: planned,
            spec,
            steps: &steps,
            knee: search.knee(),
            ended,
            seconds,
            hold_rate: hold.as_ref().map(|(_, rate)| *rate),
        };
        let Some((p, hold)) = hold else {
            let mut notes = curve.notes();
            notes.truncate(1);
            all.outcome = Err(StageError::failed(format!(
                "{}; steps: {}",
                notes.join("; "),
                steps
                    .iter()
                    .map(|s| format!("{:.0}", s.figures.target))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
            return all;
        };
        show(&format!(
            "hold at {hold:.0} {} ({:.0}% of the knee)",
            spec.rate_unit,
            planned.hold * 100.0
        ));
        let hold_from = started.elapsed().as_secs_f64();
        let ran = self.run_once(stage, &p, &work_dir.join("hold"), cancel, show);
        let hold_to = started.elapsed().as_secs_f64();
        all.outcome = absorb(&mut all, ran).map(|mut out| {
            out.metrics.extend(curve.metrics());
            let mut notes = curve.notes();
            // The stage's telemetry (and its verdict) spans the steps too.
            notes.insert(
                2,
                format!(
                    "search: the hold ran from {hold_from:.0} s to {hold_to:.0} s of the stage; the cluster and host telemetry, its charts and the saturation verdict cover every step as well"
                ),
            );
            notes.append(&mut out.notes);
            out.notes = notes;
            out
        });
        all
    }
}

/// Adds a step's commands, artifacts and tools to the search's; returns
/// the step's outcome.
fn absorb(all: &mut Ran, ran: Ran) -> Result<pipeline_stage_api::stage::StageOutput, StageError> {
    all.commands.extend(ran.commands);
    all.artifacts.extend(ran.artifacts);
    for (host, tools) in ran.tools {
        match all.tools.iter_mut().find(|(h, _)| h.name == host.name) {
            Some((_, seen)) => {
                for t in tools {
                    if !seen.contains(&t) {
                        seen.push(t);
                    }
                }
            }
            None => all.tools.push((host, tools)),
        }
    }
    ran.outcome
}
