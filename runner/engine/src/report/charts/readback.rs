//! For tests: a chart parsed back as XML (it must be well-formed and hold
//! nothing that runs or fetches), and its marks mapped back to data
//! through the plot area and domain the SVG declares.

/// A bar: its group and series indices and the value its length shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: usize,
    pub series: usize,
    pub value: f64,
}

pub struct Read {
    /// Bars, in document order.
    pub bars: Vec<Bar>,
    /// Circles of a `curve` or `lines` group, mapped back to `[x, y]`.
    pub points: Vec<[f64; 2]>,
    /// Red rings of a `lines` group, mapped back.
    pub rings: Vec<[f64; 2]>,
    /// Every text node.
    pub texts: Vec<String>,
    /// The y domain, for tolerances.
    pub y_span: f64,
    pub x_span: f64,
}

/// The tolerance of a value read back: a coordinate is rounded to 0.1 px
/// of a 200 px high (or 618 px wide) plot.
pub fn close(a: f64, b: f64, span: f64) -> bool {
    (a - b).abs() <= span / 200.0 * 0.06
}

pub fn read(text: &str) -> Read {
    let doc = roxmltree::Document::parse(text)
        .unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{text}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    for node in root.descendants() {
        assert!(
            !matches!(
                node.tag_name().name(),
                "script" | "image" | "a" | "style" | "foreignObject"
            ),
            "{}",
            node.tag_name().name()
        );
        for a in node.attributes() {
            assert!(!a.name().starts_with("on") && a.name() != "href");
            assert!(!a.value().contains("url("), "{}", a.value());
        }
    }
    let group = root
        .descendants()
        .find(|n| {
            matches!(
                n.attribute("class"),
                Some("bars") | Some("curve") | Some("lines")
            )
        })
        .expect("a group of marks");
    let attr = |k: &str| group.attribute(k).map(|v| v.parse::<f64>().unwrap());
    let plot: Vec<f64> = group
        .attribute("data-plot")
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let (y0, y1) = (attr("data-y-min").unwrap(), attr("data-y-max").unwrap());
    let (x0, x1) = (attr("data-x-min"), attr("data-x-max"));
    let back_y = |py: f64| y0 + (1.0 - (py - plot[1]) / plot[3]) * (y1 - y0);
    let back_x = |px: f64| match (x0, x1) {
        (Some(a), Some(b)) => a + (px - plot[0]) / plot[2] * (b - a),
        _ => f64::NAN,
    };
    let f = |n: roxmltree::Node, k: &str| n.attribute(k).unwrap().parse::<f64>().unwrap();
    let bars = group
        .children()
        .filter(|n| n.attribute("class") == Some("bar"))
        .map(|n| {
            let (top, bottom) = (back_y(f(n, "y")), back_y(f(n, "y") + f(n, "height")));
            Bar {
                group: f(n, "data-group") as usize,
                series: f(n, "data-series") as usize,
                value: if top.abs() >= bottom.abs() {
                    top
                } else {
                    bottom
                },
            }
        })
        .collect();
    let circles = |ring: bool| {
        group
            .children()
            .filter(|n| n.tag_name().name() == "circle")
            .filter(|n| (n.attribute("class") == Some("ring")) == ring)
            .map(|n| [back_x(f(n, "cx")), back_y(f(n, "cy"))])
            .collect()
    };
    Read {
        bars,
        points: circles(false),
        rings: circles(true),
        texts: root
            .descendants()
            .filter(|n| n.is_text())
            .filter_map(|n| n.text().map(str::to_string))
            .collect(),
        y_span: y1 - y0,
        x_span: x1.zip(x0).map_or(0.0, |(b, a)| b - a),
    }
}
