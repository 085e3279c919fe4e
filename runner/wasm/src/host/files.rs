//! `files`: reading and writing the plugin's own files, nothing else.
//!
//! A plugin's files live in `files/` inside its stage folder: a namespace of
//! their own, so the stage's evidence next to it (`NN-*.stdout|stderr`,
//! `plugin.log`, artifacts, series) can be neither read nor overwritten
//! through this interface. Paths are relative, without `..`, and are opened
//! through [`pipeline_stage_api::safe_fs`]: no symbolic link is followed at
//! any step (a link a granted command left there cannot lead out, even a
//! dangling one), a file with more than one hard link is refused, and so is
//! anything that is not a regular file (a FIFO would block the host).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use pipeline_stage_api::safe_fs::{Dir, Existing, FsError};

use super::{HostError, HostState};

/// Largest file a plugin may read in one call.
pub const MAX_READ: u64 = 64 << 20;

/// The folder of the stage folder that holds the plugin's files.
pub const FILES_DIR: &str = "files";

/// Where a plugin's files go in a stage's work folder.
pub fn files_dir(work_dir: &Path) -> PathBuf {
    work_dir.join(FILES_DIR)
}

/// The folder holding `path` inside the plugin's files, and the file's name.
fn open_parent(work_dir: &Path, path: &str, create: bool) -> Result<(Dir, String), FsError> {
    let rel = Path::new(path);
    if path.is_empty() || rel.is_absolute() {
        return Err(FsError::BadPath(path.into()));
    }
    let files = Dir::open(work_dir)?.child(OsStr::new(FILES_DIR), true)?;
    let (dir, name) = files.parent_of(rel, create)?;
    Ok((dir, name.to_string_lossy().into_owned()))
}

/// In the plugin's terms: relative to its files folder, not the host's paths.
fn why(e: &FsError) -> String {
    match e {
        FsError::BadPath(path)
            if Path::new(path)
                .components()
                .any(|c| c == std::path::Component::ParentDir) =>
        {
            "paths may not contain `..`".into()
        }
        FsError::BadPath(_) => "paths are relative to the plugin's files folder".into(),
        FsError::Symlink(_) => {
            "the path goes through a symbolic link; links are never followed".into()
        }
        FsError::HardLinked { links, .. } => format!(
            "the file has {links} hard links; a file with more than one link may be another name for a file outside the files folder and is refused"
        ),
        FsError::NotRegular { kind, .. } => {
            format!("it is a {kind}; only regular files are read or written")
        }
        FsError::TooLarge { limit, .. } => format!(
            "it is larger than the {} MiB a plugin may read at once",
            limit >> 20
        ),
        FsError::Exists(_) => "it already exists".into(),
        FsError::Io { source, .. } => source.to_string(),
    }
}

impl HostState {
    /// Runs a file operation once the `files` grant is checked; a refusal of
    /// the path (a link, a special file) is recorded like any other.
    fn with_file<R>(
        &mut self,
        path: &str,
        verb: &str,
        op: impl FnOnce(&Path) -> Result<R, FsError>,
    ) -> Result<R, HostError> {
        let tried = format!("{verb} `{path}`");
        self.require("files", self.setup.grants.files.is_some(), &tried)?;
        let Some(work_dir) = self.setup.work_dir.clone() else {
            return Err(HostError::Failed("no work folder".into()));
        };
        match self.timed(|_| op(&work_dir)) {
            Ok(r) => Ok(r),
            Err(FsError::Io { source, .. }) => Err(HostError::Failed(format!("{path}: {source}"))),
            Err(e) => Err(self.refuse(format!(
                "plugin `{}` tried to {tried}: {}",
                self.plugin,
                why(&e)
            ))),
        }
    }

    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>, HostError> {
        self.with_file(path, "read", |work_dir| {
            let (dir, name) = open_parent(work_dir, path, false)?;
            dir.read(OsStr::new(&name), MAX_READ)
        })
    }

    pub fn write_file(&mut self, path: &str, contents: &[u8]) -> Result<(), HostError> {
        self.with_file(path, "write", |work_dir| {
            let (dir, name) = open_parent(work_dir, path, true)?;
            dir.write(OsStr::new(&name), contents, Existing::Replace)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_in_the_files_folder() {
        let dir = std::env::temp_dir().join(format!("pipeline-wasm-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(open_parent(&dir, "a.txt", true).is_ok());
        assert!(open_parent(&dir, "sub/new/b.txt", true).is_ok());
        assert!(dir.join("files/sub/new").is_dir());
        assert!(open_parent(&dir, "../x", true).is_err());
        assert!(open_parent(&dir, "/etc/passwd", true).is_err());
        assert!(open_parent(&dir, "", true).is_err());
        std::os::unix::fs::symlink("/etc", dir.join("files/out")).unwrap();
        assert!(matches!(
            open_parent(&dir, "out/passwd", false),
            Err(FsError::Symlink(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
