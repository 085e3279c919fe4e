//! `pipeline compare BASELINE CANDIDATE...`: loads the runs, compares them
//! (pipeline_engine::compare), prints or writes Markdown, JSON or JUnit XML, and exits
//! 1 when a metric is worse past its threshold. Also `pipeline runs list`
//! and `pipeline history` (pipeline_engine::history): runs over time.

use std::path::{Path, PathBuf};

use pipeline_engine::compare::{self, CompareOptions, Side};
use pipeline_engine::report::format_value;
use pipeline_engine::results::RunResults;

use crate::commands::CliResult;
use crate::error::CliError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Markdown,
    Json,
    /// JUnit XML: one test case per gated metric, failed when it regressed
    /// (`compare` only).
    Junit,
}

/// `pipeline history`'s output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    Markdown,
    Json,
}

/// A run folder, or a results.json file itself.
fn load(path: &Path) -> Result<RunResults, String> {
    if path.is_dir() {
        return RunResults::load(path).map_err(|e| e.to_string());
    }
    if !path.exists() {
        return Err(format!(
            "{}: not found (give a run folder or its results.json)",
            path.display()
        ));
    }
    RunResults::load_file(path).map_err(|e| e.to_string())
}

/// One line per regression, for stderr.
pub fn regression_line(r: &compare::Regression) -> String {
    let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "regression: {} {}{}: {} -> {} ({}), past its threshold of {}%",
        r.stage,
        r.metric,
        if labels.is_empty() {
            String::new()
        } else {
            format!(" ({})", labels.join(", "))
        },
        format_value(r.baseline, &r.unit),
        format_value(r.value, &r.unit),
        r.change_percent
            .map_or("from zero".to_string(), |p| format!("{p:+.1}%")),
        r.threshold_percent
    )
}

/// Before the regression lines: what differs between the runs besides the
/// figures (a client upgrade, a daemon upgrade, a new kernel), one line
/// each; settings of `ceph config dump` are counted.
pub fn environment_lines(changes: &[compare::environment::EnvironmentChange]) -> Vec<String> {
    use compare::environment::ChangeKind;
    let mut lines: Vec<String> = changes
        .iter()
        .filter(|c| c.kind != ChangeKind::Config)
        .map(|c| format!("changed: {}", c.describe()))
        .collect();
    let settings = changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Config)
        .count();
    if settings > 0 {
        lines.push(format!(
            "changed: {settings} setting(s) of `ceph config dump` (see the comparison)"
        ));
    }
    lines
}

pub fn run(
    baseline: &Path,
    candidates: &[PathBuf],
    thresholds: &[String],
    allow_unhealthy: bool,
    format: Format,
    out: Option<&Path>,
) -> CliResult {
    let mut errors = Vec::new();
    let mut options = CompareOptions {
        allow_unhealthy,
        ..CompareOptions::default()
    };
    for spec in thresholds {
        if let Err(e) = options.thresholds.add(spec) {
            errors.push(format!("--threshold {e}"));
        }
    }
    let mut loaded = Vec::new();
    for path in std::iter::once(baseline).chain(candidates.iter().map(PathBuf::as_path)) {
        match load(path) {
            Ok(r) => loaded.push((path.display().to_string(), r)),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(CliError::InvalidEach(errors));
    }
    let sides: Vec<Side> = loaded
        .iter()
        .map(|(source, results)| Side {
            source: source.clone(),
            results,
        })
        .collect();
    let comparison = compare::compare(&sides[0], &sides[1..], &options);
    let text = match (format, out) {
        (Format::Markdown, Some(file)) => {
            let charts = charts_next_to(&comparison, file).map_err(CliError::invalid)?;
            compare::markdown::render_with_charts(&comparison, &charts)
        }
        (Format::Markdown, None) => compare::markdown::render(&comparison),
        (Format::Json, _) => serde_json::to_string_pretty(&comparison).unwrap_or_default() + "\n",
        (Format::Junit, _) => compare::junit::render(&comparison),
    };
    match out {
        Some(file) => {
            std::fs::write(file, &text)
                .map_err(|e| CliError::invalid(format!("writing {}: {e}", file.display())))?;
            println!("comparison: {}", file.display());
        }
        None => print!("{text}"),
    }
    if comparison.regressions.is_empty() {
        Ok(())
    } else {
        let mut notes = environment_lines(&comparison.environment.changes);
        notes.extend(comparison.regressions.iter().map(regression_line));
        Err(CliError::Ended {
            notes,
            interrupted: false,
        })
    }
}

/// Draws the comparison's charts into `FILE-charts/` next to the Markdown
/// `file` and returns them linked relative to it (stdout gets no charts:
/// there is no folder to put them in).
fn charts_next_to(
    comparison: &compare::Comparison,
    file: &Path,
) -> Result<Vec<compare::markdown::Embedded>, String> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "comparison".to_string());
    let folder = format!("{stem}-charts");
    let dir = file.with_file_name(&folder);
    let charts = compare::charts::write_charts(comparison, &dir)
        .map_err(|e| format!("writing the charts into {}: {e}", dir.display()))?;
    Ok(charts
        .into_iter()
        .map(|c| compare::markdown::Embedded {
            title: c.title,
            path: format!("{folder}/{}", c.file),
        })
        .collect())
}

fn runs_in(dir: &Path) -> Result<Vec<pipeline_engine::history::RunEntry>, CliError> {
    pipeline_engine::history::list_runs(dir).map_err(|e| {
        CliError::invalid(format!(
            "{}: {e} (give the folder that holds the run folders)",
            dir.display()
        ))
    })
}

pub fn runs_list(dir: &Path) -> CliResult {
    let entries = runs_in(dir)?;
    if entries.is_empty() {
        println!("no runs in {}", dir.display());
    } else {
        print!("{}", pipeline_engine::history::runs_table(&entries));
    }
    Ok(())
}

/// Where `pipeline history` reads runs from: both give the engine the same
/// entries, so the same lines and the same output.
pub enum HistorySource<'a> {
    Folder(&'a Path),
    Db(&'a str),
}

pub fn history(
    source: HistorySource<'_>,
    metric: &str,
    stage: Option<&str>,
    threshold: f64,
    format: HistoryFormat,
    chart: Option<&Path>,
) -> CliResult {
    if !(threshold.is_finite() && threshold >= 0.0) {
        return Err(CliError::invalid(format!(
            "--threshold {threshold}: a percentage of 0 or more"
        )));
    }
    let entries = match source {
        HistorySource::Folder(dir) => runs_in(dir)?,
        HistorySource::Db(url) => crate::publish::entries(url)?,
    };
    let lines = pipeline_engine::history::history(&entries, metric, stage, threshold);
    if let Some(file) = chart {
        use pipeline_engine::report::charts::over_runs::history_chart;
        match history_chart(metric, &lines, threshold) {
            Some((svg, notes)) => {
                std::fs::write(file, svg)
                    .map_err(|e| CliError::invalid(format!("writing {}: {e}", file.display())))?;
                for n in notes {
                    eprintln!("note: {n}");
                }
                eprintln!("chart: {}", file.display());
            }
            None => eprintln!("note: no run has {metric}: no chart written"),
        }
    }
    match format {
        HistoryFormat::Markdown => print!(
            "{}",
            pipeline_engine::history::history_table(metric, &lines, threshold)
        ),
        HistoryFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&lines).unwrap_or_default()
        ),
    }
    Ok(())
}
