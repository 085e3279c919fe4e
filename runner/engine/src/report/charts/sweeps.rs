//! Matrix sweeps: the instances of one stage that differ by matrix values
//! (`write[pool=replica3]`, `write[pool=ec21]`), side by side. For each
//! sweep the report gets a table (rows: headline metrics, columns: matrix
//! points), grouped bars of each headline metric across the points, and,
//! when the stage measures both a throughput and a latency, a
//! throughput-vs-latency curve with one point per matrix point.
//!
//! A metric named by I/O direction (fio's `write_iops` at `rw=randwrite`,
//! `read_iops` at `rw=randread`) is one row across the points.
//!
//! Values are medians over repetitions. Charts go in `charts/` at the run
//! folder's root; one metric has one y scale across every sweep of a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pipeline_model::{Direction, Labels};
use pipeline_stage_api::safe_fs::{Dir, FsError};
use serde::Serialize;

use super::{CHARTS_DIR, ChartNote, ChartRef, axis, bars, curve, markdown_alt, names, note, write};
use crate::compare::stats::Summary;
use crate::report::format_value;
use crate::results::{RunResults, StageRecord};

/// One stage's matrix sweep, as the report shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sweep {
    pub stage: String,
    /// The matrix axes, e.g. `["pool"]`.
    pub axes: Vec<String>,
    /// Column headers: each point's matrix values.
    pub points: Vec<String>,
    pub rows: Vec<SweepRow>,
    /// Whether any value is a median over repetitions.
    pub medians: bool,
    pub charts: Vec<ChartRef>,
    pub notes: Vec<ChartNote>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SweepRow {
    pub metric: String,
    /// `k=v, ...`, empty for none.
    pub labels: String,
    pub direction: Direction,
    /// Formatted for the unit; `-` where a point has no value.
    pub cells: Vec<String>,
}

/// A row before formatting: values in base units, one per point.
#[derive(Debug, Clone)]
struct Row {
    name: String,
    labels: Labels,
    unit: String,
    direction: Direction,
    values: Vec<Option<f64>>,
    /// The file-name part of its charts: the name, or for merged rows the
    /// part they share (`iops` for `write_iops / read_iops`).
    stem: String,
}

/// A metric of one instance: median over repetitions, in base units.
struct Figure {
    name: String,
    labels: Labels,
    unit: String,
    direction: Direction,
    headline: bool,
    value: f64,
    n: usize,
}

fn figures(stage: &StageRecord) -> Vec<Figure> {
    crate::compare::samples(stage)
        .into_iter()
        .filter_map(|((name, labels), s)| {
            let summary = Summary::of(&s.values)?;
            let (unit, factor) = axis::to_base(&s.unit);
            let value = summary.median * factor;
            value.is_finite().then_some(Figure {
                name,
                labels,
                unit,
                direction: s.direction,
                headline: s.headline,
                value,
                n: summary.n,
            })
        })
        .collect()
}

/// The sweeps of a run: stages with a matrix and two or more instances, in
/// the order of their first instance.
pub fn find(results: &RunResults) -> Vec<(String, Vec<&StageRecord>)> {
    let mut out: Vec<(String, Vec<&StageRecord>)> = Vec::new();
    for s in results.stages.iter().filter(|s| !s.matrix.is_empty()) {
        match out.iter_mut().find(|(stage, _)| *stage == s.stage) {
            Some((_, instances)) => instances.push(s),
            None => out.push((s.stage.clone(), vec![s])),
        }
    }
    out.retain(|(_, instances)| instances.len() > 1);
    out
}

