//! What each OSD was doing, as the cluster watch reads it once a second:
//!
//! - `ceph osd perf -f json`: the manager's commit and apply latency per OSD
//!   (the same layout in 16.2, 18.2 and 20.2:
//!   `{"osdstats":{"osd_perf_infos":[{"id":2,"perf_stats":{"commit_latency_ms":0,…}}]}}`);
//! - `ceph tell osd.N perf dump osd -f json`: the OSD's own op counters since
//!   it started (`{"osd":{"op_wip":0,"op_r":103,"op_r_latency":{"avgcount":103,"sum":0.0456,…},…}}`),
//!   of which two readings give the ops, bytes and mean latency in between.
//!
//! Counters a release does not have read as zero; a dump without an `osd`
//! section, or with a counter that is not a number, is an error.

use serde_json::Value;

use crate::error::ParseError;
use crate::scan::json_document;

/// One OSD in `ceph osd perf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OsdLatency {
    pub id: u32,
    pub commit_latency_ms: f64,
    pub apply_latency_ms: f64,
}

/// Parses `ceph osd perf -f json`.
pub fn parse_osd_perf(text: &str) -> Result<Vec<OsdLatency>, ParseError> {
    const TOOL: &str = "ceph osd perf";
    let doc = json_document(TOOL, text)?;
    // Every release seen nests the list in `osdstats`; a bare list is read too.
    let infos = doc
        .get("osdstats")
        .unwrap_or(&doc)
        .get("osd_perf_infos")
        .and_then(Value::as_array)
        .ok_or_else(|| ParseError::missing(TOOL, "an \"osd_perf_infos\" list", text))?;
    infos
        .iter()
        .map(|info| {
            let id = info
                .get("id")
                .and_then(Value::as_u64)
                .and_then(|id| u32::try_from(id).ok());
            let stats = info.get("perf_stats");
            let ms = |field: &str| {
                stats
                    .and_then(|s| s.get(field))
                    .and_then(Value::as_f64)
                    .filter(|x| x.is_finite() && *x >= 0.0)
            };
            match (id, ms("commit_latency_ms"), ms("apply_latency_ms")) {
                (Some(id), Some(commit), Some(apply)) => Ok(OsdLatency {
                    id,
                    commit_latency_ms: commit,
                    apply_latency_ms: apply,
                }),
                _ => Err(ParseError::missing(
                    TOOL,
                    "entries with an id and perf_stats.commit_latency_ms/apply_latency_ms",
                    text,
                )),
            }
        })
        .collect()
}

/// A latency counter: how many ops it timed and their total seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySum {
    pub count: u64,
    pub sum_s: f64,
}

/// An OSD's op counters since it started (`perf dump`'s `osd` section).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OsdCounters {
    /// Ops in progress right now (a gauge: the OSD's queue).
    pub op_wip: u64,
    pub op_r: u64,
    pub op_w: u64,
    /// Read-modify-write ops (e.g. omap updates, class calls).
    pub op_rw: u64,
    pub op_in_bytes: u64,
    pub op_out_bytes: u64,
    pub op_r_latency: LatencySum,
    pub op_w_latency: LatencySum,
    pub op_rw_latency: LatencySum,
}

/// The counters [`OsdCounters`] reads, for a caller that wants to pass on
/// only these (the cluster watch's sampler keeps its lines short).
pub const COUNTERS: [&str; 9] = [
    "op_wip",
    "op_r",
    "op_w",
    "op_rw",
    "op_in_bytes",
    "op_out_bytes",
    "op_r_latency",
    "op_w_latency",
    "op_rw_latency",
];

/// Parses `ceph tell osd.N perf dump [osd] -f json` (or the same document
/// from librados' `osd_command`).
pub fn parse_perf_dump(text: &str) -> Result<OsdCounters, ParseError> {
    const TOOL: &str = "ceph tell osd perf dump";
    let doc = json_document(TOOL, text)?;
    let osd = doc
        .get("osd")
        .and_then(Value::as_object)
        .ok_or_else(|| ParseError::missing(TOOL, "an \"osd\" section", text))?;
    let count = |name: &str| match osd.get(name) {
        None => Ok(0),
        Some(v) => v
            .as_u64()
            .ok_or_else(|| ParseError::missing(TOOL, format!("\"{name}\" as a count"), text)),
    };
    let latency = |name: &str| match osd.get(name) {
        None => Ok(LatencySum::default()),
        Some(v) => match (
            v.get("avgcount").and_then(Value::as_u64),
            v.get("sum")
                .and_then(Value::as_f64)
                .filter(|s| s.is_finite() && *s >= 0.0),
        ) {
            (Some(count), Some(sum_s)) => Ok(LatencySum { count, sum_s }),
            _ => Err(ParseError::missing(
                TOOL,
                format!("\"{name}\" with an avgcount and a sum"),
                text,
            )),
        },
    };
    Ok(OsdCounters {
        op_wip: count("op_wip")?,
        op_r: count("op_r")?,
        op_w: count("op_w")?,
        op_rw: count("op_rw")?,
        op_in_bytes: count("op_in_bytes")?,
        op_out_bytes: count("op_out_bytes")?,
        op_r_latency: latency("op_r_latency")?,
        op_w_latency: latency("op_w_latency")?,
        op_rw_latency: latency("op_rw_latency")?,
    })
}
