//! What differs between two runs' environments, listed above the metrics:
//! the client tools' versions (each stage instance's, per host), the
//! cluster daemons' (`ceph versions`), the monitors' configuration
//! (`ceph config dump`) and each host's kernel. A figure that fell by 90%
//! reads differently next to "client librbd 16.2.15 → 18.2.7".

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client_versions::{ClientVersions, upstream};
use crate::results::RunResults;
use pipeline_stage_api::client_root;

/// The environment fact `ceph-info` records the daemons' versions under.
const DAEMON_VERSIONS: &str = "ceph versions";
/// The fact with the monitors' configuration database.
const CONFIG_DUMP: &str = "ceph config dump";
/// The fact with each pool's replication, placement groups and options.
const POOL_DETAIL: &str = "ceph osd pool ls detail";
/// The fact with the CRUSH hierarchy: hosts and their OSDs.
const OSD_TREE: &str = "ceph osd tree";

/// One difference between the baseline's environment and a candidate's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvironmentChange {
    /// Index into the comparison's candidates.
    pub candidate: usize,
    pub kind: ChangeKind,
    /// What changed: a tool or library (`librbd`), a daemon kind (`osd`),
    /// a setting (`global/osd_op_queue`), a host (`local`).
    pub what: String,
    /// In the baseline; absent: not there (a setting not set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// In the candidate; absent: not there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where: the stage instances (with their host when not this
    /// machine) whose client changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<String>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// A client tool or library a stage ran.
    Client,
    /// The cluster daemons of a kind.
    Daemons,
    /// A setting of `ceph config dump`.
    Config,
    /// A property of a pool both runs' clusters had (`ceph osd pool ls detail`).
    Pool,
    /// The cluster's shape: hosts and OSDs in the CRUSH tree.
    Layout,
    /// `uname -r` of a host.
    Kernel,
    /// A host's CPU, memory, an interface's MTU or link speed, a sysctl.
    Host,
}

impl ChangeKind {
    fn word(self) -> &'static str {
        match self {
            ChangeKind::Client => "client",
            ChangeKind::Daemons => "daemons",
            ChangeKind::Config => "config",
            ChangeKind::Pool => "pool",
            ChangeKind::Layout => "layout",
            ChangeKind::Kernel => "kernel",
            ChangeKind::Host => "host",
        }
    }
}

impl EnvironmentChange {
    /// `client librbd 16.2.15 → 18.2.7 (fio-rbd, rados-write)`.
    pub fn describe(&self) -> String {
        let side = |v: &Option<String>| {
            v.clone().unwrap_or_else(|| match self.kind {
                ChangeKind::Config | ChangeKind::Pool => "(unset)".to_string(),
                _ => "(none)".to_string(),
            })
        };
        let mut line = format!(
            "{} {} {} → {}",
            self.kind.word(),
            self.what,
            side(&self.baseline),
            side(&self.value)
        );
        if !self.stages.is_empty() {
            line.push_str(&format!(" ({})", self.stages.join(", ")));
        }
        line
    }

    /// The change concerns this stage instance's figures (its client, or
    /// the cluster or kernel every stage shares).
    pub fn concerns(&self, stage: &str) -> bool {
        self.kind != ChangeKind::Client
            || self
                .stages
                .iter()
                .any(|s| s == stage || s.strip_prefix(stage).is_some_and(|r| r.starts_with(" on ")))
    }
}

/// The differences of each candidate from the baseline, and which
/// aspects both sides recorded (what "no difference" covers).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EnvironmentDiff {
    pub changes: Vec<EnvironmentChange>,
    /// `client versions`, `daemon versions`, `configuration`, `kernels`:
    /// recorded by the baseline and every candidate.
    pub compared: Vec<String>,
}

/// Whether a run recorded one aspect of its environment.
type Recorded = dyn Fn(&RunResults) -> bool;

/// Compares the baseline's environment with each candidate's.
pub fn diff(baseline: &RunResults, candidates: &[&RunResults]) -> EnvironmentDiff {
    let mut out = EnvironmentDiff::default();
    let aspects: [(&str, &Recorded); 7] = [
        ("client versions", &|r| {
            r.stages.iter().any(|s| !s.client_versions.is_empty())
        }),
        ("daemon versions", &|r| fact(r, DAEMON_VERSIONS).is_some()),
        ("configuration", &|r| fact(r, CONFIG_DUMP).is_some()),
        ("pools", &|r| fact(r, POOL_DETAIL).is_some()),
        ("layout", &|r| fact(r, OSD_TREE).is_some()),
        ("kernels", &|_| true),
        ("host settings", &|r| !r.host_manifests.is_empty()),
    ];
    for (name, recorded) in aspects {
        if recorded(baseline) && candidates.iter().all(|c| recorded(c)) {
            out.compared.push(name.to_string());
        }
    }
    for (i, candidate) in candidates.iter().enumerate() {
        out.changes.extend(client_changes(baseline, candidate, i));
        out.changes.extend(daemon_changes(baseline, candidate, i));
        out.changes.extend(config_changes(baseline, candidate, i));
        out.changes.extend(pool_changes(baseline, candidate, i));
        out.changes.extend(layout_changes(baseline, candidate, i));
        out.changes.extend(kernel_changes(baseline, candidate, i));
        out.changes.extend(host_changes(baseline, candidate, i));
    }
    out
}

