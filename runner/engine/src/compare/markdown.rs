//! The comparison as Markdown: who was compared, how verdicts were reached,
//! the regressions first, then one table per stage.

use std::fmt::Write;

use pipeline_model::Direction;

use super::environment::ChangeKind;
use super::{Change, Comparison, MetricComparison, StageComparison, Test, Verdict};
use crate::report::escape::{cell, code, image, inline};
use crate::report::format_value;

fn labels(m: &MetricComparison) -> String {
    m.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn metric_name(m: &MetricComparison) -> String {
    let arrow = match m.direction {
        Direction::Higher => " ↑",
        Direction::Lower => " ↓",
        Direction::None => "",
    };
    let flag = if m.gated { "⚑ " } else { "" };
    let l = labels(m);
    if l.is_empty() {
        format!("{flag}{}{arrow}", cell(&m.name))
    } else {
        format!("{flag}{}{arrow} ({})", cell(&m.name), cell(&l))
    }
}

fn value(summary: &super::stats::Summary, unit: &str) -> String {
    let median = format_value(summary.median, unit);
    match (summary.n, summary.cv) {
        (1, _) => median,
        (n, Some(cv)) => format!("{median} (n={n}, CV {:.1}%)", cv * 100.0),
        (n, None) => format!("{median} (n={n})"),
    }
}

fn percent(change: Option<f64>) -> String {
    match change {
        Some(p) if p.abs() >= 0.05 => format!("{p:+.1}%"),
        Some(_) => "0.0%".to_string(),
        None => "-".to_string(),
    }
}

fn verdict(c: &Change) -> String {
    let mark = match c.verdict {
        Verdict::Better => "✅ ",
        Verdict::Worse => "❌ ",
        Verdict::TooNoisy => "〰️ ",
        _ => "",
    };
    let how = match c.test {
        Test::Welch { p, .. } => format!(" (p={})", format_p(p)),
        Test::ThresholdOnly if c.verdict != Verdict::NotJudged => {
            " (single run: threshold only)".to_string()
        }
        _ => String::new(),
    };
    format!("{mark}{}{how}", c.verdict.describe())
}

fn format_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".to_string()
    } else {
        format!("{p:.3}")
    }
}

pub fn render(c: &Comparison) -> String {
    render_with_charts(c, &[])
}

/// A chart to embed: its title and its path relative to the Markdown file.
pub struct Embedded {
    pub title: String,
    pub path: String,
}

/// [`render`], with `charts` embedded after the regressions.
pub fn render_with_charts(c: &Comparison, charts: &[Embedded]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Comparison: {}\n", inline(&c.baseline.suite));
    runs_table(&mut out, c);
    how_verdicts_are_reached(&mut out, c);
    environment_section(&mut out, c);
    regressions_section(&mut out, c);
    charts_section(&mut out, charts);
    for stage in &c.stages {
        stage_section(&mut out, c, stage);
    }
    out.trim_end().to_string() + "\n"
}

/// The runs compared: the baseline, then each candidate.
fn runs_table(out: &mut String, c: &Comparison) {
    let _ = writeln!(
        out,
        "| | run | suite | started | status |\n|---|---|---|---|---|"
    );
    let mut row = |role: String, r: &super::RunInfo| {
        let _ = writeln!(
            out,
            "| {role} | {} | {} | {} | {} |",
            cell(&r.source),
            cell(&r.suite),
            cell(&r.started_at),
            cell(&r.status)
        );
    };
    row("baseline".into(), &c.baseline);
    for (i, r) in c.candidates.iter().enumerate() {
        row(candidate_name(c, i), r);
    }
}

/// The test and thresholds behind the verdicts.
fn how_verdicts_are_reached(out: &mut String, c: &Comparison) {
    let t = &c.options.thresholds;
    let mut rules = format!("default {}%", t.default_percent);
    for (pattern, pct) in &t.rules {
        let _ = write!(rules, ", {} {pct}%", code(pattern));
    }
    let _ = writeln!(
        out,
        "\nHow verdicts are reached: with two or more repetitions on both sides, Welch's t-test at α = {}; \
         a change is better or worse only when it is significant and past its threshold, and a change past \
         its threshold that is not significant is *too noisy to tell*. With a single run on either side no \
         test is possible: the threshold alone decides. Values are medians. Thresholds: {rules}. \
         Regressions are the worse verdicts of gated metrics (marked ⚑): the stages' headline figures and \
         those a threshold names.\n",
        c.options.alpha
    );
}

/// The gated metrics that got worse past their thresholds, first.
fn regressions_section(out: &mut String, c: &Comparison) {
    let _ = writeln!(out, "## Regressions\n");
    if c.regressions.is_empty() {
        let _ = writeln!(out, "None: no metric is worse past its threshold.\n");
    }
    for r in &c.regressions {
        let l = r
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "- **{}** `{}`{}: {} → {} ({}), past its threshold of {}%{}{}",
            cell(&r.stage),
            cell(&r.metric),
            if l.is_empty() {
                String::new()
            } else {
                format!(" ({})", cell(&l))
            },
            format_value(r.baseline, &r.unit),
            format_value(r.value, &r.unit),
            percent(r.change_percent),
            r.threshold_percent,
            if c.candidates.len() > 1 {
                format!(" in {}", candidate_name(c, r.candidate))
            } else {
                String::new()
            },
            beside(&regression_changes(c, r))
        );
    }
    if !c.regressions.is_empty() {
        out.push('\n');
    }
}

