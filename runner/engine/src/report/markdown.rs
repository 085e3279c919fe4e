//! The Markdown report, rendered by minijinja from `results.json` alone (so
//! `pipeline report RUN_DIR` can re-render it). Table cells are escaped.

use minijinja::Environment;

use super::{Exporter, ReportError, format_number};
use crate::exec::format_duration;
use crate::results::RunResults;

const TEMPLATE: &str = include_str!("report.md.j2");

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn export(&self, results: &RunResults) -> Result<String, ReportError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?;
        env.set_syntax(syntax);
        env.add_filter("cell", cell);
        env.add_filter("num", |v: f64| format_number(v));
        env.add_filter("duration", |v: minijinja::Value| match f64::try_from(v) {
            Ok(secs) if secs.is_finite() => {
                format_duration(std::time::Duration::from_secs_f64(secs.max(0.0)))
            }
            _ => "-".to_string(),
        });
        env.add_filter("arrow", |d: String| match d.as_str() {
            "higher" => "↑",
            "lower" => "↓",
            _ => "",
        });
        env.add_filter("status", |s: String| match s.as_str() {
            "succeeded" => "✅ succeeded".to_string(),
            "failed" => "❌ failed".to_string(),
            "skipped" => "⏭️ skipped".to_string(),
            "cancelled" => "⛔ cancelled".to_string(),
            other => other.to_string(),
        });
        env.add_filter("labels", |labels: minijinja::Value| -> String {
            let Ok(iter) = labels.try_iter() else {
                return String::new();
            };
            iter.map(|k| format!("{k}={}", labels.get_item(&k).unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        });
        env.add_filter("short", |s: String, n: usize| {
            let first = s.lines().next().unwrap_or_default();
            if first.chars().count() > n || s.lines().count() > 1 {
                format!("{}…", first.chars().take(n).collect::<String>())
            } else {
                first.to_string()
            }
        });
        env.add_filter("link", link);
        env.add_filter("combination", combination);
        env.add_filter("value", |v: f64, unit: String| {
            super::format_value(v, &unit)
        });
        env.add_filter("code", code);
        env.add_filter("json", |v: minijinja::Value| {
            serde_json::to_string(&v).unwrap_or_default()
        });
        env.add_filter("fence", |s: String| s.replace("```", "'''"));
        env.add_function("client_bound", client_bound);
        env.add_filter("cpu", cpu);
        env.add_template("report.md", TEMPLATE)?;
        let tmpl = env.get_template("report.md")?;
        let failures: Vec<_> = results
            .stages
            .iter()
            .chain(&results.cleanup)
            .filter(|s| s.error.is_some())
            .collect();
        let text = tmpl.render(minijinja::context! {
            r => minijinja::value::Serde(results),
            failures => minijinja::value::Serde(&failures),
        })?;
        // One blank line between blocks, a single trailing newline.
        let mut out = String::with_capacity(text.len());
        let mut blank = 0;
        for line in text.lines() {
            if line.trim().is_empty() {
                blank += 1;
                if blank > 1 {
                    continue;
                }
            } else {
                blank = 0;
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        Ok(out.trim_end().to_string() + "\n")
    }
}

/// A relative path as a Markdown link target: percent-encode what would end
/// or confuse the link (spaces, brackets, parentheses, `%`).
fn link(path: String) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_./=,~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Text as an inline code span that is also safe in a table cell: the
/// delimiter is longer than any backtick run inside, pipes are escaped
/// (GFM unescapes `\|` inside code spans in tables), newlines become spaces.
fn code(value: minijinja::Value) -> String {
    let text = if let Some(s) = value.as_str() {
        s.to_string()
    } else {
        value.to_string()
    };
    let text = text
        .replace("\r\n", " ")
        .replace('\n', " ")
        .replace('|', "\\|");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// How a combined figure (`host=all`) came about, e.g. `sum of 2 hosts`;
/// empty for a measured one.
fn combination(metric: minijinja::Value) -> String {
    serde_json::to_value(&metric)
        .ok()
        .and_then(|m| serde_json::from_value::<pipeline_model::Metric>(m).ok())
        .and_then(|m| m.combination())
        .unwrap_or_default()
}

/// Escapes text for a Markdown table cell.
fn cell(value: minijinja::Value) -> String {
    let text = if let Some(s) = value.as_str() {
        s.to_string()
    } else {
        value.to_string()
    };
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace("\r\n", "<br>")
        .replace('\n', "<br>")
}

/// The client-bound note for a stage's local command CPU, its duration and
/// the machine's cores; empty when it does not apply or a figure is missing
/// (results of older runners).
fn client_bound(
    local_cpu_s: minijinja::Value,
    duration_s: minijinja::Value,
    cpus: minijinja::Value,
) -> String {
    let (Ok(cpu), Ok(duration), Ok(cpus)) = (
        f64::try_from(local_cpu_s),
        f64::try_from(duration_s),
        usize::try_from(cpus),
    ) else {
        return String::new();
    };
    super::client_bound_note(cpu, duration, cpus).unwrap_or_default()
}

/// `, CPU 1.2s user + 40ms sys` for a command whose CPU is known, else nothing.
fn cpu(command: minijinja::Value) -> String {
    let seconds = |key: &str| {
        command
            .get_attr(key)
            .ok()
            .and_then(|v| f64::try_from(v).ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    match (seconds("cpu_user_s"), seconds("cpu_sys_s")) {
        (Some(user), Some(sys)) => format!(
            ", CPU {} user + {} sys",
            format_duration(std::time::Duration::from_secs_f64(user)),
            format_duration(std::time::Duration::from_secs_f64(sys))
        ),
        _ => String::new(),
    }
}
