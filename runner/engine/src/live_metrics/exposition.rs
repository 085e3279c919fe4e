//! The OpenMetrics text a scrape gets (and, less its `# EOF`, the
//! Prometheus text format a Pushgateway takes). Every name and label value
//! comes from suites, plugins and tool outputs, which may be hostile: label
//! names are reduced to what Prometheus accepts and never collide with ours
//! or each other; values are escaped as the format says, with terminal
//! controls dropped, since they end up on someone's screen.

use std::collections::BTreeMap;
use std::fmt::Write;

/// One gauge family: its name, help, and samples (labels, value).
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub samples: Vec<(Labels, f64)>,
}

/// A sample's labels, by name: one value per name by construction.
pub type Labels = BTreeMap<String, String>;

/// Adds a label from a stage, a plugin or a tool (a metric's own labels):
/// its name made valid (`[a-zA-Z_][a-zA-Z0-9_]*`, not the reserved `__`),
/// prefixed `label_` when it would take one of ours or is taken already.
pub fn add_foreign(labels: &mut Labels, name: &str, value: &str) {
    let mut clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if clean.is_empty()
        || clean.starts_with(|c: char| c.is_ascii_digit())
        || clean.starts_with("__")
    {
        clean = format!("label_{clean}");
    }
    while labels.contains_key(&clean) {
        clean = format!("label_{clean}");
    }
    labels.insert(clean, value.to_string());
}

/// The families as text; `openmetrics`: with the closing `# EOF`.
pub fn render(families: &[Family], openmetrics: bool) -> String {
    let mut out = String::new();
    for family in families {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} gauge", family.name);
        // The same labels twice would make Prometheus drop the sample: last wins.
        let mut samples: BTreeMap<String, f64> = BTreeMap::new();
        for (labels, value) in &family.samples {
            if value.is_finite() {
                samples.insert(label_set(labels), *value);
            }
        }
        for (labels, value) in samples {
            let _ = writeln!(out, "{}{labels} {}", family.name, number(value));
        }
    }
    if openmetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn label_set(labels: &Labels) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", pairs.join(","))
}

/// A label value: `\`, `"` and newlines escaped; other controls (ESC, C1,
/// DEL) dropped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Integers without a fraction; the rest as Rust prints them (shortest
/// exact form), which both formats read.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn families_render_sorted_escaped_and_closed() {
        let families = [Family {
            name: "pipeline_stage_metric",
            help: "A finished stage's figure.",
            samples: vec![
                (labels(&[("stage", "b"), ("metric", "x")]), 2.5),
                (labels(&[("stage", "a\"\\\n\u{1b}[2J")]), 1.0),
                (labels(&[("stage", "nan")]), f64::NAN),
            ],
        }];
        assert_eq!(
            render(&families, true),
            "# HELP pipeline_stage_metric A finished stage's figure.\n\
             # TYPE pipeline_stage_metric gauge\n\
             pipeline_stage_metric{metric=\"x\",stage=\"b\"} 2.5\n\
             pipeline_stage_metric{stage=\"a\\\"\\\\\\n[2J\"} 1\n\
             # EOF\n"
        );
        assert!(!render(&families, false).contains("# EOF"));
    }

    #[test]
    fn foreign_label_names_are_made_valid_and_never_take_ours() {
        let mut l = labels(&[("stage", "s"), ("host", "node1")]);
        add_foreign(&mut l, "host", "other");
        add_foreign(&mut l, "queue-depth", "32");
        add_foreign(&mut l, "9x", "a");
        add_foreign(&mut l, "__name__", "evil");
        add_foreign(&mut l, "", "empty");
        add_foreign(&mut l, "queue_depth", "dup");
        let names: Vec<&str> = l.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "host",
                "label_",
                "label_9x",
                "label___name__",
                "label_host",
                "label_queue_depth",
                "queue_depth",
                "stage"
            ]
        );
        assert_eq!(l["host"], "node1");
        assert_eq!(l["label_host"], "other");
        assert_eq!(l["label_queue_depth"], "dup");
    }
}
