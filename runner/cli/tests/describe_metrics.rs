//! `pipeline plugins describe` shows every metric a native stage declares,
//! with its unit, direction, rule across hosts and headline mark: the same
//! declarations the engine checks each run's metrics against, so what
//! `describe` says and what results.json holds cannot disagree.

mod common;

use pipeline_stage_api::metric::Declared;

#[test]
fn describe_shows_every_declared_metric_of_every_native_stage() {
    let registry = pipeline_native::registry();
    let names: Vec<String> = registry.names().map(str::to_string).collect();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let stage = registry.get(name).unwrap();
        let d = &stage.description;
        let out = common::pipeline(&["plugins", "describe", name]);
        assert_eq!(out.status.code(), Some(0), "{name}");
        let text = String::from_utf8(out.stdout).unwrap();
        if let Some(param) = &d.metrics_from_param {
            assert!(
                text.contains(&format!("metrics: each entry of `{param}` declares one")),
                "{name}:\n{text}"
            );
            continue;
        }
        let shown: Vec<&str> = match text.split_once("\nmetrics:\n") {
            Some((_, section)) => section.lines().collect(),
            None => Vec::new(),
        };
        assert_eq!(shown.len(), 2 * d.metrics.len(), "{name}:\n{text}");
        for (decl, lines) in d.metrics.iter().zip(shown.chunks(2)) {
            // Every native stage declares direction and rule.
            let summary = decl.summary(Declared::Fully);
            assert!(summary.contains(" is better") || summary.contains(" nor worse"));
            assert!(summary.contains("; host=all: "), "{summary}");
            assert_eq!(lines[0], format!("  {}", decl.summary(d.metric_values)));
            assert_eq!(lines[1], format!("      {}", decl.doc));
        }
    }
}

#[test]
fn describe_shows_a_stage_that_starts_together_reports_how_it_started() {
    let out = common::pipeline(&["plugins", "describe", "rados-bench"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "  bandwidth [MiB/s] higher is better; host=all: sum; headline",
        "  latency_avg [s] lower is better; host=all: mean weighted by ops; headline",
        "  latency_max [s] lower is better; host=all: max",
        "  start_spread_ms [ms] neither better nor worse; host=all: none",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}\n{text}");
    }
}
