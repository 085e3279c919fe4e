//! radosgw's own operation counters, from its admin socket:
//! `ceph --admin-daemon …client.rgw.NAME.asok perf dump` (every release) or
//! `… counter dump` (18.2 and later).
//!
//! Where the object counters live depends on the release (measured on the
//! sandbox gateway, tests/data/rgw-*-dump-*):
//!
//! ```text
//! 16.2, 18.2  "rgw":    {"req": 16, "get": 4, "get_b": 12285, "put": 5, "put_b": 20480, …}
//! 20.2        "rgw":    {"req": 14, "failed_req": 0, …}            (no get/put any more)
//!             "rgw_op": {"put_obj_ops": 5, "put_obj_bytes": 20480, "get_obj_ops": 4,
//!                        "get_obj_bytes": 12285, "del_obj_ops": 1, "del_obj_bytes": 4096,
//!                        "list_obj_ops": 1, …}
//! ```
//!
//! (Ceph's documentation lists `rgw_op` from Squid, 19.2, on.) `counter
//! dump` wraps each section in a list of `{"labels": {…}, "counters": {…}}`;
//! the entry with no labels is the whole gateway (labelled ones are the
//! per-user and per-bucket caches, `rgw_user_counters_cache`, subsets of it).
//!
//! What the counters count is the same in all three releases: a HEAD is a
//! `get` with no bytes, and each GET adds the object's size minus one to the
//! get bytes (3 GETs of 4096 bytes: 12285).

use pipeline_model::{Aggregate, Direction, Measurement, Metric, unit};
use serde_json::{Map, Value};

use crate::error::ParseError;
use crate::scan::json_document;

const TOOL: &str = "radosgw perf dump";

/// Which of the two layouts a dump had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `rgw` → `put`, `put_b`, `get`, `get_b` (Ceph 16.2 and 18.2).
    Rgw,
    /// `rgw_op` → `put_obj_ops`, `put_obj_bytes`, `get_obj_ops`, `get_obj_bytes`, … (19.2 and later).
    RgwOp,
}

/// The gateway's counters since it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    pub layout: Layout,
    /// Requests of any kind (`rgw.req`), and the ones that failed (`rgw.failed_req`).
    pub requests: u64,
    pub failed_requests: u64,
    pub put_ops: u64,
    pub put_bytes: u64,
    /// HEADs included.
    pub get_ops: u64,
    /// Size minus one per GET (see the module documentation).
    pub get_bytes: u64,
    /// Only the `rgw_op` layout counts deletes and listings.
    pub delete_ops: Option<u64>,
    pub delete_bytes: Option<u64>,
    pub list_ops: Option<u64>,
    /// Gauges at the dump, in `rgw` in every release seen: requests queued
    /// for a frontend thread (`qlen`) and being served (`qactive`).
    pub queue_length: Option<u64>,
    pub active_requests: Option<u64>,
}

/// Reads the counters from a `perf dump` or `counter dump` (lines before the
/// JSON are skipped).
pub fn counters(text: &str) -> Result<Counters, ParseError> {
    let doc = json_document(TOOL, text)?;
    let rgw = section(&doc, "rgw", text)?;
    let counter = |map: &Map<String, Value>, section: &str, name: &str| {
        map.get(name)
            .and_then(Value::as_u64)
            .ok_or_else(|| ParseError::missing(TOOL, format!("a counter `{section}.{name}`"), text))
    };
    let requests = counter(rgw, "rgw", "req")?;
    let failed_requests = counter(rgw, "rgw", "failed_req")?;
    let queue_length = rgw.get("qlen").and_then(Value::as_u64);
    let active_requests = rgw.get("qactive").and_then(Value::as_u64);
    // 19.2 and later: the object counters moved to `rgw_op` (and `rgw` has
    // no `put` any more). A dump with both is read from `rgw_op`.
    if doc.get("rgw_op").is_some() {
        let op = section(&doc, "rgw_op", text)?;
        let read = |name| counter(op, "rgw_op", name);
        return Ok(Counters {
            layout: Layout::RgwOp,
            requests,
            failed_requests,
            put_ops: read("put_obj_ops")?,
            put_bytes: read("put_obj_bytes")?,
            get_ops: read("get_obj_ops")?,
            get_bytes: read("get_obj_bytes")?,
            delete_ops: Some(read("del_obj_ops")?),
            delete_bytes: Some(read("del_obj_bytes")?),
            list_ops: Some(read("list_obj_ops")?),
            queue_length,
            active_requests,
        });
    }
    // 16.2 and 18.2.
    let read = |name| counter(rgw, "rgw", name);
    Ok(Counters {
        layout: Layout::Rgw,
        requests,
        failed_requests,
        put_ops: read("put")?,
        put_bytes: read("put_b")?,
        get_ops: read("get")?,
        get_bytes: read("get_b")?,
        delete_ops: None,
        delete_bytes: None,
        list_ops: None,
        queue_length,
        active_requests,
    })
}

