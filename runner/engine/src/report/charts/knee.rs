//! A searched stage's curve (`search:`): the SLO latency (p99, say) and the
//! median of each step over the rate it achieved, the SLO as a dashed line,
//! the knee as a vertical one. Passed steps are filled dots, failed ones
//! hollow red rings; a latency far above the SLO (a queue that grew all
//! step long) is drawn at the top edge with its value written beside it,
//! so one runaway step does not flatten the rest of the curve.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use pipeline_model::{Labels, Metric};

use super::axis::{Axis, axis, to_base};
use super::curve::curve_axis;
use super::svg::{Area, BOTTOM, PLOT_HEIGHT, TOP, colour, escape, num, open, x_axis, y_axis};
use crate::knee::curve::STEP_LABEL;
use crate::report::format_value;

/// The y axis reaches at most this many times the SLO's limit.
const Y_LIMIT_OVER_SLO: f64 = 4.0;
const FAILED: &str = "#C0392B";

/// One step as drawn, in base units (rate, seconds).
#[derive(Debug, Clone, PartialEq)]
struct Point {
    achieved: f64,
    slo: Option<f64>,
    median: Option<f64>,
    passed: bool,
    target: f64,
}

/// One search's figures, from a stage's metrics.
struct Search {
    /// Labels other than the step's (a repetition's, say): one chart each.
    labels: Labels,
    points: Vec<Point>,
    rate_unit: String,
    latency_unit: String,
    slo_metric: String,
    limit: f64,
    knee: Option<f64>,
}

fn without_step(labels: &Labels) -> Labels {
    let mut l = labels.clone();
    l.remove(STEP_LABEL);
    l
}

fn searches(metrics: &[Metric]) -> Vec<Search> {
    let mut by: BTreeMap<Labels, BTreeMap<String, BTreeMap<&str, &Metric>>> = BTreeMap::new();
    for m in metrics {
        let Some(step) = m.labels.get(STEP_LABEL) else {
            continue;
        };
        by.entry(without_step(&m.labels))
            .or_default()
            .entry(step.clone())
            .or_default()
            .insert(m.name.as_str(), m);
    }
    let mut out = Vec::new();
    for (labels, steps) in by {
        // The limit and the knee carry the search's labels and the SLO
        // metric's name (label `metric`), never a step.
        let same = |m: &&Metric| {
            let mut l = m.labels.clone();
            l.remove("metric");
            l == labels
        };
        let Some(limit) = metrics
            .iter()
            .filter(same)
            .find(|m| m.name == "search_slo_limit")
        else {
            continue;
        };
        let knee = metrics.iter().filter(same).find(|m| m.name == "knee");
        let (lat_base, lat_factor) = to_base(&limit.unit);
        let mut rate_unit = String::new();
        let mut rate_factor = 1.0;
        let mut points = Vec::new();
        for figures in steps.values() {
            let (Some(target), Some(achieved)) = (
                figures.get("search_target_rate"),
                figures.get("search_achieved_rate"),
            ) else {
                continue;
            };
            let (base, factor) = to_base(&achieved.unit);
            (rate_unit, rate_factor) = (base, factor);
            let latency = |name: &str| {
                figures
                    .get(name)
                    .map(|m| m.value * to_base(&m.unit).1)
                    .filter(|v| v.is_finite())
            };
            points.push(Point {
                achieved: achieved.value * factor,
                slo: latency("search_slo_latency"),
                median: latency("search_latency_p50"),
                passed: figures.get("search_passed").is_some_and(|m| m.value > 0.5),
                target: target.value * factor,
            });
        }
        if points.is_empty() {
            continue;
        }
        points.sort_by(|a, b| a.target.total_cmp(&b.target));
        out.push(Search {
            labels,
            points,
            rate_unit,
            latency_unit: lat_base,
            slo_metric: limit.labels.get("metric").cloned().unwrap_or_default(),
            limit: limit.value * lat_factor,
            knee: knee.map(|k| k.value * rate_factor),
        });
    }
    out
}

/// `(file stem, title, SVG)` of each search of a stage's metrics.
pub fn charts(metrics: &[Metric]) -> Vec<(String, String, String)> {
    searches(metrics)
        .iter()
        .map(|s| {
            let suffix: String = s.labels.iter().map(|(k, v)| format!(" {k}={v}")).collect();
            let stem = format!("knee{}", suffix.replace([' ', '='], "-").replace("--", "-"));
            // Every step held (the rate reached `max`): the knee is a lower bound.
            let bound = if s.points.iter().all(|p| p.passed) {
                "≥ "
            } else {
                ""
            };
            let title = match s.knee {
                Some(k) => format!(
                    "knee {bound}{}: {} under {}{suffix}",
                    format_value(k, &s.rate_unit),
                    s.slo_metric,
                    format_value(s.limit, &s.latency_unit)
                ),
                None => format!(
                    "no knee: {} never under {}{suffix}",
                    s.slo_metric,
                    format_value(s.limit, &s.latency_unit)
                ),
            };
            (stem, title.clone(), render(s, &title))
        })
        .collect()
}

