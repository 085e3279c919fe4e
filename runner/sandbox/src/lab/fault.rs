//! Faults a suite injects into a running sandbox, usually from a stage's
//! `during:` (`pipeline sandbox fault stop-osds --host node2`), each with
//! the action that undoes it. They act on exactly the daemons, links and
//! hosts this sandbox made, found through its pid files and lab record.

use std::time::{Duration, Instant};

use super::{net, read, sshd};
use crate::daemons::{Daemon, DaemonKind};
use crate::error::SandboxError;
use crate::layout::Layout;
use crate::pids::{self, PidFile, read_pid};
use crate::process::Deadline;
use crate::topology::Topology;

/// How long a stopped daemon gets to exit before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// Limit for starting the daemons of one host again.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// One fault, or the action that undoes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Every OSD of a cluster host stops (SIGTERM, as `systemctl stop ceph-osd.target`).
    StopOsds { host: String },
    /// The OSDs of a host start again.
    StartOsds { host: String },
    /// The host's link goes down: nothing reaches it or leaves it.
    CutLink { host: String },
    /// The host's link runs at `rate_bits` in both directions.
    DegradeLink { host: String, rate_bits: u64 },
    /// The host's link is up again, at the lab's rate.
    RestoreLink { host: String },
    /// radosgw stops and starts again.
    RestartRgw,
    /// The host disappears: every process in its namespace is killed (sshd, its sessions,
    /// and on a cluster host its Ceph daemons).
    StopHost { host: String },
    /// The host's sshd and daemons start again.
    StartHost { host: String },
    /// Each OSD of the host reads and writes at most `iops` times a second
    /// from its disk (see [`super::disk`]): a slow disk, at once.
    SlowDisk { host: String, iops: u64 },
    /// The OSDs of the host use their disks at full speed again.
    RestoreDisk { host: String },
}

impl Fault {
    fn host(&self) -> Option<&str> {
        match self {
            Fault::StopOsds { host }
            | Fault::StartOsds { host }
            | Fault::CutLink { host }
            | Fault::DegradeLink { host, .. }
            | Fault::RestoreLink { host }
            | Fault::StopHost { host }
            | Fault::StartHost { host }
            | Fault::SlowDisk { host, .. }
            | Fault::RestoreDisk { host } => Some(host),
            Fault::RestartRgw => None,
        }
    }
}

/// What a fault did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultOutcome {
    /// For the log: `stopped osd.2 (pid 9), osd.3 (pid 10) on node2`.
    pub done: String,
    /// Processes it started (daemons, an sshd), which outlive it.
    pub started: Vec<u32>,
}

/// Applies `fault` to the sandbox in `layout`.
pub(crate) fn apply(layout: &Layout, fault: &Fault) -> Result<FaultOutcome, SandboxError> {
    let mut started_pids = Vec::new();
    let done = apply_inner(layout, fault, &mut started_pids)?;
    Ok(FaultOutcome {
        done,
        started: started_pids,
    })
}

fn apply_inner(
    layout: &Layout,
    fault: &Fault,
    started_pids: &mut Vec<u32>,
) -> Result<String, SandboxError> {
    let topology = Topology::read(&layout.topology_json())?;
    let lab = read(layout)?;
    let invalid = |reason: String| SandboxError::InvalidOption { reason };
    let lab_host = match (fault.host(), &lab) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(invalid(format!(
                "{fault:?} needs a lab (`pipeline sandbox up --hosts N`); {} is a single-node sandbox",
                layout.dir().display()
            )));
        }
        (Some(name), Some(lab)) => Some(lab.plan.host(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = lab.plan.hosts.iter().map(|h| h.name.as_str()).collect();
            invalid(format!(
                "no lab host `{name}`; the lab has {}",
                names.join(", ")
            ))
        })?),
    };
    match fault {
        Fault::StopOsds { host } => {
            let osds = osds_on(&topology, host);
            if osds.is_empty() {
                return Err(invalid(format!("`{host}` runs no OSD")));
            }
            let stopped = stop(layout, &osds)?;
            Ok(format!("stopped {} on {host}", stopped.join(", ")))
        }
        Fault::SlowDisk { host, iops } => limit_disks(layout, &topology, host, Some(*iops)),
        Fault::RestoreDisk { host } => limit_disks(layout, &topology, host, None),
        Fault::StartOsds { host } => {
            let started = start(layout, &topology, &osds_on(&topology, host), started_pids)?;
            Ok(format!("started {} on {host}", started.join(", ")))
        }
        Fault::RestartRgw => {
            let rgw = vec![Daemon::rgw()];
            stop(layout, &rgw)?;
            start(layout, &topology, &rgw, started_pids)?;
            Ok(format!(
                "restarted radosgw on {}",
                topology.place(&rgw[0]).host
            ))
        }
        Fault::CutLink { host } => {
            net::set_link(&lab_host.clone().expect("checked above").netns, false)?;
            Ok(format!("cut {host}'s link"))
        }
        Fault::DegradeLink { host, rate_bits } => {
            let h = lab_host.clone().expect("checked above");
            let shape = super::LinkShape {
                rate_bits: *rate_bits,
                delay: None,
                delay_is_default: false,
            };
            net::shape(&h, &shape, false)?;
            Ok(format!("{host}'s link now runs at {shape}"))
        }
        Fault::RestoreLink { host } => {
            let h = lab_host.clone().expect("checked above");
            let lab = lab.as_ref().expect("checked above");
            net::set_link(&h.netns, true)?;
            net::shape(&h, &lab.plan.spec.link, lab.delay_applied)?;
            Ok(format!(
                "{host}'s link is up at the lab's {}",
                lab.plan.spec.link
            ))
        }
        Fault::StopHost { host } => {
            let h = lab_host.clone().expect("checked above");
            let pids = net::pids_in(&h.netns);
            for &pid in &pids {
                let _ = pids::send_signal(pid, libc::SIGKILL);
            }
            Ok(format!(
                "{host} is gone: killed its {} processes",
                pids.len()
            ))
        }
        Fault::StartHost { host } => {
            let h = lab_host.clone().expect("checked above");
            let files = sshd::SshFiles {
                dir: layout.dir().join("lab").join("ssh"),
            };
            let sshd_pid = sshd::start(&files, &h)?;
            started_pids.push(sshd_pid);
            let mut daemons: Vec<Daemon> = topology
                .daemons()
                .into_iter()
                .filter(|d| topology.place(d).host == h.name)
                .collect();
            // The monitor first, the gateway last, as at `up`.
            daemons.sort_by_key(|d| match d.kind {
                DaemonKind::Mon => 0,
                DaemonKind::Rgw => 2,
                _ => 1,
            });
            let started = start(layout, &topology, &daemons, started_pids)?;
            Ok(format!(
                "{host} is back: sshd (pid {sshd_pid}){}{}",
                if started.is_empty() { "" } else { ", " },
                started.join(", ")
            ))
        }
    }
}

