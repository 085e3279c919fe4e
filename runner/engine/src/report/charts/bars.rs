//! Grouped bars as a self-contained SVG (the same frame, axes, colours and
//! escaping as the line charts of [`super::svg`]): one group per category
//! (a matrix point, a stage), one bar per series (labels, or baseline and
//! candidate), each bar optionally marked with a short text (a change).

use std::fmt::Write as _;

use super::axis::Axis;
use super::svg::{
    Area, BOTTOM, LEGEND_ROW, PLOT_HEIGHT, TOP, colour, draw_legend, escape, legend_rows, num,
    open, y_axis,
};
use crate::report::format_value;

/// Bars narrower than this carry no value text (it would not fit).
const VALUE_TEXT_FROM: f64 = 56.0;
const MAX_BAR: f64 = 110.0;
/// Slanted group names are cut to this many characters.
const MAX_SLANTED: usize = 28;
/// Red for a change for the worse, green for the better, grey otherwise.
pub const BAD: &str = "#C00000";
pub const GOOD: &str = "#007A3D";
pub const NEUTRAL: &str = "#555555";

/// A text drawn above a bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub text: String,
    pub colour: &'static str,
}

/// One bar per group (`None`: no bar there), in base units.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    pub label: String,
    pub values: Vec<Option<f64>>,
    /// Parallel to `values` (shorter is fine: no mark).
    pub marks: Vec<Option<Mark>>,
}

pub struct Bars<'a> {
    pub title: &'a str,
    /// The categories along x.
    pub groups: &'a [String],
    /// What the categories are (e.g. `pool`), under the axis.
    pub x_name: &'a str,
    /// What the values are (e.g. the metric), beside the y unit.
    pub y_name: &'a str,
    pub series: &'a [BarSeries],
    /// Must hold zero and every value.
    pub y: &'a Axis,
    /// The base unit of the values, for the value texts.
    pub unit: &'a str,
}

