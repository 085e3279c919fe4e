//! `dd`'s transfer summary (from its stderr).
//!
//! Accepted spellings of the summary line:
//! - GNU coreutils ≥ 8.24: `268435456 bytes (268 MB, 256 MiB) copied, 0.226586 s, 1.2 GB/s`
//!   (and `512 bytes copied, 4.5e-05 s, …`, `1 byte copied, …` for small counts);
//! - older GNU: `1073741824 bytes (1.1 GB) copied, 2.44 s, 440 MB/s`;
//! - BSD/macOS: `1073741824 bytes transferred in 2.440311 secs (440000000 bytes/sec)`.
//!
//! The rate dd prints is rounded to two or three digits, so `bandwidth` is
//! recomputed from the exact byte count and seconds. With `status=progress`
//! dd rewrites a progress line with `\r`; the last summary line wins. dd's
//! messages are translated, so a non-English locale is an error that says to
//! run dd with `LC_ALL=C`.

use std::sync::LazyLock;

use pipeline_model::{Aggregate, Direction, Measurement, Metric, unit};
use regex::Regex;

use crate::error::ParseError;
use crate::scan::number;

const TOOL: &str = "dd";

static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        ^\s*(?P<bytes>\d+)\s+bytes?\s+
        (?:
            (?:\([^)]*\)\s+)?copied,\s+(?P<gnu_s>\S+)\s+s(?:ec(?:ond)?s?)?,   # GNU / busybox
          | transferred\s+in\s+(?P<bsd_s>\S+)\s+secs?                         # BSD
        )",
    )
    .expect("static regex")
});

/// Parses dd's stderr; see the module docs for the accepted lines.
pub fn parse(text: &str) -> Result<Measurement, ParseError> {
    let mut found = None;
    for (idx, line) in text.split(['\n', '\r']).enumerate() {
        if let Some(c) = SUMMARY.captures(line) {
            found = Some((idx, line, c));
        }
    }
    let Some((idx, line, caps)) = found else {
        return Err(ParseError::missing(
            TOOL,
            "a summary line like '268435456 bytes (268 MB, 256 MiB) copied, 0.21 s, 1.3 GB/s' \
             (run dd with LC_ALL=C)",
            text,
        ));
    };
    let expected = "a byte count and elapsed seconds";
    let bytes =
        number(&caps["bytes"]).ok_or_else(|| ParseError::bad_line(TOOL, expected, idx, line))?;
    let secs = caps
        .name("gnu_s")
        .or_else(|| caps.name("bsd_s"))
        .and_then(|m| number(m.as_str()))
        .filter(|s| *s >= 0.0)
        .ok_or_else(|| ParseError::bad_line(TOOL, expected, idx, line))?;

    // Across hosts: the bytes copied add up (a count of work done); the
    // elapsed times do not combine (each host's own copy).
    let mut metrics = vec![
        Metric::new("bytes", bytes, unit::BYTES, Direction::None).aggregate(Aggregate::Sum),
        Metric::new("elapsed", secs, unit::SECONDS, Direction::None).aggregate(Aggregate::None),
    ];
    // A zero-second copy (dd rounds very short runs) has no meaningful rate.
    if secs > 0.0 {
        metrics.push(
            Metric::new(
                "bandwidth",
                bytes / secs,
                unit::BYTES_PER_S,
                Direction::Higher,
            )
            .aggregate(Aggregate::Sum)
            .headline(),
        );
    }
    Ok(Measurement {
        metrics,
        ..Measurement::default()
    })
}