/// A fact, also as a fanned-out stage records it (`ceph versions (node1)`).
fn fact<'a>(r: &'a RunResults, name: &str) -> Option<&'a Value> {
    r.environment.get(name).or_else(|| {
        r.environment
            .iter()
            .find(|(k, _)| {
                k.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(" ("))
            })
            .map(|(_, v)| v)
    })
}

/// Each stage instance in both runs, host by host: tools and libraries
/// whose versions differ. The same change in several stages is one line.
fn client_changes(
    base: &RunResults,
    cand: &RunResults,
    candidate: usize,
) -> Vec<EnvironmentChange> {
    let mut grouped: Vec<EnvironmentChange> = Vec::new();
    for stage in &base.stages {
        let Some(other) = cand.stages.iter().find(|s| s.id == stage.id) else {
            continue;
        };
        for before in &stage.client_versions {
            let Some(after) = other.client_versions.iter().find(|c| c.host == before.host) else {
                continue;
            };
            let place = if before.host == crate::hosts::LOCAL {
                stage.id.clone()
            } else {
                format!("{} on {}", stage.id, before.host)
            };
            for (what, from, to) in component_changes(before, after) {
                match grouped
                    .iter_mut()
                    .find(|g| g.what == what && g.baseline == from && g.value == to)
                {
                    Some(g) => g.stages.push(place.clone()),
                    None => grouped.push(EnvironmentChange {
                        candidate,
                        kind: ChangeKind::Client,
                        what,
                        baseline: from,
                        value: to,
                        stages: vec![place.clone()],
                    }),
                }
            }
        }
    }
    // The libraries first (what a client upgrade is mostly about), then the tools.
    grouped.sort_by_key(|c| client_root::CLIENT_TOOLS.contains(&c.what.as_str()));
    grouped
}

type Component = (String, Option<String>, Option<String>);

/// Tools, then libraries, whose versions differ between two records of
/// one host: as people name releases (`16.2.15`), or the whole package
/// version where only the packaging changed.
fn component_changes(before: &ClientVersions, after: &ClientVersions) -> Vec<Component> {
    let mut changes = Vec::new();
    let tools = |c: &ClientVersions| -> Vec<(String, Option<String>)> {
        c.tools
            .iter()
            .map(|t| (t.name.clone(), t.version.clone()))
            .collect()
    };
    let libraries = |c: &ClientVersions| -> Vec<(String, Option<String>)> {
        c.libraries
            .iter()
            .map(|l| (l.name.clone(), l.version.clone()))
            .collect()
    };
    for (b, a) in [
        (tools(before), tools(after)),
        (libraries(before), libraries(after)),
    ] {
        for (name, from) in &b {
            let Some((_, to)) = a.iter().find(|(n, _)| n == name) else {
                continue;
            };
            if from != to {
                let (from, to) = shown_versions(from.as_deref(), to.as_deref());
                changes.push((name.clone(), from, to));
            }
        }
    }
    changes
}

/// Two differing versions as they are best told apart.
fn shown_versions(from: Option<&str>, to: Option<&str>) -> (Option<String>, Option<String>) {
    match (from, to) {
        (Some(f), Some(t)) if upstream(f) != upstream(t) => {
            (Some(upstream(f).to_string()), Some(upstream(t).to_string()))
        }
        (f, t) => (f.map(str::to_string), t.map(str::to_string)),
    }
}

/// `ceph versions`: each daemon kind's versions (`16.2.15 pacific (stable)`).
fn daemon_versions(r: &RunResults) -> Option<BTreeMap<String, String>> {
    let mut kinds = BTreeMap::new();
    for (kind, by_version) in fact(r, DAEMON_VERSIONS)?.as_object()? {
        if kind == "overall" {
            continue;
        }
        let versions: Vec<String> = by_version
            .as_object()?
            .keys()
            .map(|v| crate::report::environment::short_version(v))
            .collect();
        kinds.insert(kind.clone(), versions.join(", "));
    }
    Some(kinds)
}

