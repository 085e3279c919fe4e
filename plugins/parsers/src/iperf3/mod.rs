//! iperf3 results: `iperf3 -J` JSON, and the plain-text summaries of iperf3
//! and iperf2.
//!
//! Metrics: `bits_per_second` (bit/s, label `side` = sender|receiver when
//! the tool tags it; the receiver's is the headline), `retransmits` (TCP),
//! `jitter` (ms) and `lost_percent` (UDP); series `throughput` per interval.
//!
//! Rules across hosts: `bits_per_second` and `retransmits` add up. `jitter`
//! does not combine: it is iperf3's smoothed running estimate on one
//! receiver, not a mean over packets, and there is no packet count to weight
//! it by. `lost_percent` does not combine either: it is a share of each
//! link's own packets, and without their packet counts a mean of shares
//! would weight a short test like a long one.

mod json;
mod text;

use pipeline_model::Measurement;

use crate::error::ParseError;

/// Parses `iperf3 -J` output. A top-level `"error"` (iperf3 exits 0 on
/// "Connection refused" in `-J` mode) is returned as an error.
pub fn parse_json(text: &str) -> Result<Measurement, ParseError> {
    json::parse(text)
}

/// Parses plain-text iperf3 or iperf2 output.
pub fn parse_text(text: &str) -> Result<Measurement, ParseError> {
    text::parse(text)
}
