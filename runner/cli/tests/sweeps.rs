//! End to end on a real run folder: `pipeline report` of a full-baseline
//! run (its committed results.json) writes the matrix sweeps side by side,
//! and every chart report.md links is there and well-formed.

mod common;

/// The `(alt, path)` of each image report.md embeds.
fn images(report: &str) -> Vec<(String, String)> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix("![")?.strip_suffix(')'))
        .filter_map(|l| l.rsplit_once("]("))
        .map(|(alt, path)| (alt.to_string(), path.to_string()))
        .collect()
}

#[test]
fn a_real_run_reports_its_sweeps_with_charts() {
    let dir = common::temp_dir("sweeps-real");
    std::fs::copy(
        common::root().join("tests/compare/full-baseline-1.results.json"),
        dir.join("results.json"),
    )
    .unwrap();
    let report = common::render_report(&dir);
    let sweeps = report
        .split("\n## Sweeps\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## Stages\n").next())
        .expect("a Sweeps section before the stages");
    assert!(sweeps.contains("### rados-read across mode"), "{sweeps}");
    assert!(
        sweeps.contains("| bandwidth ↑ | 914.97 MiB/s | 1.526 GiB/s |"),
        "{sweeps}"
    );
    let charts: Vec<(String, String)> = images(sweeps);
    assert!(
        charts
            .iter()
            .any(|(_, p)| p == "charts/rados-read-bandwidth-vs-latency_avg.svg"),
        "{charts:?}"
    );
    assert!(charts.len() >= 8, "{charts:?}");
    for (alt, path) in &charts {
        let text = std::fs::read_to_string(dir.join(path)).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let title = doc
            .descendants()
            .find(|n| n.has_tag_name("title"))
            .and_then(|n| n.text())
            .unwrap();
        // A long title is cut (with an ellipsis) in the picture.
        let alt = alt.replace("\\]", "]");
        let shown = title.strip_suffix('…').unwrap_or(title);
        assert!(alt.starts_with(shown), "{path}: {title} / {alt}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