fn render(s: &Search, title: &str) -> String {
    let area = Area::standard();
    let x: Axis = curve_axis(s.points.iter().map(|p| p.achieved), &s.rate_unit);
    let highest = s
        .points
        .iter()
        .flat_map(|p| [p.slo, p.median])
        .flatten()
        .fold(s.limit, f64::max);
    let top = highest.min(s.limit * Y_LIMIT_OVER_SLO);
    let y = axis(0.0, top * 1.05, &s.latency_unit);
    let mut out = String::new();
    // One legend row under the x axis's name.
    open(&mut out, title, TOP + PLOT_HEIGHT + BOTTOM + 18.0);
    y_axis(&mut out, &y, &area, "latency");
    x_axis(&mut out, &x, &area, "achieved rate");
    let px = |v: f64| area.px(&x, v);
    // Above the axis: drawn at its top, the value written beside.
    let py = |v: f64| area.py(&y, v.min(y.max));
    let _ = writeln!(
        out,
        r#"<g class="knee-curve" {} fill="none" stroke-width="1.6" stroke-linejoin="round">"#,
        area.data_attributes(Some(&x), &y)
    );
    // The SLO.
    let slo_y = py(s.limit);
    let _ = writeln!(
        out,
        r##"<line class="slo" x1="{}" y1="{}" x2="{}" y2="{}" stroke="{FAILED}" stroke-dasharray="6 4"/>"##,
        num(area.left),
        num(slo_y),
        num(area.left + area.width),
        num(slo_y)
    );
    // The knee, at the rate its step achieved.
    let knee_x = s.knee.and_then(|k| {
        s.points
            .iter()
            .find(|p| p.passed && p.target == k)
            .map(|p| px(p.achieved))
    });
    if let Some(kx) = knee_x {
        let _ = writeln!(
            out,
            r##"<line class="knee" x1="{}" y1="{}" x2="{}" y2="{}" stroke="#222" stroke-dasharray="2 3"/>"##,
            num(kx),
            num(area.top),
            num(kx),
            num(area.top + area.height)
        );
    }
    for (i, pick) in [|p: &Point| p.slo, |p: &Point| p.median].iter().enumerate() {
        let pts: Vec<String> = s
            .points
            .iter()
            .filter_map(|p| pick(p).map(|v| format!("{},{}", num(px(p.achieved)), num(py(v)))))
            .collect();
        let dashed = if i == 1 {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<polyline stroke="{}"{dashed} points="{}"/>"#,
            colour(i),
            pts.join(" ")
        );
    }
    for p in &s.points {
        for (i, v) in [(0, p.slo), (1, p.median)] {
            let Some(v) = v else { continue };
            let (cx, cy) = (px(p.achieved), py(v));
            let what = if i == 0 { s.slo_metric.as_str() } else { "p50" };
            let tip = format!(
                "target {}, achieved {}: {what} {} ({})",
                format_value(p.target, &s.rate_unit),
                format_value(p.achieved, &s.rate_unit),
                format_value(v, &s.latency_unit),
                if p.passed { "passed" } else { "failed" }
            );
            let (fill, stroke) = if p.passed {
                (colour(i), colour(i))
            } else {
                ("#ffffff", FAILED)
            };
            let _ = writeln!(
                out,
                r#"<circle class="{}" cx="{}" cy="{}" r="3.5" fill="{fill}" stroke="{stroke}"><title>{}</title></circle>"#,
                if p.passed { "passed" } else { "failed" },
                num(cx),
                num(cy),
                escape(&tip)
            );
        }
    }
    out.push_str("</g>\n");
    out.push_str(r##"<g fill="#222" font-size="10">"##);
    out.push('\n');
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="end" fill="{FAILED}">SLO {} &lt; {}</text>"#,
        num(area.left + area.width - 4.0),
        num(slo_y - 4.0),
        escape(&s.slo_metric),
        escape(&format_value(s.limit, &s.latency_unit))
    );
    // The knee's label halfway up its line, on its left: the top is the
    // off-scale values', the bottom the medians'.
    if let (Some(kx), Some(k)) = (knee_x, s.knee) {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">knee {}</text>"#,
            num(kx - 4.0),
            num(area.top + area.height / 2.0),
            escape(&format_value(k, &s.rate_unit))
        );
    }
    // Off-scale values one under the other: failed steps often achieve
    // the same rate (the most the system gives), their labels would overlap.
    let off_scale = s
        .points
        .iter()
        .filter_map(|p| p.slo.filter(|v| *v > y.max).map(|v| (p, v)));
    for (i, (p, v)) in off_scale.enumerate() {
        let _ = writeln!(
            out,
            r#"<text class="off-scale" x="{}" y="{}" text-anchor="end">↑ {} at {}</text>"#,
            num(px(p.achieved) - 6.0),
            num(area.top + 10.0 + 12.0 * i as f64),
            escape(&format_value(v, &s.latency_unit)),
            escape(&format_value(p.target, &s.rate_unit))
        );
    }
    out.push_str("</g>\n");
    // The legend: the two lines, and what the marks mean.
    let ly = TOP + PLOT_HEIGHT + BOTTOM + 6.0;
    let mut lx = area.left;
    for (i, text) in [(0, s.slo_metric.clone()), (1, "p50".to_string())] {
        let dashed = if i == 1 {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{dashed}/><text x="{}" y="{}" fill="#333">{}</text>"##,
            num(lx),
            num(ly),
            num(lx + 18.0),
            num(ly),
            colour(i),
            num(lx + 22.0),
            num(ly + 4.0),
            escape(&text)
        );
        lx += 28.0 + 6.5 * text.chars().count() as f64;
    }
    let _ = writeln!(
        out,
        r##"<circle cx="{}" cy="{}" r="3.5" fill="#ffffff" stroke="{FAILED}"/><text x="{}" y="{}" fill="#333">failed step (SLO broken or behind schedule)</text>"##,
        num(lx + 4.0),
        num(ly),
        num(lx + 12.0),
        num(ly + 4.0)
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::{Direction, unit};

    fn m(name: &str, value: f64, unit: &str, labels: &[(&str, &str)]) -> Metric {
        let mut m = Metric::new(name.to_string(), value, unit, Direction::None);
        for (k, v) in labels {
            m = m.label(*k, *v);
        }
        m
    }

    /// A search's record as `knee::curve` writes it: three steps, the
    /// third broke the SLO with a latency far above it.
    fn record() -> Vec<Metric> {
        let mut out = Vec::new();
        for (step, target, achieved, p99, p50, passed) in [
            ("1", 100.0, 99.0, 4000.0, 1500.0, 1.0),
            ("2", 200.0, 201.0, 9000.0, 2500.0, 1.0),
            ("3", 400.0, 310.0, 900_000.0, 300_000.0, 0.0),
        ] {
            let l = [(STEP_LABEL, step)];
            out.push(m("search_target_rate", target, unit::OPS_PER_S, &l));
            out.push(m("search_achieved_rate", achieved, unit::OPS_PER_S, &l));
            out.push(m("search_slo_latency", p99, unit::MICROSECONDS, &l));
            out.push(m("search_latency_p50", p50, unit::MICROSECONDS, &l));
            out.push(m("search_passed", passed, unit::COUNT, &l));
        }
        out.push(m(
            "search_slo_limit",
            20_000.0,
            unit::MICROSECONDS,
            &[("metric", "latency_p99")],
        ));
        out.push(m("knee", 200.0, unit::OPS_PER_S, &[]));
        out
    }

    #[test]
    fn the_curve_its_slo_and_its_knee() {
        let charts = charts(&record());
        assert_eq!(charts.len(), 1);
        let (stem, title, svg) = &charts[0];
        assert_eq!(stem, "knee");
        assert_eq!(title, "knee 200 ops/s: latency_p99 under 20 ms");
        assert_eq!(svg.matches(r#"class="passed""#).count(), 4, "{svg}");
        assert_eq!(svg.matches(r#"class="failed""#).count(), 2, "{svg}");
        assert!(svg.contains(r#"class="slo""#) && svg.contains(r#"class="knee""#));
        // The runaway step is at the top edge, its value written: the axis
        // stops at 4x the SLO, so the passed steps keep their height.
        assert!(svg.contains("↑ 900 ms at 400 ops/s"), "{svg}");
        let y_max: f64 = svg
            .split("data-y-max=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(y_max <= 0.1, "{y_max}");
        // A search whose every step held (it reached `max`) has a knee of at least that.
        let held: Vec<Metric> = record()
            .into_iter()
            .filter(|m| m.labels.get(STEP_LABEL).map(String::as_str) != Some("3"))
            .collect();
        assert_eq!(
            super::charts(&held)[0].1,
            "knee ≥ 200 ops/s: latency_p99 under 20 ms"
        );
        // The knee's line is at the rate its step achieved.
        let s = &searches(&record())[0];
        assert_eq!(s.knee, Some(200.0));
        assert_eq!(
            s.points.iter().map(|p| p.passed).collect::<Vec<_>>(),
            [true, true, false]
        );
    }

    #[test]
    fn hostile_names_are_escaped_and_no_steps_draw_nothing() {
        let mut r = record();
        for x in &mut r {
            if x.name == "search_slo_limit" {
                x.labels.insert("metric".into(), "<script>".into());
            }
        }
        let svg = &charts(&r)[0].2;
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;"));
        assert!(charts(&[m("knee", 1.0, unit::OPS_PER_S, &[])]).is_empty());
    }
}
