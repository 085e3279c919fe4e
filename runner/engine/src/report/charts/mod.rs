//! Line charts of the per-second series a run saved (`series: NAME`
//! artifacts), written as SVG next to them (`stages/<id>/charts/`) and
//! embedded in report.md with relative links.
//!
//! Charts are drawn from the run folder alone, when the report is written,
//! so `pipeline report RUN_DIR` draws them again. A series that cannot be
//! drawn (missing file, no finite point) gives a note, never a failure.
//!
//! One chart per metric and stage: the series of one metric that differ by
//! labels (per host, per client) are lines of the same chart. One metric has
//! one y scale across the whole report, so charts of it compare at a glance.

pub mod axis;
pub mod bars;
pub mod curve;
pub mod host_charts;
pub mod knee;
pub mod names;
pub mod osd_charts;
pub mod over_runs;
#[cfg(test)]
pub mod readback;
pub mod svg;
pub mod sweeps;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use pipeline_model::{Direction, Labels, Series};
use pipeline_stage_api::safe_fs::{Dir, Existing, FsError};
use serde::{Deserialize, Serialize};

use crate::results::{RunResults, StageRecord};

/// The prefix of a series artifact's name.
pub const SERIES_ARTIFACT: &str = "series: ";
/// The folder, next to the series files, the charts go in.
pub const CHARTS_DIR: &str = "charts";
/// The largest series file read (about a million points).
const SERIES_LIMIT: u64 = 64 << 20;

/// A chart written for a stage, as the report links it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChartRef {
    /// Relative to the run folder.
    pub path: String,
    /// Markdown-escaped, for `![alt](path)`.
    pub alt: String,
}

/// What the report shows about one stage's charts.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StageCharts {
    pub charts: Vec<ChartRef>,
    /// Series without a chart.
    pub notes: Vec<ChartNote>,
}

/// A series (or metric) not drawn, and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChartNote {
    pub series: String,
    pub reason: String,
}

fn note(series: &str, reason: impl Into<String>) -> ChartNote {
    ChartNote {
        series: series.to_string(),
        reason: reason.into(),
    }
}

/// A series read back, in base units, with where its file was.
struct Loaded {
    series: Series,
    /// The metric it is a line of (the name without a fan-out host suffix).
    metric: String,
    unit: String,
    folder: PathBuf,
}

/// Draws the charts of every stage into `run_dir`; one entry per stage of
/// `results.stages`, in order.
pub fn write_charts(results: &RunResults, run_dir: &Path) -> Vec<StageCharts> {
    let mut out: Vec<StageCharts> = vec![StageCharts::default(); results.stages.len()];
    let root = Dir::open(run_dir);
    let loaded: Vec<Vec<Loaded>> = results
        .stages
        .iter()
        .zip(out.iter_mut())
        .map(|(stage, charts)| match &root {
            Ok(root) => load_stage(root, stage, &mut charts.notes),
            Err(e) => {
                if stage_has_series(stage) {
                    charts
                        .notes
                        .push(note("all", format!("cannot open the run folder: {e}")));
                }
                Vec::new()
            }
        })
        .collect();
    let scales = shared_scales(loaded.iter().flatten());
    let Ok(root) = root else { return out };
    let mut taken: BTreeMap<PathBuf, names::Taken> = BTreeMap::new();
    for ((series, charts), stage) in loaded.iter().zip(out.iter_mut()).zip(&results.stages) {
        for group in group_by_metric(series) {
            let first = group[0];
            let key = (first.metric.clone(), first.unit.clone());
            let drawable = group
                .iter()
                .flat_map(|l| &l.series.points)
                .any(|p| p[0].is_finite() && p[1].is_finite());
            let Some(&(lo, hi)) = scales.get(&key).filter(|_| drawable) else {
                charts
                    .notes
                    .push(note(&first.metric, "no finite point to draw"));
                continue;
            };
            // A dot per line says nothing a table does not (short runs of
            // rados bench print only second 0): say so instead of drawing.
            if let Some(reason) = too_few_points(&group) {
                charts.notes.push(note(&first.metric, reason));
                continue;
            }
            let stem = taken
                .entry(first.folder.clone())
                .or_default()
                .claim(names::file_stem(&first.metric));
            let rel = first.folder.join(CHARTS_DIR).join(format!("{stem}.svg"));
            let (text, title) = draw(&group, lo, hi);
            match write(&root, &rel, &text) {
                Ok(()) => charts.charts.push(ChartRef {
                    path: rel.display().to_string(),
                    alt: markdown_alt(&title),
                }),
                Err(e) => charts.notes.push(note(
                    &first.metric,
                    format!("cannot write {}: {e}", rel.display()),
                )),
            }
        }
        // After the stage's own: what the OSDs and the hosts did while it ran.
        telemetry_charts(&root, stage, &mut taken, charts);
    }
    out
}

