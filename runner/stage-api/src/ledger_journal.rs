//! The ledger's journal: `created.jsonl` in the run folder, one line per
//! creation or removal, appended the moment a stage records it.
//!
//! results.json holds the ledger too, but it is rewritten after each stage:
//! a runner killed in the middle of a stage would lose what that stage had
//! created so far (an RBD image, a bucket). The journal is written before
//! the stage goes on, so `pipeline cleanup` knows it. One `write` of a short
//! line on an O_APPEND file: lines from stages running on several hosts at
//! once never interleave.

use std::io::Write;
use std::path::Path;

use pipeline_model::Resource;
use serde::{Deserialize, Serialize};

pub const JOURNAL_FILE: &str = "created.jsonl";

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    kind: String,
    name: String,
    created_by: String,
    removed: bool,
}

/// Appends one creation (`removed: false`) or removal to the journal of
/// `run_dir`. A failure to write is returned for the caller to report; the
/// in-memory ledger is unaffected.
pub fn append(run_dir: &Path, resource: &Resource) -> std::io::Result<()> {
    let entry = Entry {
        kind: resource.kind.clone(),
        name: resource.name.clone(),
        created_by: resource.created_by.clone(),
        removed: resource.removed,
    };
    let mut line = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_dir.join(JOURNAL_FILE))?;
    file.write_all(line.as_bytes())?;
    file.sync_data()
}

/// `ledger` (from results.json) brought up to date with the journal: what
/// was created or removed after results.json was last written. Lines that
/// do not parse (a torn last line of a killed writer) are skipped.
pub fn replay(run_dir: &Path, ledger: &mut Vec<Resource>) {
    let Ok(text) = std::fs::read_to_string(run_dir.join(JOURNAL_FILE)) else {
        return;
    };
    let mut journal: Vec<Resource> = Vec::new();
    for entry in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Entry>(l).ok())
    {
        match journal
            .iter_mut()
            .find(|r| r.kind == entry.kind && r.name == entry.name)
        {
            Some(r) => {
                r.removed = entry.removed;
                if !entry.removed {
                    r.created_by = entry.created_by;
                }
            }
            None => journal.push(Resource {
                kind: entry.kind,
                name: entry.name,
                created_by: entry.created_by,
                removed: entry.removed,
            }),
        }
    }
    // The journal is never behind results.json: where both know a
    // resource, the journal's last word stands.
    for j in journal {
        match ledger
            .iter_mut()
            .find(|r| r.kind == j.kind && r.name == j.name)
        {
            Some(r) => r.removed = j.removed,
            None => ledger.push(j),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(kind: &str, name: &str, removed: bool) -> Resource {
        Resource {
            kind: kind.into(),
            name: name.into(),
            created_by: "stage".into(),
            removed,
        }
    }

    #[test]
    fn the_journal_adds_what_results_json_had_not_seen_yet() {
        let dir = std::env::temp_dir().join(format!("journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        append(&dir, &resource("pool", "p", false)).unwrap();
        append(&dir, &resource("rbd-image", "p/i", false)).unwrap();
        append(&dir, &resource("rbd-image", "p/i", true)).unwrap();
        append(&dir, &resource("rbd-image", "p/j", false)).unwrap();
        // A killed writer's torn line is skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(JOURNAL_FILE))
            .unwrap()
            .write_all(b"{\"kind\":\"po")
            .unwrap();
        let mut ledger = vec![resource("pool", "p", false)];
        replay(&dir, &mut ledger);
        let state: Vec<(&str, &str, bool)> = ledger
            .iter()
            .map(|r| (r.kind.as_str(), r.name.as_str(), r.removed))
            .collect();
        assert_eq!(
            state,
            [
                ("pool", "p", false),
                ("rbd-image", "p/i", true),
                ("rbd-image", "p/j", false)
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
