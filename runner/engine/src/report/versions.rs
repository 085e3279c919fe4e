//! The report's "Versions" table: the cluster daemons' versions by kind
//! (`ceph versions`), then one row per client the stages ran their tools
//! from (host, client name, root), with the versions of its tools and
//! libraries and the stage instances that used it. One client for the
//! whole run is one row; a suite comparing client releases gets one row
//! per release, which is where a figure that moved finds its reason.

use serde::Serialize;
use serde_json::Value;

use super::environment::short_version;
use crate::client_versions::{ClientVersions, upstream};
use crate::results::RunResults;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VersionRow {
    /// `cluster: mon ×1, mgr ×1, osd ×3` or `client 18.2 on local (root …)`.
    pub what: String,
    /// `16.2.15 pacific (stable)` or `rados 18.2.7, fio 3.39, librados 18.2.7`.
    pub version: String,
    /// Where it comes from or who used it.
    pub used_by: String,
}

/// The rows, daemons first; empty when the run recorded no versions.
pub fn rows(results: &RunResults) -> Vec<VersionRow> {
    let mut rows = daemon_rows(results);
    rows.extend(client_rows(results));
    rows
}

/// One row per daemon version: kinds running it and how many of each.
fn daemon_rows(results: &RunResults) -> Vec<VersionRow> {
    let Some(kinds) = results
        .environment
        .get("ceph versions")
        .and_then(Value::as_object)
    else {
        return Vec::new();
    };
    let mut by_version: Vec<(String, Vec<String>)> = Vec::new();
    for (kind, versions) in kinds.iter().filter(|(k, _)| *k != "overall") {
        for (version, count) in versions.as_object().into_iter().flatten() {
            let version = short_version(version);
            let entry = format!("{kind} ×{count}");
            match by_version.iter_mut().find(|(v, _)| *v == version) {
                Some((_, kinds)) => kinds.push(entry),
                None => by_version.push((version, vec![entry])),
            }
        }
    }
    by_version
        .into_iter()
        .map(|(version, kinds)| VersionRow {
            what: format!("cluster: {}", kinds.join(", ")),
            version,
            used_by: "daemons (`ceph versions`)".to_string(),
        })
        .collect()
}

/// Where a stage's tools came from: the host, and the root on it (a
/// client named in `clients:` without a root is the host's own tools, the
/// same as a stage without `client:`).
fn place(c: &ClientVersions) -> (String, Option<String>) {
    (c.host.clone(), c.root.clone())
}

/// One client place: what its tools are, the names the suite gave it, and
/// the stages that ran from it.
struct Place {
    versions: ClientVersions,
    names: Vec<String>,
    stages: Vec<String>,
}

/// One row per client place, its tools' and libraries' versions over all
/// the stages that used it, and those stages.
fn client_rows(results: &RunResults) -> Vec<VersionRow> {
    let mut places: Vec<Place> = Vec::new();
    for stage in results.stages.iter().chain(&results.cleanup) {
        for c in &stage.client_versions {
            let at = match places.iter().position(|p| place(&p.versions) == place(c)) {
                Some(i) => {
                    absorb(&mut places[i].versions, c);
                    i
                }
                None => {
                    places.push(Place {
                        versions: c.clone(),
                        names: Vec::new(),
                        stages: Vec::new(),
                    });
                    places.len() - 1
                }
            };
            let p = &mut places[at];
            if let Some(name) = c.client.as_ref().filter(|n| !p.names.contains(n)) {
                p.names.push(name.clone());
            }
            if !p.stages.contains(&stage.id) {
                p.stages.push(stage.id.clone());
            }
        }
    }
    let only_one = places.len() == 1;
    places
        .into_iter()
        .map(
            |Place {
                 versions: c,
                 names,
                 stages,
             }| VersionRow {
                what: describe_place(&c, &names),
                version: versions_text(&c),
                used_by: if only_one {
                    format!("every stage with client tools ({})", stages.len())
                } else {
                    stages.join(", ")
                },
            },
        )
        .collect()
}

/// Adds the tools and libraries another stage used at the same place.
fn absorb(into: &mut ClientVersions, other: &ClientVersions) {
    for tool in &other.tools {
        if !into.tools.iter().any(|t| t.name == tool.name) {
            into.tools.push(tool.clone());
        }
    }
    for library in &other.libraries {
        if !into.libraries.iter().any(|l| l.file == library.file) {
            into.libraries.push(library.clone());
        }
    }
}

/// `client 18.2 on local (root /var/cache/pipeline/roots/trixie)`,
/// `client 16.2 on local (its own tools)`.
fn describe_place(c: &ClientVersions, names: &[String]) -> String {
    let mut text = if names.is_empty() {
        format!("client tools on {}", c.host)
    } else {
        format!("client {} on {}", names.join(", "), c.host)
    };
    match &c.root {
        Some(root) => text.push_str(&format!(" (root {root})")),
        None => text.push_str(" (its own tools)"),
    }
    text
}

/// `rados 16.2.15, fio 3.33; librados 16.2.15, librbd 16.2.15`; a tool
/// that is not installed is `fio missing`, a version not read `?`.
fn versions_text(c: &ClientVersions) -> String {
    let tools: Vec<String> = c
        .tools
        .iter()
        .map(|t| match (&t.path, &t.version) {
            (None, _) => format!("{} missing", t.name),
            (Some(_), Some(v)) => format!("{} {v}", t.name),
            (Some(_), None) => format!("{} ?", t.name),
        })
        .collect();
    let mut libraries: Vec<String> = c
        .libraries
        .iter()
        .map(|l| format!("{} {}", l.name, l.version.as_deref().map_or("?", upstream)))
        .collect();
    libraries.sort();
    libraries.dedup();
    if libraries.is_empty() {
        tools.join(", ")
    } else {
        format!("{}; {}", tools.join(", "), libraries.join(", "))
    }
}
