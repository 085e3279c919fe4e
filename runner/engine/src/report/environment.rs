//! The report's environment section as an operator reads it: short tables
//! of the facts looked for first (Ceph versions, health, OSDs by device
//! class, the pools' settings, capacity), and each raw fact as a JSON file
//! in the run folder (`environment/NAME.json`), linked rather than inlined
//! (a `ceph osd pool ls detail` alone is hundreds of lines).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::format_value;
use crate::results::RunResults;

/// What the template shows.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EnvironmentView {
    pub tables: Vec<FactTable>,
    /// Each fact's file, in the order of the facts.
    pub files: Vec<FactFile>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FactTable {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FactFile {
    pub name: String,
    /// Relative to the run folder.
    pub path: String,
}

/// Writes each fact of `results` to `run_dir/environment/` and summarizes
/// the ones it knows. A fact whose file cannot be written is left out of
/// `files` (the template then shows it inline).
pub fn prepare(results: &RunResults, run_dir: &Path) -> EnvironmentView {
    let mut files = Vec::new();
    let folder = run_dir.join("environment");
    if !results.environment.is_empty() && std::fs::create_dir_all(&folder).is_ok() {
        let mut used: Vec<String> = Vec::new();
        for (name, value) in &results.environment {
            let stem = file_stem(name, &used);
            used.push(stem.clone());
            let path = folder.join(format!("{stem}.json"));
            let text = serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
            // Never through a link a command or plugin left in its place.
            if pipeline_stage_api::safe_fs::write(
                &path,
                text.as_bytes(),
                pipeline_stage_api::safe_fs::Existing::Replace,
            )
            .is_ok()
            {
                files.push(FactFile {
                    name: name.clone(),
                    path: format!("environment/{stem}.json"),
                });
            }
        }
    }
    let mut tables = summarize(&results.environment);
    tables.extend(host_tables(&results.host_manifests));
    EnvironmentView { tables, files }
}

/// At most this many hosts side by side in the sysctl table.
const SYSCTL_COLUMNS: usize = 8;

/// The watched hosts: what each is, and their sysctls side by side (a
/// value one host does not share with the others stands out).
fn host_tables(
    manifests: &BTreeMap<String, crate::host_watch::manifest::HostManifest>,
) -> Vec<FactTable> {
    let mut rows = Vec::new();
    for (host, m) in manifests {
        let per_nic = |map: &BTreeMap<String, u64>, unit: &str| {
            map.iter()
                .filter(|(nic, _)| nic.as_str() != "lo")
                .map(|(nic, v)| format!("{nic} {v}{unit}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        rows.push(vec![
            host.clone(),
            m.kernel.clone().unwrap_or_default(),
            m.cpu_model.clone().unwrap_or_default(),
            m.cpus.to_string(),
            format!(
                "{:.1} GiB",
                m.memory_total_bytes as f64 / (1u64 << 30) as f64
            ),
            per_nic(&m.mtu, ""),
            per_nic(&m.link_speed_mbit, " Mb/s"),
        ]);
    }
    let mut tables: Vec<FactTable> = table(
        "Hosts",
        &[
            "Host",
            "Kernel",
            "CPU",
            "CPUs",
            "Memory",
            "MTU",
            "Link speed",
        ],
        rows,
    )
    .into_iter()
    .collect();
    let hosts: Vec<(&String, _)> = manifests.iter().take(SYSCTL_COLUMNS).collect();
    let mut names: Vec<&String> = hosts.iter().flat_map(|(_, m)| m.sysctls.keys()).collect();
    names.sort();
    names.dedup();
    let rows = names
        .into_iter()
        .map(|name| {
            let mut row = vec![name.clone()];
            row.extend(
                hosts
                    .iter()
                    .map(|(_, m)| m.sysctls.get(name).cloned().unwrap_or_default()),
            );
            row
        })
        .collect();
    let mut header = vec!["Sysctl"];
    header.extend(hosts.iter().map(|(h, _)| h.as_str()));
    tables.extend(table("Host sysctls", &header, rows));
    tables
}

/// A file name for `name`: letters, digits, `-`, `_`; others as `_`, and a
/// number when two names map to the same stem.
fn file_stem(name: &str, used: &[String]) -> String {
    let base: String = name
        .chars()
        .take(80)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut stem = base.clone();
    let mut n = 2;
    while used.contains(&stem) {
        stem = format!("{base}_{n}");
        n += 1;
    }
    stem
}

/// Tables of the facts native stages record; unknown shapes are skipped.
/// (The daemons' versions are in the report's Versions table, with the
/// clients'.)
pub fn summarize(env: &BTreeMap<String, Value>) -> Vec<FactTable> {
    let mut tables = Vec::new();
    if let Some(t) = env.get("ceph status").and_then(status) {
        tables.push(t);
    }
    if let Some(t) = env.get("ceph osd tree").and_then(osd_classes) {
        tables.push(t);
    }
    if let Some(t) = env.get("ceph osd pool ls detail").and_then(pools) {
        tables.push(t);
    }
    if let Some(t) = env.get("ceph df").and_then(capacity) {
        tables.push(t);
    }
    tables
}

fn table(title: &str, header: &[&str], rows: Vec<Vec<String>>) -> Option<FactTable> {
    (!rows.is_empty()).then(|| FactTable {
        title: title.to_string(),
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
    })
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// "ceph version 16.2.15 (618f4408...) pacific (stable)" -> "16.2.15 pacific (stable)".
pub fn short_version(version: &str) -> String {
    let rest = version.strip_prefix("ceph version ").unwrap_or(version);
    let is_hash = |w: &str| {
        w.len() > 10
            && w.starts_with('(')
            && w.ends_with(')')
            && w[1..w.len() - 1].chars().all(|c| c.is_ascii_hexdigit())
    };
    rest.split_whitespace()
        .filter(|w| !is_hash(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ceph status`: health, OSDs up/in, PGs by state, objects.
fn status(v: &Value) -> Option<FactTable> {
    let mut rows = Vec::new();
    if let Some(h) = v.get("health") {
        let checks: Vec<String> = h
            .get("checks")
            .and_then(Value::as_object)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        let mut health = text(h.get("status").unwrap_or(&Value::Null));
        if !checks.is_empty() {
            health.push_str(&format!(" ({})", checks.join(", ")));
        }
        rows.push(vec!["health".to_string(), health]);
    }
    if let Some(o) = v.get("osdmap") {
        rows.push(vec![
            "OSDs".to_string(),
            format!(
                "{} total, {} up, {} in",
                text(o.get("num_osds").unwrap_or(&Value::Null)),
                text(o.get("num_up_osds").unwrap_or(&Value::Null)),
                text(o.get("num_in_osds").unwrap_or(&Value::Null))
            ),
        ]);
    }
    if let Some(p) = v.get("pgmap") {
        let states: Vec<String> = p
            .get("pgs_by_state")
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .map(|x| {
                        format!(
                            "{} {}",
                            text(x.get("count").unwrap_or(&Value::Null)),
                            text(x.get("state_name").unwrap_or(&Value::Null))
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        rows.push(vec![
            "PGs".to_string(),
            format!(
                "{} in {} pools: {}",
                text(p.get("num_pgs").unwrap_or(&Value::Null)),
                text(p.get("num_pools").unwrap_or(&Value::Null)),
                states.join(", ")
            ),
        ]);
        if let Some(n) = p.get("num_objects") {
            rows.push(vec!["objects".to_string(), text(n)]);
        }
    }
    table("Cluster status", &["", ""], rows)
}

/// `ceph osd tree`: OSDs per device class, and how many are up.
fn osd_classes(v: &Value) -> Option<FactTable> {
    let mut by_class: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for node in v.get("nodes")?.as_array()? {
        if node.get("type").and_then(Value::as_str) != Some("osd") {
            continue;
        }
        let class = node
            .get("device_class")
            .and_then(Value::as_str)
            .unwrap_or("(none)")
            .to_string();
        let entry = by_class.entry(class).or_default();
        entry.0 += 1;
        if node.get("status").and_then(Value::as_str) == Some("up") {
            entry.1 += 1;
        }
    }
    let rows = by_class
        .into_iter()
        .map(|(class, (n, up))| vec![class, n.to_string(), up.to_string()])
        .collect();
    table("OSDs by device class", &["class", "OSDs", "up"], rows)
}

/// `ceph osd pool ls detail`: each pool's replication and placement.
fn pools(v: &Value) -> Option<FactTable> {
    let mut rows = Vec::new();
    for p in v.as_array()? {
        let field = |k: &str| text(p.get(k).unwrap_or(&Value::Null));
        let erasure = p.get("type").and_then(Value::as_u64) == Some(3);
        let profile = p
            .get("erasure_code_profile")
            .and_then(Value::as_str)
            .filter(|s| erasure && !s.is_empty())
            .unwrap_or("-")
            .to_string();
        rows.push(vec![
            field("pool_name"),
            if erasure {
                "erasure".into()
            } else {
                "replicated".into()
            },
            field("size"),
            field("min_size"),
            field("pg_num"),
            profile,
        ]);
    }
    table(
        "Pools",
        &["pool", "type", "size", "min_size", "pg_num", "EC profile"],
        rows,
    )
}

/// `ceph df`: raw capacity.
fn capacity(v: &Value) -> Option<FactTable> {
    let s = v.get("stats")?;
    let bytes = |k: &str| {
        s.get(k)
            .and_then(Value::as_f64)
            .map(|b| format_value(b, "B"))
    };
    let rows = [
        ("total", bytes("total_bytes")),
        ("used (raw)", bytes("total_used_raw_bytes")),
        ("available", bytes("total_avail_bytes")),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| vec![k.to_string(), v]))
    .collect();
    table("Capacity", &["", ""], rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts of a real full-baseline run on the sandbox (tests/compare/).
    fn real_facts() -> BTreeMap<String, Value> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/compare/full-baseline-1.results.json"
        );
        let r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        serde_json::from_value(r["environment"].clone()).unwrap()
    }

    #[test]
    fn the_facts_an_operator_looks_for_first() {
        let tables = summarize(&real_facts());
        let titles: Vec<&str> = tables.iter().map(|t| t.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Cluster status",
                "OSDs by device class",
                "Pools",
                "Capacity"
            ]
        );
        assert_eq!(
            tables[0].rows[0],
            vec!["health".to_string(), "HEALTH_OK".into()]
        );
        assert_eq!(
            tables[0].rows[1],
            vec!["OSDs".to_string(), "3 total, 3 up, 3 in".into()]
        );
        assert_eq!(
            tables[1].rows,
            vec![vec!["hdd".to_string(), "3".into(), "3".into()]]
        );
        let pool = tables[2]
            .rows
            .iter()
            .find(|r| r[0] == ".rgw.root")
            .expect("the gateway's pool");
        assert_eq!(
            pool[1..5],
            ["replicated".to_string(), "3".into(), "2".into(), "8".into()]
        );
        assert_eq!(
            tables[3].rows[0],
            vec!["total".to_string(), "12 GiB".into()]
        );
    }

    #[test]
    fn unknown_shapes_are_skipped_and_file_names_never_collide() {
        let mut env = BTreeMap::new();
        env.insert("ceph osd tree".to_string(), Value::from(3));
        env.insert(
            "ceph status".to_string(),
            serde_json::json!({"health": {"status": "HEALTH_WARN", "checks": {"OSD_DOWN": {}}}}),
        );
        let tables = summarize(&env);
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].rows[0][1], "HEALTH_WARN (OSD_DOWN)");
        let a = file_stem("ceph df", &[]);
        let b = file_stem("ceph/df", std::slice::from_ref(&a));
        assert_eq!((a.as_str(), b.as_str()), ("ceph_df", "ceph_df_2"));
        assert_eq!(file_stem("../../etc", &[]), "______etc");
    }
}
