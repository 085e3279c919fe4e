//! `pipeline compare`: a baseline run against one or more candidate runs,
//! metric by metric, with a verdict for each that is honest about noise,
//! and the regressions a CI job can fail on.
//!
//! Matching: stage instances by id (which includes matrix values, e.g.
//! `rados-write[bs=4M]`), metrics by name and labels (so hosts match by
//! name). Repetitions of a stage are the metric's samples: metrics that
//! differ only in their `repetition` label. Anything on one side only is
//! listed, never dropped.
//!
//! Gate: a regression (exit 1) is a *gated* metric that is worse past its
//! threshold. Gated are the stages' headline metrics, and every metric a
//! `--threshold` pattern names; the others are judged and shown but do not
//! fail the comparison (a suite has hundreds of figures, and on a noisy
//! machine some minimum latency always moves).
//!
//! Verdicts (see [`judge`]): with at least two samples a side, Welch's
//! t-test; a change is better or worse only when it is significant AND past
//! its threshold, and a change past the threshold that is not significant
//! is "too noisy to tell". With a single sample on either side no test is
//! possible and the threshold alone decides, which the output says.

pub mod charts;
pub mod environment;
pub mod junit;
pub mod markdown;
pub mod stats;
pub mod thresholds;

use std::path::Path;

use pipeline_model::{Direction, Labels};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::results::{RunResults, StageRecord};
use stats::{Summary, Welch};
pub use thresholds::{ThresholdError, Thresholds};

/// The label that tells repetitions of one measurement apart.
pub const REPETITION_LABEL: &str = "repetition";

/// One side of a comparison: a loaded results file and how to name it.
pub struct Side<'a> {
    /// What the user gave (a run folder or a results.json), as shown.
    pub source: String,
    pub results: &'a RunResults,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareOptions {
    pub thresholds: Thresholds,
    /// Significance level of the test.
    pub alpha: f64,
    /// Judge stages measured on a cluster that was not clean (their watch
    /// flagged them) like any other; by default their figures are shown but
    /// not judged, and cannot regress.
    pub allow_unhealthy: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            thresholds: Thresholds::default(),
            alpha: 0.05,
            allow_unhealthy: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: RunInfo,
    pub candidates: Vec<RunInfo>,
    pub options: CompareOptions,
    /// What differs between the runs' environments (client and daemon
    /// versions, cluster configuration, kernels).
    pub environment: environment::EnvironmentDiff,
    pub stages: Vec<StageComparison>,
    /// Gated metrics worse past their threshold: `compare` exits 1 on any.
    pub regressions: Vec<Regression>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    pub source: String,
    pub suite: String,
    pub run_id: String,
    pub started_at: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageComparison {
    /// Instance id (stage id and matrix values).
    pub id: String,
    /// Whether the stage is in the baseline, then in each candidate.
    pub in_baseline: bool,
    pub in_candidates: Vec<bool>,
    /// The sides whose stage was measured on a cluster that was not clean,
    /// with what the watch saw: `(side, flag)`, side `baseline` or the
    /// candidate's source.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unhealthy: Vec<(String, String)>,
    pub metrics: Vec<MetricComparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    pub name: String,
    pub labels: Labels,
    pub unit: String,
    pub direction: Direction,
    pub threshold_percent: f64,
    /// Whether a worse verdict is a regression (see the module comment).
    pub gated: bool,
    /// `None`: the metric is not in the baseline.
    pub baseline: Option<Summary>,
    /// One per candidate; `None`: the metric is not in that candidate.
    pub candidates: Vec<Option<Change>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub summary: Summary,
    /// Change of the median against the baseline's, in percent; `None`
    /// when the baseline is missing or zero.
    pub change_percent: Option<f64>,
    pub verdict: Verdict,
    pub test: Test,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    NoSignificantChange,
    TooNoisy,
    /// The metric has no better or worse (e.g. an object size).
    NotJudged,
    /// Nothing to compare against.
    NoBaseline,
    /// One side was measured on a cluster that was not clean.
    NotComparable,
}

impl Verdict {
    pub fn describe(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoSignificantChange => "no significant change",
            Verdict::TooNoisy => "too noisy to tell",
            Verdict::NotJudged => "not judged (no direction)",
            Verdict::NoBaseline => "not in the baseline",
            Verdict::NotComparable => "not comparable: cluster not clean",
        }
    }
}

