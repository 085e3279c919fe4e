//! Charts drawn from real series files in a real (temporary) run folder,
//! each parsed back as XML and checked against the points it claims.

use std::path::PathBuf;

use pipeline_model::{Direction, Series};

use super::{ChartRef, StageCharts, write_charts};
use crate::report::{Exporter, MarkdownExporter};
use crate::results::RunResults;

const SMOKE: &str = include_str!("../../../../../tests/report/smoke.results.json");

struct Run {
    dir: PathBuf,
    results: RunResults,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A run folder whose stages (id, series) saved their series as the runner
/// does: `stages/<id>/series-<stem>.json`, listed as `series: NAME`.
fn run(name: &str, stages: &[(&str, Vec<Series>)]) -> Run {
    let dir = std::env::temp_dir().join(format!("pipeline-charts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut results: RunResults = serde_json::from_str(SMOKE).unwrap();
    let template = results.stages[0].clone();
    results.stages.clear();
    for (id, series) in stages {
        let folder = dir.join("stages").join(id);
        std::fs::create_dir_all(&folder).unwrap();
        let mut stage = template.clone();
        stage.id = id.to_string();
        let files = super::names::series_files(series.iter().map(|s| &*s.name));
        for (s, file) in series.iter().zip(files) {
            std::fs::write(folder.join(&file), serde_json::to_string(s).unwrap()).unwrap();
            stage.artifacts.push(pipeline_model::Artifact {
                name: format!("series: {}", s.name),
                path: format!("stages/{id}/{file}"),
            });
        }
        results.stages.push(stage);
    }
    Run { dir, results }
}

fn series(name: &str, unit: &str, points: &[[f64; 2]]) -> Series {
    let mut s = Series::new(name, unit, Direction::Higher);
    s.points = points.to_vec();
    s
}

fn labelled(mut s: Series, key: &str, value: &str) -> Series {
    s.labels.insert(key.into(), value.into());
    s
}

/// A chart read back: its text, and the vertices of its polylines mapped
/// back to data (`[t, v]` in base units) through the plot area and domain
/// the SVG declares.
struct Drawn {
    text: String,
    lines: Vec<Vec<[f64; 2]>>,
    circles: usize,
    y_max: f64,
    texts: Vec<String>,
}

fn drawn(run: &Run, chart: &ChartRef) -> Drawn {
    let text = std::fs::read_to_string(run.dir.join(&chart.path)).unwrap();
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}\n{text}", chart.path));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    for node in root.descendants() {
        // Nothing that runs or fetches: no script, no link, no foreign font.
        assert!(
            !matches!(
                node.tag_name().name(),
                "script" | "image" | "a" | "style" | "foreignObject"
            ),
            "{}",
            node.tag_name().name()
        );
        for a in node.attributes() {
            assert!(
                !a.name().starts_with("on") && a.name() != "href",
                "{}",
                a.name()
            );
            assert!(!a.value().contains("url("), "{}", a.value());
        }
    }
    let g = root
        .descendants()
        .find(|n| n.attribute("class") == Some("lines"))
        .unwrap();
    let num = |k: &str| g.attribute(k).unwrap().parse::<f64>().unwrap();
    let plot: Vec<f64> = g
        .attribute("data-plot")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let (x0, x1, y0, y1) = (
        num("data-x-min"),
        num("data-x-max"),
        num("data-y-min"),
        num("data-y-max"),
    );
    let back = |px: f64, py: f64| {
        [
            x0 + (px - plot[0]) / plot[2] * (x1 - x0),
            y0 + (1.0 - (py - plot[1]) / plot[3]) * (y1 - y0),
        ]
    };
    let lines = g
        .children()
        .filter(|n| n.tag_name().name() == "polyline")
        .map(|p| {
            p.attribute("points")
                .unwrap()
                .split(' ')
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    back(x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect();
    let circles = g
        .children()
        .filter(|n| n.tag_name().name() == "circle")
        .count();
    let texts = root
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text().map(str::to_string))
        .collect();
    Drawn {
        text,
        lines,
        circles,
        y_max: y1,
        texts,
    }
}

/// Within the rounding of a coordinate (0.1 px) on a span.
fn close(a: [f64; 2], b: [f64; 2], x_span: f64, y_span: f64) -> bool {
    (a[0] - b[0]).abs() <= x_span / 600.0 * 0.06 && (a[1] - b[1]).abs() <= y_span / 200.0 * 0.06
}

#[test]
fn a_chart_is_well_formed_and_holds_the_points_of_its_series() {
    let points = [
        [1.0, 18874368.0],
        [2.0, 14680064.0],
        [3.0, 13631488.0],
        [4.0, 13631488.0],
        [5.0, 12582912.0],
    ];
    let run = run(
        "points",
        &[("rbd", vec![series("bandwidth", "B/s", &points)])],
    );
    let charts = write_charts(&run.results, &run.dir);
    assert_eq!(charts.len(), 1);
    assert_eq!(charts[0].notes, []);
    let chart = &charts[0].charts[0];
    assert_eq!(chart.path, "stages/rbd/charts/bandwidth.svg");
    let d = drawn(&run, chart);
    assert_eq!(d.lines.len(), 1);
    assert_eq!(d.lines[0].len(), points.len());
    for (vertex, point) in d.lines[0].iter().zip(&points) {
        assert!(close(*vertex, *point, 5.0, d.y_max), "{vertex:?} {point:?}");
    }
    assert_eq!(d.circles, points.len(), "a short series marks each point");
    assert!(d.texts.iter().any(|t| t == "MiB/s"), "{:?}", d.texts);
    assert!(d.texts.iter().any(|t| t == "bandwidth"), "{:?}", d.texts);
}

#[test]
fn fanned_out_hosts_are_lines_of_one_chart_with_a_legend() {
    let a = labelled(
        series(
            "cur_bandwidth-client-0",
            "MiB/s",
            &[[0.0, 10.0], [1.0, 20.0]],
        ),
        "host",
        "client-0",
    );
    let b = labelled(
        series(
            "cur_bandwidth-client-1",
            "MiB/s",
            &[[0.0, 30.0], [1.0, 40.0], [2.0, 35.0]],
        ),
        "host",
        "client-1",
    );
    let run = run("fanout", &[("rados", vec![a, b])]);
    let charts = write_charts(&run.results, &run.dir);
    assert_eq!(charts[0].charts.len(), 1, "{charts:?}");
    let d = drawn(&run, &charts[0].charts[0]);
    assert_eq!(d.lines.len(), 2);
    assert_eq!((d.lines[0].len(), d.lines[1].len()), (2, 3));
    assert!(
        close(d.lines[1][2], [2.0, 35.0 * 1048576.0], 2.0, d.y_max),
        "{:?}",
        d.lines[1]
    );
    for legend in ["host=client-0", "host=client-1"] {
        assert!(
            d.texts.iter().any(|t| t == legend),
            "{legend}: {:?}",
            d.texts
        );
    }
    assert!(
        d.texts.iter().any(|t| t == "cur_bandwidth"),
        "{:?}",
        d.texts
    );
}

#[test]
fn one_metric_has_one_scale_across_the_report() {
    let run = run(
        "scale",
        &[
            (
                "write",
                vec![series("bandwidth", "MiB/s", &[[1.0, 18.0], [2.0, 14.0]])],
            ),
            (
                "read",
                vec![series(
                    "bandwidth",
                    "B/s",
                    &[[1.0, 46.0 * 1048576.0], [2.0, 0.0]],
                )],
            ),
            (
                "ops",
                vec![series("iops", "IOPS", &[[1.0, 3.0], [2.0, 2.0]])],
            ),
        ],
    );
    let charts = write_charts(&run.results, &run.dir);
    let y: Vec<f64> = charts
        .iter()
        .map(|c| drawn(&run, &c.charts[0]).y_max)
        .collect();
    assert_eq!(y[0], y[1], "both bandwidth charts reach the larger one");
    assert_eq!(y[0], 50.0 * 1048576.0);
    assert_eq!(y[2], 3.0, "another metric keeps its own scale");
}

#[test]
fn awkward_series_give_a_valid_chart_or_a_note() {
    let many: Vec<[f64; 2]> = (0..100_000)
        .map(|i| [i as f64 / 100.0, ((i * 7919) % 1000) as f64])
        .collect();
    let nan = [
        [0.0, 1.0],
        [1.0, f64::NAN],
        [2.0, 3.0],
        [3.0, 4.0],
        [f64::INFINITY, 5.0],
    ];
    let stages = [
        ("empty", vec![series("bw", "B/s", &[])]),
        (
            "nothing-finite",
            vec![series("gone", "B/s", &[[0.0, f64::NAN], [f64::NAN, 1.0]])],
        ),
        ("one", vec![series("lat", "s", &[[0.0, 0.04]])]),
        ("gaps", vec![series("gappy", "IOPS", &nan)]),
        ("many", vec![series("busy", "IOPS", &many)]),
        (
            "huge",
            vec![series(
                "huge",
                "count",
                &[[0.0, 1e308], [1.0, 1e300], [2.0, -1e300], [3.0, f64::MAX]],
            )],
        ),
        (
            "tiny",
            vec![series("tiny", "s", &[[0.0, 1e-300], [1.0, 2e-300]])],
        ),
        (
            "names",
            vec![series(
                "<b>&\"quoted\" 'x'\u{1}]`",
                "<u>",
                &[[0.0, 1.0], [1.0, 2.0]],
            )],
        ),
    ];
    let run = run("awkward", &stages);
    let charts = write_charts(&run.results, &run.dir);
    let by_id = |id: &str| &charts[stages.iter().position(|s| s.0 == id).unwrap()];

    for id in ["empty", "nothing-finite"] {
        assert_eq!(by_id(id).charts, []);
        assert_eq!(by_id(id).notes.len(), 1);
        assert_eq!(by_id(id).notes[0].reason, "no finite point to draw");
    }
    assert_eq!(by_id("one").charts, []);
    assert_eq!(
        by_id("one").notes[0].reason,
        "one point only (40 ms at 0 s); no line to draw"
    );

    let gaps = drawn(&run, &by_id("gaps").charts[0]);
    assert_eq!(
        gaps.lines.len(),
        1,
        "[0,1] alone is a dot, [2,3]..[3,4] a line"
    );
    assert_eq!(gaps.lines[0].len(), 2);
    assert_eq!(gaps.circles, 3);

    let busy = drawn(&run, &by_id("many").charts[0]);
    assert_eq!(busy.lines.len(), 1);
    let vertices = busy.lines[0].len();
    assert!(vertices <= 4 * 618 && vertices > 600, "{vertices}");
    assert!(busy.text.len() < 64 * 1024, "{} bytes", busy.text.len());
    assert!(close(busy.lines[0][0], many[0], 1000.0, busy.y_max));
    assert!(close(
        busy.lines[0][vertices - 1],
        many[many.len() - 1],
        1000.0,
        busy.y_max
    ));
    assert_eq!(busy.circles, 0, "no dot per point on a long line");

    let huge = drawn(&run, &by_id("huge").charts[0]);
    assert_eq!(
        huge.lines[0].len(),
        2,
        "beyond 1e300 is a gap: {:?}",
        huge.lines
    );
    assert!(huge.y_max.is_finite());
    let tiny = drawn(&run, &by_id("tiny").charts[0]);
    assert_eq!(tiny.lines[0].len(), 2);

    let names = &by_id("names").charts[0];
    let d = drawn(&run, names);
    assert!(
        d.texts.iter().any(|t| t == "<b>&\"quoted\" 'x'\u{FFFD}]`"),
        "{:?}",
        d.texts
    );
    assert!(d.texts.iter().any(|t| t == "<u>"), "{:?}", d.texts);
    assert_eq!(
        names.alt,
        "&lt;b&gt;&amp;\"quoted\" 'x' \\]\\` per second, &lt;u&gt;"
    );
}

#[test]
fn names_that_a_sanitizer_would_merge_keep_their_own_chart() {
    let s = |name: &str, v: f64| series(name, "IOPS", &[[0.0, v], [1.0, v]]);
    let run = run(
        "names",
        &[(
            "st",
            vec![s("a/b", 1.0), s("a_b", 2.0), s("a b", 3.0), s("..", 4.0)],
        )],
    );
    let charts = write_charts(&run.results, &run.dir);
    let paths: Vec<&str> = charts[0].charts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "stages/st/charts/a~2Fb.svg",
            "stages/st/charts/a_b.svg",
            "stages/st/charts/a~20b.svg",
            "stages/st/charts/~2E..svg"
        ]
    );
    for (chart, v) in charts[0].charts.iter().zip([1.0, 2.0, 3.0, 4.0]) {
        let d = drawn(&run, chart);
        assert!(
            close(d.lines[0][0], [0.0, v], 1.0, d.y_max),
            "{}",
            chart.path
        );
    }
}

#[test]
fn a_series_file_that_is_missing_outside_or_a_link_is_a_note() {
    let mut run = run(
        "refused",
        &[("st", vec![series("ok", "IOPS", &[[0.0, 1.0], [1.0, 1.0]])])],
    );
    let outside = run.dir.with_extension("outside.json");
    std::fs::write(
        &outside,
        serde_json::to_string(&series("x", "IOPS", &[[0.0, 1.0]])).unwrap(),
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, run.dir.join("stages/st/series-link.json")).unwrap();
    let artifacts = &mut run.results.stages[0].artifacts;
    for (name, path) in [
        ("missing", "stages/st/series-missing.json".to_string()),
        ("up", "stages/../../x.json".to_string()),
        ("absolute", outside.display().to_string()),
        ("link", "stages/st/series-link.json".to_string()),
    ] {
        artifacts.push(pipeline_model::Artifact {
            name: format!("series: {name}"),
            path,
        });
    }
    let charts = write_charts(&run.results, &run.dir);
    let _ = std::fs::remove_file(&outside);
    assert_eq!(
        charts[0].charts.len(),
        1,
        "the readable series is still drawn"
    );
    let notes: Vec<(&str, &str)> = charts[0]
        .notes
        .iter()
        .map(|n| (n.series.as_str(), n.reason.as_str()))
        .collect();
    assert_eq!(notes.len(), 4, "{notes:?}");
    assert!(
        notes[0]
            .1
            .starts_with("cannot read stages/st/series-missing.json"),
        "{notes:?}"
    );
    assert!(
        notes[1].1.contains("not a path inside the run folder"),
        "{notes:?}"
    );
    assert!(
        notes[2].1.contains("not a path inside the run folder"),
        "{notes:?}"
    );
    assert!(notes[3].1.contains("symbolic link"), "{notes:?}");
}

#[test]
fn the_report_embeds_each_chart_by_a_relative_link_and_lists_the_skipped() {
    let run = run(
        "embed",
        &[(
            "rados-read[mode=rand]",
            vec![
                series("cur_bandwidth", "MiB/s", &[[0.0, 1.0], [1.0, 2.0]]),
                series("none", "s", &[]),
            ],
        )],
    );
    crate::report::write_report(&run.results, &run.dir).unwrap();
    let report = std::fs::read_to_string(run.dir.join("report.md")).unwrap();
    let link = "![cur_bandwidth per second, MiB/s](stages/rados-read%5Bmode=rand%5D/charts/cur_bandwidth.svg)";
    assert!(report.contains(&format!("\n\n{link}\n\n")), "{report}");
    assert!(
        run.dir
            .join("stages/rados-read[mode=rand]/charts/cur_bandwidth.svg")
            .is_file(),
        "the link leads to the chart"
    );
    assert!(
        report.contains("- Chart of `none` not drawn: no finite point to draw\n"),
        "{report}"
    );

    // Rendered again from the same folder: the same report and charts.
    let first = std::fs::read(
        run.dir
            .join("stages/rados-read[mode=rand]/charts/cur_bandwidth.svg"),
    )
    .unwrap();
    crate::report::write_report(&run.results, &run.dir).unwrap();
    assert_eq!(
        std::fs::read_to_string(run.dir.join("report.md")).unwrap(),
        report
    );
    assert_eq!(
        std::fs::read(
            run.dir
                .join("stages/rados-read[mode=rand]/charts/cur_bandwidth.svg")
        )
        .unwrap(),
        first
    );

    // Without charts (an exporter given none), no image and no note.
    let plain = MarkdownExporter::default().export(&run.results).unwrap();
    assert!(!plain.contains("!["), "{plain}");
    let none: Vec<StageCharts> = Vec::new();
    assert_eq!(
        MarkdownExporter {
            charts: none,
            sweeps: Vec::new(),
            environment: None
        }
        .export(&run.results)
        .unwrap(),
        plain
    );
}

#[test]
fn the_same_name_with_other_labels_is_another_line_not_a_lost_file() {
    let get = labelled(
        series("bw", "MiB/s", &[[0.0, 1.0], [1.0, 2.0]]),
        "op",
        "get",
    );
    let put = labelled(
        series("bw", "MiB/s", &[[0.0, 3.0], [1.0, 4.0]]),
        "op",
        "put",
    );
    let run = run("same-name", &[("s3", vec![get, put])]);
    let files: Vec<&str> = run.results.stages[0]
        .artifacts
        .iter()
        .map(|a| a.path.as_str())
        .collect();
    assert_eq!(
        files,
        ["stages/s3/series-bw.json", "stages/s3/series-bw~2.json"]
    );
    let charts = write_charts(&run.results, &run.dir);
    assert_eq!(charts[0].charts.len(), 1);
    let d = drawn(&run, &charts[0].charts[0]);
    assert_eq!(d.lines.len(), 2);
    for legend in ["op=get", "op=put"] {
        assert!(
            d.texts.iter().any(|t| t == legend),
            "{legend}: {:?}",
            d.texts
        );
    }
}
