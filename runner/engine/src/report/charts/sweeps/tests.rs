//! Sweeps of a real run (the committed full-baseline results) and of
//! made-up ones, their charts read back against the table's values.

use std::path::PathBuf;

use pipeline_model::{Direction, Metric};

use super::{Sweep, write_sweeps};
use crate::report::charts::readback::{self, close};
use crate::results::{RunResults, StageRecord};

const REAL: &str = include_str!("../../../../../../tests/compare/full-baseline-1.results.json");
const SMOKE: &str = include_str!("../../../../../../tests/report/smoke.results.json");

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("pipeline-sweeps-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

fn sweep<'a>(sweeps: &'a [Sweep], stage: &str) -> &'a Sweep {
    sweeps.iter().find(|s| s.stage == stage).unwrap()
}

fn chart(dir: &Dir, sweep: &Sweep, file: &str) -> readback::Read {
    let c = sweep
        .charts
        .iter()
        .find(|c| c.path == format!("charts/{file}"))
        .unwrap_or_else(|| panic!("no {file} in {:?}", sweep.charts));
    readback::read(&std::fs::read_to_string(dir.0.join(&c.path)).unwrap())
}

const MIB: f64 = 1048576.0;

#[test]
fn a_real_run_gives_a_table_bars_and_a_curve_holding_its_values() {
    let results = RunResults::parse(REAL, std::path::Path::new("real.json")).unwrap();
    let d = dir("real");
    let sweeps = write_sweeps(&results, &d.0);
    let stages: Vec<&str> = sweeps.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(stages, ["rados-read", "rbd-bench", "fio-rbd", "s3"]);
    let rados = sweep(&sweeps, "rados-read");
    assert_eq!(rados.axes, ["mode"]);
    assert_eq!(rados.points, ["seq", "rand"]);
    let table: Vec<(String, Vec<String>)> = rados
        .rows
        .iter()
        .map(|r| (r.metric.clone(), r.cells.clone()))
        .collect();
    assert_eq!(
        table,
        [
            (
                "bandwidth".into(),
                vec!["914.97 MiB/s".into(), "1.526 GiB/s".into()]
            ),
            (
                "iops_avg".into(),
                vec!["228 IOPS".into(), "390 IOPS".into()]
            ),
            (
                "latency_avg".into(),
                vec!["61.26 ms".into(), "38.969 ms".into()]
            ),
        ]
    );
    assert!(!rados.medians);
    // Two modes: the table above compares them; no bars, no curve joining them.
    assert!(rados.charts.is_empty(), "{:?}", rados.charts);
    assert_eq!(
        rados.notes.len(),
        1,
        "one note says why there are no charts: {:?}",
        rados.notes
    );
    // rbd bench labels each figure with its mode: still one row a metric.
    let rbd = sweep(&sweeps, "rbd-bench");
    assert_eq!(rbd.rows[0].metric, "iops");
    assert_eq!(rbd.rows[0].labels, "");
    assert_eq!(rbd.rows[0].cells, ["2966 IOPS", "11736.4 IOPS"]);
    // fio names its figures by direction (write_iops at randwrite,
    // read_iops at randread): one row, so the two compare side by side.
    let fio = sweep(&sweeps, "fio-rbd");
    let iops = fio
        .rows
        .iter()
        .find(|r| r.metric == "write_iops / read_iops")
        .unwrap_or_else(|| panic!("{:?}", fio.rows));
    assert_eq!(iops.labels, "client=all, job=all");
    assert_eq!(iops.cells, ["5007.8 IOPS", "12957.1 IOPS"]);
    assert!(fio.charts.is_empty(), "{:?}", fio.charts);
}

/// A stage instance of `stage` at matrix point `point` with `metrics`.
fn instance(
    template: &StageRecord,
    stage: &str,
    point: (&str, &str),
    metrics: Vec<Metric>,
) -> StageRecord {
    let mut s = template.clone();
    s.id = format!("{stage}[{}={}]", point.0, point.1);
    s.stage = stage.to_string();
    s.matrix = [(point.0.to_string(), serde_json::json!(point.1))].into();
    s.metrics = metrics;
    s.artifacts.clear();
    s
}

