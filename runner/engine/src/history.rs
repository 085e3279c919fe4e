//! A runs folder over time: `pipeline runs list` (every run, newest last)
//! and `pipeline history` (one metric across the runs, with the points where
//! the comparison gate would have fired against the run before).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use pipeline_model::{Direction, Labels};
use serde::Serialize;

use crate::compare::stats::Summary;
use crate::compare::{REPETITION_LABEL, Verdict, judge};
use crate::report::escape::{cell, code};
use crate::report::format_value;
use crate::results::{RESULTS_FILE, RunResults};

/// One folder of the runs folder.
#[derive(Debug, Clone, Serialize)]
pub struct RunEntry {
    pub dir: PathBuf,
    /// `Err`: why its results.json could not be read (listed, not dropped).
    #[serde(flatten)]
    pub run: Result<RunSummary, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub id: String,
    pub suite: String,
    pub started_at: String,
    pub status: String,
    /// The suite's commit (12 characters, `+` when it had uncommitted changes).
    pub commit: Option<String>,
    pub duration_s: Option<f64>,
    #[serde(skip)]
    pub results: Box<RunResults>,
}

/// The runs in `dir` (each a folder with results.json), oldest first;
/// unreadable ones last.
pub fn list_runs(dir: &Path) -> std::io::Result<Vec<RunEntry>> {
    let mut entries = Vec::new();
    for item in std::fs::read_dir(dir)? {
        let path = item?.path();
        if !path.join(RESULTS_FILE).is_file() {
            continue;
        }
        let run = RunResults::load(&path).map_err(|e| e.to_string());
        entries.push(entry(path, run));
    }
    sort_entries(&mut entries);
    Ok(entries)
}

/// A run as `list_runs` lists it; `dir` names it (a folder, or where a
/// database says it came from: `pipeline history --db`).
pub fn entry(dir: PathBuf, run: Result<RunResults, String>) -> RunEntry {
    let run = run.map(|r| RunSummary {
        id: r.run_id.clone(),
        suite: r.pipeline.name.clone(),
        started_at: r.started_at.clone(),
        status: serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        commit: r.pipeline.git.as_ref().map(|g| {
            let short: String = g.commit.chars().take(12).collect();
            if g.dirty { format!("{short}+") } else { short }
        }),
        duration_s: r.duration_s,
        results: Box::new(r),
    });
    RunEntry { dir, run }
}

/// Oldest first, unreadable ones last: the order `history` reads runs in,
/// whichever store they came from.
pub fn sort_entries(entries: &mut [RunEntry]) {
    entries.sort_by(|a, b| match (&a.run, &b.run) {
        (Ok(x), Ok(y)) => x.started_at.cmp(&y.started_at).then(a.dir.cmp(&b.dir)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.dir.cmp(&b.dir),
    });
}

pub fn runs_table(entries: &[RunEntry]) -> String {
    let mut out = String::from(
        "| run | suite | started | status | commit | duration |\n|---|---|---|---|---|---:|\n",
    );
    for e in entries {
        let dir = e
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match &e.run {
            Ok(r) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    cell(&dir),
                    cell(&r.suite),
                    cell(&r.started_at),
                    cell(&r.status),
                    r.commit.as_deref().map_or("-".to_string(), code),
                    r.duration_s
                        .map_or("-".to_string(), |d| format_value(d, "s")),
                );
            }
            Err(e) => {
                let _ = writeln!(out, "| {} | unreadable: {} | | | | |", cell(&dir), cell(e));
            }
        }
    }
    out
}

/// One metric of one stage instance (and labels) across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub stage: String,
    pub labels: Labels,
    pub unit: String,
    pub direction: Direction,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub run: String,
    pub started_at: String,
    /// Median over the run's repetitions (the value, without repetitions).
    pub value: f64,
    pub n: usize,
    /// A `compare` of the run before against this one would call this metric
    /// worse past `threshold_percent`: a gate on it would have fired here.
    pub gate_fired: bool,
    pub change_percent: Option<f64>,
    /// The stage was measured while the cluster was not clean (its cluster
    /// watch's flag): its figure is shown, never judged, nor judged against.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cluster_not_clean: bool,
    /// The host watch named a resource that limited the stage's figures.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub host_limited: bool,
}

