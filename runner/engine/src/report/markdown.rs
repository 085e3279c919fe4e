//! The Markdown report, rendered by minijinja from `results.json` alone (so
//! `pipeline report RUN_DIR` can re-render it). Every value a stage or
//! plugin wrote goes through a filter of [`super::escape`] for the context
//! it lands in (`cell`, `inline`, `code`, `block`, `html`, `link`).

use minijinja::Environment;

use super::charts::StageCharts;
use super::charts::sweeps::Sweep;
use super::{Exporter, ReportError, escape, format_number};
use crate::exec::format_duration;
use crate::results::RunResults;

const TEMPLATE: &str = include_str!("report.md.j2");

#[derive(Debug, Default)]
pub struct MarkdownExporter {
    /// The charts drawn for each stage of the results, in order (none when
    /// empty).
    pub charts: Vec<StageCharts>,
    /// The matrix sweeps side by side, with their charts.
    pub sweeps: Vec<Sweep>,
    /// The environment's tables and fact files (`None`: every fact inline).
    pub environment: Option<super::environment::EnvironmentView>,
}

impl Exporter for MarkdownExporter {
    fn export(&self, results: &RunResults) -> Result<String, ReportError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Chainable);
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?;
        env.set_syntax(syntax);
        env.add_filter("cell", |v: minijinja::Value| escape::cell(&as_text(&v)));
        env.add_filter("inline", |v: minijinja::Value| escape::inline(&as_text(&v)));
        env.add_filter("html", |v: minijinja::Value| escape::html(&as_text(&v)));
        env.add_filter("anchor", |v: minijinja::Value| escape::anchor(&as_text(&v)));
        env.add_filter("block", |v: minijinja::Value, lang: String| {
            escape::block(&as_text(&v), &lang)
        });
        env.add_filter("link", |text: minijinja::Value, path: minijinja::Value| {
            escape::link(&as_text(&text), &as_text(&path))
        });
        env.add_filter("image", |alt: minijinja::Value, path: minijinja::Value| {
            escape::image(&as_text(&alt), &as_text(&path))
        });
        env.add_filter("num", |v: f64| format_number(v));
        env.add_filter("duration", |v: minijinja::Value| {
            f64::try_from(v)
                .ok()
                .and_then(seconds)
                .map_or_else(|| "-".to_string(), format_duration)
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
        env.add_filter("combination", combination);
        env.add_filter("change", change);
        env.add_filter("value", |v: f64, unit: String| {
            super::format_value(v, &unit)
        });
        env.add_filter("code", |v: minijinja::Value| escape::code(&as_text(&v)));
        env.add_filter("json", |v: minijinja::Value| {
            serde_json::to_string(&v).unwrap_or_default()
        });
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
        let latency: Vec<Vec<super::latency_table::LatencyRow>> = results
            .stages
            .iter()
            .map(super::latency_table::rows)
            .collect();
        let versions = super::versions::rows(results);
        let client_hosts: Vec<Vec<super::client_hosts::ClientHostRow>> = results
            .stages
            .iter()
            .map(super::client_hosts::rows)
            .collect();
        let text = tmpl.render(minijinja::context! {
            r => minijinja::value::Serde(results),
            latency => minijinja::value::Serde(&latency),
            client_hosts => minijinja::value::Serde(&client_hosts),
            versions => minijinja::value::Serde(&versions),
            failures => minijinja::value::Serde(&failures),
            charts => minijinja::value::Serde(&self.charts),
            sweeps => minijinja::value::Serde(&self.sweeps),
            environment => minijinja::value::Serde(&self.environment),
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

/// A value as the text a filter escapes: strings as they are, anything
/// else as minijinja prints it.
fn as_text(value: &minijinja::Value) -> String {
    match value.as_str() {
        Some(s) => s.to_string(),
        None => value.to_string(),
    }
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

/// An environment change of the comparison as one line
/// (`client librbd 16.2.15 → 18.2.7 (fio-rbd)`).
fn change(value: minijinja::Value) -> String {
    serde_json::to_value(&value)
        .ok()
        .and_then(|v| {
            serde_json::from_value::<crate::compare::environment::EnvironmentChange>(v).ok()
        })
        .map(|c| c.describe())
        .unwrap_or_default()
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
            .and_then(seconds)
    };
    match (seconds("cpu_user_s"), seconds("cpu_sys_s")) {
        (Some(user), Some(sys)) => format!(
            ", CPU {} user + {} sys",
            format_duration(user),
            format_duration(sys)
        ),
        _ => String::new(),
    }
}

/// Seconds as a duration; `None` for what no duration is (negative, not
/// finite, or too large: `from_secs_f64` would panic on 1e300).
fn seconds(secs: f64) -> Option<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(secs.max(0.0)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smoke run's results with `edit` applied: any valid results.json.
    fn smoke_with(edit: impl FnOnce(&mut serde_json::Value)) -> RunResults {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/report/smoke.results.json");
        let mut doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut doc);
        RunResults::parse(&doc.to_string(), &path).unwrap()
    }

    #[test]
    fn extreme_but_valid_numbers_render_sensibly() {
        let results = smoke_with(|doc| {
            let stage = &mut doc["stages"][1];
            stage["metrics"][0]["value"] = serde_json::json!(1e300);
            stage["metrics"][1]["value"] = serde_json::json!(1e-300);
            stage["metrics"][1]["headline"] = serde_json::json!(true);
            stage["metrics"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!(
                    {"name": "zero", "value": -0.0, "unit": "s", "direction": "none"}
                ));
            // Durations no `Duration` can hold (from_secs_f64 would panic).
            stage["duration_s"] = serde_json::json!(1e300);
            stage["commands"][0]["duration_s"] = serde_json::json!(1e300);
            stage["commands"][0]["cpu_user_s"] = serde_json::json!(1e300);
            stage["commands"][0]["cpu_sys_s"] = serde_json::json!(-5.0);
            doc["duration_s"] = serde_json::json!(f64::MAX);
        });
        let report = MarkdownExporter::default().export(&results).unwrap();
        assert!(report.len() < 64 << 10, "{} bytes", report.len());
        assert!(
            report.contains("| bytes |  | 9.095e287 TiB |  |"),
            "{report}"
        );
        assert!(
            report.contains("| seconds |  | 1e-291 ns | ↓ |"),
            "{report}"
        );
        assert!(report.contains("| zero |  | 0 s |  |"), "{report}");
        assert!(report.contains("seconds **1e-291 ns** ↓"), "{report}");
        assert!(report.contains("| Duration | - |"), "{report}");
        assert!(
            !report.contains("NaN") && !report.contains("inf"),
            "{report}"
        );
    }

    /// A figure that was 0 in every repetition has no coefficient of
    /// variation (`cv_percent` absent): its cell says `-`, the report renders.
    #[test]
    fn a_repeated_figure_without_a_spread_renders() {
        let results = smoke_with(|doc| {
            doc["stages"][1]["repetitions"] = serde_json::json!({
                "planned": 2, "completed": 2, "pause_s": 0.0, "max_cv_percent": 10.0,
                "summaries": [
                    {"name": "errors", "unit": "count", "direction": "lower", "headline": true,
                     "n": 2, "median": 0.0, "min": 0.0, "max": 0.0},
                    {"name": "knee", "unit": "ops/s", "direction": "higher", "headline": true,
                     "n": 2, "median": 1750.0, "min": 1700.0, "max": 1800.0, "cv_percent": 4.0}
                ]
            });
        });
        let report = MarkdownExporter::default().export(&results).unwrap();
        assert!(
            report.contains("| errors |  | 0 | 0 | 0 | - | 2 | ↓ |"),
            "{report}"
        );
        assert!(
            report.contains("errors **0** ↓ median of 2<br>"),
            "{report}"
        );
        assert!(
            report.contains("knee **1750 ops/s** ↑ median of 2, CV 4.0%"),
            "{report}"
        );
    }
}
