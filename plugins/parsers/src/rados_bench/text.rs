//! The plain-text form of `rados bench` output.
//!
//! With `--show-time` every line starts with a local timestamp
//! (`2016-03-02 10:20:30.123456`); both regexes allow for it. Every 20
//! seconds rados repeats the table header after a `min lat: … max lat: …`
//! line; neither matches a row or a summary line, so both are skipped.

use std::sync::LazyLock;

use regex::Regex;

use super::{Parsed, Row, fields};
use crate::scan::{lines, number};

/// `Key words (unit): value` — the summary lines.
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:\d{4}-\d\d-\d\d[ T]\S+\s+)?(?P<key>[A-Za-z][A-Za-z /()_]*?):?\s+(?P<value>\S+)\s*$",
    )
    .expect("static regex")
});

/// A per-second row: sec, Cur ops, started, finished, avg MB/s, cur MB/s,
/// last lat(s), avg lat(s). The last four may be `-`, `0` or `nan`.
static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|\s)(?P<sec>\d+)\s+(?P<cur_ops>\d+)\s+\d+\s+\d+\s+\S+\s+(?P<cur_bw>\S+)\s+\S+\s+(?P<avg_lat>\S+)\s*$",
    )
    .expect("static regex")
});

pub(super) fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in lines(text) {
        if let Some(c) = ROW.captures(line) {
            if let Some(sec) = number(&c["sec"]) {
                parsed.rows.push(Row {
                    sec,
                    cur_ops: number(&c["cur_ops"]),
                    cur_bw: number(&c["cur_bw"]),
                    avg_lat: number(&c["avg_lat"]),
                });
            }
        } else if let Some(c) = SUMMARY.captures(line) {
            let key = &c["key"];
            if let (Some(field), Some(value)) = (fields::lookup(key), number(&c["value"])) {
                parsed.set(field, value);
                parsed.write |= fields::is_write_count(key);
            }
        }
    }
    parsed
}
