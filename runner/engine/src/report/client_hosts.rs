//! The client-hosts table of a stage that ran its load from several hosts
//! (`s3-bench`/`swift-bench` with `on:`): per host its clock against this
//! machine, when it started against the earliest, how busy its client
//! was and its worker's memory, so a reader sees at once which client was
//! saturated, and which host was lost. Built from the stage's own metrics.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::results::StageRecord;

/// A client busier than this share of the cores its runtime could use is
/// marked saturated: its figures say more about it than about the gateway.
const SATURATED: f64 = 0.8;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientHostRow {
    pub host: String,
    pub clock_offset: String,
    pub start_offset: String,
    /// `1.62 of 2 cores (saturated)`.
    pub client_cpu: String,
    pub worker_memory: String,
    /// `measured`, or `LOST: not in host=all`.
    pub status: String,
}

/// One row per client host, or none when the stage has no `client_cores`.
pub fn rows(stage: &StageRecord) -> Vec<ClientHostRow> {
    let mut by_host: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    for m in &stage.metrics {
        let Some(host) = m.labels.get("host") else {
            continue;
        };
        if host == "all" || m.labels.len() != 1 {
            continue;
        }
        if [
            "client_cores",
            "client_cores_busy",
            "clock_offset_ms",
            "start_offset_ms",
            "worker_max_rss",
            "host_lost",
        ]
        .contains(&m.name.as_str())
        {
            by_host
                .entry(host.as_str())
                .or_default()
                .insert(m.name.as_str(), m.value);
        }
    }
    if !by_host
        .values()
        .any(|f| f.contains_key("client_cores") || f.contains_key("host_lost"))
    {
        return Vec::new();
    }
    by_host
        .into_iter()
        .map(|(host, f)| {
            let ms = |name: &str| f.get(name).map_or("-".into(), |v| format!("{v:+.3} ms"));
            let client_cpu = match (f.get("client_cores_busy"), f.get("client_cores")) {
                (Some(busy), Some(cores)) => format!(
                    "{busy:.2} of {cores:.0} cores{}",
                    if *busy >= SATURATED * cores {
                        " (saturated)"
                    } else {
                        ""
                    }
                ),
                _ => "-".into(),
            };
            ClientHostRow {
                host: host.to_string(),
                clock_offset: ms("clock_offset_ms"),
                start_offset: ms("start_offset_ms"),
                client_cpu,
                worker_memory: f
                    .get("worker_max_rss")
                    .map_or("-".into(), |v| format!("{v:.1} MiB")),
                status: if f.contains_key("host_lost") {
                    "LOST: not in host=all".into()
                } else {
                    "measured".into()
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_host_with_saturation_and_losses() {
        let m = |name: &str, v: f64, host: &str| serde_json::json!({"name": name, "value": v, "unit": "cores", "direction": "none", "labels": {"host": host}});
        let stage: StageRecord = serde_json::from_value(serde_json::json!({
            "id": "s3", "stage": "s3", "plugin": "s3-bench", "params": {}, "status": "succeeded",
            "metrics": [
                m("client_cores", 2.0, "node1"), m("client_cores_busy", 1.9, "node1"),
                m("clock_offset_ms", -0.25, "node1"), m("start_offset_ms", 0.0, "node1"),
                m("worker_max_rss", 21.04, "node1"),
                m("host_lost", 1.0, "node2"),
                m("client_cores", 4.0, "all"),
            ]
        }))
        .unwrap();
        let rows = rows(&stage);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].client_cpu, "1.90 of 2 cores (saturated)");
        assert_eq!(rows[0].clock_offset, "-0.250 ms");
        assert_eq!(rows[0].worker_memory, "21.0 MiB");
        assert_eq!(rows[0].status, "measured");
        assert_eq!(rows[1].status, "LOST: not in host=all");
        assert_eq!(rows[1].client_cpu, "-");
        let local: StageRecord = serde_json::from_value(serde_json::json!({
            "id": "s3", "stage": "s3", "plugin": "s3-bench", "params": {}, "status": "succeeded",
            "metrics": [m("clock_offset_ms", 0.0, "node1")]
        }))
        .unwrap();
        assert!(super::rows(&local).is_empty());
    }
}
