//! One line chart as a self-contained SVG: no script, no external reference,
//! generic font families only, so it shows the same in a browser, on GitHub
//! and in any Markdown viewer. Text is XML-escaped; long series are reduced
//! to the lowest and highest point per pixel column before drawing.

use std::fmt::Write as _;

use super::axis::Axis;

pub const WIDTH: f64 = 720.0;
pub(super) const LEFT: f64 = 78.0;
pub(super) const RIGHT: f64 = 24.0;
pub(super) const TOP: f64 = 34.0;
pub(super) const PLOT_HEIGHT: f64 = 200.0;
pub(super) const BOTTOM: f64 = 44.0;
pub(super) const LEGEND_ROW: f64 = 18.0;
/// Above this many points, a line is drawn without a dot per point.
const MARKERS_UP_TO: usize = 60;
const MAX_TITLE: usize = 90;
const MAX_LEGEND: usize = 60;

/// Colour-blind-safe (Okabe-Ito), dark enough on white.
pub(super) const COLOURS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// A line to draw: its legend text and its `[t, v]` points in base units,
/// sorted by `t`; a non-finite `v` is a gap.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub points: Vec<[f64; 2]>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x: &'a Axis,
    pub y: &'a Axis,
    /// What the x axis shows (`time`); its unit is added.
    pub x_name: &'a str,
    pub lines: &'a [Line],
    /// Points to ring in red (e.g. where a regression gate fired).
    pub rings: &'a [[f64; 2]],
}

/// The plot area in pixels.
pub(super) struct Area {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
}

impl Area {
    /// The plot area every chart kind uses.
    pub(super) fn standard() -> Area {
        Area {
            left: LEFT,
            top: TOP,
            width: WIDTH - LEFT - RIGHT,
            height: PLOT_HEIGHT,
        }
    }
    pub(super) fn px(&self, x: &Axis, t: f64) -> f64 {
        self.left + self.width * (t - x.min) / (x.max - x.min)
    }
    pub(super) fn py(&self, y: &Axis, v: f64) -> f64 {
        self.top + self.height * (1.0 - (v - y.min) / (y.max - y.min))
    }
    /// `data-plot` and the data domain, so a reader (or a test) can map a
    /// mark back to its value.
    pub(super) fn data_attributes(&self, x: Option<&Axis>, y: &Axis) -> String {
        let mut out = format!(
            r#"data-plot="{} {} {} {}""#,
            self.left, self.top, self.width, self.height
        );
        if let Some(x) = x {
            let _ = write!(out, r#" data-x-min="{}" data-x-max="{}""#, x.min, x.max);
        }
        let _ = write!(out, r#" data-y-min="{}" data-y-max="{}""#, y.min, y.max);
        out
    }
}

/// The opening of a chart `height` pixels high: the root element, the
/// title (also as `<title>`, which viewers show) and a white background.
pub(super) fn open(s: &mut String, title: &str, height: f64) {
    let title = escape(&shorten(title, MAX_TITLE));
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, Helvetica, sans-serif" font-size="11">"#,
        w = WIDTH,
        h = height,
    );
    let _ = writeln!(s, "<title>{title}</title>");
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="20" font-size="14" font-weight="bold" fill="#222">{title}</text>"##,
        LEFT
    );
}

pub fn render(chart: &Chart) -> String {
    let area = Area::standard();
    let labels: Vec<&str> = chart.lines.iter().map(|l| l.label.as_str()).collect();
    let legend = legend_rows(&labels);
    let height = TOP + PLOT_HEIGHT + BOTTOM + LEGEND_ROW * legend.len() as f64;
    let mut s = String::new();
    open(&mut s, chart.title, height);
    y_axis(&mut s, chart.y, &area, "");
    x_axis(&mut s, chart.x, &area, chart.x_name);
    // The plot area (left top width height) and the data domain travel with
    // the picture, so a reader (or a test) can map a vertex back to its point.
    let _ = writeln!(
        s,
        r#"<g class="lines" {} fill="none" stroke-width="1.6" stroke-linejoin="round" stroke-linecap="round">"#,
        area.data_attributes(Some(chart.x), chart.y)
    );
    for (i, line) in chart.lines.iter().enumerate() {
        draw_line(&mut s, line, i, chart, &area);
    }
    for p in chart.rings.iter().filter(|p| is_drawn(p)) {
        let _ = writeln!(
            s,
            r##"<circle class="ring" cx="{}" cy="{}" r="6" stroke="#C00000" stroke-width="2"/>"##,
            num(area.px(chart.x, p[0])),
            num(area.py(chart.y, p[1]))
        );
    }
    s.push_str("</g>\n");
    draw_legend(&mut s, &legend, TOP + PLOT_HEIGHT + BOTTOM);
    s.push_str("</svg>\n");
    s
}

