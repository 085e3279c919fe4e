//! How the hosts of a stage that started together did start: each host's
//! clock against this machine's, its actual start against the earliest
//! host's, and the spread. The engine reports it for per-host stages with
//! `sync_start`, `s3-bench`/`swift-bench` for their client hosts.

use std::time::SystemTime;

use pipeline_model::unit;

use crate::clock::{self, Offset};
use crate::metric::MetricDecl;
use crate::stage::StageOutput;

/// A host's actual start after the earliest host's (label `host`).
pub const START_OFFSET_MS: MetricDecl = MetricDecl::info(
    "start_offset_ms",
    unit::MILLISECONDS,
    "With sync_start: how long after the earliest host this host's measured command started (label host).",
);
/// A host's clock against this machine's (label `host`).
pub const CLOCK_OFFSET_MS: MetricDecl = MetricDecl::info(
    "clock_offset_ms",
    unit::MILLISECONDS,
    "With sync_start: the host's clock minus this machine's (label host).",
);
/// Latest minus earliest start (label `host=all`).
pub const START_SPREAD_MS: MetricDecl = MetricDecl::info(
    "start_spread_ms",
    unit::MILLISECONDS,
    "With sync_start: the latest host's start minus the earliest's (host=all).",
);

/// The metrics [`add_start_report`] adds.
pub fn metrics() -> [MetricDecl; 3] {
    [START_OFFSET_MS, CLOCK_OFFSET_MS, START_SPREAD_MS]
}

/// How the hosts of a `sync_start` stage started.
#[derive(Debug, Clone)]
pub struct StartReport {
    /// The instant the runner picked, in this machine's clock.
    pub planned: SystemTime,
    pub hosts: Vec<HostStart>,
}

/// One host of a [`StartReport`].
#[derive(Debug, Clone)]
pub struct HostStart {
    pub name: String,
    /// Its clock against this machine's.
    pub clock: Offset,
    /// When its measured command did start, in this machine's clock
    /// (`None`: it did not say).
    pub started: Option<SystemTime>,
}

/// Per host, `start_offset_ms` (its actual start after the earliest
/// host's, in this machine's clock) and `clock_offset_ms` (its clock minus
/// this machine's); `start_spread_ms` (`host=all`: latest minus earliest
/// start); and a note with the instant and the clock offsets.
pub fn add_start_report(merged: &mut StageOutput, report: &StartReport) {
    let starts: Vec<(&str, i128)> = report
        .hosts
        .iter()
        .filter_map(|h| Some((h.name.as_str(), clock::unix_ns(h.started?))))
        .collect();
    let instants: Vec<i128> = starts.iter().map(|(_, ns)| *ns).collect();
    let earliest = instants.iter().copied().min().unwrap_or_default();
    let ms = |decl: &MetricDecl, value: f64, host: &str| decl.value(value).label("host", host);
    for (host, ns) in &starts {
        let after = (ns - earliest) as f64 / 1e6;
        merged.metrics.push(ms(&START_OFFSET_MS, after, host));
    }
    for h in &report.hosts {
        merged
            .metrics
            .push(ms(&CLOCK_OFFSET_MS, h.clock.offset_ms(), &h.name));
    }
    let spread = clock::spread_ms(&instants);
    if !starts.is_empty() {
        merged.metrics.push(ms(&START_SPREAD_MS, spread, "all"));
    }
    merged.notes.push(start_note(report, spread, starts.len()));
}