/// How a verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Test {
    /// Welch's two-sided t-test of the repetitions.
    Welch {
        t: f64,
        df: f64,
        p: f64,
    },
    /// A single sample on at least one side: no test possible.
    ThresholdOnly,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Regression {
    pub stage: String,
    pub metric: String,
    pub labels: Labels,
    /// Index into `candidates`.
    pub candidate: usize,
    pub unit: String,
    pub baseline: f64,
    pub value: f64,
    pub change_percent: Option<f64>,
    pub threshold_percent: f64,
}

/// A run's comparison with the baseline its suite names (`report.compare_to`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunComparison {
    /// The baseline as the suite names it.
    pub baseline: String,
    /// The comparison's Markdown, relative to the run folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The comparison as JUnit XML (one test case per gated metric),
    /// relative to the run folder, for a CI job's test report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub junit: Option<String>,
    /// Gated metrics worse past their threshold: the run exits 1.
    #[serde(default)]
    pub regressions: Vec<Regression>,
    /// What differs between the baseline's environment and this run's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_changes: Vec<environment::EnvironmentChange>,
    /// Why no comparison could be made (the baseline became unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The file `compare_to` writes into the run folder.
pub const COMPARISON_FILE: &str = "comparison.md";
/// The JUnit XML `compare_to` writes beside it.
pub const COMPARISON_JUNIT_FILE: &str = "comparison.junit.xml";
/// The folder, next to it, its charts go in.
pub const COMPARISON_CHARTS: &str = "comparison-charts";

