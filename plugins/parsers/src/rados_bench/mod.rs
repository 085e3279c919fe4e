//! `rados bench` (write, seq, rand) output, text or `--format json`.
//!
//! Both forms carry the same two things: a per-second table (`sec`, `Cur
//! ops`, `started`, `finished`, `avg MB/s`, `cur MB/s`, `last lat(s)`, `avg
//! lat(s)`) and a closing summary (`Bandwidth (MB/sec): 312.933`, …). The
//! summary figures become metrics exactly as printed; the table becomes the
//! series `cur_bandwidth`, `avg_latency` and `cur_ops` (ops in flight).
//!
//! The output only tells a write run from a read run (`Total writes made`),
//! not seq from rand, so the `mode` label is `write`, or `seq`/`rand` only
//! when the text includes the `rados … bench … seq` command line itself.

mod fields;
mod json;
mod text;

use std::sync::LazyLock;

use pipeline_model::{Direction, Measurement, Metric, Series, unit};
use regex::Regex;

use crate::error::ParseError;
use fields::Field;

const TOOL: &str = "rados bench";

/// What rados prints (to stderr) when `seq`/`rand` finds no benchmark data.
const NO_DATA: &str = "Must write data before running a read benchmark!";

/// One row of the per-second table.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    sec: f64,
    cur_ops: Option<f64>,
    cur_bw: Option<f64>,
    avg_lat: Option<f64>,
}

/// What the text and JSON readers extract, before it becomes metrics.
#[derive(Debug, Default)]
struct Parsed {
    summary: Vec<(Field, f64)>,
    write: bool,
    rows: Vec<Row>,
}

impl Parsed {
    /// Records a summary figure; a later figure of the same name replaces an
    /// earlier one (the JSON write output repeats `object_size`).
    fn set(&mut self, field: Field, value: f64) {
        match self.summary.iter_mut().find(|(f, _)| f.name == field.name) {
            Some(slot) => *slot = (field, value),
            None => self.summary.push((field, value)),
        }
    }
}

static COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\brados\b.*\bbench\b.*\b(write|seq|rand)\b").expect("static regex")
});

/// Parses `rados bench` output, detecting text vs `--format json`.
pub fn parse(text: &str) -> Result<Measurement, ParseError> {
    if text.contains(NO_DATA) {
        return Err(ParseError::tool(TOOL, NO_DATA));
    }
    let is_json = crate::scan::lines(text).any(|l| l.trim_start().starts_with('{'));
    let parsed = if is_json {
        json::parse(text)?
    } else {
        text::parse(text)
    };
    if !parsed
        .summary
        .iter()
        .any(|(f, _)| matches!(f.name, "bandwidth" | "total_time" | "iops_avg"))
    {
        return Err(ParseError::missing(
            TOOL,
            "a summary such as 'Total time run: 10.4176' and 'Bandwidth (MB/sec): 312.933'",
            text,
        ));
    }
    Ok(build(parsed, mode(text)))
}

/// The benchmark mode named on a `rados bench` command line in the text, if any.
fn mode(text: &str) -> Option<&str> {
    crate::scan::lines(text)
        .find_map(|l| COMMAND.captures(l))
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

fn build(parsed: Parsed, mode: Option<&str>) -> Measurement {
    let mode = mode.or(parsed.write.then_some("write"));
    let label = |m: Metric| match mode {
        Some(mode) => m.label("mode", mode),
        None => m,
    };
    let metrics = parsed
        .summary
        .iter()
        .map(|(f, v)| {
            let m = Metric::new(f.name, *v, f.unit, f.direction).aggregate(f.rule.aggregate());
            label(if f.headline { m.headline() } else { m })
        })
        .collect();

    let rows = &parsed.rows;
    let series = [
        column(
            "cur_bandwidth",
            unit::MIB_PER_S,
            Direction::Higher,
            rows,
            |r| r.cur_bw,
        ),
        column("avg_latency", unit::SECONDS, Direction::Lower, rows, |r| {
            r.avg_lat
        }),
        column("cur_ops", unit::COUNT, Direction::None, rows, |r| r.cur_ops),
    ]
    .into_iter()
    .flatten()
    .map(|mut s| {
        if let Some(mode) = mode {
            s.labels.insert("mode".into(), mode.into());
        }
        s
    })
    .collect();
    Measurement {
        metrics,
        series,
        histograms: Vec::new(),
    }
}

/// One column of the per-second table as a series; `None` if it is empty.
fn column(
    name: &str,
    unit: &str,
    direction: Direction,
    rows: &[Row],
    get: fn(&Row) -> Option<f64>,
) -> Option<Series> {
    let mut s = Series::new(name, unit, direction);
    s.points = rows
        .iter()
        .filter_map(|r| get(r).map(|v| [r.sec, v]))
        .collect();
    (!s.points.is_empty()).then_some(s)
}