pub(super) fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// Lines past the palette are dashed, so no two lines look alike.
pub(super) fn dash(i: usize) -> &'static str {
    match (i / COLOURS.len()) % 3 {
        0 => "",
        1 => r#" stroke-dasharray="6 3""#,
        _ => r#" stroke-dasharray="2 3""#,
    }
}

/// The horizontal grid, the frame and the y ticks with the unit.
/// `name` (e.g. the metric) goes before the unit in the axis title.
pub(super) fn y_axis(s: &mut String, y: &Axis, area: &Area, name: &str) {
    let (x0, x1) = (area.left, area.left + area.width);
    let (y0, y1) = (area.top + area.height, area.top);
    s.push_str(r##"<g stroke="#e3e3e3" stroke-width="1">"##);
    s.push('\n');
    for (v, _) in &y.ticks {
        let py = num(area.py(y, *v));
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{py}" x2="{}" y2="{py}"/>"#,
            num(x0),
            num(x1)
        );
    }
    s.push_str("</g>\n");
    let _ = writeln!(
        s,
        r##"<path d="M{} {}V{}H{}" fill="none" stroke="#888" stroke-width="1"/>"##,
        num(x0),
        num(y1),
        num(y0),
        num(x1)
    );
    s.push_str(r##"<g fill="#333" text-anchor="end">"##);
    s.push('\n');
    for (v, label) in &y.ticks {
        let py = area.py(y, *v);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            num(x0 - 6.0),
            num(py + 4.0),
            escape(label)
        );
    }
    s.push_str("</g>\n");
    let y_mid = num(area.top + area.height / 2.0);
    let _ = writeln!(
        s,
        r##"<text transform="translate(16 {y_mid}) rotate(-90)" fill="#333" text-anchor="middle">{}</text>"##,
        escape(&match (name.is_empty(), y.unit.is_empty()) {
            (true, true) => "value".to_string(),
            (true, false) => y.unit.clone(),
            (false, true) => name.to_string(),
            (false, false) => format!("{name} ({})", y.unit),
        })
    );
}

/// The x ticks of a numeric axis and its name with the unit, e.g. `time (s)`.
pub(super) fn x_axis(s: &mut String, x: &Axis, area: &Area, name: &str) {
    let y0 = area.top + area.height;
    s.push_str(r##"<g fill="#333" text-anchor="middle">"##);
    s.push('\n');
    for (t, label) in &x.ticks {
        let px = num(area.px(x, *t));
        let _ = writeln!(
            s,
            r##"<line x1="{px}" y1="{}" x2="{px}" y2="{}" stroke="#888"/><text x="{px}" y="{}">{}</text>"##,
            num(y0),
            num(y0 + 4.0),
            num(y0 + 16.0),
            escape(label)
        );
    }
    let name = if x.unit.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({})", x.unit)
    };
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">{}</text>"#,
        num(area.left + area.width / 2.0),
        num(y0 + 34.0),
        escape(&name)
    );
    s.push_str("</g>\n");
}

fn draw_line(s: &mut String, line: &Line, i: usize, chart: &Chart, area: &Area) {
    let finite = line.points.iter().filter(|p| is_drawn(p)).count();
    let colour = colour(i);
    for segment in segments(&line.points) {
        let kept = reduce(segment, chart.x, area);
        if kept.len() > 1 {
            let mut pts = String::with_capacity(kept.len() * 12);
            for p in &kept {
                if !pts.is_empty() {
                    pts.push(' ');
                }
                let _ = write!(
                    pts,
                    "{},{}",
                    num(area.px(chart.x, p[0])),
                    num(area.py(chart.y, p[1]))
                );
            }
            let _ = writeln!(
                s,
                r#"<polyline stroke="{colour}"{} points="{pts}"/>"#,
                dash(i)
            );
        }
        // A lone point has no line to show it; a short series shows each.
        if kept.len() == 1 || finite <= MARKERS_UP_TO {
            for p in &kept {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{}" cy="{}" r="2.5" fill="{colour}"/>"#,
                    num(area.px(chart.x, p[0])),
                    num(area.py(chart.y, p[1]))
                );
            }
        }
    }
}

fn is_drawn(p: &[f64; 2]) -> bool {
    p[0].is_finite() && p[1].is_finite()
}

