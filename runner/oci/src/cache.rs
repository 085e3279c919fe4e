//! Pulled plugins, kept by digest so a locked run needs no network:
//!
//! - `blobs/sha256/<hex>.wasm`: the plugin's bytes,
//! - `manifests/sha256/<hex>.json`: which plugin bytes a manifest names, and
//!   where it was pulled from (for `pipeline plugins list`).
//!
//! Every read checks the bytes against their digest: a cache file that was
//! changed is treated as missing, never run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::OciError;

/// `$PIPELINE_CACHE_DIR/oci`, `$XDG_CACHE_HOME/pipeline/oci` or `~/.cache/pipeline/oci`.
pub fn default_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let env = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = env("PIPELINE_CACHE_DIR") {
        return dir.join("oci");
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return dir.join("pipeline").join("oci");
    }
    env("HOME")
        .unwrap_or_else(std::env::temp_dir)
        .join(".cache")
        .join("pipeline")
        .join("oci")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedManifest {
    /// The reference it was pulled by (a tag, or a digest).
    pub reference: String,
    pub manifest: String,
    pub wasm: String,
    pub size: u64,
    /// The plugin's name, from the manifest's `org.opencontainers.image.title`.
    #[serde(default)]
    pub title: Option<String>,
    pub pulled_at: String,
}

pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: PathBuf) -> Self {
        Cache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn hex(digest: &str) -> &str {
        digest.strip_prefix("sha256:").unwrap_or(digest)
    }

    pub fn wasm_path(&self, wasm_digest: &str) -> PathBuf {
        self.dir
            .join("blobs")
            .join("sha256")
            .join(format!("{}.wasm", Self::hex(wasm_digest)))
    }

    fn manifest_path(&self, manifest_digest: &str) -> PathBuf {
        self.dir
            .join("manifests")
            .join("sha256")
            .join(format!("{}.json", Self::hex(manifest_digest)))
    }

    /// The cached plugin a manifest digest names, if its bytes are intact.
    pub fn get(&self, manifest_digest: &str) -> Option<(CachedManifest, PathBuf)> {
        let text = std::fs::read_to_string(self.manifest_path(manifest_digest)).ok()?;
        let record: CachedManifest = serde_json::from_str(&text).ok()?;
        if record.manifest != manifest_digest {
            return None;
        }
        let path = self.wasm_path(&record.wasm);
        let bytes = std::fs::read(&path).ok()?;
        (crate::sha256_digest(&bytes) == record.wasm).then_some((record, path))
    }

    /// The plugin bytes with this digest, if cached and intact.
    pub fn wasm(&self, wasm_digest: &str) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.wasm_path(wasm_digest)).ok()?;
        (crate::sha256_digest(&bytes) == wasm_digest).then_some(bytes)
    }

    pub fn put(&self, record: &CachedManifest, wasm: &[u8]) -> Result<PathBuf, OciError> {
        let path = self.wasm_path(&record.wasm);
        write_atomic(&path, wasm).map_err(|e| self.error(&path, e))?;
        let manifest = self.manifest_path(&record.manifest);
        let json = serde_json::to_vec_pretty(record).unwrap_or_default();
        write_atomic(&manifest, &json).map_err(|e| self.error(&manifest, e))?;
        Ok(path)
    }

    /// Every intact cached manifest, newest pull first.
    pub fn list(&self) -> Vec<(CachedManifest, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("manifests").join("sha256")) else {
            return Vec::new();
        };
        let mut found: Vec<(CachedManifest, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let hex = name.strip_suffix(".json")?;
                self.get(&format!("sha256:{hex}"))
            })
            .collect();
        found.sort_by(|a, b| b.0.pulled_at.cmp(&a.0.pulled_at));
        found
    }

    fn error(&self, path: &Path, e: std::io::Error) -> OciError {
        OciError::Cache {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Written to a temporary file beside it, then renamed: a reader sees the
/// old content or the new, never half of it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_cache_file_is_treated_as_missing() {
        let dir = std::env::temp_dir().join(format!("oci-cache-{}", std::process::id()));
        let cache = Cache::new(dir.clone());
        let wasm = b"\0asm plugin bytes".to_vec();
        let record = CachedManifest {
            reference: "oci://127.0.0.1:5000/t/p:1".into(),
            manifest: format!("sha256:{}", "1".repeat(64)),
            wasm: crate::sha256_digest(&wasm),
            size: wasm.len() as u64,
            title: Some("p".into()),
            pulled_at: "2026-12-01T00:00:00Z".into(),
        };
        let path = cache.put(&record, &wasm).unwrap();
        assert_eq!(cache.get(&record.manifest).unwrap().1, path);
        assert_eq!(cache.list().len(), 1);
        std::fs::write(&path, b"\0asm other bytes").unwrap();
        assert!(cache.get(&record.manifest).is_none());
        assert!(cache.list().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
