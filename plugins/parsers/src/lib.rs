//! Parsers that turn benchmark tool outputs into [`Measurement`]s: one
//! module per tool, plus [`parse`], the dispatch behind
//! `pipeline parse FORMAT FILE`.
//!
//! Every parser reads the tool's output as the tool printed it (stdout and
//! stderr together are fine), takes the figures from the tool's own summary
//! lines, and returns a [`ParseError`] — never panics — on anything else.

pub mod ceph_health;
pub mod ceph_status;
pub mod dd;
pub mod error;
pub mod fio;
pub mod iperf3;
pub mod osd_perf;
pub mod rados_bench;
pub mod rbd_bench;
pub mod rgw_perf;
mod scan;
pub mod swift_bench;

pub use error::ParseError;
use pipeline_model::Measurement;

/// The formats [`parse`] accepts: `(name, description)`.
pub const FORMATS: &[(&str, &str)] = &[
    (
        "rados-bench",
        "rados bench write/seq/rand output, text or --format json",
    ),
    (
        "rbd-bench",
        "rbd bench (or the older rbd bench-write) output",
    ),
    (
        "fio-json",
        "fio --output-format=json or json+ output (non-JSON lines before it are skipped)",
    ),
    (
        "dd",
        "dd's transfer summary line from its stderr (LC_ALL=C)",
    ),
    ("iperf3-json", "iperf3 -J output"),
    ("iperf-text", "plain-text iperf3 or iperf2 output"),
    (
        "swift-bench",
        "swift-bench (OpenStack, 2.0.0) log: its **FINAL** line per phase",
    ),
    (
        "rgw-perf",
        "radosgw admin socket `perf dump` or `counter dump`: put/get ops and bytes (Ceph 16.2 to 20.2 layouts)",
    ),
];

/// Parses `text` as the output named by `format` (one of [`FORMATS`]).
pub fn parse(format: &str, text: &str) -> Result<Measurement, ParseError> {
    match format {
        "rados-bench" => rados_bench::parse(text),
        "rbd-bench" => rbd_bench::parse(text),
        "fio-json" => fio::parse_json(text),
        "dd" => dd::parse(text),
        "iperf3-json" => iperf3::parse_json(text),
        "iperf-text" => iperf3::parse_text(text),
        "swift-bench" => swift_bench::parse(text),
        "rgw-perf" => rgw_perf::parse(text),
        _ => Err(ParseError::UnknownFormat {
            format: format.to_string(),
            known: FORMATS
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_format_lists_formats() {
        let msg = parse("nope", "").unwrap_err().to_string();
        for (name, _) in FORMATS {
            assert!(msg.contains(name), "{msg}");
        }
    }

    #[test]
    fn every_listed_format_dispatches() {
        for (name, _) in FORMATS {
            assert!(!matches!(
                parse(name, ""),
                Err(ParseError::UnknownFormat { .. })
            ));
        }
    }
}