/// The charts of the gated metrics, when any were drawn.
fn charts_section(out: &mut String, charts: &[Embedded]) {
    if !charts.is_empty() {
        let _ = writeln!(
            out,
            "## Charts\n\nThe gated metrics (medians), baseline against candidate; above each candidate's bar its change, in red when worse past the threshold, in green when better.\n"
        );
        for chart in charts {
            let _ = writeln!(out, "{}\n", image(&chart.title, &chart.path));
        }
    }
}

/// One stage's table: each metric in the baseline and each candidate.
fn stage_section(out: &mut String, c: &Comparison, stage: &StageComparison) {
    let _ = writeln!(out, "## {}\n", inline(&stage.id));
    let missing: Vec<String> = std::iter::once(("baseline".to_string(), stage.in_baseline))
        .chain(
            stage
                .in_candidates
                .iter()
                .enumerate()
                .map(|(i, present)| (candidate_name(c, i), *present)),
        )
        .filter(|(_, present)| !present)
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "Not in: {}.\n", missing.join(", "));
    }
    for (side, flag) in &stage.unhealthy {
        let judged = if c.options.allow_unhealthy {
            "judged anyway (--allow-unhealthy)"
        } else {
            "not judged (--allow-unhealthy judges it)"
        };
        let _ = writeln!(
            out,
            "⚠️ {}: measured on a cluster that was not clean ({}); {judged}.\n",
            inline(side),
            inline(flag)
        );
    }
    if stage.metrics.is_empty() {
        let _ = writeln!(out, "No metrics.\n");
        return;
    }
    let mut header = "| metric | baseline |".to_string();
    let mut rule = "|---|---:|".to_string();
    for i in 0..c.candidates.len() {
        let name = candidate_name(c, i);
        let _ = write!(header, " {name} | change | verdict |");
        rule.push_str("---:|---:|---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for m in &stage.metrics {
        let base = m
            .baseline
            .as_ref()
            .map_or("missing".to_string(), |s| value(s, &m.unit));
        let mut line = format!("| {} | {base} |", metric_name(m));
        for change in &m.candidates {
            match change {
                Some(ch) => {
                    let _ = write!(
                        line,
                        " {} | {} | {} |",
                        value(&ch.summary, &m.unit),
                        percent(ch.change_percent),
                        verdict(ch)
                    );
                }
                None => line.push_str(" missing | - | - |"),
            }
        }
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
}

/// Most settings listed one by one; the rest are counted (the JSON output
/// has them all).
const MAX_CONFIG_LINES: usize = 20;

/// What differs between the runs' environments, above the figures.
fn environment_section(out: &mut String, c: &Comparison) {
    let _ = writeln!(out, "## What differs between the runs\n");
    let env = &c.environment;
    if env.changes.is_empty() {
        let _ = if env.compared.is_empty() {
            writeln!(out, "Nothing to compare: the runs recorded no versions.\n")
        } else {
            writeln!(
                out,
                "Nothing recorded differs ({}).\n",
                env.compared.join(", ")
            )
        };
        return;
    }
    let mut config_lines = 0;
    let mut config_left = 0;
    for change in &env.changes {
        if change.kind == ChangeKind::Config {
            config_lines += 1;
            if config_lines > MAX_CONFIG_LINES {
                config_left += 1;
                continue;
            }
        }
        let mut line = format!("- {}", inline(&change.describe()));
        if c.candidates.len() > 1 {
            line.push_str(&format!(" in {}", candidate_name(c, change.candidate)));
        }
        let _ = writeln!(out, "{line}");
    }
    if config_left > 0 {
        let _ = writeln!(
            out,
            "- and {config_left} more setting(s) of `ceph config dump` (all of them in `--format json`)"
        );
    }
    out.push('\n');
}

/// The environment changes that concern a regression's stage: its
/// client's, the cluster's and the kernels' (configuration and pool changes
/// are listed above, not repeated on every line).
pub fn regression_changes<'a>(
    c: &'a Comparison,
    r: &super::Regression,
) -> Vec<&'a super::environment::EnvironmentChange> {
    c.environment
        .changes
        .iter()
        .filter(|e| {
            e.candidate == r.candidate
                && !matches!(e.kind, ChangeKind::Config | ChangeKind::Pool)
                && e.concerns(&r.stage)
        })
        .collect()
}

/// `; changed: client librados, librbd 16.2.15 → 18.2.7` after a
/// regression: its changes, those from one version to another as one.
fn beside(changes: &[&super::environment::EnvironmentChange]) -> String {
    let mut merged: Vec<super::environment::EnvironmentChange> = Vec::new();
    for change in changes {
        match merged.iter_mut().find(|m| {
            m.kind == change.kind && m.baseline == change.baseline && m.value == change.value
        }) {
            Some(m) => m.what = format!("{}, {}", m.what, change.what),
            None => {
                let mut short = (*change).clone();
                short.stages.clear();
                merged.push(short);
            }
        }
    }
    if merged.is_empty() {
        return String::new();
    }
    let what: Vec<String> = merged.iter().map(|m| inline(&m.describe())).collect();
    format!("; changed: {}", what.join("; "))
}

fn candidate_name(c: &Comparison, i: usize) -> String {
    if c.candidates.len() == 1 {
        "candidate".to_string()
    } else {
        format!("candidate {}", i + 1)
    }
}
