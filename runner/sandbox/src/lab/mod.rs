//! A lab of several hosts on one machine (`pipeline sandbox up --hosts N --clients M`).
//!
//! Each host is a network namespace with an address from 198.18.0.0/24 on one bridge
//! (`net`), its link shaped with `tc` (`link`), and its own sshd (`sshd`). Cluster hosts
//! also run the Ceph daemons the [`crate::topology::Topology`] puts there; client hosts
//! run only sshd. The lab is recorded in `DIR/lab/lab.json`, so `down` removes exactly
//! what `up` made; `leftovers` finds anything of a lab's that is still on the machine.

mod fault;
mod inventory;
mod link;
mod net;
mod plan;
mod sshd;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use fault::{Fault, FaultOutcome};
pub use link::LinkShape;
pub(crate) use net::in_netns;
pub use plan::{BRIDGE, BRIDGE_ADDRESS, LabHost, LabPlan, LabSpec, Role};
pub use sshd::SSHD;

use crate::error::SandboxError;
use crate::layout::Layout;
use crate::topology::Topology;

/// Time a host's processes get after SIGTERM at teardown.
const HOST_GRACE: Duration = Duration::from_secs(5);

/// A lab that was made: what `down` removes and `sandbox env` exports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lab {
    pub plan: LabPlan,
    /// Ansible INI inventory of the hosts (groups mons, mgrs, osds, rgws, clients).
    pub inventory: PathBuf,
    /// Private key every host's sshd accepts for root.
    pub ssh_key: PathBuf,
    /// Host keys of every host, by address.
    pub known_hosts: PathBuf,
    /// Whether the links carry the delay (the kernel may lack netem).
    pub delay_applied: bool,
}

fn lab_dir(layout: &Layout) -> PathBuf {
    layout.dir().join("lab")
}

fn record_path(layout: &Layout) -> PathBuf {
    lab_dir(layout).join("lab.json")
}

/// Refuses without root: namespaces, bridges and qdiscs need CAP_NET_ADMIN, sshd root.
pub(crate) fn require_root() -> Result<(), SandboxError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(SandboxError::NeedsRoot {
            what: "a lab (`--hosts`): it creates network namespaces, a bridge, tc qdiscs and sshd servers".into(),
        })
    }
}

/// Namespaces and interfaces of a lab still on this machine (named `pl-…`).
pub fn leftovers() -> Vec<String> {
    let mut found: Vec<String> = net::namespaces()
        .into_iter()
        .map(|n| format!("namespace {n}"))
        .collect();
    found.extend(net::links().into_iter().map(|l| format!("interface {l}")));
    found
}

/// Builds the network, hosts and sshds of `plan`, writes the inventory, and records the
/// lab. On failure, what was made is removed again.
pub(crate) fn create(
    layout: &Layout,
    plan: &LabPlan,
    topology: &Topology,
    say: &mut dyn FnMut(&str),
) -> Result<Lab, SandboxError> {
    let dir = lab_dir(layout);
    std::fs::create_dir_all(&dir).map_err(SandboxError::io("create directory", &dir))?;
    let files = sshd::SshFiles {
        dir: dir.join("ssh"),
    };
    let lab = Lab {
        plan: plan.clone(),
        inventory: dir.join("inventory.ini"),
        ssh_key: files.client_key(),
        known_hosts: files.known_hosts(),
        delay_applied: false,
    };
    // Recorded before anything exists, so a failed `up` is undone by `down` too.
    write_record(layout, &lab)?;
    let result = build(layout, lab, &files, topology, say);
    if result.is_err() {
        let _ = teardown(layout);
    }
    result
}

fn build(
    layout: &Layout,
    mut lab: Lab,
    files: &sshd::SshFiles,
    topology: &Topology,
    say: &mut dyn FnMut(&str),
) -> Result<Lab, SandboxError> {
    let plan = &lab.plan;
    net::create_bridge()?;
    let link = plan.spec.link;
    let delay = link.delay.is_some() && net::netem_available();
    if link.delay.is_some() && !delay {
        if !link.delay_is_default {
            return Err(SandboxError::InvalidOption {
                reason: format!(
                    "--link {link}: this kernel has no netem qdisc (sch_netem), so links cannot carry a delay; give a rate only"
                ),
            });
        }
        say("links carry no delay: this kernel has no netem qdisc (sch_netem)");
    }
    for host in &plan.hosts {
        net::create_host(host)?;
        net::shape(host, &link, delay)?;
    }
    sshd::write_files(files, &plan.hosts)?;
    for host in &plan.hosts {
        sshd::start(files, host)?;
    }
    let shown = if delay {
        link.to_string()
    } else {
        LinkShape {
            delay: None,
            ..link
        }
        .to_string()
    };
    say(&format!(
        "lab network: {} hosts on {} ({}), {shown} per link, sshd on each",
        plan.hosts.len(),
        plan.network(),
        plan.hosts
            .iter()
            .map(|h| format!("{} {}", h.name, h.address))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let text = inventory::render(plan, topology, &lab.ssh_key, layout.dir());
    std::fs::write(&lab.inventory, text).map_err(SandboxError::io("write", &lab.inventory))?;
    lab.delay_applied = delay;
    write_record(layout, &lab)?;
    Ok(lab)
}

fn write_record(layout: &Layout, lab: &Lab) -> Result<(), SandboxError> {
    let path = record_path(layout);
    let json = serde_json::to_string_pretty(lab).map_err(|e| SandboxError::Parse {
        what: "lab record".into(),
        detail: e.to_string(),
    })?;
    std::fs::write(&path, json + "\n").map_err(SandboxError::io("write", &path))
}

/// The lab recorded in `layout`'s folder, if any.
pub(crate) fn read(layout: &Layout) -> Result<Option<Lab>, SandboxError> {
    let path = record_path(layout);
    match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SandboxError::io("read", &path)(e)),
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| SandboxError::Parse {
                what: path.display().to_string(),
                detail: e.to_string(),
            }),
    }
}

/// Removes the recorded lab's hosts (their remaining processes, namespaces and veths,
/// qdiscs with them) and the bridge. Returns what it removed, for `down`'s report.
pub(crate) fn teardown(layout: &Layout) -> Result<Vec<String>, SandboxError> {
    let Some(lab) = read(layout)? else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    let mut first_error = None;
    for host in &lab.plan.hosts {
        let present = net::namespaces().contains(&host.netns)
            || Path::new("/sys/class/net").join(&host.netns).exists();
        if !present {
            continue;
        }
        match net::remove_host(&host.netns, HOST_GRACE) {
            Ok(_) => removed.push(host.name.clone()),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Err(e) = net::remove_bridge() {
        first_error.get_or_insert(e);
    } else {
        removed.push(BRIDGE.to_string());
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            let _ = std::fs::remove_file(record_path(layout));
            Ok(removed)
        }
    }
}

/// Where a lab keeps its files, for `env`.
pub(crate) fn env_of(lab: &Lab) -> crate::env::LabEnv {
    crate::env::LabEnv {
        inventory: lab.inventory.clone(),
        ssh_key: lab.ssh_key.clone(),
        known_hosts: lab.known_hosts.clone(),
    }
}

/// Applies `fault` to the sandbox in `dir` (see [`Fault`]); returns what was done.
pub fn inject(dir: &Path, fault: &Fault) -> Result<FaultOutcome, SandboxError> {
    let layout = Layout::new(dir)?;
    if !layout.marker().exists() {
        return Err(SandboxError::NoSandbox {
            dir: layout.dir().to_path_buf(),
            file: layout.marker(),
        });
    }
    fault::apply(&layout, fault)
}
