//! Baseline against candidate bars for the gated metrics of a comparison,
//! the change written above each candidate's bar (red when worse, green
//! when better), drawn with the report's chart kinds
//! ([`crate::report::charts::bars`]). One chart per metric (name and base
//! unit), one group of bars per stage instance (and labels), so the same
//! metric of several stages shares one scale.

use std::path::Path;

use super::{Comparison, MetricComparison, Verdict};
use crate::report::charts::bars::{self, BAD, BarSeries, GOOD, Mark, NEUTRAL};
use crate::report::charts::{axis, names};

/// More groups than this and the chart is split: names stay readable.
const MAX_GROUPS: usize = 4;

/// A chart of a comparison: its title and file name (no folder).
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonChart {
    pub title: String,
    pub file: String,
}

struct Group<'a> {
    name: String,
    metric: &'a MetricComparison,
}

fn candidate_label(c: &Comparison, i: usize) -> String {
    if c.candidates.len() == 1 {
        "candidate".to_string()
    } else {
        format!("candidate {}", i + 1)
    }
}

fn mark(change: &super::Change) -> Mark {
    let pct = change
        .change_percent
        .map_or("from 0".to_string(), |p| format!("{p:+.1}%"));
    let (word, colour) = match change.verdict {
        Verdict::Worse => (" worse", BAD),
        Verdict::Better => (" better", GOOD),
        Verdict::TooNoisy => (" noisy", NEUTRAL),
        _ => ("", NEUTRAL),
    };
    Mark {
        text: format!("{pct}{word}"),
        colour,
    }
}

/// Draws the charts of `c` into `dir` (created); returns them in order.
pub fn write_charts(c: &Comparison, dir: &Path) -> std::io::Result<Vec<ComparisonChart>> {
    // (metric name, base unit) -> the gated metrics with a baseline.
    let mut metrics: Vec<((String, String), Vec<Group>)> = Vec::new();
    for stage in &c.stages {
        for m in stage
            .metrics
            .iter()
            .filter(|m| m.gated && m.baseline.is_some())
        {
            let key = (m.name.clone(), axis::to_base(&m.unit).0);
            let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let name = if labels.is_empty() {
                stage.id.clone()
            } else {
                format!("{} ({})", stage.id, labels.join(", "))
            };
            let group = Group { name, metric: m };
            match metrics.iter_mut().find(|(k, _)| *k == key) {
                Some((_, groups)) => groups.push(group),
                None => metrics.push((key, vec![group])),
            }
        }
    }
    if metrics.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir)?;
    let mut taken = names::Taken::default();
    let mut out = Vec::new();
    for ((name, unit), groups) in &metrics {
        let factor = |m: &MetricComparison| axis::to_base(&m.unit).1;
        let mut series = vec![BarSeries {
            label: "baseline".to_string(),
            values: groups
                .iter()
                .map(|g| {
                    g.metric
                        .baseline
                        .as_ref()
                        .map(|b| b.median * factor(g.metric))
                })
                .collect(),
            marks: Vec::new(),
        }];
        for i in 0..c.candidates.len() {
            let changes: Vec<Option<&super::Change>> = groups
                .iter()
                .map(|g| g.metric.candidates.get(i).and_then(Option::as_ref))
                .collect();
            series.push(BarSeries {
                label: candidate_label(c, i),
                values: changes
                    .iter()
                    .zip(groups)
                    .map(|(ch, g)| ch.map(|ch| ch.summary.median * factor(g.metric)))
                    .collect(),
                marks: changes.iter().map(|ch| ch.map(mark)).collect(),
            });
        }
        // One scale for all parts of a metric's chart.
        let y = bars::bar_axis(
            series
                .iter()
                .flat_map(|s| s.values.iter().flatten().copied()),
            unit,
        );
        let parts = groups.len().div_ceil(MAX_GROUPS);
        for part in 0..parts {
            let range = part * MAX_GROUPS..((part + 1) * MAX_GROUPS).min(groups.len());
            let group_names: Vec<String> = groups[range.clone()]
                .iter()
                .map(|g| g.name.clone())
                .collect();
            let cut: Vec<BarSeries> = series
                .iter()
                .map(|s| BarSeries {
                    label: s.label.clone(),
                    values: s.values[range.clone()].to_vec(),
                    marks: s
                        .marks
                        .get(range.clone())
                        .map(<[_]>::to_vec)
                        .unwrap_or_default(),
                })
                .collect();
            let against = if c.candidates.len() == 1 {
                "candidate"
            } else {
                "candidates"
            };
            let title = if parts > 1 {
                format!("{name}: baseline against {against} ({}/{parts})", part + 1)
            } else {
                format!("{name}: baseline against {against}")
            };
            let text = bars::render(&bars::Bars {
                title: &title,
                groups: &group_names,
                x_name: "stage",
                y_name: name,
                series: &cut,
                y: &y,
                unit,
            });
            let stem = taken.claim(names::file_stem(name));
            let file = format!("{stem}.svg");
            std::fs::write(dir.join(&file), text)?;
            out.push(ComparisonChart { title, file });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{CompareOptions, Side, compare};
    use crate::report::charts::readback::{close, read};
    use crate::results::RunResults;

    fn load(text: &str) -> RunResults {
        RunResults::parse(text, Path::new("x.json")).unwrap()
    }

    #[test]
    fn bars_hold_both_medians_and_mark_each_regression() {
        let base = load(include_str!(
            "../../../../tests/compare/full-baseline-1.results.json"
        ));
        let cand = load(include_str!(
            "../../../../tests/compare/full-baseline-2.results.json"
        ));
        let side = |r| Side {
            source: "x".into(),
            results: r,
        };
        let c = compare(&side(&base), &[side(&cand)], &CompareOptions::default());
        let dir = std::env::temp_dir().join(format!("pipeline-cmp-charts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let charts = write_charts(&c, &dir).unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert!(files.contains(&"latency_avg.svg"), "{files:?}");
        let mut marks = Vec::new();
        let mut bars_seen = 0;
        for chart in &charts {
            let drawn = read(&std::fs::read_to_string(dir.join(&chart.file)).unwrap());
            marks.extend(drawn.texts.iter().cloned());
            // Each bar maps back to the median it stands for.
            let metric = chart.title.split(':').next().unwrap();
            let medians: Vec<(f64, f64)> = c
                .stages
                .iter()
                .flat_map(|s| &s.metrics)
                .filter(|m| m.gated && m.name == metric && m.baseline.is_some())
                .map(|m| {
                    let f = axis::to_base(&m.unit).1;
                    let cand = m.candidates[0].as_ref().unwrap().summary.median;
                    (m.baseline.as_ref().unwrap().median * f, cand * f)
                })
                .collect();
            for bar in &drawn.bars {
                let part: usize = chart
                    .title
                    .rsplit_once('(')
                    .and_then(|(_, p)| p.split('/').next()?.parse().ok())
                    .unwrap_or(1);
                let (b, c) = medians[(part - 1) * MAX_GROUPS + bar.group];
                let want = if bar.series == 0 { b } else { c };
                assert!(
                    close(bar.value, want, drawn.y_span),
                    "{}: {bar:?} {want}",
                    chart.file
                );
                bars_seen += 1;
            }
        }
        assert!(bars_seen >= 2 * c.regressions.len());
        for r in &c.regressions {
            let text = format!("{:+.1}% worse", r.change_percent.unwrap());
            assert!(marks.contains(&text), "{text} not in {marks:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
