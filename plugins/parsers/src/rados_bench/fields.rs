//! The summary figures rados bench prints, and the metric each becomes.
//!
//! Text and JSON spell the same figure differently and the spelling changed
//! across releases (`Average Latency(s):` vs `Average Latency:`, the JSON key
//! `max_latency:` with a stray colon in old releases, `Average IOPS` without
//! a colon in old read benchmarks). Keys are therefore compared after
//! [`normalize`], which keeps only ASCII letters, lowercased: every spelling
//! of one figure normalizes to one of the aliases below.

use pipeline_model::{Aggregate, Direction, unit};

/// How a summary figure becomes a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Field {
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
    pub headline: bool,
    pub rule: Rule,
}

/// How the figure combines across hosts (an [`Aggregate`] that fits in a
/// `const` table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Rule {
    Sum,
    Max,
    Min,
    /// Mean weighted by the op count (`ops`).
    MeanByOps,
    None,
}

impl Rule {
    pub fn aggregate(self) -> Aggregate {
        match self {
            Rule::Sum => Aggregate::Sum,
            Rule::Max => Aggregate::Max,
            Rule::Min => Aggregate::Min,
            Rule::MeanByOps => Aggregate::mean_weighted_by("ops"),
            Rule::None => Aggregate::None,
        }
    }
}

const fn field(name: &'static str, unit: &'static str, direction: Direction, rule: Rule) -> Field {
    Field {
        name,
        unit,
        direction,
        headline: false,
        rule,
    }
}

const fn headline(
    name: &'static str,
    unit: &'static str,
    direction: Direction,
    rule: Rule,
) -> Field {
    Field {
        name,
        unit,
        direction,
        headline: true,
        rule,
    }
}

/// `(normalized aliases, field)`. rados' "MB/sec" is 2^20 bytes per second.
///
/// Rules across hosts: bandwidth, IOPS and the op count add up; the average
/// latency is the mean over all ops (weighted by `ops`); the latency extremes
/// are the extremes over hosts; standard deviations do not combine. The
/// per-second extremes of bandwidth and IOPS (`bandwidth_max`, `iops_min`, …)
/// do not combine either: the hosts' best and worst seconds need not be the
/// same seconds, so neither their sum nor their maximum is the cluster's
/// best or worst second (the series of each host are kept for that).
const FIELDS: &[(&[&str], Field)] = &[
    (
        &["totaltimerun"],
        field("total_time", unit::SECONDS, Direction::None, Rule::None),
    ),
    (
        &["totalwritesmade", "totalreadsmade", "totalrollbacksmade"],
        field("ops", unit::COUNT, Direction::None, Rule::Sum),
    ),
    (
        &["writesize", "readsize", "opsize"],
        field("op_size", unit::BYTES, Direction::None, Rule::None),
    ),
    (
        &["objectsize"],
        field("object_size", unit::BYTES, Direction::None, Rule::None),
    ),
    (
        &["bandwidthmbsec", "bandwidth"],
        headline("bandwidth", unit::MIB_PER_S, Direction::Higher, Rule::Sum),
    ),
    (
        &["stddevbandwidth"],
        field(
            "bandwidth_stddev",
            unit::MIB_PER_S,
            Direction::None,
            Rule::None,
        ),
    ),
    (
        &["maxbandwidthmbsec", "maxbandwidth"],
        field(
            "bandwidth_max",
            unit::MIB_PER_S,
            Direction::Higher,
            Rule::None,
        ),
    ),
    (
        &["minbandwidthmbsec", "minbandwidth"],
        field(
            "bandwidth_min",
            unit::MIB_PER_S,
            Direction::Higher,
            Rule::None,
        ),
    ),
    (
        &["averageiops"],
        headline("iops_avg", unit::IOPS, Direction::Higher, Rule::Sum),
    ),
    (
        &["stddeviops"],
        field("iops_stddev", unit::IOPS, Direction::None, Rule::None),
    ),
    (
        &["maxiops"],
        field("iops_max", unit::IOPS, Direction::Higher, Rule::None),
    ),
    (
        &["miniops"],
        field("iops_min", unit::IOPS, Direction::Higher, Rule::None),
    ),
    (
        &["averagelatencys", "averagelatency"],
        headline(
            "latency_avg",
            unit::SECONDS,
            Direction::Lower,
            Rule::MeanByOps,
        ),
    ),
    (
        &["stddevlatencys", "stddevlatency"],
        field("latency_stddev", unit::SECONDS, Direction::None, Rule::None),
    ),
    (
        &["maxlatencys", "maxlatency"],
        field("latency_max", unit::SECONDS, Direction::Lower, Rule::Max),
    ),
    (
        &["minlatencys", "minlatency"],
        field("latency_min", unit::SECONDS, Direction::Lower, Rule::Min),
    ),
];

/// Keeps only ASCII letters, lowercased: `"Bandwidth (MB/sec):"` →
/// `"bandwidthmbsec"`, `"total_time_run"` → `"totaltimerun"`.
pub(crate) fn normalize(key: &str) -> String {
    key.chars()
        .filter(char::is_ascii_alphabetic)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The field for a summary key, in any spelling.
pub(crate) fn lookup(key: &str) -> Option<Field> {
    let key = normalize(key);
    FIELDS
        .iter()
        .find(|(aliases, _)| aliases.contains(&key.as_str()))
        .map(|(_, f)| *f)
}

/// Whether a summary key names the write benchmark's op count, which is the
/// only way the output itself tells a write run from a read run.
pub(crate) fn is_write_count(key: &str) -> bool {
    normalize(key) == "totalwritesmade"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_across_releases() {
        assert_eq!(
            lookup("Average Latency(s)").map(|f| f.name),
            Some("latency_avg")
        );
        assert_eq!(
            lookup("Average Latency").map(|f| f.name),
            Some("latency_avg")
        );
        assert_eq!(lookup("max_latency:").map(|f| f.name), Some("latency_max"));
        assert_eq!(
            lookup("Bandwidth (MB/sec)").map(|f| f.name),
            Some("bandwidth")
        );
        assert_eq!(lookup("bandwidth").map(|f| f.name), Some("bandwidth"));
        assert_eq!(lookup("Average IOPS").map(|f| f.name), Some("iops_avg"));
        assert_eq!(lookup("hints"), None);
    }
}