/// Caps (or uncaps) the disk I/O of every OSD on `host`.
fn limit_disks(
    layout: &Layout,
    topology: &Topology,
    host: &str,
    iops: Option<u64>,
) -> Result<String, SandboxError> {
    let osds = osds_on(topology, host);
    if osds.is_empty() {
        return Err(SandboxError::InvalidOption {
            reason: format!("`{host}` runs no OSD"),
        });
    }
    let done: Vec<String> = osds
        .iter()
        .filter_map(Daemon::osd_id)
        .map(|id| super::disk::limit(layout, id, iops))
        .collect::<Result<_, _>>()?;
    Ok(format!("{host}: {}", done.join(", ")))
}

fn osds_on(topology: &Topology, host: &str) -> Vec<Daemon> {
    (0..topology.osd_count)
        .map(Daemon::osd)
        .filter(|d| topology.place(d).host == host)
        .collect()
}

fn pid_file(layout: &Layout, daemon: &Daemon) -> PidFile {
    let path = layout.pid_file(&daemon.name());
    PidFile {
        daemon: daemon.clone(),
        pid: read_pid(&path),
        path,
    }
}

/// SIGTERM to those of `daemons` that run, SIGKILL after [`STOP_GRACE`]; waits until
/// they are gone. Returns the names of those it stopped.
fn stop(layout: &Layout, daemons: &[Daemon]) -> Result<Vec<String>, SandboxError> {
    let live: Vec<(PidFile, u32)> = daemons
        .iter()
        .map(|d| pid_file(layout, d))
        .filter_map(|f| f.live_pid(layout).map(|pid| (f, pid)))
        .collect();
    for (_, pid) in &live {
        let _ = pids::send_signal(*pid, libc::SIGTERM);
    }
    let start = Instant::now();
    while live.iter().any(|(f, _)| f.live_pid(layout).is_some()) {
        if start.elapsed() > STOP_GRACE {
            for (f, pid) in &live {
                if f.live_pid(layout).is_some() {
                    let _ = pids::send_signal(*pid, libc::SIGKILL);
                }
            }
        }
        if start.elapsed() > STOP_GRACE + Duration::from_secs(5) {
            return Err(SandboxError::Parse {
                what: "stopping daemons".into(),
                detail: format!("still alive after SIGKILL: {:?}", daemons),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(live
        .iter()
        .map(|(f, pid)| format!("{} (pid {pid})", f.daemon.name()))
        .collect())
}

/// Starts those of `daemons` that do not run, on their hosts. Returns their names.
fn start(
    layout: &Layout,
    topology: &Topology,
    daemons: &[Daemon],
    pids: &mut Vec<u32>,
) -> Result<Vec<String>, SandboxError> {
    let deadline = Deadline::after(START_TIMEOUT);
    let mut started = Vec::new();
    for daemon in daemons {
        if pid_file(layout, daemon).live_pid(layout).is_some() {
            continue;
        }
        let pid = crate::bootstrap::start_daemon(layout, topology, daemon, &deadline)?;
        pids.push(pid);
        started.push(format!("{} (pid {pid})", daemon.name()));
    }
    Ok(started)
}
