//! The lab as an Ansible INI inventory, in the format the runner reads
//! (`inventory: {ansible: …}`; `pipeline_engine::hosts::read_ansible_ini`).

use std::fmt::Write as _;
use std::path::Path;

use super::plan::{LabHost, LabPlan};
use crate::daemons::Daemon;
use crate::topology::Topology;

/// Groups `mons`, `mgrs`, `osds`, `rgws` (hosts running those daemons) and `clients`.
pub(crate) fn render(plan: &LabPlan, topology: &Topology, key: &Path, dir: &Path) -> String {
    let line = |h: &LabHost| {
        format!(
            "{} ansible_host={} ansible_user=root ansible_port=22 ansible_ssh_private_key_file={}\n",
            h.name,
            h.address,
            key.display()
        )
    };
    let hosts_of = |daemons: Vec<Daemon>| -> Vec<&LabHost> {
        let mut names: Vec<String> = daemons.iter().map(|d| topology.place(d).host).collect();
        names.dedup();
        plan.cluster_hosts()
            .filter(|h| names.contains(&h.name))
            .collect()
    };
    let osds: Vec<Daemon> = (0..topology.osd_count).map(Daemon::osd).collect();
    let groups: [(&str, Vec<&LabHost>); 5] = [
        ("mons", hosts_of(vec![Daemon::mon()])),
        ("mgrs", hosts_of(vec![Daemon::mgr()])),
        ("osds", hosts_of(osds)),
        ("rgws", hosts_of(vec![Daemon::rgw()])),
        ("clients", plan.client_hosts().collect()),
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The lab of `pipeline sandbox up --hosts {} --clients {}` in {}.\n\
         # Each host is a network namespace running its own sshd; check host keys against\n\
         # the known_hosts beside this file ($PIPELINE_LAB_KNOWN_HOSTS).",
        plan.spec.cluster_hosts,
        plan.spec.client_hosts,
        dir.display()
    );
    for (group, members) in groups {
        let _ = writeln!(out, "\n[{group}]");
        for host in members {
            out.push_str(&line(host));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::LabSpec;

    #[test]
    fn default_lab_inventory() {
        let plan = LabPlan::new(LabSpec::default()).unwrap();
        let topology = Topology::lab(&plan);
        let text = render(
            &plan,
            &topology,
            Path::new("/tmp/sbx/lab/ssh/id_ed25519"),
            Path::new("/tmp/sbx"),
        );
        let section = |name: &str| -> Vec<String> {
            text.split(&format!("[{name}]\n"))
                .nth(1)
                .unwrap()
                .lines()
                .take_while(|l| !l.is_empty())
                .map(|l| l.split_whitespace().next().unwrap().to_string())
                .collect()
        };
        assert_eq!(section("mons"), ["node1"]);
        assert_eq!(section("mgrs"), ["node2"]);
        assert_eq!(section("osds"), ["node1", "node2", "node3"]);
        assert_eq!(section("rgws"), ["node3"]);
        assert_eq!(section("clients"), ["client1", "client2"]);
        assert!(text.contains(
            "client2 ansible_host=198.18.0.102 ansible_user=root ansible_port=22 ansible_ssh_private_key_file=/tmp/sbx/lab/ssh/id_ed25519\n"
        ));
    }

    /// `pipelines/lab.hosts.ini` (what lab-baseline.yaml reads without a lab environment)
    /// is the default lab's inventory, the key aside.
    #[test]
    fn committed_default_inventory_agrees() {
        let plan = LabPlan::new(LabSpec::default()).unwrap();
        let topology = Topology::lab(&plan);
        let key = Path::new("/k");
        let hosts_only = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .map(|l| l.replace(" ansible_ssh_private_key_file=/k", ""))
                .collect()
        };
        let committed = include_str!("../../../../pipelines/lab.hosts.ini");
        assert_eq!(
            hosts_only(committed),
            hosts_only(&render(&plan, &topology, key, Path::new("/tmp/sbx")))
        );
    }
}