fn results(stages: Vec<StageRecord>) -> RunResults {
    let mut r: RunResults = serde_json::from_str(SMOKE).unwrap();
    r.stages = stages;
    r
}

#[test]
fn repetitions_give_medians_and_a_metric_shares_one_scale_across_sweeps() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    let bw = |v: f64, rep: &str| {
        Metric::new("bandwidth", v, "MiB/s", Direction::Higher)
            .label("repetition", rep)
            .headline()
    };
    let lat = |v: f64, rep: &str| {
        Metric::new("latency_avg", v, "s", Direction::Lower)
            .label("repetition", rep)
            .headline()
    };
    let reps = |f: &dyn Fn(f64, &str) -> Metric, vals: [f64; 3]| -> Vec<Metric> {
        vals.iter()
            .zip(["1", "2", "3"])
            .map(|(v, r)| f(*v, r))
            .collect()
    };
    let pools = ("pool", "replica3");
    let ec = ("pool", "ec21");
    let ec42 = ("pool", "ec42");
    let r = results(vec![
        instance(
            t,
            "write",
            pools,
            [
                reps(&bw, [100.0, 300.0, 120.0]),
                reps(&lat, [0.2, 0.1, 0.3]),
            ]
            .concat(),
        ),
        instance(
            t,
            "write",
            ec,
            [reps(&bw, [80.0, 60.0, 70.0]), reps(&lat, [0.4, 0.5, 0.45])].concat(),
        ),
        instance(
            t,
            "write",
            ec42,
            [reps(&bw, [90.0, 95.0, 85.0]), reps(&lat, [0.3, 0.35, 0.4])].concat(),
        ),
        instance(t, "seq-read", pools, reps(&bw, [900.0, 1000.0, 950.0])),
        instance(t, "seq-read", ec, reps(&bw, [700.0, 710.0, 720.0])),
        instance(t, "seq-read", ec42, reps(&bw, [800.0, 810.0, 820.0])),
    ]);
    let d = dir("reps");
    let sweeps = write_sweeps(&r, &d.0);
    let write = sweep(&sweeps, "write");
    assert!(write.medians);
    assert_eq!(write.points, ["replica3", "ec21", "ec42"]);
    assert_eq!(write.rows[0].cells, ["120 MiB/s", "70 MiB/s", "90 MiB/s"]);
    assert_eq!(write.rows[1].cells, ["200 ms", "450 ms", "350 ms"]);
    let bars = chart(&d, write, "write-bandwidth.svg");
    for (bar, want) in bars.bars.iter().zip([120.0 * MIB, 70.0 * MIB]) {
        assert!(close(bar.value, want, bars.y_span), "{bar:?}");
    }
    let read = chart(&d, sweep(&sweeps, "seq-read"), "seq-read-bandwidth.svg");
    // The same y scale as the write bars: they compare at a glance.
    assert_eq!(read.y_span, bars.y_span);
    assert!(read.y_span >= 950.0 * MIB);
    let curve = chart(&d, write, "write-bandwidth-vs-latency_avg.svg");
    assert_eq!(curve.points.len(), 3);
    assert!(close(curve.points[1][1], 0.45, curve.y_span));
    // Labels from anywhere reach the SVG escaped, never as markup.
    assert!(curve.texts.iter().any(|t| t == "ec21"));
}

