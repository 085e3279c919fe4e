//! The latency table of a stage that reports latency percentiles per label
//! set (s3-bench and swift-bench: per `op` and `phase`): one row per label
//! set with its rate, bandwidth, mean and percentiles and its errors, so a
//! reader sees each operation at a glance instead of forty metric rows.
//! Built from the stage's own metrics only; nothing is recomputed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::StageRecord;

/// One operation (label set) of a stage, its figures formatted for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyRow {
    /// `op=get, phase=measure`.
    pub what: String,
    pub ops_per_s: String,
    pub bandwidth: String,
    pub mean: String,
    pub p50: String,
    pub p90: String,
    pub p99: String,
    pub p99_9: String,
    pub max: String,
    pub errors: String,
}

const COLUMNS: [&str; 8] = [
    "ops_per_s",
    "bandwidth",
    "latency_mean",
    "latency_p50",
    "latency_p90",
    "latency_p99",
    "latency_p99_9",
    "latency_max",
];

/// The rows of a stage's latency table, or none when it reports no
/// `latency_p50` with labels.
pub fn rows(stage: &StageRecord) -> Vec<LatencyRow> {
    // Label sets without `kind` (errors carry one per error kind).
    let key = |m: &pipeline_model::Metric| -> Vec<(String, String)> {
        m.labels
            .iter()
            .filter(|(k, _)| k.as_str() != "kind")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut groups: BTreeMap<Vec<(String, String)>, BTreeMap<&str, String>> = BTreeMap::new();
    let mut errors: BTreeMap<Vec<(String, String)>, f64> = BTreeMap::new();
    for m in &stage.metrics {
        if m.labels.is_empty() {
            continue;
        }
        if m.name == "errors" {
            *errors.entry(key(m)).or_default() += m.value;
        } else if let Some(column) = COLUMNS.iter().find(|c| **c == m.name) {
            groups
                .entry(key(m))
                .or_default()
                .insert(column, super::format_value(m.value, &m.unit));
        }
    }
    groups
        .into_iter()
        .filter(|(_, cols)| cols.contains_key("latency_p50"))
        .map(|(labels, cols)| {
            let get = |c: &str| cols.get(c).cloned().unwrap_or_else(|| "-".into());
            LatencyRow {
                what: labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                ops_per_s: get("ops_per_s"),
                bandwidth: get("bandwidth"),
                mean: get("latency_mean"),
                p50: get("latency_p50"),
                p90: get("latency_p90"),
                p99: get("latency_p99"),
                p99_9: get("latency_p99_9"),
                max: get("latency_max"),
                errors: super::format_number(errors.get(&labels).copied().unwrap_or(0.0)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_label_set_with_its_errors() {
        let stage: StageRecord = serde_json::from_value(serde_json::json!({
            "id": "s3", "stage": "s3", "plugin": "s3-bench", "params": {}, "status": "failed",
            "metrics": [
                {"name": "ops_per_s", "value": 250.0, "unit": "IOPS", "direction": "higher", "labels": {"op": "get", "phase": "measure"}},
                {"name": "latency_p50", "value": 1500.0, "unit": "us", "direction": "lower", "labels": {"op": "get", "phase": "measure"}},
                {"name": "latency_p99", "value": 9000.0, "unit": "us", "direction": "lower", "labels": {"op": "get", "phase": "measure"}},
                {"name": "errors", "value": 2.0, "unit": "count", "direction": "lower", "labels": {"op": "get", "phase": "measure", "kind": "timeout"}},
                {"name": "errors", "value": 1.0, "unit": "count", "direction": "lower", "labels": {"op": "get", "phase": "measure", "kind": "http-503"}},
                {"name": "ops", "value": 9.0, "unit": "count", "direction": "lower", "labels": {"op": "put", "phase": "measure"}},
                {"name": "client_cpu_seconds", "value": 1.0, "unit": "s", "direction": "lower"}
            ]
        }))
        .unwrap();
        let rows = rows(&stage);
        assert_eq!(rows.len(), 1, "only label sets with a p50: {rows:?}");
        let r = &rows[0];
        assert_eq!(r.what, "op=get, phase=measure");
        assert_eq!(r.errors, "3");
        assert_eq!(r.p50, super::super::format_value(1500.0, "us"));
        assert_eq!(r.p90, "-");
    }
}
