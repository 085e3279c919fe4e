//! The comparison as JUnit XML, for CI systems that gate on test reports
//! (GitLab's merge-request widget, Jenkins' junit and xunit plugins).
//!
//! One `<testsuite>` per candidate, one `<testcase>` per gated metric of each
//! stage (classname: the stage instance; name: the metric and its labels).
//! A test case fails exactly when the comparison gate fires for it, so the
//! report and `compare`'s exit code always agree: a regression is a
//! `<failure type="regression">` with both values, the change and the
//! threshold. A gated metric that cannot be judged (missing on one side, or
//! measured on a cluster that was not clean) is `<skipped>` with the reason;
//! the others pass, with their figures in `<system-out>`.
//!
//! The shape is the one the Jenkins xunit plugin's junit-10.xsd describes
//! (the test suite validates it with xmllint). Every text comes from run
//! folders, which may be hostile: it is escaped, and characters XML 1.0
//! cannot carry (control characters, U+FFFE, U+FFFF) are dropped.

use std::fmt::Write;

use super::markdown::regression_changes;
use super::{Change, Comparison, MetricComparison, Test, Verdict};
use crate::report::format_value;

/// What one gated metric of one candidate came to.
enum Outcome {
    Passed(String),
    Failed { message: String, detail: String },
    Skipped(String),
}

/// One `<testcase>`: a gated metric of one stage, for one candidate.
struct Case {
    /// The stage instance.
    classname: String,
    /// The metric and its labels.
    name: String,
    outcome: Outcome,
}

pub fn render(c: &Comparison) -> String {
    let suites: Vec<(String, Vec<Case>)> = (0..c.candidates.len())
        .map(|ci| (suite_name(c, ci), cases(c, ci)))
        .collect();
    let count = |f: fn(&Outcome) -> bool| -> usize {
        suites
            .iter()
            .flat_map(|(_, cases)| cases)
            .filter(|case| f(&case.outcome))
            .count()
    };
    let tests: usize = suites.iter().map(|(_, cases)| cases.len()).sum();
    let failures = count(|o| matches!(o, Outcome::Failed { .. }));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\">",
        attr(&format!("pipeline compare: {}", c.baseline.suite))
    );
    for (ci, (name, cases)) in suites.iter().enumerate() {
        let failed = cases
            .iter()
            .filter(|case| matches!(case.outcome, Outcome::Failed { .. }))
            .count();
        let skipped = cases
            .iter()
            .filter(|case| matches!(case.outcome, Outcome::Skipped(_)))
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"{skipped}\" timestamp=\"{}\" id=\"{ci}\" package=\"pipeline\">",
            attr(name),
            cases.len(),
            attr(&c.candidates[ci].started_at)
        );
        properties(&mut out, c, ci);
        for case in cases {
            let head = format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                attr(&case.classname),
                attr(&case.name)
            );
            match &case.outcome {
                Outcome::Passed(figures) => {
                    let _ = writeln!(
                        out,
                        "{head}>\n      <system-out>{}</system-out>\n    </testcase>",
                        text(figures)
                    );
                }
                Outcome::Failed { message, detail } => {
                    let _ = writeln!(
                        out,
                        "{head}>\n      <failure type=\"regression\" message=\"{}\">{}</failure>\n    </testcase>",
                        attr(message),
                        text(detail)
                    );
                }
                Outcome::Skipped(why) => {
                    let _ = writeln!(
                        out,
                        "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                        attr(why)
                    );
                }
            }
        }
        let _ = writeln!(out, "  </testsuite>");
    }
    out.push_str("</testsuites>\n");
    out
}

/// `full-baseline: runs/b against runs/a`.
fn suite_name(c: &Comparison, ci: usize) -> String {
    format!(
        "{}: {} against {}",
        c.candidates[ci].suite, c.candidates[ci].source, c.baseline.source
    )
}

/// Which runs, the thresholds, and what differs between the environments.
fn properties(out: &mut String, c: &Comparison, ci: usize) {
    let cand = &c.candidates[ci];
    let t = &c.options.thresholds;
    let mut thresholds = format!("default {}%", t.default_percent);
    for (pattern, pct) in &t.rules {
        let _ = write!(thresholds, ", {pattern} {pct}%");
    }
    let mut props = vec![
        ("baseline", c.baseline.source.clone()),
        ("baseline.run_id", c.baseline.run_id.clone()),
        ("baseline.started_at", c.baseline.started_at.clone()),
        ("candidate", cand.source.clone()),
        ("candidate.run_id", cand.run_id.clone()),
        ("candidate.status", cand.status.clone()),
        ("thresholds", thresholds),
    ];
    for change in c.environment.changes.iter().filter(|e| e.candidate == ci) {
        props.push(("changed", change.describe()));
    }
    out.push_str("    <properties>\n");
    for (name, value) in props {
        let _ = writeln!(
            out,
            "      <property name=\"{}\" value=\"{}\"/>",
            attr(name),
            attr(&value)
        );
    }
    out.push_str("    </properties>\n");
}