fn daemon_changes(
    base: &RunResults,
    cand: &RunResults,
    candidate: usize,
) -> Vec<EnvironmentChange> {
    let (Some(before), Some(after)) = (daemon_versions(base), daemon_versions(cand)) else {
        return Vec::new();
    };
    changed_entries(&before, &after)
        .into_iter()
        .map(|(what, baseline, value)| EnvironmentChange {
            candidate,
            kind: ChangeKind::Daemons,
            what,
            baseline,
            value,
            stages: Vec::new(),
        })
        .collect()
}

/// `ceph config dump --format json`: `SECTION[/MASK]/NAME` → value.
fn config(r: &RunResults) -> Option<BTreeMap<String, String>> {
    let mut settings = BTreeMap::new();
    for entry in fact(r, CONFIG_DUMP)?.as_array()? {
        let field = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or_default();
        let mut key = field("section").to_string();
        if !field("mask").is_empty() {
            key.push('/');
            key.push_str(field("mask"));
        }
        key.push('/');
        key.push_str(field("name"));
        settings.insert(key, field("value").to_string());
    }
    Some(settings)
}

fn config_changes(
    base: &RunResults,
    cand: &RunResults,
    candidate: usize,
) -> Vec<EnvironmentChange> {
    let (Some(before), Some(after)) = (config(base), config(cand)) else {
        return Vec::new();
    };
    changed_entries(&before, &after)
        .into_iter()
        .map(|(what, baseline, value)| EnvironmentChange {
            candidate,
            kind: ChangeKind::Config,
            what,
            baseline,
            value,
            stages: Vec::new(),
        })
        .collect()
}

/// The properties of a pool that change what a benchmark of it measures.
const POOL_PROPERTIES: &[&str] = &[
    "type",
    "size",
    "min_size",
    "pg_num",
    "crush_rule",
    "erasure_code_profile",
    "pg_autoscale_mode",
    "flags_names",
];

/// `ceph osd pool ls detail`: `NAME PROPERTY` → value, with the pool's
/// `options` (compression, target size…) as `NAME options.KEY`.
fn pools(r: &RunResults) -> Option<BTreeMap<String, String>> {
    let mut properties = BTreeMap::new();
    for pool in fact(r, POOL_DETAIL)?.as_array()? {
        let Some(name) = pool.get("pool_name").and_then(Value::as_str) else {
            continue;
        };
        for key in POOL_PROPERTIES {
            if let Some(v) = pool.get(*key) {
                let shown = match (*key, v) {
                    ("type", Value::Number(n)) => match n.as_u64() {
                        Some(1) => "replicated".to_string(),
                        Some(3) => "erasure".to_string(),
                        _ => n.to_string(),
                    },
                    (_, Value::String(s)) if s.is_empty() => continue,
                    (_, Value::String(s)) => s.clone(),
                    (_, other) => other.to_string(),
                };
                properties.insert(format!("{name} {key}"), shown);
            }
        }
        if let Some(options) = pool.get("options").and_then(Value::as_object) {
            for (key, v) in options {
                let shown = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                properties.insert(format!("{name} options.{key}"), shown);
            }
        }
    }
    Some(properties)
}

/// Pools both clusters had whose properties differ; a pool only one run
/// saw (the run's own, or one created in between) is no change of it.
fn pool_changes(base: &RunResults, cand: &RunResults, candidate: usize) -> Vec<EnvironmentChange> {
    let (Some(before), Some(after)) = (pools(base), pools(cand)) else {
        return Vec::new();
    };
    let pool_of = |key: &str| key.split(' ').next().unwrap_or_default().to_string();
    let names = |m: &BTreeMap<String, String>| -> std::collections::BTreeSet<String> {
        m.keys().map(|k| pool_of(k)).collect()
    };
    let shared: Vec<String> = names(&before)
        .intersection(&names(&after))
        .cloned()
        .collect();
    changed_entries(&before, &after)
        .into_iter()
        .filter(|(what, _, _)| shared.contains(&pool_of(what)))
        .map(|(what, baseline, value)| EnvironmentChange {
            candidate,
            kind: ChangeKind::Pool,
            what,
            baseline,
            value,
            stages: Vec::new(),
        })
        .collect()
}

