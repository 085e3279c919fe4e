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
    let bw = chart(&d, rados, "rados-read-bandwidth.svg");
    let want = [914.974 * MIB, 1563.03 * MIB];
    assert_eq!(bw.bars.len(), 2);
    for (bar, want) in bw.bars.iter().zip(want) {
        assert!(close(bar.value, want, bw.y_span), "{bar:?} {want}");
    }
    assert!(bw.texts.iter().any(|t| t == "seq") && bw.texts.iter().any(|t| t == "rand"));
    assert!(
        bw.texts.iter().any(|t| t == "bandwidth (GiB/s)"),
        "{:?}",
        bw.texts
    );
    // The hockey stick: bandwidth along x, latency up, one point per mode.
    let curve = chart(&d, rados, "rados-read-bandwidth-vs-latency_avg.svg");
    assert_eq!(curve.points.len(), 2);
    for (p, want) in curve
        .points
        .iter()
        .zip([[914.974 * MIB, 0.0612598], [1563.03 * MIB, 0.0389692]])
    {
        assert!(close(p[1], want[1], curve.y_span), "{p:?} {want:?}");
        assert!(
            (p[0] - want[0]).abs() <= curve.x_span / 618.0 * 0.06,
            "{p:?}"
        );
    }
    assert!(curve.texts.iter().any(|t| t == "latency_avg (ms)"));
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
    assert!(fio.notes.is_empty(), "{:?}", fio.notes);
    let bars = chart(&d, fio, "fio-rbd-iops.svg");
    assert!(close(bars.bars[1].value, 12957.136317, bars.y_span));
    let curve = chart(&d, fio, "fio-rbd-bandwidth-vs-clat_mean.svg");
    assert_eq!(curve.points.len(), 2);
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
        instance(t, "seq-read", pools, reps(&bw, [900.0, 1000.0, 950.0])),
        instance(t, "seq-read", ec, reps(&bw, [700.0, 710.0, 720.0])),
    ]);
    let d = dir("reps");
    let sweeps = write_sweeps(&r, &d.0);
    let write = sweep(&sweeps, "write");
    assert!(write.medians);
    assert_eq!(write.points, ["replica3", "ec21"]);
    assert_eq!(write.rows[0].cells, ["120 MiB/s", "70 MiB/s"]);
    assert_eq!(write.rows[1].cells, ["200 ms", "450 ms"]);
    let bars = chart(&d, write, "write-bandwidth.svg");
    for (bar, want) in bars.bars.iter().zip([120.0 * MIB, 70.0 * MIB]) {
        assert!(close(bar.value, want, bars.y_span), "{bar:?}");
    }
    let read = chart(&d, sweep(&sweeps, "seq-read"), "seq-read-bandwidth.svg");
    // The same y scale as the write bars: they compare at a glance.
    assert_eq!(read.y_span, bars.y_span);
    assert!(read.y_span >= 950.0 * MIB);
    let curve = chart(&d, write, "write-bandwidth-vs-latency_avg.svg");
    assert_eq!(curve.points.len(), 2);
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
        assert_eq!(read.bars.len(), 2);
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
