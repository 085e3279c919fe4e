//! What a pipeline grants a sandboxed (WASM) plugin. Native stages are
//! trusted code; the grants are enforced by the WASM host.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Capabilities granted to a plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Programs the plugin may run through the host (by name, e.g. `[ceph, rados]`).
    #[serde(default)]
    pub exec: Vec<String>,
    /// `work`: read and write files in the stage's own work folder.
    #[serde(default)]
    pub files: Option<FilesGrant>,
    /// URL prefixes the plugin may send HTTP requests to (e.g. `http://127.0.0.1:7480/`).
    #[serde(default)]
    pub http: Vec<String>,
    /// Environment variables the plugin may set for the programs it runs
    /// (names, e.g. `[CEPH_ARGS]`). Granted programs start from a minimal
    /// environment (PATH, HOME, USER, LOGNAME, LANG, LC_ALL, TZ, TMPDIR)
    /// plus these; setting any other variable is refused.
    #[serde(default)]
    pub env: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FilesGrant {
    /// The stage's work folder in the run folder, nothing else.
    Work,
}

impl Grants {
    /// One line for `plan` and the report.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.exec.is_empty() {
            parts.push(format!("exec [{}]", self.exec.join(", ")));
        }
        if self.files.is_some() {
            parts.push("files: work folder".to_string());
        }
        if !self.http.is_empty() {
            parts.push(format!("http [{}]", self.http.join(", ")));
        }
        if !self.env.is_empty() {
            parts.push(format!("env [{}]", self.env.join(", ")));
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// Why a suite may not grant the variable `name` (`None`: it may).
pub fn env_grant_problem(name: &str) -> Option<String> {
    if !crate::exec::valid_env_name(name) {
        return Some(format!(
            "`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    // Both decide which program a granted name runs: with them, an exec
    // grant would no longer mean what it says.
    if name == "PATH" || name.starts_with("LD_") {
        return Some(format!(
            "`{name}` decides which program runs; a plugin may not set it"
        ));
    }
    None
}
