//! Plain-text iperf3 and iperf2 output.
//!
//! Every report line has the shape `[ ID] start-end sec  transfer  bitrate…`:
//! - iperf3 ends with summary lines tagged `sender` / `receiver`, after
//!   `Retr` (TCP) or `Jitter  Lost/Total (pct%)` (UDP) columns;
//! - iperf2 tags nothing: its summary is the report spanning the longest
//!   interval (`0.0-10.0 sec` among `0.0-1.0`, `1.0-2.0`, …).
//!
//! With parallel streams (`-P`) the `[SUM]` lines are the summary. Bitrate
//! prefixes are decimal (iperf's `Mbits/sec` is 10^6 bit/s).

use std::sync::LazyLock;

use pipeline_model::{Aggregate, Direction, Measurement, Metric, Series, unit};
use regex::Regex;

use crate::error::ParseError;
use crate::scan::{decimal_prefix, lines, number};

const TOOL: &str = "iperf";

static REPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)^\[\s*(?P<id>\d+|SUM)\]\s*(?:\[(?P<role>[A-Z]+-[A-Z]+)\])?\s*
        (?P<start>[0-9.]+)\s*-\s*(?P<end>[0-9.]+)\s+sec\s+
        [0-9.]+\s+[KMGTP]?Bytes\s+
        (?P<rate>[0-9.]+)\s+(?P<prefix>[KMGTP]?)bits/sec
        (?P<rest>.*)$",
    )
    .expect("static regex")
});

/// UDP columns: `0.005 ms  0/763 (0%)`.
static UDP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<jitter>[0-9.]+)\s+ms\s+\d+/\s*\d+\s+\((?P<pct>[0-9.eE+-]+)%\)")
        .expect("static regex")
});

/// One report line.
#[derive(Debug, Clone)]
struct Report {
    id: String,
    role: Option<String>,
    start: f64,
    end: f64,
    bps: f64,
    side: Option<&'static str>,
    retransmits: Option<f64>,
    jitter_ms: Option<f64>,
    lost_percent: Option<f64>,
}

fn report(line: &str) -> Option<Report> {
    let c = REPORT.captures(line)?;
    let rest = c["rest"].trim();
    let (side, rest) = if let Some(r) = rest.strip_suffix("receiver") {
        (Some("receiver"), r.trim())
    } else if let Some(r) = rest.strip_suffix("sender") {
        (Some("sender"), r.trim())
    } else {
        (None, rest)
    };
    let udp = UDP.captures(rest);
    Some(Report {
        id: c["id"].to_string(),
        role: c.name("role").map(|m| m.as_str().to_string()),
        start: number(&c["start"])?,
        end: number(&c["end"])?,
        bps: number(&c["rate"])? * decimal_prefix(&c["prefix"])?,
        side,
        // A lone integer after the bitrate is iperf3's TCP `Retr` column.
        retransmits: rest.parse::<u64>().ok().map(|r| r as f64),
        jitter_ms: udp.as_ref().and_then(|u| number(&u["jitter"])),
        lost_percent: udp.as_ref().and_then(|u| number(&u["pct"])),
    })
}

pub(super) fn parse(text: &str) -> Result<Measurement, ParseError> {
    let reports: Vec<Report> = lines(text).filter_map(report).collect();
    let summary = summary(&reports);
    if summary.is_empty() {
        if let Some(err) =
            lines(text).find(|l| l.starts_with("iperf3: error") || l.starts_with("iperf: error"))
        {
            return Err(ParseError::tool(TOOL, err.trim()));
        }
        return Err(ParseError::missing(
            TOOL,
            "a summary line like '[  5]   0.00-10.00  sec  21.9 GBytes  18.8 Gbits/sec  0  sender'",
            text,
        ));
    }
    let any_receiver = summary.iter().any(|r| r.side == Some("receiver"));
    let mut metrics = Vec::new();
    for r in &summary {
        let twins = summary
            .iter()
            .filter(|o| o.side == r.side && o.role == r.role)
            .count();
        let label = |mut m: Metric| {
            if let Some(side) = r.side {
                m = m.label("side", side);
            }
            if let Some(role) = &r.role {
                m = m.label("role", role.as_str());
            }
            if twins > 1 {
                m = m.label("stream", r.id.as_str());
            }
            m
        };
        let bps = label(
            Metric::new(
                "bits_per_second",
                r.bps,
                unit::BITS_PER_S,
                Direction::Higher,
            )
            .aggregate(Aggregate::Sum),
        );
        let headline = r.side == Some("receiver") || !any_receiver;
        metrics.push(if headline { bps.headline() } else { bps });
        if let Some(v) = r.retransmits {
            metrics.push(label(
                Metric::new("retransmits", v, unit::COUNT, Direction::Lower)
                    .aggregate(Aggregate::Sum),
            ));
        }
        if let Some(v) = r.jitter_ms {
            metrics.push(label(
                Metric::new("jitter", v, unit::MILLISECONDS, Direction::Lower)
                    .aggregate(Aggregate::None),
            ));
        }
        if let Some(v) = r.lost_percent {
            metrics.push(label(
                Metric::new("lost_percent", v, unit::PERCENT, Direction::Lower)
                    .aggregate(Aggregate::None),
            ));
        }
    }
    Ok(Measurement {
        histograms: Vec::new(),
        metrics,
        series: throughput(&reports, &summary).into_iter().collect(),
    })
}

/// The summary reports: the tagged ones (iperf3) or the longest-spanning
/// ones (iperf2); `[SUM]` lines only, when there are any.
fn summary(reports: &[Report]) -> Vec<Report> {
    let tagged: Vec<&Report> = reports.iter().filter(|r| r.side.is_some()).collect();
    let chosen = if tagged.is_empty() {
        let span = |r: &Report| r.end - r.start;
        let longest = reports.iter().map(span).fold(0.0, f64::max);
        reports
            .iter()
            .filter(|r| span(r) >= longest - 1e-9 && longest > 0.0)
            .collect()
    } else {
        tagged
    };
    let sums: Vec<&Report> = chosen.iter().copied().filter(|r| r.id == "SUM").collect();
    let chosen = if sums.is_empty() { chosen } else { sums };
    chosen.into_iter().cloned().collect()
}

/// Per-interval bitrate of the non-summary reports of one stream: `[SUM]`
/// when there is one, else the first stream seen.
fn throughput(reports: &[Report], summary: &[Report]) -> Option<Series> {
    let is_summary = |r: &Report| {
        summary.iter().any(|s| {
            s.id == r.id
                && s.role == r.role
                && s.start == r.start
                && s.end == r.end
                && s.side == r.side
        })
    };
    let intervals: Vec<&Report> = reports
        .iter()
        .filter(|r| r.side.is_none() && !is_summary(r))
        .collect();
    let first = intervals
        .iter()
        .find(|r| r.id == "SUM")
        .or(intervals.first())?;
    let (id, role) = (first.id.clone(), first.role.clone());
    let mut s = Series::new("throughput", unit::BITS_PER_S, Direction::Higher);
    s.points = intervals
        .iter()
        .filter(|r| r.id == id && r.role == role)
        .map(|r| [r.end, r.bps])
        .collect();
    Some(s)
}