/// `metric` across `entries` (oldest first), for stage instances whose id,
/// or stage id, is `stage` (all stages when `None`).
pub fn history(
    entries: &[RunEntry],
    metric: &str,
    stage: Option<&str>,
    threshold_percent: f64,
) -> Vec<Line> {
    let mut lines: Vec<(Line, Vec<Vec<f64>>)> = Vec::new();
    for entry in entries {
        let Ok(run) = &entry.run else { continue };
        for s in &run.results.stages {
            if stage.is_some_and(|want| want != s.id && want != s.stage) {
                continue;
            }
            for m in s
                .metrics
                .iter()
                .filter(|m| m.name == metric && m.value.is_finite())
            {
                let mut labels = m.labels.clone();
                labels.remove(REPETITION_LABEL);
                let i = match lines
                    .iter()
                    .position(|(l, _)| l.stage == s.id && l.labels == labels)
                {
                    Some(i) => i,
                    None => {
                        lines.push((
                            Line {
                                stage: s.id.clone(),
                                labels,
                                unit: m.unit.clone(),
                                direction: m.direction,
                                points: Vec::new(),
                            },
                            Vec::new(),
                        ));
                        lines.len() - 1
                    }
                };
                let (line, samples) = &mut lines[i];
                if line.points.last().is_some_and(|p| p.run == run.id) {
                    samples
                        .last_mut()
                        .expect("a point has samples")
                        .push(m.value);
                } else {
                    line.points.push(Point {
                        run: run.id.clone(),
                        started_at: run.started_at.clone(),
                        value: m.value,
                        n: 1,
                        gate_fired: false,
                        change_percent: None,
                        cluster_not_clean: s
                            .cluster
                            .as_ref()
                            .is_some_and(|c| c.unhealthy.is_some()),
                        host_limited: s.hosts.iter().any(|h| !h.limited_by.is_empty()),
                    });
                    samples.push(vec![m.value]);
                }
            }
        }
    }
    lines
        .into_iter()
        .map(|(mut line, samples)| {
            let not_clean: Vec<bool> = line.points.iter().map(|p| p.cluster_not_clean).collect();
            for (i, point) in line.points.iter_mut().enumerate() {
                let Some(summary) = Summary::of(&samples[i]) else {
                    continue;
                };
                point.value = summary.median;
                point.n = summary.n;
                if i > 0 {
                    let change = judge(
                        &samples[i - 1],
                        &samples[i],
                        line.direction,
                        threshold_percent,
                        0.05,
                    );
                    point.change_percent = change.change_percent;
                    // As `compare` without --allow-unhealthy: not comparable.
                    point.gate_fired =
                        change.verdict == Verdict::Worse && !not_clean[i] && !not_clean[i - 1];
                }
            }
            line
        })
        .collect()
}

pub fn history_table(metric: &str, lines: &[Line], threshold_percent: f64) -> String {
    let mut out = format!(
        "# History of {}\n\nMedians over each run's repetitions; ❌ marks a run where `pipeline compare` against the run before would fail the gate (threshold {}%); ⚠️ a figure measured while the cluster was not clean (never gated, nor gated against); 🔎 one the host watch found limited by a host's CPU, disk or NIC.\n",
        code(metric),
        threshold_percent
    );
    if lines.is_empty() {
        out.push_str("\nNo run has this metric.\n");
    }
    for line in lines {
        let labels: Vec<String> = line
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(
            out,
            "\n## {}{}\n\n| run | started | value | change | |\n|---|---|---:|---:|---|",
            cell(&line.stage),
            if labels.is_empty() {
                String::new()
            } else {
                format!(" ({})", cell(&labels.join(", ")))
            }
        );
        for p in &line.points {
            let _ = writeln!(
                out,
                "| {} | {} | {}{} | {} | {} |",
                cell(&p.run),
                cell(&p.started_at),
                format_value(p.value, &line.unit),
                if p.n > 1 {
                    format!(" (n={})", p.n)
                } else {
                    String::new()
                },
                p.change_percent
                    .map_or("-".to_string(), |c| format!("{c:+.1}%")),
                [
                    (p.gate_fired, "❌ gate"),
                    (p.cluster_not_clean, "⚠️ cluster not clean"),
                    (p.host_limited, "🔎 host-limited"),
                ]
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, word)| *word)
                .collect::<Vec<_>>()
                .join(" ")
            );
        }
    }
    out
}