/// The counters of one section: `perf dump`'s object, or the unlabelled
/// entry of `counter dump`'s list.
fn section<'a>(
    doc: &'a Value,
    name: &str,
    text: &str,
) -> Result<&'a Map<String, Value>, ParseError> {
    let found = match doc.get(name) {
        Some(Value::Object(map)) => Some(map),
        Some(Value::Array(entries)) => entries
            .iter()
            .find(|e| {
                e.get("labels")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty)
            })
            .and_then(|e| e.get("counters"))
            .and_then(Value::as_object),
        _ => None,
    };
    found.ok_or_else(|| {
        ParseError::missing(
            TOOL,
            format!("a `{name}` section (is this a radosgw admin socket's perf dump?)"),
            text,
        )
    })
}

/// The counters as metrics: `ops` and `bytes` labelled `op` (put, get, and
/// with the `rgw_op` layout delete; `ops` also list), `requests`,
/// `failed_requests`. They are totals since the gateway started (a
/// benchmark's share is the difference of two dumps), summed over gateways.
pub fn parse(text: &str) -> Result<Measurement, ParseError> {
    let c = counters(text)?;
    let count = |name: &str, v: u64, unit: &str| {
        Metric::new(name, v as f64, unit, Direction::None).aggregate(Aggregate::Sum)
    };
    let mut metrics = vec![
        count("requests", c.requests, unit::COUNT),
        count("failed_requests", c.failed_requests, unit::COUNT),
    ];
    let per_op = [
        ("put", Some(c.put_ops), Some(c.put_bytes)),
        ("get", Some(c.get_ops), Some(c.get_bytes)),
        ("delete", c.delete_ops, c.delete_bytes),
        ("list", c.list_ops, None),
    ];
    for (op, ops, bytes) in per_op {
        if let Some(v) = ops {
            metrics.push(count("ops", v, unit::COUNT).label("op", op));
        }
        if let Some(v) = bytes {
            metrics.push(count("bytes", v, unit::BYTES).label("op", op));
        }
    }
    Ok(Measurement {
        metrics,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_documents_are_errors_not_zeros() {
        for text in [
            "",
            "admin_socket: exception getting command descriptions: [Errno 2] No such file or directory",
            "{\"osd\": {}}",
            "{\"rgw\": {\"req\": 1, \"failed_req\": 0}}",
            "{\"rgw\": {\"req\": 1, \"failed_req\": 0, \"put\": \"5\"}}",
            "{\"rgw\": {\"req\": 1, \"failed_req\": 0}, \"rgw_op\": {\"put_obj_ops\": 1}}",
            "{\"rgw\": [{\"labels\": {\"User\": \"u\"}, \"counters\": {\"req\": 1}}]}",
        ] {
            assert!(counters(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn counter_dump_reads_the_unlabelled_entry() {
        let text = r#"{"rgw": [{"labels": {}, "counters": {"req": 3, "failed_req": 1}}],
            "rgw_op": [
              {"labels": {"Bucket": "b"}, "counters": {"put_obj_ops": 1}},
              {"labels": {}, "counters": {"put_obj_ops": 2, "put_obj_bytes": 8, "get_obj_ops": 0,
                "get_obj_bytes": 0, "del_obj_ops": 0, "del_obj_bytes": 0, "list_obj_ops": 0}}]}"#;
        let c = counters(text).unwrap();
        assert_eq!(
            (c.layout, c.requests, c.failed_requests),
            (Layout::RgwOp, 3, 1)
        );
        assert_eq!((c.put_ops, c.put_bytes), (2, 8));
    }
}