/// "started together at 19:42:01.500 UTC: spread 3.2 ms over 2 hosts;
/// clock offsets node1 +0.0 ms (±0.1), node2 +0.0 ms (±0.1)".
fn start_note(report: &StartReport, spread_ms: f64, started: usize) -> String {
    let at = utc(report.planned);
    let offsets: Vec<String> = report
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{} {:+.3} ms (±{:.3})",
                h.name,
                h.clock.offset_ms(),
                h.clock.round_trip_ms() / 2.0
            )
        })
        .collect();
    let silent: Vec<&str> = report
        .hosts
        .iter()
        .filter(|h| h.started.is_none())
        .map(|h| h.name.as_str())
        .collect();
    let hosts = if started == 1 { "host" } else { "hosts" };
    let mut note = format!(
        "started together at {at}: spread {spread_ms:.3} ms over {started} {hosts}; clock offsets {}",
        offsets.join(", ")
    );
    if !silent.is_empty() {
        note.push_str(&format!(
            "; no actual start reported by {}",
            silent.join(", ")
        ));
    }
    note
}

/// `19:42:01.500 UTC`: an instant's time of day, to the millisecond.
pub fn utc(t: SystemTime) -> String {
    let ns = clock::unix_ns(t);
    let secs = ns.div_euclid(1_000_000_000) as i64;
    let ms = ns.rem_euclid(1_000_000_000) / 1_000_000;
    let day = secs.rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}.{ms:03} UTC",
        day / 3600,
        day % 3600 / 60,
        day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipeline_model::{Aggregate, Metric};

    fn find<'a>(out: &'a StageOutput, name: &str, h: &str) -> Option<&'a Metric> {
        out.metrics
            .iter()
            .find(|m| m.name == name && m.labels["host"] == h)
    }

    fn offset(offset_ms: f64, round_trip_ms: f64) -> Offset {
        Offset {
            offset_ns: (offset_ms * 1e6) as i64,
            round_trip_ns: (round_trip_ms * 1e6) as i64,
            samples: 8,
        }
    }

    fn host_start(name: &str, clock: Offset, started: Option<SystemTime>) -> HostStart {
        HostStart {
            name: name.into(),
            clock,
            started,
        }
    }

    #[test]
    fn hosts_started_together_report_their_offsets_and_spread() {
        let planned = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 500_000_000);
        let tenths_of_ms = |n: u64| std::time::Duration::from_micros(n * 100);
        let report = StartReport {
            planned,
            hosts: vec![
                host_start("node1", offset(0.0, 0.2), Some(planned + tenths_of_ms(12))),
                host_start("node2", offset(-2.5, 0.4), Some(planned + tenths_of_ms(44))),
            ],
        };
        let mut merged = StageOutput::default();
        add_start_report(&mut merged, &report);
        let value = |name: &str, h: &str| find(&merged, name, h).unwrap().value;
        assert_eq!(value("start_offset_ms", "node1"), 0.0);
        assert!((value("start_offset_ms", "node2") - 3.2).abs() < 1e-9);
        assert!((value("start_spread_ms", "all") - 3.2).abs() < 1e-9);
        assert_eq!(value("clock_offset_ms", "node2"), -2.5);
        let spread = find(&merged, "start_spread_ms", "all").unwrap();
        assert_eq!(spread.unit, "ms");
        assert_eq!(spread.aggregate, Aggregate::None);
        assert_eq!(
            merged.notes,
            [
                "started together at 22:13:20.500 UTC: spread 3.200 ms over 2 hosts; \
              clock offsets node1 +0.000 ms (±0.100), node2 -2.500 ms (±0.200)"
            ]
        );
    }

    #[test]
    fn a_host_that_did_not_report_its_start_is_named() {
        let planned = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let report = StartReport {
            planned,
            hosts: vec![
                host_start("node1", offset(0.0, 0.2), Some(planned)),
                host_start("node2", offset(1.0, 0.2), None),
            ],
        };
        let mut merged = StageOutput::default();
        add_start_report(&mut merged, &report);
        assert!(find(&merged, "start_offset_ms", "node2").is_none());
        assert_eq!(
            find(&merged, "clock_offset_ms", "node2").unwrap().value,
            1.0
        );
        assert!(
            merged.notes[0].ends_with("; no actual start reported by node2"),
            "{:?}",
            merged.notes
        );
    }

    #[test]
    fn times_of_day_in_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(3_723_004);
        assert_eq!(utc(t), "01:02:03.004 UTC");
    }
}