/// The runs of drawable points between gaps.
fn segments(points: &[[f64; 2]]) -> impl Iterator<Item = &[[f64; 2]]> {
    points
        .split(|p| !is_drawn(p))
        .filter(|segment| !segment.is_empty())
}

/// At most the first, lowest, highest and last point of each pixel column
/// (in their order), when a segment has more points than twice the columns:
/// the drawn line looks the same, the file stays small.
pub fn reduce(segment: &[[f64; 2]], x: &Axis, area_width: &impl Columns) -> Vec<[f64; 2]> {
    let columns = area_width.columns();
    if segment.len() <= 2 * columns {
        return segment.to_vec();
    }
    let column = |t: f64| {
        let c = ((t - x.min) / (x.max - x.min) * columns as f64).floor();
        c.clamp(0.0, columns as f64 - 1.0) as usize
    };
    let mut kept = Vec::with_capacity(4 * columns);
    let mut start = 0;
    while start < segment.len() {
        let c = column(segment[start][0]);
        let mut end = start;
        while end < segment.len() && column(segment[end][0]) == c {
            end += 1;
        }
        let bucket = &segment[start..end];
        let (mut lo, mut hi) = (0, 0);
        for (j, p) in bucket.iter().enumerate() {
            if p[1] < bucket[lo][1] {
                lo = j;
            }
            if p[1] > bucket[hi][1] {
                hi = j;
            }
        }
        let mut picks = [0, lo, hi, bucket.len() - 1];
        picks.sort_unstable();
        let mut last = None;
        for j in picks {
            if last != Some(j) {
                kept.push(bucket[j]);
                last = Some(j);
            }
        }
        start = end;
    }
    kept
}

/// How many pixel columns the plot has (a trait so tests can ask for fewer).
pub trait Columns {
    fn columns(&self) -> usize;
}

impl Columns for Area {
    fn columns(&self) -> usize {
        self.width.max(1.0) as usize
    }
}

impl Columns for usize {
    fn columns(&self) -> usize {
        (*self).max(1)
    }
}

/// Legend entries packed into rows; no legend for a single line.
pub(super) fn legend_rows(labels: &[&str]) -> Vec<Vec<(usize, String)>> {
    if labels.len() < 2 {
        return Vec::new();
    }
    let mut rows: Vec<Vec<(usize, String)>> = vec![Vec::new()];
    let mut used = 0.0;
    let room = WIDTH - LEFT - RIGHT;
    for (i, label) in labels.iter().enumerate() {
        let text = shorten(label, MAX_LEGEND);
        // An estimate: sans-serif at 11 px averages under 6.5 px a character.
        let width = 28.0 + 6.5 * text.chars().count() as f64;
        if used > 0.0 && used + width > room {
            rows.push(Vec::new());
            used = 0.0;
        }
        used += width;
        if let Some(row) = rows.last_mut() {
            row.push((i, text));
        }
    }
    rows
}

pub(super) fn draw_legend(s: &mut String, rows: &[Vec<(usize, String)>], top: f64) {
    for (r, row) in rows.iter().enumerate() {
        let y = top + LEGEND_ROW * r as f64 + 8.0;
        let mut x = LEFT;
        for (i, text) in row {
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="2"{}/><text x="{}" y="{}" fill="#333">{}</text>"##,
                num(x),
                num(y),
                num(x + 18.0),
                num(y),
                colour(*i),
                dash(*i),
                num(x + 22.0),
                num(y + 4.0),
                escape(text)
            );
            x += 28.0 + 6.5 * text.chars().count() as f64;
        }
    }
}

/// A coordinate with one decimal, no trailing `.0`.
pub(super) fn num(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

pub(super) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    }
}

/// Text for an XML element or attribute: markup characters escaped, and
/// characters XML 1.0 cannot hold at all (most control characters) replaced.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::axis::axis;

    #[test]
    fn reduction_keeps_the_extremes_and_both_ends() {
        let points: Vec<[f64; 2]> = (0..10_000)
            .map(|i| [i as f64, if i == 4321 { 1e6 } else { (i % 7) as f64 }])
            .collect();
        let x = axis(0.0, 9999.0, "s");
        let kept = reduce(&points, &x, &100usize);
        assert!(kept.len() <= 400, "{}", kept.len());
        assert_eq!(kept.first(), points.first());
        assert_eq!(kept.last(), points.last());
        assert!(kept.contains(&[4321.0, 1e6]));
        assert!(kept.windows(2).all(|w| w[0][0] <= w[1][0]));
    }

    #[test]
    fn escaping() {
        assert_eq!(
            escape("a<b>&\"c'\u{1}\n"),
            "a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD} "
        );
    }
}
