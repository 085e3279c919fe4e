//! The run folder's lock: `run.lock`, held (flock) by the `pipeline run`
//! that writes the folder, and by `pipeline cleanup` while it works on it.
//!
//! The kernel drops an flock when its holder dies, SIGKILL and OOM kill
//! included, so "the lock is free" means "no live process owns this run"
//! without trusting a pid that may have been reused. The file's text (pid,
//! host, time) only names the holder in messages.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub const LOCK_FILE: &str = "run.lock";

/// Held for as long as the value lives.
#[derive(Debug)]
pub struct RunLock {
    // Dropping the file closes it, which releases the flock.
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{dir} is in use by {holder}; wait for it to finish (or stop it) and try again")]
    Held { dir: PathBuf, holder: String },
    #[error("cannot lock {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RunLock {
    /// Takes the lock of `run_dir` without waiting, and writes who holds it.
    /// `what` says which command holds it (`pipeline run`, `pipeline cleanup`).
    pub fn acquire(run_dir: &Path, what: &str) -> Result<RunLock, LockError> {
        let path = run_dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        if !try_flock(&file).map_err(io)? {
            return Err(LockError::Held {
                dir: run_dir.to_path_buf(),
                holder: holder_text(&mut file),
            });
        }
        let text = format!(
            "{what} pid {} on {} since {}\n",
            std::process::id(),
            crate::host::host_info().hostname,
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        file.set_len(0).map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        Ok(RunLock { _file: file })
    }
}

/// Who holds the lock of `run_dir` now, or `None` when nobody does (no lock
/// file: a run written before locks existed, or by a finished run).
pub fn holder(run_dir: &Path) -> Option<String> {
    let mut file = File::open(run_dir.join(LOCK_FILE)).ok()?;
    match try_flock(&file) {
        // Taken: nobody else had it. Closing the file releases it again.
        Ok(true) => None,
        Ok(false) => Some(holder_text(&mut file)),
        Err(_) => None,
    }
}

fn holder_text(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.take(512).read_to_string(&mut text);
    let text = crate::terminal::line(text.trim());
    if text.is_empty() {
        "another process".to_string()
    } else {
        text
    }
}

/// flock(LOCK_EX | LOCK_NB): `Ok(false)` when another open file holds it.
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_names_its_holder_and_is_free_once_dropped() {
        let dir = std::env::temp_dir().join(format!("run-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(holder(&dir), None, "no lock file: nobody");
        let lock = RunLock::acquire(&dir, "pipeline run").unwrap();
        let held = holder(&dir).expect("held while the lock lives");
        assert!(held.starts_with("pipeline run pid "), "{held}");
        match RunLock::acquire(&dir, "pipeline cleanup") {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, held),
            other => panic!("a second holder must be refused: {other:?}"),
        }
        drop(lock);
        assert_eq!(holder(&dir), None);
        let again = RunLock::acquire(&dir, "pipeline cleanup").unwrap();
        assert!(holder(&dir).unwrap().starts_with("pipeline cleanup pid "));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
