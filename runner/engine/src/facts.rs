//! Which environment facts a stage records, under which name. Facts
//! describe the system under test (`ceph versions`, `ceph df`) and whoever
//! reads the results trusts them, so a plugin must not be able to pass its
//! own figures off as the runner's, nor overwrite one a native stage
//! recorded: a plugin's facts (a stage loaded from a file) are recorded
//! under its name, `NAME: key` (native facts have no `: ` in their keys).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::results::StageRecord;

/// The key a plugin's fact is recorded under.
pub fn plugin_key(plugin: &str, key: &str) -> String {
    format!("{plugin}: {key}")
}

/// The facts of the stage of `record` as they go into the results: a
/// native stage's as they are, a plugin's under its name.
pub fn namespaced(record: &StageRecord, facts: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    if record.plugin_file.is_none() {
        return facts;
    }
    facts
        .into_iter()
        .map(|(key, value)| (plugin_key(&record.plugin, &key), value))
        .collect()
}
