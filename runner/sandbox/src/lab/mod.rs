//! A lab of several hosts on one machine (`pipeline sandbox up --hosts N --clients M`).
//!
//! Each host is a network namespace with an address from 198.18.0.0/24 on one bridge
//! (`net`), its link shaped with `tc` (`link`), and its own sshd (`sshd`). Cluster hosts
//! also run the Ceph daemons the [`crate::topology::Topology`] puts there; client hosts
//! run only sshd. The lab is recorded in `DIR/lab/lab.json`, so `down` removes exactly
//! what `up` made; `leftovers` finds anything of a lab's that is still on the machine.

pub(crate) mod disk;
mod fault;
mod inventory;
mod link;
mod net;
mod plan;
mod sshd;

use std::path::{Component, Path, PathBuf};
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
    found.extend(disk::leftovers());
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

/// The lab recorded in `layout`'s folder, if any. The record decides which namespaces
/// `down` empties and removes, so it is believed only when it is exactly what `up` would
/// have written for its own spec (hosts, addresses, `pl-` namespaces, files in the lab
/// folder): a damaged or doctored record cannot aim teardown at anything else.
pub(crate) fn read(layout: &Layout) -> Result<Option<Lab>, SandboxError> {
    let path = record_path(layout);
    let bad = |reason: String| SandboxError::BadLabRecord {
        path: path.clone(),
        reason,
        found: {
            let found = leftovers();
            if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            }
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SandboxError::io("read", &path)(e)),
        Ok(text) => text,
    };
    let lab: Lab = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    check_record(&lab, &lab_dir(layout)).map_err(bad)?;
    Ok(Some(lab))
}

/// Why `lab` is not a record `up` wrote into `dir`, if it is not.
fn check_record(lab: &Lab, dir: &Path) -> Result<(), String> {
    let expected = LabPlan::new(lab.plan.spec.clone()).map_err(|e| e.to_string())?;
    if expected.hosts != lab.plan.hosts {
        return Err(format!(
            "its hosts are not the {} cluster and {} client hosts its spec makes",
            lab.plan.spec.cluster_hosts, lab.plan.spec.client_hosts
        ));
    }
    for (what, file) in [
        ("inventory", &lab.inventory),
        ("ssh_key", &lab.ssh_key),
        ("known_hosts", &lab.known_hosts),
    ] {
        let inside = file
            .strip_prefix(dir)
            .is_ok_and(|rest| rest.components().all(|c| matches!(c, Component::Normal(_))));
        if !inside {
            return Err(format!("its {what} {file:?} is outside {dir:?}"));
        }
    }
    Ok(())
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
    // After the hosts: removing them killed what was left in their
    // namespaces, so no OSD thread holds a loop device or its cgroup (a
    // cgroup with a task left in it cannot be removed: EBUSY; once, an OSD
    // still exiting left five of them behind).
    match disk::teardown(layout) {
        Ok(gone) => removed.extend(gone),
        Err(e) => {
            first_error.get_or_insert(e);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(dir: &Path) -> Lab {
        Lab {
            plan: LabPlan::new(LabSpec::default()).unwrap(),
            inventory: dir.join("inventory.ini"),
            ssh_key: dir.join("ssh/id_ed25519"),
            known_hosts: dir.join("ssh/known_hosts"),
            delay_applied: true,
        }
    }

    #[test]
    fn a_record_up_would_write_is_believed() {
        let dir = Path::new("/tmp/sbx/lab");
        assert_eq!(check_record(&recorded(dir), dir), Ok(()));
    }

    #[test]
    fn a_record_naming_a_foreign_namespace_is_refused() {
        let dir = Path::new("/tmp/sbx/lab");
        let mut lab = recorded(dir);
        lab.plan.hosts[1].netns = "someone-elses".into();
        let reason = check_record(&lab, dir).unwrap_err();
        assert!(
            reason.contains("not the 3 cluster and 2 client hosts"),
            "{reason}"
        );
        let mut lab = recorded(dir);
        lab.plan.hosts.push(lab.plan.hosts[0].clone());
        assert!(check_record(&lab, dir).is_err());
        let mut lab = recorded(dir);
        lab.plan.spec.cluster_hosts = 0;
        assert!(check_record(&lab, dir).unwrap_err().contains("--hosts 0"));
    }

    #[test]
    fn a_record_pointing_outside_the_lab_folder_is_refused() {
        let dir = Path::new("/tmp/sbx/lab");
        for outside in [
            "/etc/shadow",
            "/tmp/sbx/lab/../../etc/shadow",
            "/tmp/sbx/labx/key",
        ] {
            let mut lab = recorded(dir);
            lab.ssh_key = outside.into();
            let reason = check_record(&lab, dir).unwrap_err();
            assert!(
                reason.contains("ssh_key") && reason.contains("outside"),
                "{reason}"
            );
        }
    }

    #[test]
    fn a_damaged_record_is_an_error_naming_it_and_what_is_left() {
        let base = std::env::temp_dir().join(format!("sbx-lab-record-{}", std::process::id()));
        let layout = Layout::new(&base).unwrap();
        std::fs::create_dir_all(lab_dir(&layout)).unwrap();
        assert_eq!(read(&layout).unwrap(), None);
        for damaged in ["{\"plan\": ", "[]", "{\"plan\": {\"spec\": 1}}"] {
            std::fs::write(record_path(&layout), damaged).unwrap();
            let error = read(&layout).unwrap_err().to_string();
            assert!(
                error.contains("lab.json") && error.contains("not one `pipeline sandbox up` wrote"),
                "{error}"
            );
        }
        let lab = recorded(&lab_dir(&layout));
        write_record(&layout, &lab).unwrap();
        assert_eq!(read(&layout).unwrap(), Some(lab));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
