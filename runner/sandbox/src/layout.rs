//! Where each file of a sandbox lives, in one place.
//!
//! `ceph.conf` names most of these paths through Ceph metavariables (`$name`, `$id`);
//! the methods here compute the same paths for a concrete daemon so the Rust side
//! (pid files, log tails, keyrings) and the Ceph side always agree. A unit test in
//! `conf.rs` checks that they do.

use std::path::{Path, PathBuf};

use crate::error::SandboxError;

/// File whose presence marks a directory as created by this crate (and so safe to wipe).
pub const MARKER: &str = ".pipeline-sandbox";
/// The plugin registry's configuration, beside `ceph.conf`.
pub const REGISTRY_CONFIG: &str = "registry.yml";

/// Paths inside one sandbox directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    dir: PathBuf,
}

impl Layout {
    /// Checks that `dir` can be written into `ceph.conf` verbatim and returns its layout.
    ///
    /// Ceph's config parser treats `#`, `;`, `$`, `=`, quotes, brackets and whitespace
    /// specially, so instead of escaping we accept a conservative character set. A relative
    /// directory is made absolute, because daemons change their working directory to `/`.
    pub fn new(dir: &Path) -> Result<Layout, SandboxError> {
        let invalid = |reason: String| SandboxError::InvalidDir {
            dir: dir.to_path_buf(),
            reason,
        };
        let text = dir
            .to_str()
            .ok_or_else(|| invalid("path is not valid UTF-8".into()))?;
        if text.is_empty() {
            return Err(invalid("path is empty".into()));
        }
        if let Some(bad) = text
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "/._-+@:".contains(*c)))
        {
            return Err(invalid(format!(
                "character {bad:?} is not allowed (use letters, digits and / . _ - + @ :)"
            )));
        }
        let absolute = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(SandboxError::io("read current directory", "."))?
                .join(dir)
        };
        if absolute.parent().is_none() {
            return Err(invalid("refusing to use the root directory".into()));
        }
        Ok(Layout { dir: absolute })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn marker(&self) -> PathBuf {
        self.dir.join(MARKER)
    }
    pub fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }
    pub fn registry_config(&self) -> PathBuf {
        self.dir.join(REGISTRY_CONFIG)
    }
    pub fn topology_json(&self) -> PathBuf {
        self.dir.join("topology.json")
    }
    pub fn env_json(&self) -> PathBuf {
        self.dir.join("env.json")
    }
    pub fn monmap(&self) -> PathBuf {
        self.dir.join("monmap")
    }
    pub fn keys_dir(&self) -> PathBuf {
        self.dir.join("keys")
    }
    /// Keyring of entity `name` (`client.admin`, `osd.0`, …): `keys/$name.keyring`.
    pub fn keyring(&self, name: &str) -> PathBuf {
        self.keys_dir().join(format!("{name}.keyring"))
    }
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }
    /// `run/$name.pid`.
    pub fn pid_file(&self, name: &str) -> PathBuf {
        self.run_dir().join(format!("{name}.pid"))
    }
    /// `run/$cluster-$name.asok` (only checked against `ceph.conf` in tests).
    #[cfg(test)]
    pub fn admin_socket(&self, name: &str) -> PathBuf {
        self.run_dir().join(format!("ceph-{name}.asok"))
    }
    pub fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }
    /// `log/$name.log`: the daemon's own log.
    pub fn log_file(&self, name: &str) -> PathBuf {
        self.log_dir().join(format!("{name}.log"))
    }
    /// `log/$name.out`: stdout/stderr of the daemon's start command (early errors land here).
    pub fn start_output(&self, name: &str) -> PathBuf {
        self.log_dir().join(format!("{name}.out"))
    }
    pub fn crash_dir(&self) -> PathBuf {
        self.dir.join("crash")
    }
    /// Parent of the per-daemon data directories of `kind` (`mon`, `mgr`, `osd`, `rgw`).
    pub fn data_root(&self, kind: &str) -> PathBuf {
        self.dir.join(kind)
    }
    /// `$kind/$cluster-$id`, e.g. `osd/ceph-0`.
    pub fn data_dir(&self, kind: &str, id: &str) -> PathBuf {
        self.data_root(kind).join(format!("ceph-{id}"))
    }
    /// Scratch file for `ceph osd new -i`.
    pub fn osd_secret_json(&self, id: u32) -> PathBuf {
        self.keys_dir().join(format!("osd.{id}.secret.json"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_characters_ceph_conf_would_misread() {
        for bad in [
            "/tmp/a b", "/tmp/a#b", "/tmp/$x", "/tmp/a;b", "/tmp/a=b", "", "/",
        ] {
            assert!(Layout::new(Path::new(bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn accepts_usual_paths_and_makes_relative_ones_absolute() {
        let layout = Layout::new(Path::new("/tmp/pipeline-sandbox_2.x")).unwrap();
        assert_eq!(
            layout.pid_file("osd.1"),
            Path::new("/tmp/pipeline-sandbox_2.x/run/osd.1.pid")
        );
        let relative = Layout::new(Path::new("sbx")).unwrap();
        assert!(relative.dir().is_absolute());
    }
}
