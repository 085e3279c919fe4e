//! The figures of one I/O direction (`read` or `write`) of one fio job, in
//! the units of the metrics, whatever fio release wrote them.
//!
//! fio 3 reports `bw_bytes` (B/s) and latencies in `clat_ns` (nanoseconds);
//! fio 2 reports only `bw` (KiB/s) and latencies in `clat` (microseconds).
//! With `--output-format=json+` the latency object also has `bins`: fio's
//! own latency histogram, `{"<latency>": <number of I/Os>, …}`, the buckets
//! fio computes its percentiles from.

use serde_json::Value;

use crate::scan::json_number;

/// The completion-latency percentiles reported, as `(fio's percentile,
/// metric name suffix, quantile)`.
pub(super) const PERCENTILES: &[(f64, &str, f64)] = &[
    (50.0, "p50", 0.5),
    (90.0, "p90", 0.9),
    (99.0, "p99", 0.99),
    (99.9, "p99_9", 0.999),
];

/// The quantile (0..1) of a [`PERCENTILES`] suffix.
pub(super) fn quantile(suffix: &str) -> Option<f64> {
    PERCENTILES
        .iter()
        .find(|(_, s, _)| *s == suffix)
        .map(|(_, _, q)| *q)
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct DirStats {
    /// Number of I/Os, the weight of this job in the mean latency over jobs.
    pub ios: f64,
    pub iops: f64,
    pub bw_bytes: f64,
    /// Mean completion latency, microseconds.
    pub clat_mean_us: Option<f64>,
    /// `(suffix, microseconds)` for each of [`PERCENTILES`] present.
    pub clat_pct_us: Vec<(&'static str, f64)>,
    /// json+ only: `(latency in ns, number of I/Os)` of each non-empty bin.
    pub clat_bins_ns: Option<Vec<(u64, u64)>>,
}

/// Reads `job[dir]`; `None` when the direction did no I/O (or is absent).
pub(super) fn read(dir: &Value) -> Option<DirStats> {
    let num = |key: &str| dir.get(key).and_then(json_number);
    let iops = num("iops").unwrap_or(0.0);
    let ios = match num("total_ios") {
        Some(n) => n,
        // fio 2 has no total_ios: estimate from iops × runtime (ms).
        None if num("io_bytes").unwrap_or(0.0) > 0.0 => {
            iops * num("runtime").unwrap_or(0.0) / 1000.0
        }
        None => 0.0,
    };
    if ios <= 0.0 {
        return None;
    }
    let bw_bytes = num("bw_bytes").or_else(|| num("bw").map(|kib| kib * 1024.0))?;

    // (latency object, divisor to microseconds)
    let clat = match (dir.get("clat_ns"), dir.get("clat")) {
        (Some(ns), _) => Some((ns, 1000.0)),
        (None, Some(us)) => Some((us, 1.0)),
        (None, None) => None,
    };
    let (clat_mean_us, clat_pct_us, clat_bins_ns) = match clat {
        Some((obj, to_us)) => (
            obj.get("mean").and_then(json_number).map(|v| v / to_us),
            percentiles(obj.get("percentile"), to_us),
            bins(obj.get("bins"), 1000.0 / to_us),
        ),
        None => (None, Vec::new(), None),
    };
    Some(DirStats {
        ios,
        iops,
        bw_bytes,
        clat_mean_us,
        clat_pct_us,
        clat_bins_ns,
    })
}

/// json+'s `{"<latency>": count, …}` with latencies scaled to ns; `None`
/// without bins or when any bin is not a whole latency and count (a
/// histogram missing some I/Os would give wrong percentiles).
fn bins(map: Option<&Value>, to_ns: f64) -> Option<Vec<(u64, u64)>> {
    let Some(Value::Object(map)) = map else {
        return None;
    };
    map.iter()
        .map(|(latency, count)| {
            let latency = latency.parse::<u64>().ok()?;
            let ns = latency.checked_mul(to_ns as u64)?;
            Some((ns, count.as_u64()?))
        })
        .filter(|bin| bin.is_none_or(|(_, count)| count > 0))
        .collect()
}

/// Picks [`PERCENTILES`] out of fio's `{"50.000000": 51968, …}` map.
fn percentiles(map: Option<&Value>, to_us: f64) -> Vec<(&'static str, f64)> {
    let Some(Value::Object(map)) = map else {
        return Vec::new();
    };
    PERCENTILES
        .iter()
        .filter_map(|(p, suffix, _)| {
            map.iter()
                .find(|(k, _)| k.parse::<f64>().is_ok_and(|k| (k - p).abs() < 1e-6))
                .and_then(|(_, v)| json_number(v))
                .map(|v| (*suffix, v / to_us))
        })
        .collect()
}
