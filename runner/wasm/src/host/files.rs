//! `files`: reading and writing inside the stage's own work folder, nothing
//! else. Paths are relative, without `..`; the resolved parent folder must
//! still be inside the work folder (a symlink a command left there cannot
//! lead out).

use std::path::{Component, Path, PathBuf};

use super::{HostError, HostState};

/// Largest file a plugin may read in one call.
pub const MAX_READ: u64 = 64 << 20;

/// `work_dir/path` if `path` stays inside `work_dir`.
pub fn resolve(work_dir: &Path, path: &str) -> Result<PathBuf, String> {
    let rel = Path::new(path);
    if path.is_empty() || rel.is_absolute() {
        return Err("paths are relative to the stage's work folder".into());
    }
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err("paths may not contain `..`".into());
    }
    let full = work_dir.join(rel);
    // The deepest existing ancestor, resolved, must be inside the work folder.
    let root = work_dir
        .canonicalize()
        .map_err(|e| format!("work folder: {e}"))?;
    let mut probe = full.as_path();
    while !probe.exists() {
        probe = probe.parent().unwrap_or(work_dir);
    }
    let real = probe.canonicalize().map_err(|e| e.to_string())?;
    if !real.starts_with(&root) {
        return Err("the path leads out of the work folder".into());
    }
    Ok(full)
}

impl HostState {
    fn file_path(&mut self, path: &str, verb: &str) -> Result<PathBuf, HostError> {
        let tried = format!("{verb} `{path}`");
        self.require("files", self.setup.grants.files.is_some(), &tried)?;
        let Some(work_dir) = self.setup.work_dir.clone() else {
            return Err(HostError::Failed("no work folder".into()));
        };
        resolve(&work_dir, path)
            .map_err(|why| self.refuse(format!("plugin `{}` tried to {tried}: {why}", self.plugin)))
    }

    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>, HostError> {
        let full = self.file_path(path, "read")?;
        self.timed(|_| {
            let meta =
                std::fs::metadata(&full).map_err(|e| HostError::Failed(format!("{path}: {e}")))?;
            if meta.len() > MAX_READ {
                return Err(HostError::Failed(format!(
                    "{path}: {} bytes, more than the {} MiB a plugin may read at once",
                    meta.len(),
                    MAX_READ >> 20
                )));
            }
            std::fs::read(&full).map_err(|e| HostError::Failed(format!("{path}: {e}")))
        })
    }

    pub fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<(), HostError> {
        let full = self.file_path(path, "write")?;
        self.timed(|_| {
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| HostError::Failed(format!("{path}: {e}")))?;
            }
            std::fs::write(&full, contents).map_err(|e| HostError::Failed(format!("{path}: {e}")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_in_the_work_folder() {
        let dir = std::env::temp_dir().join(format!("pipeline-wasm-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert!(resolve(&dir, "a.txt").is_ok());
        assert!(resolve(&dir, "sub/new/b.txt").is_ok());
        assert!(resolve(&dir, "../x").is_err());
        assert!(resolve(&dir, "/etc/passwd").is_err());
        assert!(resolve(&dir, "").is_err());
        std::os::unix::fs::symlink("/etc", dir.join("out")).unwrap();
        assert!(resolve(&dir, "out/passwd").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
