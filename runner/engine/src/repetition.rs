//! `repeat: N`: a stage instance run N times in a row. Each repetition runs
//! in its own folder (`stages/<id>/repetition-K/`) and its metrics and
//! histograms carry the label `repetition=K`, so results.json keeps every
//! measurement; the record also gets a summary per metric (median, min,
//! max, coefficient of variation), the figure a report leads with, and says
//! when the spread is too large to trust. `pipeline compare` reads the
//! repetitions as the samples of its test.

use pipeline_model::{Direction, Labels};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::compare::REPETITION_LABEL;
use crate::compare::stats::Summary;
use crate::results::{CommandCpu, StageRecord, StageStatus};

/// Default `report.max_cv`: spreads above 10% are flagged.
pub const DEFAULT_MAX_CV_PERCENT: f64 = 10.0;

/// What a repeated stage instance did, and its figures over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Repetitions {
    /// Repetitions asked for.
    pub planned: u32,
    /// Repetitions that ran to the end (fewer after a failure or Ctrl-C).
    pub completed: u32,
    pub pause_s: f64,
    /// Coefficient of variation (percent) above which a figure is flagged.
    pub max_cv_percent: f64,
    pub summaries: Vec<RepetitionSummary>,
}

/// One metric over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RepetitionSummary {
    pub name: String,
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    pub unit: String,
    pub direction: Direction,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headline: bool,
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation in percent (absent with one value or a zero mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv_percent: Option<f64>,
    /// The spread is above `max_cv_percent`: too large to trust the median.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_noisy: bool,
}

/// A copy of `record` without what each repetition adds (metrics,
/// histograms, artifacts, commands, notes): what a repetition starts from.
pub fn emptied(record: &StageRecord) -> StageRecord {
    StageRecord {
        metrics: Vec::new(),
        histograms: Vec::new(),
        artifacts: Vec::new(),
        commands: Vec::new(),
        notes: Vec::new(),
        ..record.clone()
    }
}

/// Adds repetition `k`'s record (`one`, run from a copy of `record`) to
/// `record`.
pub fn absorb(record: &mut StageRecord, one: StageRecord, k: u32, planned: u32) {
    let tag = |labels: &mut Labels| {
        labels.insert(REPETITION_LABEL.to_string(), k.to_string());
    };
    for mut m in one.metrics {
        tag(&mut m.labels);
        record.metrics.push(m);
    }
    for mut h in one.histograms {
        tag(&mut h.labels);
        record.histograms.push(h);
    }
    record.artifacts.extend(one.artifacts);
    record.commands.extend(one.commands);
    record.command_cpu = CommandCpu::of(&record.commands);
    record.notes.extend(
        one.notes
            .into_iter()
            .map(|n| format!("repetition {k}: {n}")),
    );
    // Later stages read the outputs of the last repetition.
    record.outputs = one.outputs;
    if one.status != StageStatus::Succeeded && record.status == StageStatus::Succeeded {
        record.status = one.status;
        record.error = one
            .error
            .map(|e| format!("repetition {k} of {planned}: {e}"));
        record.skip_reason = one.skip_reason;
    }
}

/// The summaries of `record`'s metrics over their repetitions.
pub fn summarize(
    record: &StageRecord,
    planned: u32,
    completed: u32,
    pause_s: f64,
    max_cv_percent: f64,
) -> Repetitions {
    let mut groups: Vec<(RepetitionSummary, Vec<f64>)> = Vec::new();
    // A search's step K is a different rate in each repetition: its
    // figures do not summarise across them (the knee does).
    let steps = record
        .metrics
        .iter()
        .filter(|m| !m.labels.contains_key(crate::knee::curve::STEP_LABEL));
    for m in steps {
        let mut labels = m.labels.clone();
        labels.remove(REPETITION_LABEL);
        match groups
            .iter_mut()
            .find(|(s, _)| s.name == m.name && s.labels == labels)
        {
            Some((s, values)) => {
                values.push(m.value);
                s.headline |= m.headline;
            }
            None => groups.push((
                RepetitionSummary {
                    name: m.name.clone(),
                    labels,
                    unit: m.unit.clone(),
                    direction: m.direction,
                    headline: m.headline,
                    n: 0,
                    median: 0.0,
                    min: 0.0,
                    max: 0.0,
                    cv_percent: None,
                    too_noisy: false,
                },
                vec![m.value],
            )),
        }
    }
    let summaries = groups
        .into_iter()
        .filter_map(|(mut s, values)| {
            let summary = Summary::of(&values)?;
            s.n = summary.n;
            s.median = summary.median;
            s.min = summary.min;
            s.max = summary.max;
            s.cv_percent = summary.cv.map(|cv| cv * 100.0);
            // Only a figure that has a better and a worse can be untrustworthy.
            s.too_noisy = s.direction != Direction::None
                && s.cv_percent.is_some_and(|cv| cv > max_cv_percent);
            Some(s)
        })
        .collect();
    Repetitions {
        planned,
        completed,
        pause_s,
        max_cv_percent,
        summaries,
    }
}
