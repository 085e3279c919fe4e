//! End to end on real run folders: `pipeline report` of a committed
//! results.json writes the matrix sweeps side by side. A full-baseline run's
//! sweeps are two modes each (seq/rand, read/write): tables and a note, no
//! charts. The client-upgrade run's sweeps have three client releases:
//! every chart report.md links is there and well-formed.

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

/// The Sweeps section of the report `pipeline report` writes for `results`.
fn sweeps_section(name: &str, results: &str) -> (std::path::PathBuf, String) {
    let dir = common::temp_dir(name);
    std::fs::copy(common::root().join(results), dir.join("results.json")).unwrap();
    let report = common::render_report(&dir);
    let sweeps = report
        .split("\n## Sweeps\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## Stages\n").next())
        .expect("a Sweeps section before the stages")
        .to_string();
    (dir, sweeps)
}

#[test]
fn two_modes_side_by_side_are_a_table_and_a_note_not_charts() {
    let (dir, sweeps) =
        sweeps_section("sweeps-modes", "tests/compare/full-baseline-1.results.json");
    assert!(sweeps.contains("### rados-read across mode"), "{sweeps}");
    assert!(
        sweeps.contains("| bandwidth ↑ | 914.97 MiB/s | 1.526 GiB/s |"),
        "{sweeps}"
    );
    assert!(images(&sweeps).is_empty(), "{sweeps}");
    assert_eq!(
        sweeps
            .matches("two categories, compared in the table above")
            .count(),
        4,
        "{sweeps}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_real_run_reports_its_sweeps_with_charts() {
    let (dir, sweeps) = sweeps_section("sweeps-real", "tests/report/client-upgrade.results.json");
    assert!(sweeps.contains("### rados-read across client"), "{sweeps}");
    let charts: Vec<(String, String)> = images(&sweeps);
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
        // client × rw: the rw modes are words, so the fio curve's points stay unjoined.
        if path.contains("fio-rbd") && path.contains("-vs-") {
            assert!(!text.contains("<polyline"), "{path}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