/// `ceph osd tree`: how many hosts and OSDs the CRUSH tree has, and how
/// many OSDs each host.
fn layout(r: &RunResults) -> Option<BTreeMap<String, String>> {
    let nodes = fact(r, OSD_TREE)?.get("nodes")?.as_array()?;
    let kind = |n: &Value| {
        n.get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut out = BTreeMap::new();
    let osds = nodes.iter().filter(|n| kind(n) == "osd").count();
    let hosts: Vec<&Value> = nodes.iter().filter(|n| kind(n) == "host").collect();
    out.insert("osds".to_string(), osds.to_string());
    out.insert("hosts".to_string(), hosts.len().to_string());
    for host in hosts {
        let name = host.get("name").and_then(Value::as_str).unwrap_or("?");
        let children = host
            .get("children")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        out.insert(format!("osds on {name}"), children.to_string());
    }
    Some(out)
}

fn layout_changes(
    base: &RunResults,
    cand: &RunResults,
    candidate: usize,
) -> Vec<EnvironmentChange> {
    let (Some(before), Some(after)) = (layout(base), layout(cand)) else {
        return Vec::new();
    };
    changed_entries(&before, &after)
        .into_iter()
        .map(|(what, baseline, value)| EnvironmentChange {
            candidate,
            kind: ChangeKind::Layout,
            what,
            baseline,
            value,
            stages: Vec::new(),
        })
        .collect()
}

/// Each host's `uname -r`: this machine's from the run, the others' from
/// their client versions.
fn kernels(r: &RunResults) -> BTreeMap<String, String> {
    let mut kernels = BTreeMap::new();
    kernels.insert(crate::hosts::LOCAL.to_string(), r.host.kernel.clone());
    for (host, m) in &r.host_manifests {
        if let Some(kernel) = &m.kernel {
            kernels
                .entry(host.clone())
                .or_insert_with(|| kernel.clone());
        }
    }
    for c in r.stages.iter().flat_map(|s| &s.client_versions) {
        if let Some(kernel) = &c.kernel {
            kernels
                .entry(c.host.clone())
                .or_insert_with(|| kernel.clone());
        }
    }
    kernels
}

fn kernel_changes(
    base: &RunResults,
    cand: &RunResults,
    candidate: usize,
) -> Vec<EnvironmentChange> {
    let (before, after) = (kernels(base), kernels(cand));
    changed_entries(&before, &after)
        .into_iter()
        // A host only one run used is no change of its kernel.
        .filter(|(_, b, a)| b.is_some() && a.is_some())
        .map(|(what, baseline, value)| EnvironmentChange {
            candidate,
            kind: ChangeKind::Kernel,
            what,
            baseline,
            value,
            stages: Vec::new(),
        })
        .collect()
}

/// A host's manifest as `KEY → value` lines: `cpu`, `cpus`, `memory`,
/// `mtu IF`, `link IF`, `sysctl NAME`.
fn host_settings(m: &crate::host_watch::manifest::HostManifest) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(cpu) = &m.cpu_model {
        out.insert("cpu".to_string(), cpu.clone());
    }
    if m.cpus > 0 {
        out.insert("cpus".to_string(), m.cpus.to_string());
    }
    if m.memory_total_bytes > 0 {
        let gib = m.memory_total_bytes as f64 / (1u64 << 30) as f64;
        out.insert("memory".to_string(), format!("{gib:.1} GiB"));
    }
    for (nic, mtu) in &m.mtu {
        out.insert(format!("mtu {nic}"), mtu.to_string());
    }
    for (nic, mbit) in &m.link_speed_mbit {
        out.insert(format!("link {nic}"), format!("{mbit} Mb/s"));
    }
    for (name, value) in &m.sysctls {
        out.insert(format!("sysctl {name}"), value.clone());
    }
    out
}

/// Each host both runs described: the settings that differ. A setting
/// only one side has (an interface that came or went) is no change of it.
fn host_changes(base: &RunResults, cand: &RunResults, candidate: usize) -> Vec<EnvironmentChange> {
    let mut changes = Vec::new();
    for (host, before) in &base.host_manifests {
        let Some(after) = cand.host_manifests.get(host) else {
            continue;
        };
        let (before, after) = (host_settings(before), host_settings(after));
        for (what, baseline, value) in changed_entries(&before, &after) {
            if baseline.is_some() && value.is_some() {
                changes.push(EnvironmentChange {
                    candidate,
                    kind: ChangeKind::Host,
                    what: format!("{host} {what}"),
                    baseline,
                    value,
                    stages: Vec::new(),
                });
            }
        }
    }
    changes
}

