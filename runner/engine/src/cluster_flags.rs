//! `cluster: {flags: [noscrub, nodeep-scrub]}`: OSD flags the run sets for
//! its whole length, so no scrub competes with the benchmark, and restores
//! afterwards: after success, a failure or Ctrl-C (the run's end), and
//! through `pipeline cleanup` after the runner was killed.
//!
//! Only a flag the run itself set is unset: each goes into the run's ledger
//! (`osd_flag NAME`, journalled before `ceph osd set`), and a flag that was
//! already set when the run began is left as it was found.

use std::path::Path;
use std::time::Duration;

use pipeline_model::Resource;
use pipeline_stage_api::ledger_journal;

use crate::cancel::CancelToken;
use crate::ceph::CephConnection;
use crate::exec::{CommandSpec, run_to_files};

/// The ledger kind of a flag the run set.
pub const KIND: &str = "osd_flag";
/// Flags a suite may set: they keep the cluster from doing background work
/// during the measurement and change nothing about its data.
pub const ALLOWED: &[&str] = &["noscrub", "nodeep-scrub"];
/// Who set it, in the ledger.
const SET_BY: &str = "cluster.flags";
/// Limit for each `ceph osd` call.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Sets each of `flags` not already set, recording it in `created` (and the
/// journal) first. Returns what to say: each flag set, or left as found, or
/// why it could not be set.
pub fn set(
    conn: &CephConnection,
    run_dir: &Path,
    flags: &[String],
    created: &mut Vec<Resource>,
) -> Vec<String> {
    if flags.is_empty() {
        return Vec::new();
    }
    let dir = run_dir.join("cluster-flags");
    let already = match ceph(conn, &dir, "osd-dump", &["osd", "dump", "--format", "json"]) {
        Ok(text) => flags_set(&text),
        Err(e) => return vec![format!("warning: cannot read the OSD flags, none set: {e}")],
    };
    let mut said = Vec::new();
    for flag in flags {
        if already.contains(flag) {
            said.push(format!(
                "OSD flag {flag} was already set: left as it is (not unset at the end)"
            ));
            continue;
        }
        let resource = Resource {
            kind: KIND.into(),
            name: flag.clone(),
            created_by: SET_BY.into(),
            removed: false,
        };
        if let Err(e) = ledger_journal::append(run_dir, &resource) {
            said.push(format!(
                "warning: OSD flag {flag} not set: cannot journal it first: {e}"
            ));
            continue;
        }
        created.push(resource);
        match ceph(conn, &dir, &format!("set-{flag}"), &["osd", "set", flag]) {
            Ok(_) => said.push(format!("set OSD flag {flag} for the run")),
            Err(e) => {
                said.push(format!("warning: cannot set OSD flag {flag}: {e}"));
                mark_removed(run_dir, created, flag);
            }
        }
    }
    said
}

/// Unsets every flag in `created` the run set and has not unset. Returns
/// what to say, and whether each one was unset.
pub fn restore(
    conn: &CephConnection,
    run_dir: &Path,
    created: &mut [Resource],
) -> (Vec<String>, bool) {
    let dir = run_dir.join("cluster-flags");
    let pending: Vec<String> = created
        .iter()
        .filter(|r| r.kind == KIND && !r.removed)
        .map(|r| r.name.clone())
        .collect();
    let mut said = Vec::new();
    let mut all = true;
    for flag in pending {
        match ceph(
            conn,
            &dir,
            &format!("unset-{flag}"),
            &["osd", "unset", &flag],
        ) {
            Ok(_) => {
                mark_removed(run_dir, created, &flag);
                said.push(format!("unset OSD flag {flag}, as before the run"));
            }
            Err(e) => {
                all = false;
                said.push(format!(
                    "warning: OSD flag {flag} is still set: {e}; `pipeline cleanup RUN_DIR` tries again, or `ceph osd unset {flag}`"
                ));
            }
        }
    }
    (said, all)
}

fn mark_removed(run_dir: &Path, created: &mut [Resource], flag: &str) {
    if let Some(r) = created
        .iter_mut()
        .find(|r| r.kind == KIND && r.name == flag)
    {
        r.removed = true;
        // The journal follows; should it fail, results.json still says so.
        let _ = ledger_journal::append(run_dir, r);
    }
}

/// The flags `ceph osd dump --format json` lists as set.
fn flags_set(text: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text.trim()) else {
        return Vec::new();
    };
    match doc.get("flags_set").and_then(|f| f.as_array()) {
        Some(list) => list
            .iter()
            .filter_map(|f| f.as_str().map(String::from))
            .collect(),
        None => doc
            .get("flags")
            .and_then(|f| f.as_str())
            .unwrap_or("")
            .split(',')
            .map(String::from)
            .collect(),
    }
}

/// `ceph ARGS` with the suite's connection; its stdout, or why it failed.
/// Outputs are kept in the run folder (`cluster-flags/NAME.stdout`).
fn ceph(conn: &CephConnection, dir: &Path, name: &str, args: &[&str]) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {dir:?}: {e}"))?;
    let out = dir.join(format!("{name}.stdout"));
    let err = dir.join(format!("{name}.stderr"));
    let spec = CommandSpec::new(conn.argv("ceph", args)).timeout(CALL_TIMEOUT);
    // Never cancelled: a flag must be restored even after Ctrl-C.
    let finished = run_to_files(&spec, &out, &err, None, &CancelToken::default())
        .map_err(|e| format!("cannot run ceph: {e}"))?;
    if finished.exit.success() {
        return pipeline_stage_api::context::read_output_whole(&out, &spec.display());
    }
    Err(format!(
        "`{}` {}: {}",
        spec.display(),
        finished.exit,
        crate::terminal::last_line_of_file(&err)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_each_releases_osd_dump() {
        for release in ["16.2.15", "18.2.7", "20.2.4"] {
            let path = format!(
                "{}/../../plugins/parsers/tests/data/ceph-osd-dump-{release}-local.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let flags = flags_set(&std::fs::read_to_string(path).unwrap());
            assert!(
                flags.contains(&"sortbitwise".to_string()),
                "{release}: {flags:?}"
            );
            assert!(!flags.contains(&"noscrub".to_string()), "{release}");
        }
        assert_eq!(
            flags_set(r#"{"flags": "noscrub,sortbitwise"}"#),
            ["noscrub", "sortbitwise"]
        );
        assert!(flags_set("not json").is_empty());
    }
}