#[test]
fn hostile_names_stay_text_and_files_stay_apart() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    let m = |v: f64| Metric::new("<b>&\"x\"</b>/../y", v, "IOPS", Direction::Higher).headline();
    let r = results(vec![
        instance(t, "a/b", ("k", "<script>"), vec![m(1.0)]),
        instance(t, "a/b", ("k", "]](x)"), vec![m(2.0)]),
        instance(t, "a/b", ("k", "a b"), vec![m(2.5)]),
        instance(t, "a_b", ("k", "1"), vec![m(3.0)]),
        instance(t, "a_b", ("k", "2"), vec![m(4.0)]),
    ]);
    let d = dir("hostile");
    let sweeps = write_sweeps(&r, &d.0);
    let paths: Vec<&str> = sweeps
        .iter()
        .flat_map(|s| s.charts.iter().map(|c| c.path.as_str()))
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert_ne!(paths[0], paths[1]);
    for p in &paths {
        assert!(p.starts_with("charts/") && !p[7..].contains('/'), "{p}");
        let read = readback::read(&std::fs::read_to_string(d.0.join(p)).unwrap());
        assert_eq!(read.bars.len(), if p.contains("a~2Fb") { 3 } else { 2 });
        if p.contains("a~2Fb") {
            assert!(
                read.texts.iter().any(|t| t == "<script>"),
                "{:?}",
                read.texts
            );
            assert!(read.texts.iter().any(|t| t == "]](x)"), "{:?}", read.texts);
        }
    }
    assert!(
        sweeps[0].charts[0].alt.contains("&lt;b&gt;"),
        "{}",
        sweeps[0].charts[0].alt
    );
}

#[test]
fn values_no_axis_can_hold_are_shown_in_the_table_not_drawn() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    let m = |v: f64| Metric::new("iops", v, "IOPS", Direction::Higher).headline();
    let l = |v: f64| Metric::new("lat", v, "s", Direction::Lower).headline();
    let r = results(vec![
        instance(t, "x", ("qd", "1"), vec![m(100.0), l(0.001)]),
        instance(t, "x", ("qd", "2"), vec![m(f64::MAX), l(0.002)]),
        instance(t, "x", ("qd", "4"), vec![m(300.0), l(1e308)]),
        instance(t, "x", ("qd", "8"), vec![m(400.0), l(0.008)]),
    ]);
    let d = dir("extreme");
    let sweeps = write_sweeps(&r, &d.0);
    let x = sweep(&sweeps, "x");
    assert_eq!(x.rows[0].cells[1], "1.798e308 IOPS");
    let bars = chart(&d, x, "x-iops.svg");
    assert_eq!(bars.bars.len(), 3);
    assert!(bars.y_span.is_finite() && bars.y_span < 1000.0);
    assert!(bars.texts.iter().any(|t| t == "n/a"));
    let curve = chart(&d, x, "x-iops-vs-lat.svg");
    // Points qd=2 and qd=4 hold a value no axis can span: left out.
    assert_eq!(curve.points.len(), 2);
    assert!(
        curve
            .points
            .iter()
            .all(|p| p[0].is_finite() && p[1].is_finite())
    );
}

/// Sweeps of `stage` over `axis` with one bandwidth and one latency per point.
fn bandwidth_sweep(
    template: &StageRecord,
    stage: &str,
    axis: &str,
    points: &[(&str, f64, f64)],
) -> Vec<StageRecord> {
    points
        .iter()
        .map(|(p, bw, lat)| {
            instance(
                template,
                stage,
                (axis, p),
                vec![
                    Metric::new("bandwidth", *bw, "MiB/s", Direction::Higher).headline(),
                    Metric::new("latency_avg", *lat, "s", Direction::Lower).headline(),
                ],
            )
        })
        .collect()
}

fn svg(dir: &Dir, file: &str) -> String {
    std::fs::read_to_string(dir.0.join("charts").join(file)).unwrap()
}