/// Compares a finished run with its suite's baseline and writes
/// [`COMPARISON_FILE`] into `run_dir`.
pub fn with_baseline(
    planned: &crate::plan::PlannedComparison,
    results: &RunResults,
    run_dir: &Path,
) -> RunComparison {
    let failed = |error: String| RunComparison {
        baseline: planned.shown.clone(),
        file: None,
        junit: None,
        regressions: Vec::new(),
        environment_changes: Vec::new(),
        error: Some(error),
    };
    let baseline = match RunResults::load_file(&planned.baseline).map_err(|e| e.to_string()) {
        Ok(b) => b,
        Err(e) => return failed(e),
    };
    let options = CompareOptions {
        thresholds: planned.thresholds.clone(),
        ..CompareOptions::default()
    };
    let comparison = compare(
        &Side {
            source: planned.shown.clone(),
            results: &baseline,
        },
        &[Side {
            source: "this run".to_string(),
            results,
        }],
        &options,
    );
    // Charts next to it, as `compare --out` draws them; a chart that cannot
    // be written leaves the comparison without charts, not without a verdict.
    let charts = charts::write_charts(&comparison, &run_dir.join(COMPARISON_CHARTS))
        .map(|charts| {
            charts
                .into_iter()
                .map(|c| markdown::Embedded {
                    title: c.title,
                    path: format!("{COMPARISON_CHARTS}/{}", c.file),
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let file = run_dir.join(COMPARISON_FILE);
    if let Err(e) = std::fs::write(&file, markdown::render_with_charts(&comparison, &charts)) {
        return failed(format!("writing {}: {e}", file.display()));
    }
    let junit = run_dir.join(COMPARISON_JUNIT_FILE);
    if let Err(e) = std::fs::write(&junit, junit::render(&comparison)) {
        return failed(format!("writing {}: {e}", junit.display()));
    }
    RunComparison {
        baseline: planned.shown.clone(),
        file: Some(COMPARISON_FILE.to_string()),
        junit: Some(COMPARISON_JUNIT_FILE.to_string()),
        regressions: comparison.regressions,
        environment_changes: comparison.environment.changes,
        error: None,
    }
}

/// A metric's identity within a stage: name and labels (without the
/// repetition label).
pub(crate) type MetricKey = (String, Labels);

pub(crate) struct Samples {
    pub unit: String,
    pub direction: Direction,
    pub headline: bool,
    pub values: Vec<f64>,
}

/// The samples of each metric of a stage, in the order they first appear.
pub(crate) fn samples(stage: &StageRecord) -> Vec<(MetricKey, Samples)> {
    let mut out: Vec<(MetricKey, Samples)> = Vec::new();
    for m in &stage.metrics {
        if !m.value.is_finite() {
            continue;
        }
        let mut labels = m.labels.clone();
        labels.remove(REPETITION_LABEL);
        let key = (m.name.clone(), labels);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, s)) => {
                s.values.push(m.value);
                s.headline |= m.headline;
            }
            None => out.push((
                key,
                Samples {
                    unit: m.unit.clone(),
                    direction: m.direction,
                    headline: m.headline,
                    values: vec![m.value],
                },
            )),
        }
    }
    out
}

fn info(side: &Side) -> RunInfo {
    let r = side.results;
    RunInfo {
        source: side.source.clone(),
        suite: r.pipeline.name.clone(),
        run_id: r.run_id.clone(),
        started_at: r.started_at.clone(),
        status: serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
    }
}

/// Compares `baseline` with each of `candidates`.
pub fn compare(baseline: &Side, candidates: &[Side], options: &CompareOptions) -> Comparison {
    // Stage ids in order: the baseline's, then those only candidates have.
    let mut ids: Vec<&str> = baseline
        .results
        .stages
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    for c in candidates {
        for s in &c.results.stages {
            if !ids.contains(&s.id.as_str()) {
                ids.push(&s.id);
            }
        }
    }
    let find = |r: &'_ RunResults, id: &str| -> Option<StageRecord> {
        r.stages.iter().find(|s| s.id == id).cloned()
    };
    let mut stages = Vec::new();
    let mut regressions = Vec::new();
    for id in ids {
        let base_stage = find(baseline.results, id);
        let cand_stages: Vec<Option<StageRecord>> =
            candidates.iter().map(|c| find(c.results, id)).collect();
        let unhealthy: Vec<(String, String)> = std::iter::once(("baseline", &base_stage))
            .chain(
                candidates
                    .iter()
                    .map(|c| c.source.as_str())
                    .zip(&cand_stages),
            )
            .filter_map(|(side, stage)| {
                let flag = stage.as_ref()?.cluster.as_ref()?.unhealthy.clone()?;
                Some((side.to_string(), flag))
            })
            .collect();
        let judged = unhealthy.is_empty() || options.allow_unhealthy;
        let base_samples = base_stage.as_ref().map(samples).unwrap_or_default();
        let cand_samples: Vec<Vec<(MetricKey, Samples)>> = cand_stages
            .iter()
            .map(|s| s.as_ref().map(samples).unwrap_or_default())
            .collect();
        // Metric keys in order: the baseline's, then the candidates' own.
        let mut keys: Vec<MetricKey> = base_samples.iter().map(|(k, _)| k.clone()).collect();
        for cs in &cand_samples {
            for (k, _) in cs {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        let mut metrics = Vec::new();
        for key in keys {
            let lookup = |list: &'_ [(MetricKey, Samples)]| -> Option<usize> {
                list.iter().position(|(k, _)| *k == key)
            };
            let base = lookup(&base_samples).map(|i| &base_samples[i].1);
            let any = base.or_else(|| {
                cand_samples
                    .iter()
                    .find_map(|cs| lookup(cs).map(|i| &cs[i].1))
            });
            let Some(any) = any else { continue };
            let threshold = options.thresholds.for_metric(&key.0);
            let gated = any.headline || options.thresholds.names(&key.0);
            let base_summary = base.and_then(|b| Summary::of(&b.values));
            let mut changes = Vec::new();
            for (ci, cs) in cand_samples.iter().enumerate() {
                let change = lookup(cs).and_then(|i| {
                    let cand = &cs[i].1;
                    let summary = Summary::of(&cand.values)?;
                    Some(match base {
                        Some(_) if !judged => Change {
                            summary,
                            change_percent: None,
                            verdict: Verdict::NotComparable,
                            test: Test::None,
                        },
                        Some(b) => judge(
                            &b.values,
                            &cand.values,
                            any.direction,
                            threshold,
                            options.alpha,
                        ),
                        None => Change {
                            summary,
                            change_percent: None,
                            verdict: Verdict::NoBaseline,
                            test: Test::None,
                        },
                    })
                });
                if let (Some(c), Some(b)) = (&change, &base_summary)
                    && gated
                    && c.verdict == Verdict::Worse
                {
                    regressions.push(Regression {
                        stage: id.to_string(),
                        metric: key.0.clone(),
                        labels: key.1.clone(),
                        candidate: ci,
                        unit: any.unit.clone(),
                        baseline: b.median,
                        value: c.summary.median,
                        change_percent: c.change_percent,
                        threshold_percent: threshold,
                    });
                }
                changes.push(change);
            }
            metrics.push(MetricComparison {
                name: key.0.clone(),
                labels: key.1.clone(),
                unit: any.unit.clone(),
                direction: any.direction,
                threshold_percent: threshold,
                gated,
                baseline: base_summary,
                candidates: changes,
            });
        }
        stages.push(StageComparison {
            id: id.to_string(),
            in_baseline: base_stage.is_some(),
            unhealthy,
            in_candidates: cand_stages.iter().map(Option::is_some).collect(),
            metrics,
        });
    }
    let others: Vec<&RunResults> = candidates.iter().map(|c| c.results).collect();
    Comparison {
        baseline: info(baseline),
        candidates: candidates.iter().map(info).collect(),
        options: options.clone(),
        environment: environment::diff(baseline.results, &others),
        stages,
        regressions,
    }
}

/// The verdict for one metric: `base` and `cand` are its samples (at least
/// one each), `threshold` in percent.
pub fn judge(
    base: &[f64],
    cand: &[f64],
    direction: Direction,
    threshold: f64,
    alpha: f64,
) -> Change {
    let b = Summary::of(base).expect("at least one baseline sample");
    let summary = Summary::of(cand).expect("at least one candidate sample");
    let change_percent =
        (b.median != 0.0).then(|| (summary.median - b.median) / b.median.abs() * 100.0);
    // Past the threshold: by the percentage, or any change from a zero baseline.
    let past = match change_percent {
        Some(pct) => pct.abs() > threshold,
        None => summary.median != b.median,
    };
    let up = summary.median > b.median;
    let direction_verdict = match (direction, up) {
        (Direction::Higher, true) | (Direction::Lower, false) => Verdict::Better,
        (Direction::Higher, false) | (Direction::Lower, true) => Verdict::Worse,
        (Direction::None, _) => Verdict::NotJudged,
    };
    let test = match stats::welch(base, cand) {
        Some(Welch { t, df, p }) => Test::Welch { t, df, p },
        None => Test::ThresholdOnly,
    };
    let verdict = if direction == Direction::None {
        Verdict::NotJudged
    } else {
        match test {
            Test::Welch { p, .. } if p < alpha && past => direction_verdict,
            Test::Welch { .. } if past => Verdict::TooNoisy,
            Test::ThresholdOnly if past => direction_verdict,
            _ => Verdict::NoSignificantChange,
        }
    };
    Change {
        summary,
        change_percent,
        verdict,
        test,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_runs_use_the_threshold_alone() {
        // The field notes' regression: 4K random read, 4875 -> 381 IOPS.
        let c = judge(&[4875.0], &[381.0], Direction::Higher, 5.0, 0.05);
        assert_eq!(c.verdict, Verdict::Worse);
        assert_eq!(c.test, Test::ThresholdOnly);
        assert!((c.change_percent.unwrap() + 92.184_615).abs() < 1e-4);
        let small = judge(&[100.0], &[97.0], Direction::Higher, 5.0, 0.05);
        assert_eq!(small.verdict, Verdict::NoSignificantChange);
        let latency = judge(&[1.0], &[1.2], Direction::Lower, 10.0, 0.05);
        assert_eq!(latency.verdict, Verdict::Worse);
        let neutral = judge(&[1.0], &[2.0], Direction::None, 5.0, 0.05);
        assert_eq!(neutral.verdict, Verdict::NotJudged);
    }

    #[test]
    fn repetitions_need_significance_and_the_threshold() {
        let big = judge(
            &[4875.0, 4910.0, 4850.0],
            &[381.0, 377.0, 390.0],
            Direction::Higher,
            5.0,
            0.05,
        );
        assert_eq!(big.verdict, Verdict::Worse);
        assert!(matches!(big.test, Test::Welch { p, .. } if p < 1e-4));
        // Significant (tight spread) but only 0.5%: not a regression.
        let tiny = judge(
            &[1000.0, 1000.1, 999.9],
            &[995.0, 995.1, 994.9],
            Direction::Higher,
            5.0,
            0.05,
        );
        assert!(matches!(tiny.test, Test::Welch { p, .. } if p < 0.05));
        assert_eq!(tiny.verdict, Verdict::NoSignificantChange);
        // 10% lower medians but spread all over: too noisy.
        let noisy = judge(
            &[100.0, 150.0, 60.0],
            &[90.0, 140.0, 50.0],
            Direction::Higher,
            5.0,
            0.05,
        );
        assert_eq!(noisy.verdict, Verdict::TooNoisy);
    }

    #[test]
    fn a_zero_baseline_counts_any_change() {
        let errors = judge(&[0.0], &[3.0], Direction::Lower, 5.0, 0.05);
        assert_eq!(errors.change_percent, None);
        assert_eq!(errors.verdict, Verdict::Worse);
        let same = judge(&[0.0], &[0.0], Direction::Lower, 5.0, 0.05);
        assert_eq!(same.verdict, Verdict::NoSignificantChange);
    }
}
