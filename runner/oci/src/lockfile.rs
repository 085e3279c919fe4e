//! `SUITE.lock`, next to the suite (like Cargo.lock): the manifest digest each
//! `oci://` reference resolved to, and the digest of the plugin bytes in it.
//! `pipeline lock` writes it; `run` uses it; `run --locked` insists on it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::OciError;
use crate::reference::{OciReference, is_digest};

pub const VERSION: u32 = 1;
/// A lock file is a short list; anything bigger is not one of ours.
const MAX_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub version: u32,
    #[serde(default)]
    pub plugins: Vec<LockedPlugin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedPlugin {
    /// As the suite writes it.
    pub reference: String,
    /// The manifest's digest: what the run pulls.
    pub manifest: String,
    /// The digest of the `.wasm` bytes: what the run loads.
    pub wasm: String,
}

/// `pipelines/x.yaml` -> `pipelines/x.lock`.
pub fn lock_path(suite: &Path) -> PathBuf {
    suite.with_extension("lock")
}

impl Lockfile {
    /// `Ok(None)` when there is no lock file.
    pub fn load(path: &Path) -> Result<Option<Lockfile>, OciError> {
        let fail = |message: String| OciError::Lock {
            path: path.display().to_string(),
            message,
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e.to_string())),
        };
        if meta.len() > MAX_BYTES {
            return Err(fail(format!(
                "{} bytes; a lock file is at most {MAX_BYTES}",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let lock: Lockfile = serde_saphyr::from_str(&text).map_err(|e| fail(e.to_string()))?;
        if lock.version != VERSION {
            return Err(fail(format!(
                "version {} is not one this pipeline reads ({VERSION})",
                lock.version
            )));
        }
        for p in &lock.plugins {
            if let Err(e) = OciReference::parse(&p.reference) {
                return Err(fail(e.to_string()));
            }
            for d in [&p.manifest, &p.wasm] {
                if !is_digest(d) {
                    return Err(fail(format!(
                        "`{d}` ({}) is not `sha256:` and 64 lower-case hex digits",
                        p.reference
                    )));
                }
            }
        }
        Ok(Some(lock))
    }

    pub fn entry(&self, reference: &str) -> Option<&LockedPlugin> {
        self.plugins.iter().find(|p| p.reference == reference)
    }

    /// Written to a temporary file then renamed: a reader sees the old lock
    /// or the new one.
    pub fn save(&self, path: &Path, suite_name: &str) -> Result<(), OciError> {
        let fail = |message: String| OciError::Lock {
            path: path.display().to_string(),
            message,
        };
        let mut sorted = self.clone();
        sorted.plugins.sort_by(|a, b| a.reference.cmp(&b.reference));
        let body = serde_saphyr::to_string(&sorted).map_err(|e| fail(e.to_string()))?;
        let text = format!(
            "# Written by `pipeline lock {suite_name}`: the digest each plugin\n# reference resolved to. Commit it next to the suite.\n{body}"
        );
        crate::cache::write_atomic(path, text.as_bytes()).map_err(|e| fail(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_round_trips_and_bad_digests_are_refused() {
        let dir = std::env::temp_dir().join(format!("oci-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = lock_path(&dir.join("suite.yaml"));
        assert_eq!(path, dir.join("suite.lock"));
        assert_eq!(Lockfile::load(&path).unwrap(), None);
        let d = format!("sha256:{}", "0".repeat(64));
        let lock = Lockfile {
            version: VERSION,
            plugins: vec![LockedPlugin {
                reference: "oci://127.0.0.1:5000/t/p:1".into(),
                manifest: d.clone(),
                wasm: d.clone(),
            }],
        };
        lock.save(&path, "suite.yaml").unwrap();
        assert_eq!(Lockfile::load(&path).unwrap(), Some(lock));
        std::fs::write(
            &path,
            "version: 1\nplugins:\n  - reference: oci://127.0.0.1:5000/t/p:1\n    manifest: sha256:00\n    wasm: sha256:00\n",
        )
        .unwrap();
        let e = Lockfile::load(&path).unwrap_err().to_string();
        assert!(e.contains("`sha256:00`"), "{e}");
        std::fs::write(&path, "version: 2\n").unwrap();
        assert!(
            Lockfile::load(&path)
                .unwrap_err()
                .to_string()
                .contains("version 2")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
