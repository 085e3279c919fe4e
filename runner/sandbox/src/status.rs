//! `status`: which daemons of a sandbox run, and what the cluster says about its health.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ceph_cli::ceph_json;
use crate::daemons::DaemonKind;
use crate::error::SandboxError;
use crate::layout::Layout;
use crate::pids::{self, PidFile};
use crate::readiness::health_summary;

/// Bound for the health query, so `status` stays quick on a sick cluster.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// State of one daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// Ceph name: `mon.a`, `osd.0`, `client.rgw.sandbox`.
    pub name: String,
    pub kind: DaemonKind,
    /// Pid from the pid file, if there is one.
    pub pid: Option<u32>,
    /// The pid is alive and its command line is this sandbox's daemon.
    pub running: bool,
}

/// What `status` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub dir: PathBuf,
    /// Every daemon of a complete sandbox, running or not.
    pub daemons: Vec<DaemonStatus>,
    /// `HEALTH_OK`, `HEALTH_WARN: …`, or why it could not be asked; `None` without a monitor.
    pub health: Option<String>,
    /// `env.json` exists: `up` completed once in this directory.
    pub ready_once: bool,
}

impl Status {
    pub fn all_running(&self) -> bool {
        self.daemons.iter().all(|d| d.running)
    }
    pub fn any_running(&self) -> bool {
        self.daemons.iter().any(|d| d.running)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "sandbox {}", self.dir.display())?;
        for d in &self.daemons {
            let state = match (d.running, d.pid) {
                (true, Some(pid)) => format!("running (pid {pid})"),
                (false, Some(pid)) => format!("not running (stale pid {pid})"),
                _ => "not running".into(),
            };
            writeln!(f, "  {:<20} {state}", d.name)?;
        }
        match &self.health {
            Some(health) => write!(f, "  health: {health}"),
            None => write!(f, "  health: unknown (monitor not running)"),
        }
    }
}

/// See [`crate::status`].
pub(crate) fn status(dir: &Path) -> Result<Status, SandboxError> {
    let layout = Layout::new(dir)?;
    let files = pids::pid_files(&layout);
    let mut daemons = crate::topology::Topology::read(&layout.topology_json())?.daemons();
    for extra in files.iter().map(|f| &f.daemon) {
        if !daemons.contains(extra) {
            daemons.push(extra.clone());
        }
    }
    let daemons: Vec<DaemonStatus> = daemons
        .into_iter()
        .map(|daemon| {
            let name = daemon.name();
            let file = files
                .iter()
                .find(|f| f.daemon == daemon)
                .cloned()
                .unwrap_or_else(|| PidFile {
                    path: layout.pid_file(&name),
                    pid: None,
                    daemon: daemon.clone(),
                });
            DaemonStatus {
                running: file.live_pid(&layout).is_some(),
                pid: file.pid,
                kind: daemon.kind,
                name,
            }
        })
        .collect();
    let mon_running = daemons
        .iter()
        .any(|d| d.kind == DaemonKind::Mon && d.running);
    let health = mon_running.then(|| {
        ceph_json(&layout, &["health"], HEALTH_TIMEOUT)
            .and_then(|json| health_summary(&json))
            .unwrap_or_else(|e| format!("unknown: {e}"))
    });
    Ok(Status {
        dir: layout.dir().to_path_buf(),
        daemons,
        health,
        ready_once: layout.env_json().exists(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_of_absent_sandbox_lists_all_daemons_stopped() {
        let status = status(Path::new("/nonexistent/pipeline-sandbox-status")).unwrap();
        assert_eq!(status.daemons.len(), 6);
        assert!(!status.any_running());
        assert_eq!(status.health, None);
        assert!(status.to_string().contains("osd.2"));
    }
}
