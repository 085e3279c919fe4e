//! `down`: stop the daemons this sandbox started, then remove its data.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::daemons::DaemonKind;
use crate::error::SandboxError;
use crate::layout::{Layout, MARKER};
use crate::pids::{self, PidFile};

/// Time a daemon gets to exit after SIGTERM before it is sent SIGKILL.
pub const GRACE: Duration = Duration::from_secs(10);

/// One daemon `down` stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedDaemon {
    pub name: String,
    pub pid: u32,
    /// It ignored SIGTERM for [`GRACE`] and was killed.
    pub killed: bool,
}

/// What `down` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownReport {
    pub dir: PathBuf,
    pub stopped: Vec<StoppedDaemon>,
    /// Pid files whose process was already gone (or was not ours): removed, nothing signalled.
    pub stale: Vec<String>,
    /// The lab's hosts (namespaces, veths, sshd) and bridge that were removed.
    #[serde(default)]
    pub lab: Vec<String>,
    /// The sandbox directory was deleted.
    pub removed_dir: bool,
    pub elapsed: Duration,
}

impl fmt::Display for DownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.stopped.is_empty() {
            write!(f, "nothing was running in {}", self.dir.display())?;
        } else {
            let names: Vec<String> = self
                .stopped
                .iter()
                .map(|d| {
                    let how = if d.killed { ", SIGKILL" } else { "" };
                    format!("{} (pid {}{how})", d.name, d.pid)
                })
                .collect();
            write!(
                f,
                "stopped {} in {:.1} s",
                names.join(", "),
                self.elapsed.as_secs_f64()
            )?;
        }
        if !self.lab.is_empty() {
            write!(f, "; removed lab {}", self.lab.join(", "))?;
        }
        if !self.stale.is_empty() {
            write!(f, "; stale pid files: {}", self.stale.join(", "))?;
        }
        if self.removed_dir {
            write!(f, "; removed {}", self.dir.display())?;
        }
        Ok(())
    }
}

/// See [`crate::down`].
pub(crate) fn down(dir: &Path, keep_data: bool) -> Result<DownReport, SandboxError> {
    let start = Instant::now();
    let layout = Layout::new(dir)?;
    let mut report = DownReport {
        dir: layout.dir().to_path_buf(),
        stopped: Vec::new(),
        stale: Vec::new(),
        lab: Vec::new(),
        removed_dir: false,
        elapsed: Duration::ZERO,
    };
    if !layout.dir().exists() {
        return Ok(report);
    }
    if !layout.marker().exists() {
        return Err(SandboxError::NotASandboxDir {
            dir: layout.dir().to_path_buf(),
            marker: MARKER,
        });
    }
    let (stopped, stale) = stop_daemons(&layout);
    report.stopped = stopped;
    report.stale = stale;
    // After the daemons: a host's namespace goes with whatever still runs in it.
    report.lab = crate::lab::teardown(&layout)?;
    if !keep_data {
        std::fs::remove_dir_all(layout.dir()).map_err(SandboxError::io("remove", layout.dir()))?;
        report.removed_dir = true;
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Stops every live daemon named by a pid file and removes the pid files. Returns the
/// stopped daemons and the names of stale pid files.
///
/// Order matters: the gateway goes first because its shutdown unwatches objects on the OSDs
/// (with the OSDs already gone it hangs until SIGKILL); the monitor goes last so the others
/// can still report their shutdown to it.
pub(crate) fn stop_daemons(layout: &Layout) -> (Vec<StoppedDaemon>, Vec<String>) {
    let mut stale = Vec::new();
    let mut live: Vec<(PidFile, u32)> = Vec::new();
    for file in pids::pid_files(layout) {
        match file.live_pid(layout) {
            Some(pid) => live.push((file, pid)),
            None => {
                stale.push(file.daemon.name());
                let _ = std::fs::remove_file(&file.path);
            }
        }
    }
    let phase = |f: &PidFile| match f.daemon.kind {
        DaemonKind::Rgw | DaemonKind::Registry => 0,
        DaemonKind::Mgr | DaemonKind::Osd => 1,
        DaemonKind::Mon => 2,
    };
    let mut stopped = Vec::new();
    for current in 0..3 {
        let (group, rest): (Vec<_>, Vec<_>) =
            live.into_iter().partition(|(f, _)| phase(f) == current);
        live = rest;
        stopped.extend(stop_group(layout, group));
    }
    (stopped, stale)
}

/// SIGTERM to all of `group`, wait up to [`GRACE`], SIGKILL the rest, wait for them.
fn stop_group(layout: &Layout, group: Vec<(PidFile, u32)>) -> Vec<StoppedDaemon> {
    for (_, pid) in &group {
        let _ = pids::send_signal(*pid, libc::SIGTERM);
    }
    let mut remaining: Vec<&(PidFile, u32)> = group.iter().collect();
    let mut killed = Vec::new();
    let start = Instant::now();
    while !remaining.is_empty() {
        remaining.retain(|(file, _)| file.live_pid(layout).is_some());
        if remaining.is_empty() {
            break;
        }
        if start.elapsed() >= GRACE {
            for (file, pid) in remaining.drain(..) {
                // re-checked just above: still this sandbox's daemon
                let _ = pids::send_signal(*pid, libc::SIGKILL);
                killed.push(*pid);
                wait_gone(layout, file, Duration::from_secs(5));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    group
        .iter()
        .map(|(file, pid)| {
            let _ = std::fs::remove_file(&file.path);
            StoppedDaemon {
                name: file.daemon.name(),
                pid: *pid,
                killed: killed.contains(pid),
            }
        })
        .collect()
}

fn wait_gone(layout: &Layout, file: &PidFile, limit: Duration) {
    let start = Instant::now();
    while file.live_pid(layout).is_some() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_on_absent_dir_reports_nothing() {
        let report = down(Path::new("/nonexistent/pipeline-sandbox-down"), false).unwrap();
        assert!(report.stopped.is_empty());
        assert!(report.to_string().starts_with("nothing was running"));
    }

    #[test]
    fn down_refuses_foreign_dir_and_leaves_it() {
        let dir = std::env::temp_dir().join(format!("sbx-down-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        let err = down(&dir, false).unwrap_err();
        assert!(dir.join("file").exists());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(err, SandboxError::NotASandboxDir { .. }), "{err}");
    }

    #[test]
    fn stale_pid_of_unrelated_process_is_not_signalled() {
        // A pid file pointing at this very test process: alive, but not a ceph daemon.
        let dir = std::env::temp_dir().join(format!("sbx-down-stale-{}", std::process::id()));
        let layout = Layout::new(&dir).unwrap();
        std::fs::create_dir_all(layout.run_dir()).unwrap();
        std::fs::write(layout.marker(), "").unwrap();
        std::fs::write(layout.pid_file("osd.0"), std::process::id().to_string()).unwrap();
        let report = down(&dir, false).unwrap();
        assert!(report.stopped.is_empty());
        assert_eq!(report.stale, vec!["osd.0"]);
        assert!(report.removed_dir && !dir.exists());
    }
}
