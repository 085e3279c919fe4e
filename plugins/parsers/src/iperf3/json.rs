//! `iperf3 -J` output.
//!
//! iperf3 exits 0 and still prints a JSON document when it fails in `-J`
//! mode (`"error": "unable to connect to server: Connection refused"`), so
//! a top-level `error` is a parse error carrying that text.

use pipeline_model::{Aggregate, Direction, Measurement, Metric, Series, unit};
use serde_json::Value;

use crate::error::ParseError;
use crate::scan::{json_document, json_number};

const TOOL: &str = "iperf3";

pub(super) fn parse(text: &str) -> Result<Measurement, ParseError> {
    let doc = json_document(TOOL, text)?;
    if let Some(error) = doc.get("error") {
        let message = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_string);
        return Err(ParseError::tool(TOOL, message));
    }
    let Some(end) = doc.get("end").filter(|e| e.is_object()) else {
        return Err(ParseError::missing(
            TOOL,
            "a JSON document with an \"end\" section",
            text,
        ));
    };
    let bps = |section: &str| {
        end.get(section)
            .and_then(|s| s.get("bits_per_second"))
            .and_then(json_number)
    };

    let mut metrics = Vec::new();
    let sent = bps("sum_sent");
    let received = bps("sum_received");
    if let Some(v) = sent {
        metrics.push(
            Metric::new("bits_per_second", v, unit::BITS_PER_S, Direction::Higher)
                .aggregate(Aggregate::Sum)
                .label("side", "sender"),
        );
    }
    if let Some(v) = received {
        metrics.push(
            Metric::new("bits_per_second", v, unit::BITS_PER_S, Direction::Higher)
                .aggregate(Aggregate::Sum)
                .label("side", "receiver")
                .headline(),
        );
    }
    // Old iperf3 UDP results carry only `sum`.
    if let (None, None, Some(v)) = (sent, received, bps("sum")) {
        metrics.push(
            Metric::new("bits_per_second", v, unit::BITS_PER_S, Direction::Higher)
                .aggregate(Aggregate::Sum)
                .headline(),
        );
    }
    if let Some(r) = end
        .get("sum_sent")
        .and_then(|s| s.get("retransmits"))
        .and_then(json_number)
    {
        metrics.push(
            Metric::new("retransmits", r, unit::COUNT, Direction::Lower).aggregate(Aggregate::Sum),
        );
    }
    // UDP: `sum` is the receiver's view (jitter and loss are measured there).
    if let Some(udp) = end.get("sum").or_else(|| end.get("sum_received")) {
        if let Some(j) = udp.get("jitter_ms").and_then(json_number) {
            metrics.push(
                Metric::new("jitter", j, unit::MILLISECONDS, Direction::Lower)
                    .aggregate(Aggregate::None),
            );
        }
        if let Some(l) = udp.get("lost_percent").and_then(json_number) {
            metrics.push(
                Metric::new("lost_percent", l, unit::PERCENT, Direction::Lower)
                    .aggregate(Aggregate::None),
            );
        }
    }
    if metrics.is_empty() {
        return Err(ParseError::missing(
            TOOL,
            "\"end\".\"sum_sent\"/\"sum_received\" with bits_per_second",
            text,
        ));
    }
    Ok(Measurement {
        histograms: Vec::new(),
        metrics,
        series: throughput(&doc).into_iter().collect(),
    })
}

/// Per-interval throughput (`intervals[].sum`), skipping `--omit` intervals.
fn throughput(doc: &Value) -> Option<Series> {
    let intervals = doc.get("intervals")?.as_array()?;
    let mut s = Series::new("throughput", unit::BITS_PER_S, Direction::Higher);
    s.points = intervals
        .iter()
        .filter_map(|i| i.get("sum"))
        .filter(|sum| sum.get("omitted").and_then(Value::as_bool) != Some(true))
        .filter_map(|sum| {
            Some([
                json_number(sum.get("end")?)?,
                json_number(sum.get("bits_per_second")?)?,
            ])
        })
        .collect();
    (!s.points.is_empty()).then_some(s)
}