/// The gated metrics of every stage, for candidate `ci`.
fn cases(c: &Comparison, ci: usize) -> Vec<Case> {
    let mut out = Vec::new();
    for stage in &c.stages {
        for m in stage.metrics.iter().filter(|m| m.gated) {
            let name = metric_name(m);
            let outcome = match (&m.baseline, m.candidates.get(ci).and_then(Option::as_ref)) {
                (_, None) => Outcome::Skipped("not in this run".to_string()),
                (None, Some(_)) => Outcome::Skipped("not in the baseline".to_string()),
                (Some(base), Some(change)) => outcome(c, ci, &stage.id, m, base.median, change),
            };
            out.push(Case {
                classname: stage.id.clone(),
                name,
                outcome,
            });
        }
    }
    out
}

fn outcome(
    c: &Comparison,
    ci: usize,
    stage: &str,
    m: &MetricComparison,
    baseline: f64,
    change: &Change,
) -> Outcome {
    let figures = format!(
        "{} -> {} ({}): {}{}",
        format_value(baseline, &m.unit),
        format_value(change.summary.median, &m.unit),
        change
            .change_percent
            .map_or("-".to_string(), |p| format!("{p:+.1}%")),
        change.verdict.describe(),
        how(change)
    );
    match change.verdict {
        Verdict::NotComparable => {
            let flags: Vec<&str> = c
                .stages
                .iter()
                .find(|s| s.id == stage)
                .map(|s| s.unhealthy.iter().map(|(_, f)| f.as_str()).collect())
                .unwrap_or_default();
            Outcome::Skipped(format!(
                "not comparable: measured on a cluster that was not clean ({})",
                flags.join("; ")
            ))
        }
        Verdict::Worse => {
            let regression = c.regressions.iter().find(|r| {
                r.candidate == ci && r.stage == stage && r.metric == m.name && r.labels == m.labels
            });
            match regression {
                Some(r) => {
                    let mut detail = format!(
                        "{figures}\nthreshold: {}% ({})",
                        r.threshold_percent,
                        direction(m)
                    );
                    for e in regression_changes(c, r) {
                        let _ = write!(detail, "\nchanged: {}", e.describe());
                    }
                    Outcome::Failed {
                        message: format!(
                            "{stage} {}: {} -> {} ({}), past its threshold of {}%",
                            metric_name(m),
                            format_value(r.baseline, &r.unit),
                            format_value(r.value, &r.unit),
                            r.change_percent
                                .map_or("from zero".to_string(), |p| format!("{p:+.1}%")),
                            r.threshold_percent
                        ),
                        detail,
                    }
                }
                // Worse without a regression cannot happen for a gated
                // metric with a baseline; were it to, the exit code says
                // "passed", and so does the report.
                None => Outcome::Passed(figures),
            }
        }
        _ => Outcome::Passed(figures),
    }
}

fn direction(m: &MetricComparison) -> &'static str {
    match m.direction {
        pipeline_model::Direction::Higher => "higher is better",
        pipeline_model::Direction::Lower => "lower is better",
        pipeline_model::Direction::None => "no direction",
    }
}

fn how(change: &Change) -> String {
    match change.test {
        Test::Welch { p, .. } => format!(" (Welch's t-test, p={p:.3}, n={})", change.summary.n),
        Test::ThresholdOnly => " (single run: threshold only)".to_string(),
        Test::None => String::new(),
    }
}

/// `bandwidth (mode=write)`.
fn metric_name(m: &MetricComparison) -> String {
    if m.labels.is_empty() {
        return m.name.clone();
    }
    let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} ({})", m.name, labels.join(", "))
}

/// Whether XML 1.0 can carry `ch` at all (its Char production).
fn xml_char(ch: char) -> bool {
    matches!(ch, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Element text: `&`, `<`, `>` escaped, what XML cannot carry dropped, and
/// terminal controls (C1, which XML allows) dropped too, since CI pages
/// print these texts.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s
        .chars()
        .filter(|&c| xml_char(c) && !('\u{80}'..='\u{9F}').contains(&c))
    {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// An attribute value (always in double quotes): as [`text`], and quotes
/// and whitespace other than spaces as references, which attribute
/// normalization would otherwise turn into spaces.
fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in text(s).chars() {
        match ch {
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_escaped_and_what_xml_cannot_carry_is_dropped() {
        assert_eq!(text("a<b & c>d"), "a&lt;b &amp; c&gt;d");
        assert_eq!(text("red\u{1b}[31m\u{7}\u{0}\u{9b}x\u{FFFE}"), "red[31mx");
        assert_eq!(attr("say \"hi\"\n\tnow"), "say &quot;hi&quot;&#10;&#9;now");
        assert_eq!(text("r\rn"), "r&#13;n");
        // What is kept of a hostile text parses back to itself, less the dropped.
        let hostile = "<x a=\"1\">&amp;\u{1b}]0;title\u{7}</x>";
        let doc = format!("<t v=\"{}\">{}</t>", attr(hostile), text(hostile));
        let parsed = roxmltree::Document::parse(&doc).unwrap();
        let root = parsed.root_element();
        assert_eq!(root.attribute("v"), Some("<x a=\"1\">&amp;]0;title</x>"));
        assert_eq!(root.text(), Some("<x a=\"1\">&amp;]0;title</x>"));
    }
}