#[test]
fn two_categories_get_the_table_and_a_note_not_charts() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    let r = results(bandwidth_sweep(
        t,
        "rados",
        "mode",
        &[("seq", 900.0, 0.06), ("rand", 1500.0, 0.04)],
    ));
    let d = dir("two-categories");
    let sweeps = write_sweeps(&r, &d.0);
    let rados = sweep(&sweeps, "rados");
    assert_eq!(rados.rows[0].cells, ["900 MiB/s", "1.465 GiB/s"]);
    assert!(rados.charts.is_empty(), "{:?}", rados.charts);
    assert!(
        rados.notes[0].reason.contains("two categories"),
        "{:?}",
        rados.notes
    );
    assert!(
        !d.0.join("charts").exists()
            || std::fs::read_dir(d.0.join("charts"))
                .unwrap()
                .next()
                .is_none()
    );
    // Two numeric points are a sweep still: bars of each metric and a curve.
    let r = results(bandwidth_sweep(
        t,
        "rados",
        "threads",
        &[("1", 900.0, 0.06), ("16", 1500.0, 0.04)],
    ));
    let d = dir("two-numbers");
    let sweeps = write_sweeps(&r, &d.0);
    assert_eq!(sweep(&sweeps, "rados").charts.len(), 3);
}

#[test]
fn a_curve_joins_the_steps_of_a_numeric_sweep_and_never_categories() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    let modes = [
        ("seq", 900.0, 0.06),
        ("rand", 1500.0, 0.04),
        ("mixed", 700.0, 0.09),
    ];
    let depths = [
        ("1", 100.0, 0.001),
        ("8", 700.0, 0.004),
        ("64", 900.0, 0.03),
    ];
    let r = results(
        [
            bandwidth_sweep(t, "modes", "mode", &modes),
            bandwidth_sweep(t, "depths", "iodepth", &depths),
        ]
        .concat(),
    );
    let d = dir("curves");
    write_sweeps(&r, &d.0);
    let modes = svg(&d, "modes-bandwidth-vs-latency_avg.svg");
    assert!(!modes.contains("<polyline"), "{modes}");
    assert_eq!(modes.matches("<circle").count(), 3);
    let depths = svg(&d, "depths-bandwidth-vs-latency_avg.svg");
    assert_eq!(depths.matches("<polyline").count(), 1, "{depths}");
}

#[test]
fn bars_far_below_the_shared_scale_get_a_scale_of_their_own() {
    let smoke: RunResults = serde_json::from_str(SMOKE).unwrap();
    let t = &smoke.stages[0];
    // As in the report that showed the defect: rbd bench at 8.4 and 39 MiB/s
    // beside a rados read sweep at up to 2 GiB/s.
    let r = results(
        [
            bandwidth_sweep(
                t,
                "rados-read",
                "threads",
                &[
                    ("1", 400.0, 0.01),
                    ("4", 1200.0, 0.02),
                    ("16", 2048.0, 0.03),
                ],
            ),
            bandwidth_sweep(
                t,
                "rbd-bench",
                "io_size",
                &[
                    ("4096", 8.4, 0.002),
                    ("16384", 20.0, 0.003),
                    ("65536", 39.0, 0.004),
                ],
            ),
            bandwidth_sweep(
                t,
                "rados-write",
                "threads",
                &[("1", 300.0, 0.01), ("4", 700.0, 0.02), ("16", 900.0, 0.03)],
            ),
        ]
        .concat(),
    );
    let d = dir("scales");
    let sweeps = write_sweeps(&r, &d.0);
    let small = chart(&d, sweep(&sweeps, "rbd-bench"), "rbd-bench-bandwidth.svg");
    assert!(
        small.y_span >= 39.0 * MIB && small.y_span < 100.0 * MIB,
        "{}",
        small.y_span
    );
    assert!(close(small.bars[0].value, 8.4 * MIB, small.y_span));
    // Within a tenth of each other, sweeps keep the one scale.
    let read = chart(&d, sweep(&sweeps, "rados-read"), "rados-read-bandwidth.svg");
    let write = chart(
        &d,
        sweep(&sweeps, "rados-write"),
        "rados-write-bandwidth.svg",
    );
    assert_eq!(read.y_span, write.y_span);
}
