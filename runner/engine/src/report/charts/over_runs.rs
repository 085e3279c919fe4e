//! `pipeline history --chart`: one metric over the runs of a runs folder,
//! a line per stage instance (and labels), the runs where the comparison
//! gate would have fired ringed in red. Drawn with the line chart of
//! [`super::svg`], its x axis the runs in order (labelled by start time).

use pipeline_model::Labels;

use super::axis::{self, Axis};
use super::svg;
use crate::history::Line;

/// About this many run labels fit along the axis.
const RUN_LABELS: usize = 7;

/// A line's name in the legend: its stage instance and labels.
fn line_name(stage: &str, labels: &Labels) -> String {
    if labels.is_empty() {
        stage.to_string()
    } else {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{stage} ({})", l.join(", "))
    }
}

/// `2026-12-01T00:45:10.765Z` as `12-01 00:45`.
fn short_time(started_at: &str) -> String {
    match (started_at.get(5..10), started_at.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time}"),
        _ => started_at.to_string(),
    }
}

/// The chart of `lines` (the history of `metric`) and notes on what was
/// left out; `None` when no line has a point.
pub fn history_chart(
    metric: &str,
    lines: &[Line],
    threshold_percent: f64,
) -> Option<(String, Vec<String>)> {
    // Runs in order, as the lines met them (history is oldest first).
    let mut runs: Vec<(&str, &str)> = Vec::new();
    for line in lines {
        for p in &line.points {
            if !runs.iter().any(|(id, _)| *id == p.run) {
                runs.push((&p.run, &p.started_at));
            }
        }
    }
    runs.sort_by(|a, b| a.1.cmp(b.1));
    let mut notes = Vec::new();
    // One base unit a chart: lines in another are named, not drawn.
    let base = lines
        .iter()
        .find(|l| !l.points.is_empty())
        .map(|l| axis::to_base(&l.unit).0)?;
    let mut drawn = Vec::new();
    let mut rings = Vec::new();
    let (mut lo, mut hi) = (0f64, 0f64);
    for line in lines {
        let (unit, factor) = axis::to_base(&line.unit);
        if unit != base {
            notes.push(format!(
                "{} is in {}, not {base}: not drawn",
                line_name(&line.stage, &line.labels),
                line.unit
            ));
            continue;
        }
        let mut points = Vec::new();
        for p in &line.points {
            let Some(x) = runs.iter().position(|(id, _)| *id == p.run) else {
                continue;
            };
            let v = p.value * factor;
            if !v.is_finite() || v.abs() > axis::LARGEST {
                continue;
            }
            lo = lo.min(v);
            hi = hi.max(v);
            points.push([x as f64, v]);
            if p.gate_fired {
                rings.push([x as f64, v]);
            }
        }
        drawn.push(svg::Line {
            label: line_name(&line.stage, &line.labels),
            points,
        });
    }
    let step = runs.len().div_ceil(RUN_LABELS).max(1);
    let x = Axis {
        min: -0.5,
        max: runs.len() as f64 - 0.5,
        ticks: runs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0)
            .map(|(i, (_, at))| (i as f64, short_time(at)))
            .collect(),
        unit: String::new(),
    };
    let y = axis::axis(lo, hi, &base);
    let title = format!(
        "{metric} over {} runs; red rings: the gate ({threshold_percent}%) would have fired",
        runs.len()
    );
    let text = svg::render(&svg::Chart {
        title: &title,
        x: &x,
        y: &y,
        x_name: "run (started, UTC)",
        lines: &drawn,
        rings: &rings,
    });
    Some((text, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Point;
    use crate::report::charts::readback::{close, read};
    use pipeline_model::Direction;

    fn point(run: &str, at: &str, value: f64, fired: bool) -> Point {
        Point {
            run: run.into(),
            started_at: at.into(),
            value,
            n: 1,
            gate_fired: fired,
            change_percent: None,
            cluster_not_clean: false,
            host_limited: false,
        }
    }

    #[test]
    fn points_and_rings_map_back_to_runs_and_values() {
        let lines = vec![
            Line {
                stage: "rados-read[mode=rand]".into(),
                labels: Labels::new(),
                unit: "MiB/s".into(),
                direction: Direction::Higher,
                points: vec![
                    point("a", "2026-12-01T00:45:10Z", 1563.0, false),
                    point("b", "2026-12-02T00:45:10Z", 1142.5, true),
                    point("c", "2026-12-03T00:45:10Z", 1500.0, false),
                ],
            },
            Line {
                stage: "rados-read[mode=seq]".into(),
                labels: Labels::new(),
                unit: "B/s".into(),
                direction: Direction::Higher,
                // Not in run b: its line skips that run's position.
                points: vec![
                    point("a", "2026-12-01T00:45:10Z", 914.0 * 1048576.0, false),
                    point("c", "2026-12-03T00:45:10Z", 958.0 * 1048576.0, false),
                ],
            },
        ];
        let (text, notes) = history_chart("bandwidth", &lines, 5.0).unwrap();
        assert!(notes.is_empty());
        let drawn = read(&text);
        assert_eq!(drawn.rings.len(), 1);
        assert!((drawn.rings[0][0] - 1.0).abs() < 0.01, "{:?}", drawn.rings);
        assert!(close(drawn.rings[0][1], 1142.5 * 1048576.0, drawn.y_span));
        assert!(
            drawn.texts.iter().any(|t| t == "12-02 00:45"),
            "{:?}",
            drawn.texts
        );
        assert!(drawn.texts.iter().any(|t| t == "rados-read[mode=seq]"));
        assert_eq!(drawn.texts.iter().filter(|t| *t == "GiB/s").count(), 1);
    }
}
