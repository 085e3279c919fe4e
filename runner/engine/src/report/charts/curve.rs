//! Throughput against latency, one labelled point per matrix point, joined
//! in the sweep's order when the sweep's axis is numeric: the "hockey
//! stick" (where more load stops buying throughput and only adds latency).
//! Points of a categorical axis (`seq`, `rand`) are not joined: no line
//! runs between modes as if one were a step towards the other. Same frame
//! and helpers as the line charts of [`super::svg`].

use std::fmt::Write as _;

use super::axis::Axis;
use super::svg::{
    Area, BOTTOM, PLOT_HEIGHT, TOP, colour, escape, num, open, shorten, x_axis, y_axis,
};

const MAX_POINT_LABEL: usize = 32;

pub struct Curve<'a> {
    pub title: &'a str,
    pub x: &'a Axis,
    pub y: &'a Axis,
    /// The metrics on the axes (their units are added).
    pub x_name: &'a str,
    pub y_name: &'a str,
    /// `(label, [x, y])` in base units, in the order to join them.
    pub points: &'a [(String, [f64; 2])],
    /// Whether the points are steps of a numeric sweep (then joined by a line).
    pub joined: bool,
}

pub fn render(c: &Curve) -> String {
    let area = Area::standard();
    let mut s = String::new();
    open(&mut s, c.title, TOP + PLOT_HEIGHT + BOTTOM);
    y_axis(&mut s, c.y, &area, c.y_name);
    x_axis(&mut s, c.x, &area, c.x_name);
    let at = |p: &[f64; 2]| (area.px(c.x, p[0]), area.py(c.y, p[1]));
    let _ = writeln!(
        s,
        r#"<g class="curve" {} fill="none" stroke-width="1.6" stroke-linejoin="round">"#,
        area.data_attributes(Some(c.x), c.y)
    );
    let pts: Vec<String> = c
        .points
        .iter()
        .map(|(_, p)| {
            let (x, y) = at(p);
            format!("{},{}", num(x), num(y))
        })
        .collect();
    if c.joined {
        let _ = writeln!(
            s,
            r#"<polyline stroke="{}" points="{}"/>"#,
            colour(0),
            pts.join(" ")
        );
    }
    for (label, p) in c.points {
        let (x, y) = at(p);
        let _ = writeln!(
            s,
            r#"<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}</title></circle>"#,
            num(x),
            num(y),
            colour(0),
            escape(label)
        );
    }
    s.push_str("</g>\n");
    s.push_str(r##"<g fill="#222" font-size="10">"##);
    s.push('\n');
    for (label, p) in c.points {
        let (x, y) = at(p);
        // Labels of points in the right third go to their left.
        let right = x > area.left + area.width * 2.0 / 3.0;
        let _ = writeln!(
            s,
            r#"<text class="point-label" x="{}" y="{}" text-anchor="{}">{}</text>"#,
            num(if right { x - 6.0 } else { x + 6.0 }),
            num(y - 6.0),
            if right { "end" } else { "start" },
            escape(&shorten(label, MAX_POINT_LABEL))
        );
    }
    s.push_str("</g>\n</svg>\n");
    s
}

/// An axis for the curve: from zero (throughput and latency start there)
/// to the largest value.
pub fn curve_axis(values: impl IntoIterator<Item = f64>, unit: &str) -> Axis {
    super::bars::bar_axis(values, unit)
}