/// Keys whose values differ, or that only one side has.
fn changed_entries(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Vec<Component> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| ((*k).clone(), before.get(k).cloned(), after.get(k).cloned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A real run of tests/client-roots/client-release.yaml (tests/compare/).
    fn run(client: &str) -> RunResults {
        let path = format!(
            "{}/../../tests/compare/client-{client}.results.json",
            env!("CARGO_MANIFEST_DIR")
        );
        RunResults::load_file(Path::new(&path)).unwrap()
    }

    #[test]
    fn a_client_upgrade_is_each_changed_component_once_with_its_stages() {
        let d = diff(&run("16.2"), &[&run("18.2")]);
        let lines: Vec<String> = d.changes.iter().map(EnvironmentChange::describe).collect();
        assert_eq!(
            lines,
            [
                "client librados 16.2.15 → 18.2.7 (rados-write, fio-rbd)",
                "client librbd 16.2.15 → 18.2.7 (fio-rbd)",
                "client rados 16.2.15 → 18.2.7 (rados-write)",
                "client rbd 16.2.15 → 18.2.7 (fio-rbd)",
                "client fio 3.33 → 3.39 (fio-rbd)",
            ]
        );
        assert_eq!(
            d.compared,
            [
                "client versions",
                "daemon versions",
                "configuration",
                "pools",
                "layout",
                "kernels"
            ]
        );
        assert!(d.changes[1].concerns("fio-rbd") && !d.changes[1].concerns("rados-write"));
    }

    #[test]
    fn a_hosts_mtu_sysctl_and_memory_that_differ() {
        let mut base = run("16.2");
        let here = crate::host_watch::manifest::local();
        base.host_manifests.insert("node1".into(), here.clone());
        let mut cand = base.clone();
        let m = cand.host_manifests.get_mut("node1").unwrap();
        m.mtu.insert("lo".into(), 9000);
        m.sysctls
            .insert("net.core.rmem_max".into(), "1234567".into());
        m.memory_total_bytes = 8 << 30;
        m.mtu.insert("only-in-the-candidate".into(), 1500);
        let d = diff(&base, &[&cand]);
        let lines: Vec<String> = d.changes.iter().map(EnvironmentChange::describe).collect();
        let gib = here.memory_total_bytes as f64 / (1u64 << 30) as f64;
        assert_eq!(
            lines,
            [
                format!("host node1 memory {gib:.1} GiB → 8.0 GiB"),
                format!("host node1 mtu lo {} → 9000", here.mtu["lo"]),
                format!(
                    "host node1 sysctl net.core.rmem_max {} → 1234567",
                    here.sysctls["net.core.rmem_max"]
                ),
            ]
        );
        assert!(d.compared.contains(&"host settings".to_string()));
    }

    #[test]
    fn daemons_settings_and_kernels_that_differ() {
        let base = run("16.2");
        let mut cand = base.clone();
        cand.host.kernel = "6.19.0".into();
        let osd = cand
            .environment
            .get_mut("ceph versions")
            .and_then(|v| v.get_mut("osd"))
            .unwrap();
        *osd = serde_json::json!({"ceph version 18.2.7 (6b0e988052ec84cf2d4a54ff9bbbc5e720b621ad) reef (stable)": 3});
        let dump = cand.environment.get_mut("ceph config dump").unwrap();
        dump.as_array_mut().unwrap().push(serde_json::json!(
            {"section": "client", "name": "rbd_cache", "value": "false", "level": "advanced", "can_update_at_runtime": true, "mask": ""}
        ));
        let pools = cand
            .environment
            .get_mut("ceph osd pool ls detail")
            .and_then(Value::as_array_mut)
            .unwrap();
        pools[0]["size"] = serde_json::json!(2);
        pools[0]["options"] = serde_json::json!({"compression_mode": "aggressive"});
        // A pool only the candidate's cluster had is no change of a pool.
        let mut extra = pools[0].clone();
        extra["pool_name"] = serde_json::json!("made-in-between");
        pools.push(extra);
        let tree = cand.environment.get_mut("ceph osd tree").unwrap();
        let osd = tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["type"] == "osd")
            .unwrap()
            .clone();
        tree["nodes"].as_array_mut().unwrap().push(osd);
        let lines: Vec<String> = diff(&base, &[&cand])
            .changes
            .iter()
            .map(EnvironmentChange::describe)
            .collect();
        assert_eq!(
            lines,
            [
                "daemons osd 16.2.15 pacific (stable) → 18.2.7 reef (stable)",
                "config client/rbd_cache (unset) → false",
                "pool .rgw.root options.compression_mode (unset) → aggressive",
                "pool .rgw.root size 3 → 2",
                "layout osds 3 → 4",
                format!("kernel local {} → 6.19.0", base.host.kernel).as_str(),
            ]
        );
        // A run against itself: nothing differs.
        assert!(diff(&base, &[&base]).changes.is_empty());
    }
}