/// The telemetry's charts of a stage (its OSDs' ops and latency, its hosts'
/// CPU and NICs), in the stage's folder beside its series charts.
fn telemetry_charts(
    root: &Dir,
    stage: &StageRecord,
    taken: &mut BTreeMap<PathBuf, names::Taken>,
    charts: &mut StageCharts,
) {
    // The stage's folder, as its artifacts or its commands' raw outputs
    // name it (`stages/ID/...`): a stage without series still has one.
    let paths = stage
        .artifacts
        .iter()
        .map(|a| a.path.as_str())
        .chain(stage.commands.iter().map(|c| c.stdout.as_str()));
    let Some(folder) = paths.into_iter().find_map(|p| {
        let mut parts = Path::new(p).components();
        match (parts.next(), parts.next(), parts.next()) {
            (
                Some(std::path::Component::Normal(s)),
                Some(std::path::Component::Normal(id)),
                Some(_),
            ) if s == "stages" => Some(Path::new("stages").join(id)),
            _ => None,
        }
    }) else {
        return;
    };
    // A search's curve first (its figures are the stage's), then the
    // OSDs' series (the cluster's), then each host's.
    let knee = knee::charts(&stage.metrics);
    let osds = stage.cluster.iter().flat_map(osd_charts::charts);
    let hosts = stage.hosts.iter().flat_map(host_charts::charts);
    for (stem, alt, text) in knee.into_iter().chain(osds).chain(hosts) {
        let stem = taken
            .entry(folder.clone())
            .or_default()
            .claim(names::file_stem(&stem));
        let rel = folder.join(CHARTS_DIR).join(format!("{stem}.svg"));
        match write(root, &rel, &text) {
            Ok(()) => charts.charts.push(ChartRef {
                path: rel.display().to_string(),
                alt: markdown_alt(&alt),
            }),
            Err(e) => charts.notes.push(note(
                "telemetry",
                format!("cannot write {}: {e}", rel.display()),
            )),
        }
    }
}

/// Why a metric has no line to draw (no series with two finite points).
fn too_few_points(group: &[&Loaded]) -> Option<String> {
    let finite = |l: &&Loaded| {
        l.series
            .points
            .iter()
            .filter(|p| p[0].is_finite() && p[1].is_finite())
            .copied()
            .collect::<Vec<_>>()
    };
    let points: Vec<Vec<[f64; 2]>> = group.iter().map(finite).collect();
    if points.iter().any(|p| p.len() > 1) {
        return None;
    }
    Some(match points.iter().flatten().collect::<Vec<_>>()[..] {
        [only] => format!(
            "one point only ({} at {}); no line to draw",
            crate::report::format_value(only[1], &group[0].unit),
            crate::report::format_value(only[0], "s")
        ),
        _ => "one point per line only; no line to draw".to_string(),
    })
}

fn stage_has_series(stage: &StageRecord) -> bool {
    stage
        .artifacts
        .iter()
        .any(|a| a.name.starts_with(SERIES_ARTIFACT))
}

/// The stage's series files, read without following links (a command may
/// have left anything in a stage folder), converted to base units.
fn load_stage(root: &Dir, stage: &StageRecord, notes: &mut Vec<ChartNote>) -> Vec<Loaded> {
    let mut loaded = Vec::new();
    for artifact in &stage.artifacts {
        let Some(name) = artifact.name.strip_prefix(SERIES_ARTIFACT) else {
            continue;
        };
        match read_series(root, Path::new(&artifact.path)) {
            Ok((mut series, folder)) => {
                let (unit, factor) = axis::to_base(&series.unit);
                for p in &mut series.points {
                    p[1] *= factor;
                    // Beyond this an axis span would overflow: a gap instead.
                    if p[1].abs() > axis::LARGEST {
                        p[1] = f64::NAN;
                    }
                }
                series.points.sort_by(|a, b| a[0].total_cmp(&b[0]));
                loaded.push(Loaded {
                    metric: metric_of(&series),
                    unit,
                    series,
                    folder,
                });
            }
            Err(e) => notes.push(note(name, e)),
        }
    }
    loaded
}

/// The series at `rel` in the run folder and the folder holding it.
fn read_series(root: &Dir, rel: &Path) -> Result<(Series, PathBuf), String> {
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let folder = rel.parent().filter(|_| plain).ok_or_else(|| {
        format!(
            "{} is not a path inside the run folder; not read",
            rel.display()
        )
    })?;
    let unreadable = |e| format!("cannot read {}: {}", rel.display(), reason(e));
    let (dir, file) = root.parent_of(rel, false).map_err(unreadable)?;
    let bytes = dir.read(&file, SERIES_LIMIT).map_err(unreadable)?;
    let file: SeriesFile = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a series: {e}", rel.display()))?;
    let series = Series {
        name: file.name,
        unit: file.unit,
        direction: Direction::None,
        labels: file.labels,
        points: file
            .points
            .into_iter()
            .map(|[t, v]| [t.unwrap_or(f64::NAN), v.unwrap_or(f64::NAN)])
            .collect(),
    };
    Ok((series, folder.to_path_buf()))
}