/// The y axis for bars of `values` (base units of `unit`): it holds zero,
/// since a bar's length is its value.
pub fn bar_axis(values: impl IntoIterator<Item = f64>, unit: &str) -> Axis {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| drawable(*v))
        .fold((0f64, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    super::axis::axis(lo, hi, unit)
}

/// Whether a bar can show `v`: beyond [`super::axis::LARGEST`] an axis
/// span would overflow, so such a value is `n/a` in the chart (the table
/// still shows it).
pub fn drawable(v: f64) -> bool {
    v.is_finite() && v.abs() <= super::axis::LARGEST
}

/// `text` cut to `max` characters in the middle: names of stage instances
/// differ at their end (`disk (target=/tmp, test=dd-read)`) as often as at
/// their start.
fn shorten_middle(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max || max < 3 {
        return text.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// The grouped bar chart as SVG: the y axis, the group names under their
/// groups (slanted when they do not fit), the bars with their values and
/// marks above them, and the legend.
pub fn render(b: &Bars) -> String {
    let area = Area::standard();
    let labels: Vec<&str> = b.series.iter().map(|s| s.label.as_str()).collect();
    let legend = legend_rows(&labels);
    let layout = Layout::of(b, &area);
    let height = TOP + PLOT_HEIGHT + BOTTOM + layout.slant_room + LEGEND_ROW * legend.len() as f64;
    let mut s = String::new();
    open(&mut s, b.title, height);
    y_axis(&mut s, b.y, &area, b.y_name);
    group_names(&mut s, b, &area, &layout);
    let _ = writeln!(s, r#"<g class="bars" {}>"#, area.data_attributes(None, b.y));
    let mut texts = String::new();
    for (j, series) in b.series.iter().enumerate() {
        for (g, value) in series.values.iter().enumerate() {
            bar(
                &mut s,
                &mut texts,
                b,
                &area,
                &layout,
                (j, series),
                (g, *value),
            );
        }
    }
    s.push_str("</g>\n");
    s.push_str(&texts);
    draw_legend(
        &mut s,
        &legend,
        TOP + PLOT_HEIGHT + BOTTOM + layout.slant_room,
    );
    s.push_str("</svg>\n");
    s
}

/// Where a bar chart's groups and bars go.
struct Layout {
    group_width: f64,
    /// Characters of a group name that fit under its group.
    room: usize,
    /// Group names do not fit: they are slanted, and take `slant_room`.
    slant: bool,
    slant_room: f64,
    bar_width: f64,
    /// From a group's left edge to its first bar.
    inset: f64,
    /// The y of 0 (or of the axis end nearest it).
    zero: f64,
    /// The y of the plot's bottom edge.
    bottom: f64,
}

impl Layout {
    fn of(b: &Bars, area: &Area) -> Self {
        let groups = b.groups.len().max(1) as f64;
        let group_width = area.width / groups;
        // Group names that do not fit under their group are slanted, and the
        // chart grows by the room they take.
        let room = ((group_width / 6.5) as usize).max(4);
        let longest = b
            .groups
            .iter()
            .map(|g| g.chars().count())
            .max()
            .unwrap_or(0);
        let slant = longest > room;
        let slant_room = if slant {
            (longest.min(MAX_SLANTED) as f64 * 6.5 * 0.5).ceil()
        } else {
            0.0
        };
        let bars = b.series.len().max(1) as f64;
        // Wide bars read as heavier, not clearer: at most MAX_BAR, centred.
        let bar_width = (group_width * 0.8 / bars).min(MAX_BAR);
        Layout {
            group_width,
            room,
            slant,
            slant_room,
            bar_width,
            inset: (group_width - bar_width * bars) / 2.0,
            zero: area.py(b.y, 0.0f64.clamp(b.y.min, b.y.max)),
            bottom: area.top + area.height,
        }
    }
}

/// Each group's name under it, and the x axis's name.
fn group_names(s: &mut String, b: &Bars, area: &Area, layout: &Layout) {
    let Layout {
        group_width,
        room,
        slant,
        slant_room,
        bottom,
        ..
    } = *layout;
    s.push_str(r##"<g fill="#333" text-anchor="middle">"##);
    s.push('\n');
    for (g, name) in b.groups.iter().enumerate() {
        let x = num(area.left + group_width * (g as f64 + 0.5));
        if slant {
            let _ = writeln!(
                s,
                r#"<text transform="translate({x} {}) rotate(-30)" text-anchor="end">{}</text>"#,
                num(bottom + 14.0),
                escape(&shorten_middle(name, MAX_SLANTED))
            );
        } else {
            let _ = writeln!(
                s,
                r#"<text x="{x}" y="{}">{}</text>"#,
                num(bottom + 16.0),
                escape(&shorten_middle(name, room))
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">{}</text>"#,
        num(area.left + area.width / 2.0),
        num(bottom + 34.0 + slant_room),
        escape(b.x_name)
    );
    s.push_str("</g>\n");
}

/// Series `j`'s bar in group `g` into `s`; its value and mark (or `n/a`
/// when it has none it can draw) into `texts`, drawn over every bar.
fn bar(
    s: &mut String,
    texts: &mut String,
    b: &Bars,
    area: &Area,
    layout: &Layout,
    (j, series): (usize, &BarSeries),
    (g, value): (usize, Option<f64>),
) {
    let Layout {
        group_width,
        bar_width,
        inset,
        zero,
        ..
    } = *layout;
    let x = area.left + group_width * g as f64 + inset + bar_width * j as f64;
    let centre = num(x + bar_width / 2.0);
    let Some(v) = value.filter(|v| drawable(*v)) else {
        let _ = writeln!(
            texts,
            r##"<text x="{centre}" y="{}" fill="#888" font-size="9" text-anchor="middle">n/a</text>"##,
            num(zero - 3.0)
        );
        return;
    };
    let top = area.py(b.y, v);
    let (y, h) = if top <= zero {
        (top, zero - top)
    } else {
        (zero, top - zero)
    };
    let shown = format_value(v, b.unit);
    let _ = writeln!(
        s,
        r#"<rect class="bar" data-group="{g}" data-series="{j}" x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
        num(x + 1.0),
        num(y),
        num((bar_width - 2.0).max(1.0)),
        num(h),
        colour(j),
        escape(&format!(
            "{}{}: {shown}",
            b.groups.get(g).map(String::as_str).unwrap_or_default(),
            if series.label.is_empty() {
                String::new()
            } else {
                format!(", {}", series.label)
            }
        ))
    );
    let mut above = y - 3.0;
    if bar_width >= VALUE_TEXT_FROM {
        let _ = writeln!(
            texts,
            r##"<text x="{centre}" y="{}" fill="#222" font-size="9" text-anchor="middle">{}</text>"##,
            num(above),
            escape(&shown)
        );
        above -= 11.0;
    }
    if let Some(Some(mark)) = series.marks.get(g) {
        let _ = writeln!(
            texts,
            r#"<text class="mark" x="{centre}" y="{}" fill="{}" font-size="10" font-weight="bold" text-anchor="middle">{}</text>"#,
            num(above),
            mark.colour,
            escape(&mark.text)
        );
    }
}
