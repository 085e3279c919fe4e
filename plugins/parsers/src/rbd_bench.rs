//! `rbd bench` and the older `rbd bench-write` output.
//!
//! Both print a header, a per-second table `SEC OPS OPS/SEC BYTES/SEC` and a
//! closing line:
//! - current: `elapsed: 9   ops: 262144   ops/sec: 27826.1   bytes/sec: 109 MiB/s`
//!   (rates formatted by Ceph's `byte_u_t`: `B/s`, `KiB/s`, `MiB/s`, `GiB/s`);
//! - old `bench-write`: `elapsed:    14  ops:   262144  ops/sec: 17568.36  bytes/sec: 71959999.43`
//!   (a plain number of bytes per second).
//!
//! Metrics: `iops`, `bandwidth` (B/s; both headline), `elapsed` (s), `ops`,
//! and `op_size` from the `bench  type write io_size 4096 …` header, whose
//! `type` also becomes the label `mode`; series `iops` and `bandwidth`.
//!
//! Rules across hosts: `iops`, `bandwidth` and `ops` add up; `elapsed` and
//! `op_size` do not combine.
//!
//! `--io-type readwrite` adds `read_ops: …` and `write_ops: …` lines, which
//! become the same metrics labelled `op=read` / `op=write`. The `bandwidth`
//! figure is the printed rate converted to B/s, so it carries the printed
//! rounding (`109 MiB/s`).

use std::sync::LazyLock;

use pipeline_model::{Aggregate, Direction, Measurement, Metric, Series, unit};
use regex::{Captures, Regex};

use crate::error::ParseError;
use crate::scan::{ceph_byte_unit, lines, number};

const TOOL: &str = "rbd bench";

/// A rate: a number, optionally followed by a byte unit and `/s`.
const RATE: &str = r"(?P<rate>[0-9.eE+-]+)\s*(?P<unit>[A-Za-z]*B|bytes)?(?:/s)?";

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^bench(?:-write)?\s+(?:type\s+(?P<type>\S+)\s+)?.*?\bio_size\s+(?P<io_size>\d+)")
        .expect("static regex")
});

static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^\s*(?P<sec>\d+)\s+(?P<ops>\d+)\s+(?P<iops>\S+)\s+{RATE}\s*$"
    ))
    .expect("static regex")
});

static TOTAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^\s*elapsed:\s*(?P<elapsed>\S+)\s+ops:\s*(?P<ops>\d+)\s+ops/sec:\s*(?P<iops>\S+)\s+bytes/sec:\s*{RATE}\s*$"
    ))
    .expect("static regex")
});

static PER_OP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^\s*(?P<op>read|write)_ops:\s*(?P<ops>\d+)\s+(?:read|write)_ops/sec:\s*(?P<iops>\S+)\s+(?:read|write)_bytes/sec:\s*{RATE}\s*$"
    ))
    .expect("static regex")
});

/// The rate in B/s of a [`RATE`] match.
fn bytes_per_sec(c: &Captures) -> Option<f64> {
    let factor = c
        .name("unit")
        .map_or(Some(1.0), |u| ceph_byte_unit(u.as_str()))?;
    Some(number(&c["rate"])? * factor)
}

/// Parses `rbd bench` / `rbd bench-write` output.
pub fn parse(text: &str) -> Result<Measurement, ParseError> {
    let mut mode = None;
    let mut op_size = None;
    let mut iops = Series::new("iops", unit::IOPS, Direction::Higher);
    let mut bandwidth = Series::new("bandwidth", unit::BYTES_PER_S, Direction::Higher);
    let mut total = None;
    let mut per_op = Vec::new();

    for (idx, line) in lines(text).enumerate() {
        let bad = || {
            ParseError::bad_line(
                TOOL,
                "numbers in the 'elapsed: … ops: … ops/sec: … bytes/sec: …' line",
                idx,
                line,
            )
        };
        if let Some(c) = HEADER.captures(line) {
            mode = c.name("type").map(|m| m.as_str().to_string());
            op_size = number(&c["io_size"]);
        } else if let Some(c) = ROW.captures(line) {
            if let (Some(sec), Some(r), Some(b)) =
                (number(&c["sec"]), number(&c["iops"]), bytes_per_sec(&c))
            {
                iops.points.push([sec, r]);
                bandwidth.points.push([sec, b]);
            }
        } else if let Some(c) = TOTAL.captures(line) {
            let values = (
                number(&c["elapsed"]),
                number(&c["ops"]),
                number(&c["iops"]),
                bytes_per_sec(&c),
            );
            let (Some(elapsed), Some(ops), Some(r), Some(b)) = values else {
                return Err(bad());
            };
            total = Some((elapsed, ops, r, b));
        } else if let Some(c) = PER_OP.captures(line) {
            let (Some(ops), Some(r), Some(b)) =
                (number(&c["ops"]), number(&c["iops"]), bytes_per_sec(&c))
            else {
                return Err(bad());
            };
            per_op.push((c["op"].to_string(), ops, r, b));
        }
    }

    let Some((elapsed, ops, r, b)) = total else {
        return Err(ParseError::missing(
            TOOL,
            "a closing line like 'elapsed: 9   ops: 262144   ops/sec: 27826.1   bytes/sec: 109 MiB/s'",
            text,
        ));
    };
    let iops_metric =
        |r| Metric::new("iops", r, unit::IOPS, Direction::Higher).aggregate(Aggregate::Sum);
    let bandwidth_metric = |b| {
        Metric::new("bandwidth", b, unit::BYTES_PER_S, Direction::Higher).aggregate(Aggregate::Sum)
    };
    let op_count =
        |n| Metric::new("ops", n, unit::COUNT, Direction::None).aggregate(Aggregate::Sum);
    let mut metrics = vec![
        iops_metric(r).headline(),
        bandwidth_metric(b).headline(),
        Metric::new("elapsed", elapsed, unit::SECONDS, Direction::None).aggregate(Aggregate::None),
        op_count(ops),
    ];
    if let Some(size) = op_size {
        metrics.push(
            Metric::new("op_size", size, unit::BYTES, Direction::None).aggregate(Aggregate::None),
        );
    }
    for (op, ops, r, b) in per_op {
        metrics.push(iops_metric(r).label("op", &op));
        metrics.push(bandwidth_metric(b).label("op", &op));
        metrics.push(op_count(ops).label("op", &op));
    }
    let mut series: Vec<Series> = [iops, bandwidth]
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    if let Some(mode) = mode {
        for m in &mut metrics {
            m.labels.insert("mode".into(), mode.clone());
        }
        for s in &mut series {
            s.labels.insert("mode".into(), mode.clone());
        }
    }
    Ok(Measurement {
        metrics,
        series,
        histograms: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two closing lines quoted in this crate's specification.
    #[test]
    fn closing_line_both_generations() {
        let m =
            parse("elapsed: 9   ops: 262144   ops/sec: 27826.1   bytes/sec: 109 MiB/s").unwrap();
        assert_eq!(m.metrics[0].value, 27826.1);
        assert_eq!(m.metrics[1].value, 109.0 * 1024.0 * 1024.0);

        let m = parse("elapsed:    14  ops:   262144  ops/sec: 17568.36  bytes/sec: 71959999.43")
            .unwrap();
        let v: Vec<f64> = m.metrics.iter().map(|m| m.value).collect();
        assert_eq!(v, [17568.36, 71959999.43, 14.0, 262144.0]);
    }
}