/// Why a file was not read, without the run folder's absolute path (the
/// report names files relative to it).
fn reason(e: FsError) -> String {
    match e {
        FsError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            "no such file in the run folder".to_string()
        }
        FsError::Io { source, .. } => source.to_string(),
        FsError::Symlink(_) => "it is a symbolic link; links are never followed".to_string(),
        FsError::HardLinked { links, .. } => {
            format!("it has {links} hard links; only a file with one link is read")
        }
        FsError::NotRegular { kind, .. } => format!("it is a {kind}, not a regular file"),
        FsError::TooLarge { limit, .. } => format!("it is larger than {limit} bytes"),
        other => other.to_string(),
    }
}

/// A series file as written: JSON has no NaN, so serde writes a NaN value
/// as `null`; read back, that is a gap, not an unreadable file.
#[derive(Deserialize)]
struct SeriesFile {
    name: String,
    unit: String,
    #[serde(default)]
    labels: Labels,
    points: Vec<[Option<f64>; 2]>,
}

/// A fanned-out stage names each host's series `NAME-HOST` and labels it
/// `host=HOST`: those are lines of one metric, `NAME`.
fn metric_of(series: &Series) -> String {
    series
        .labels
        .get("host")
        .and_then(|host| series.name.strip_suffix(&format!("-{host}")))
        .filter(|name| !name.is_empty())
        .unwrap_or(&series.name)
        .to_string()
}

/// The y span of each metric (name and base unit) over the whole report:
/// its finite values, and zero.
fn shared_scales<'a>(
    all: impl Iterator<Item = &'a Loaded>,
) -> BTreeMap<(String, String), (f64, f64)> {
    let mut scales: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for l in all {
        for p in &l.series.points {
            if p[0].is_finite() && p[1].is_finite() {
                let span = scales
                    .entry((l.metric.clone(), l.unit.clone()))
                    .or_insert((0.0, 0.0));
                span.0 = span.0.min(p[1]);
                span.1 = span.1.max(p[1]);
            }
        }
    }
    scales
}

/// A stage's series grouped by metric, in the order they first appear.
fn group_by_metric(series: &[Loaded]) -> Vec<Vec<&Loaded>> {
    let mut groups: Vec<Vec<&Loaded>> = Vec::new();
    for l in series {
        match groups
            .iter_mut()
            .find(|g| g[0].metric == l.metric && g[0].unit == l.unit)
        {
            Some(g) => g.push(l),
            None => groups.push(vec![l]),
        }
    }
    groups
}

/// The SVG of one metric's lines, and its title.
fn draw(group: &[&Loaded], lo: f64, hi: f64) -> (String, String) {
    let first = group[0];
    let label_text = |l: &Loaded, keep: &dyn Fn(&str) -> bool| {
        l.series
            .labels
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Labels every line shares go in the title; the rest tell lines apart.
    let shared = |k: &str| {
        group
            .iter()
            .all(|l| l.series.labels.get(k) == first.series.labels.get(k))
    };
    let common = label_text(first, &shared);
    let title = if common.is_empty() {
        first.metric.clone()
    } else {
        format!("{} ({common})", first.metric)
    };
    let lines: Vec<svg::Line> = group
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let apart = label_text(l, &|k| !shared(k));
            let label = if !apart.is_empty() {
                apart
            } else if group
                .iter()
                .filter(|o| o.series.name == l.series.name)
                .count()
                == 1
            {
                l.series.name.clone()
            } else {
                format!("#{}", i + 1)
            };
            svg::Line {
                label,
                points: l.series.points.clone(),
            }
        })
        .collect();
    let times = group
        .iter()
        .flat_map(|l| l.series.points.iter())
        .filter(|p| p[0].is_finite() && p[1].is_finite())
        .map(|p| p[0]);
    let (t0, t1) = times.fold((0f64, 0f64), |(a, b), t| (a.min(t), b.max(t)));
    let x = axis::axis(t0, t1, "s");
    let y = axis::axis(lo, hi, &first.unit);
    let text = svg::render(&svg::Chart {
        title: &title,
        x: &x,
        y: &y,
        x_name: "time",
        lines: &lines,
        rings: &[],
    });
    let unit = if y.unit.is_empty() {
        String::new()
    } else {
        format!(", {}", y.unit)
    };
    (text, format!("{title} per second{unit}"))
}

fn write(root: &Dir, rel: &Path, text: &str) -> Result<(), String> {
    let (dir, file) = root.parent_of(rel, true).map_err(|e| e.to_string())?;
    dir.write(OsStr::new(&file), text.as_bytes(), Existing::Replace)
        .map_err(|e| e.to_string())
}

/// Text for the alt of a Markdown image: nothing in it ends the brackets,
/// opens a code span (which would swallow a `]`) or starts HTML.
fn markdown_alt(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '[' | ']' | '`' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