fn label_text(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A point's matrix values as a column header: the bare value for one
/// axis (`seq`), `k=v, ...` for more.
fn point_name(stage: &StageRecord) -> String {
    let value = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if stage.matrix.len() == 1 {
        return stage.matrix.values().map(value).collect();
    }
    stage
        .matrix
        .iter()
        .map(|(k, v)| format!("{k}={}", value(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows of a sweep: the metrics headlined (or named by
/// `report.summary_metrics`) in any instance. A metric whose labels differ
/// between points but that each point has once (rbd bench labels `iops`
/// with its mode) is one row, with the labels the points share.
fn rows(instances: &[&StageRecord], summary_metrics: &[String]) -> (Vec<Row>, bool) {
    let per_point: Vec<Vec<Figure>> = instances.iter().map(|s| figures(s)).collect();
    let medians = per_point.iter().flatten().any(|f| f.n > 1);
    let shown = |f: &Figure| f.headline || summary_metrics.contains(&f.name);
    // The chosen metrics, (name, labels, unit), in order of first appearance.
    let mut keys: Vec<(String, Labels, String)> = Vec::new();
    for f in per_point.iter().flatten() {
        let key = (f.name.clone(), f.labels.clone(), f.unit.clone());
        if shown(f) && !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut done: Vec<(String, String)> = Vec::new();
    for (name, _, unit) in &keys {
        if done.contains(&(name.clone(), unit.clone())) {
            continue;
        }
        done.push((name.clone(), unit.clone()));
        let same: Vec<&(String, Labels, String)> = keys
            .iter()
            .filter(|(n, _, u)| n == name && u == unit)
            .collect();
        fn at<'p>(
            point: &'p [Figure],
            name: &str,
            unit: &str,
            labels: &Labels,
        ) -> Option<&'p Figure> {
            point
                .iter()
                .find(|f| f.name == name && f.unit == unit && f.labels == *labels)
        }
        let once_per_point = per_point.iter().all(|point| {
            same.iter()
                .filter(|(_, labels, _)| at(point, name, unit, labels).is_some())
                .count()
                <= 1
        });
        if once_per_point && same.len() > 1 {
            let first = &same[0].1;
            let common: Labels = first
                .iter()
                .filter(|(k, v)| same.iter().all(|(_, l, _)| l.get(*k) == Some(*v)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let found: Vec<Option<&Figure>> = per_point
                .iter()
                .map(|point| same.iter().find_map(|(_, l, _)| at(point, name, unit, l)))
                .collect();
            let direction = found.iter().flatten().next().map(|f| f.direction);
            rows.push(Row {
                name: name.clone(),
                labels: common,
                unit: unit.clone(),
                direction: direction.unwrap_or(Direction::None),
                values: found.iter().map(|f| f.map(|f| f.value)).collect(),
                stem: name.clone(),
            });
        } else {
            for (_, labels, _) in same {
                let found: Vec<Option<&Figure>> = per_point
                    .iter()
                    .map(|point| at(point, name, unit, labels))
                    .collect();
                let direction = found.iter().flatten().next().map(|f| f.direction);
                rows.push(Row {
                    name: name.clone(),
                    labels: labels.clone(),
                    unit: unit.clone(),
                    direction: direction.unwrap_or(Direction::None),
                    values: found.iter().map(|f| f.map(|f| f.value)).collect(),
                    stem: name.clone(),
                });
            }
        }
    }
    (merge_directions(rows), medians)
}

/// The I/O direction a metric name starts with (fio's `read_iops`,
/// `write_iops`), and the rest.
fn direction_family(name: &str) -> Option<&str> {
    ["read_", "write_", "trim_"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .filter(|rest| !rest.is_empty())
}

/// A sweep over the I/O direction (`rw: [randwrite, randread]`) measures
/// `write_iops` at one point and `read_iops` at the other: such rows (same
/// family, labels, unit and direction, at disjoint points) are one row,
/// `write_iops / read_iops`, so the points compare side by side.
fn merge_directions(rows: Vec<Row>) -> Vec<Row> {
    let mut out: Vec<Row> = Vec::new();
    let mut used = vec![false; rows.len()];
    for i in 0..rows.len() {
        if used[i] {
            continue;
        }
        used[i] = true;
        let mut row = rows[i].clone();
        if let Some(family) = direction_family(&rows[i].name) {
            for j in i + 1..rows.len() {
                let other = &rows[j];
                let fits = !used[j]
                    && direction_family(&other.name) == Some(family)
                    && other.labels == row.labels
                    && other.unit == row.unit
                    && other.direction == row.direction
                    && row
                        .values
                        .iter()
                        .zip(&other.values)
                        .all(|(a, b)| a.is_none() || b.is_none());
                if fits {
                    used[j] = true;
                    row.name = format!("{} / {}", row.name, other.name);
                    row.stem = family.to_string();
                    for (a, b) in row.values.iter_mut().zip(&other.values) {
                        if a.is_none() {
                            *a = *b;
                        }
                    }
                }
            }
        }
        out.push(row);
    }
    out
}

/// Throughput-like: more is better and it counts work per time.
fn is_throughput(row: &Row) -> bool {
    let name = row.name.to_ascii_lowercase();
    row.direction == Direction::Higher
        && (["bandwidth", "iops", "ops_per_s", "throughput"]
            .iter()
            .any(|w| name.contains(w))
            || matches!(row.unit.as_str(), "B/s" | "bit/s" | "IOPS"))
}

/// Latency-like: less is better and it is a time.
fn is_latency(row: &Row) -> bool {
    row.direction == Direction::Lower && row.unit == "s"
}

/// The throughput and latency rows of the curve: the first throughput row
/// with a latency row at two or more common points (the latency with the
/// most common points, then the first).
fn curve_rows(rows: &[Row]) -> Option<(&Row, &Row, Vec<usize>)> {
    for t in rows.iter().filter(|r| is_throughput(r)) {
        let mut best: Option<(&Row, Vec<usize>)> = None;
        for l in rows.iter().filter(|r| is_latency(r)) {
            let common: Vec<usize> = (0..t.values.len())
                .filter(|&i| t.values[i].is_some() && l.values.get(i).is_some_and(Option::is_some))
                .collect();
            if common.len() >= 2 && best.as_ref().is_none_or(|(_, b)| common.len() > b.len()) {
                best = Some((l, common));
            }
        }
        if let Some((l, common)) = best {
            return Some((t, l, common));
        }
    }
    None
}

fn row_title(row: &Row) -> String {
    if row.labels.is_empty() {
        row.name.clone()
    } else {
        format!("{} ({})", row.name, label_text(&row.labels))
    }
}

/// Whether a matrix value is a number (`16`, `"4096"`), not a word (`seq`).
fn is_number(v: &serde_json::Value) -> bool {
    v.is_number() || v.as_str().is_some_and(|t| t.trim().parse::<f64>().is_ok())
}

/// Whether the sweep's points differ by words only (`io_type: [read,
/// write]`): no value on any of its axes is a number.
fn is_categorical(instances: &[&StageRecord]) -> bool {
    !instances.iter().any(|s| s.matrix.values().any(is_number))
}

/// Whether every axis of the sweep is numeric (`iodepth: [1, 16, 64]`):
/// only then do its points have an order a curve may join them in. A mode
/// axis beside a numeric one (`rw` × `iodepth`) leaves the points unjoined.
fn is_numeric(instances: &[&StageRecord]) -> bool {
    instances.iter().all(|s| s.matrix.values().all(is_number))
}

/// The values a chart's y axis spans: the metric's values across every sweep
/// of the run (one scale, so sweeps compare by eye), unless this chart's
/// largest value is under a tenth of that: its bars would be slivers at the
/// bottom (8 and 39 MiB/s on an axis to 2 GiB/s), so it gets its own scale.
fn shared_or_own_scale(shared: &[f64], group: &[&Row]) -> Vec<f64> {
    let largest = |values: &mut dyn Iterator<Item = f64>| {
        values
            .filter(|v| bars::drawable(*v))
            .fold(0f64, |m, v| m.max(v.abs()))
    };
    let own: Vec<f64> = group
        .iter()
        .flat_map(|g| g.values.iter().flatten().copied())
        .collect();
    let own_max = largest(&mut own.iter().copied());
    let shared_max = largest(&mut shared.iter().copied());
    if own_max > 0.0 && own_max * 10.0 < shared_max {
        own
    } else {
        shared.to_vec()
    }
}

/// Finds the sweeps of `results`, draws their charts into
/// `run_dir/charts/` and returns what the report shows.
pub fn write_sweeps(results: &RunResults, run_dir: &Path) -> Vec<Sweep> {
    let found = find(results);
    let built: Vec<(String, Vec<&StageRecord>, Vec<Row>, bool)> = found
        .into_iter()
        .map(|(stage, instances)| {
            let (rows, medians) = rows(&instances, &results.pipeline.summary_metrics);
            (stage, instances, rows, medians)
        })
        .collect();
    let scales = shared_scales(built.iter().map(|(_, _, rows, _)| rows.as_slice()));
    let root = Dir::open(run_dir);
    let mut taken = names::Taken::default();
    let mut out = Vec::new();
    for (stage, instances, rows, medians) in built {
        let points: Vec<String> = instances.iter().map(|s| point_name(s)).collect();
        let axes: Vec<String> = instances[0].matrix.keys().cloned().collect();
        let mut sweep = Sweep {
            stage: stage.clone(),
            axes: axes.clone(),
            points: points.clone(),
            rows: rows.iter().map(sweep_row).collect(),
            medians,
            charts: Vec::new(),
            notes: Vec::new(),
        };
        let x_name = axes.join(", ");
        // Two modes side by side (`seq`, `rand`): the table says it all;
        // bars of two categories and a curve through them say less.
        if is_categorical(&instances) && points.len() < 3 {
            sweep
                .notes
                .push(note(&x_name, "two categories, compared in the table above"));
            out.push(sweep);
            continue;
        }
        let chart = SweepChart {
            stage: &stage,
            points: &points,
            x_name: &x_name,
            of: if medians { " (medians)" } else { "" },
        };
        let mut drawn = chart.bars(&rows, &scales, &mut sweep.notes);
        drawn.extend(chart.curve(&rows, is_numeric(&instances)));
        for d in drawn {
            save_chart(&root, &mut taken, &stage, d, &mut sweep);
        }
        out.push(sweep);
    }
    out
}

/// One y scale per metric (name and base unit) across the sweeps: every
/// value each metric has in any of them.
fn shared_scales<'r>(
    sweeps: impl Iterator<Item = &'r [Row]>,
) -> BTreeMap<(String, String), Vec<f64>> {
    let mut scales: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for rows in sweeps {
        for r in rows {
            scales
                .entry((r.name.clone(), r.unit.clone()))
                .or_default()
                .extend(r.values.iter().flatten());
        }
    }
    scales
}

/// A row of the sweep's table: each point's value formatted for its unit.
fn sweep_row(r: &Row) -> SweepRow {
    SweepRow {
        metric: r.name.clone(),
        labels: label_text(&r.labels),
        direction: r.direction,
        cells: r
            .values
            .iter()
            .map(|v| v.map_or("-".to_string(), |v| format_value(v, &r.unit)))
            .collect(),
    }
}

/// A chart drawn for a sweep, not yet written.
struct Drawn {
    /// The metric part of its file name.
    metric: String,
    title: String,
    svg: String,
}

/// What every chart of one sweep shares.
struct SweepChart<'a> {
    stage: &'a str,
    /// The x positions: each point's matrix values.
    points: &'a [String],
    /// The matrix axes, for the x axis's name.
    x_name: &'a str,
    /// ` (medians)` when values are medians over repetitions.
    of: &'a str,
}

impl SweepChart<'_> {
    /// Grouped bars: one chart per metric, its label sets as the bars. A
    /// metric with a value at one point only gets a note instead.
    fn bars(
        &self,
        rows: &[Row],
        scales: &BTreeMap<(String, String), Vec<f64>>,
        notes: &mut Vec<ChartNote>,
    ) -> Vec<Drawn> {
        let SweepChart {
            stage,
            points,
            x_name,
            of,
        } = *self;
        let mut drawn = Vec::new();
        let mut done: Vec<(String, String)> = Vec::new();
        let mut lone: Vec<String> = Vec::new();
        for r in rows {
            let key = (r.name.clone(), r.unit.clone());
            if done.contains(&key) {
                continue;
            }
            done.push(key.clone());
            let group: Vec<&Row> = rows
                .iter()
                .filter(|o| o.name == r.name && o.unit == r.unit)
                .collect();
            let with_value = (0..points.len())
                .filter(|&i| group.iter().any(|g| g.values[i].is_some()))
                .count();
            if with_value < 2 {
                lone.push(r.name.clone());
                continue;
            }
            let series: Vec<bars::BarSeries> = group
                .iter()
                .map(|g| bars::BarSeries {
                    label: label_text(&g.labels),
                    values: g.values.clone(),
                    marks: Vec::new(),
                })
                .collect();
            let y = bars::bar_axis(shared_or_own_scale(&scales[&key], &group), &r.unit);
            let title = if group.len() == 1 {
                format!("{stage}: {} across {x_name}{of}", row_title(r))
            } else {
                format!("{stage}: {} across {x_name}{of}", r.name)
            };
            let svg = bars::render(&bars::Bars {
                title: &title,
                groups: points,
                x_name,
                y_name: &r.name,
                series: &series,
                y: &y,
                unit: &r.unit,
            });
            drawn.push(Drawn {
                metric: r.stem.clone(),
                title,
                svg,
            });
        }
        if !lone.is_empty() {
            notes.push(note(
                &lone.join(", "),
                "each measured at one matrix point only; no bars to compare",
            ));
        }
        drawn
    }

    /// The throughput-vs-latency curve, when the stage measures both: one
    /// point per matrix point, joined only when every axis is `numeric`.
    fn curve(&self, rows: &[Row], numeric: bool) -> Option<Drawn> {
        let SweepChart {
            stage, points, of, ..
        } = *self;
        let (t, l, common) = curve_rows(rows)?;
        let pts: Vec<(String, [f64; 2])> = common
            .iter()
            .filter_map(|&i| Some((points[i].clone(), [t.values[i]?, l.values[i]?])))
            .filter(|(_, p)| bars::drawable(p[0]) && bars::drawable(p[1]))
            .collect();
        let x = curve::curve_axis(pts.iter().map(|p| p.1[0]), &t.unit);
        let y = curve::curve_axis(pts.iter().map(|p| p.1[1]), &l.unit);
        let title = if t.labels == l.labels {
            let shared = label_text(&t.labels);
            let shared = if shared.is_empty() {
                String::new()
            } else {
                format!(" ({shared})")
            };
            // Merged rows by the part they share: the point labels
            // (randwrite, randread) say which direction each is.
            format!("{stage}: {} against {}{shared}{of}", l.stem, t.stem)
        } else {
            format!("{stage}: {} against {}{of}", row_title(l), row_title(t))
        };
        let svg = curve::render(&curve::Curve {
            title: &title,
            x: &x,
            y: &y,
            x_name: &t.name,
            y_name: &l.name,
            points: &pts,
            joined: numeric,
        });
        Some(Drawn {
            metric: format!("{}-vs-{}", t.stem, l.stem),
            title,
            svg,
        })
    }
}

/// Writes a drawn chart under `charts/` by a file name no other chart of
/// the run has, and lists it in the sweep (or notes why it could not be
/// written).
fn save_chart(
    root: &Result<Dir, FsError>,
    taken: &mut names::Taken,
    stage: &str,
    drawn: Drawn,
    sweep: &mut Sweep,
) {
    let Drawn { metric, title, svg } = drawn;
    let stem = taken.claim(format!(
        "{}-{}",
        names::file_stem(stage),
        names::file_stem(&metric)
    ));
    let rel = PathBuf::from(CHARTS_DIR).join(format!("{stem}.svg"));
    let written = match root {
        Ok(root) => write(root, &rel, &svg),
        Err(e) => Err(format!("cannot open the run folder: {e}")),
    };
    match written {
        Ok(()) => sweep.charts.push(ChartRef {
            path: rel.display().to_string(),
            alt: markdown_alt(&title),
        }),
        Err(e) => sweep.notes.push(note(
            &metric,
            format!("cannot write {}: {e}", rel.display()),
        )),
    }
}

#[cfg(test)]
mod tests;
