//! swift-bench (OpenStack's object-store benchmark, 2.0.0) log output.
//!
//! swift-bench logs progress lines and, per phase, one final line:
//!
//! ```text
//! swift-bench 2026-12-01 07:24:23,233 INFO 1000 PUTS **FINAL** [0 failures], 406.9/s
//! swift-bench 2026-12-01 07:24:24,290 INFO 1000 GETS **FINAL** [0 failures], 947.5/s
//! swift-bench 2026-12-01 07:24:26,485 INFO 1000 DEL **FINAL** [0 failures], 456.1/s
//! ```
//!
//! Only the `**FINAL**` lines are figures (the others are running
//! rates). swift-bench prints neither the object size nor latencies, so there
//! is no bandwidth or percentile to take; a failed authentication ends in a
//! Python traceback, whose last line is reported as the tool's error.

use std::sync::LazyLock;

use pipeline_model::{Aggregate, Direction, Measurement, Metric, unit};
use regex::Regex;

use crate::error::ParseError;
use crate::scan::number;

const TOOL: &str = "swift-bench";

static FINAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?P<count>\d+) (?P<op>PUTS|GETS|DEL) \*\*FINAL\*\* \[(?P<failures>\d+) failures\], (?P<rate>\S+)/s\s*$",
    )
    .expect("static regex")
});

pub fn parse(text: &str) -> Result<Measurement, ParseError> {
    let mut metrics = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let Some(c) = FINAL.captures(line) else {
            continue;
        };
        let bad = || ParseError::bad_line(TOOL, "a count, failures and a rate", idx, line);
        let op = match &c["op"] {
            "PUTS" => "put",
            "GETS" => "get",
            _ => "delete",
        };
        let count = number(&c["count"]).ok_or_else(bad)?;
        let failures = number(&c["failures"]).ok_or_else(bad)?;
        let rate = number(&c["rate"]).filter(|r| *r >= 0.0).ok_or_else(bad)?;
        let labelled = |m: Metric| m.label("op", op);
        metrics.push(labelled(
            Metric::new("ops", count, unit::COUNT, Direction::None).aggregate(Aggregate::Sum),
        ));
        metrics.push(labelled(
            Metric::new("errors", failures, unit::COUNT, Direction::Lower)
                .aggregate(Aggregate::Sum),
        ));
        metrics.push(labelled(
            Metric::new("ops_per_s", rate, unit::OPS_PER_S, Direction::Higher)
                .aggregate(Aggregate::Sum)
                .headline(),
        ));
    }
    if metrics.is_empty() {
        if let Some(err) = text
            .lines()
            .rev()
            .find(|l| l.contains("Exception:") || l.contains("Error:"))
        {
            return Err(ParseError::ToolError {
                tool: TOOL,
                message: err.trim().chars().take(300).collect(),
            });
        }
        return Err(ParseError::missing(
            TOOL,
            "a line like '1000 PUTS **FINAL** [0 failures], 406.9/s'",
            text,
        ));
    }
    Ok(Measurement {
        metrics,
        ..Measurement::default()
    })
}
