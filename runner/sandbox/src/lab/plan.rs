//! What a lab is made of, decided before anything is created: host names, addresses,
//! namespace and interface names. Pure, so it is tested without root.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::link::LinkShape;
use crate::error::SandboxError;

/// The lab's subnet: 198.18.0.0/24, inside 198.18.0.0/15, the range RFC 2544 reserves for
/// benchmark testing, so no lab address can be a real machine's.
pub const SUBNET: [u8; 3] = [198, 18, 0];
pub const PREFIX_LEN: u8 = 24;
/// The bridge's own address in the machine's namespace: how the runner reaches the hosts.
pub const BRIDGE_ADDRESS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The bridge every host's veth is attached to.
pub const BRIDGE: &str = "pl-lab0";
/// Prefix of every namespace and host-side interface the lab creates; `down` and the
/// leftovers check look for exactly these.
pub const NAME_PREFIX: &str = "pl-";

pub const MAX_CLUSTER_HOSTS: u32 = 16;
pub const MAX_CLIENT_HOSTS: u32 = 32;
pub const MAX_OSDS_PER_HOST: u32 = 8;

/// What `pipeline sandbox up --hosts N --clients M --osds-per-host K --link R,D` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabSpec {
    pub cluster_hosts: u32,
    pub client_hosts: u32,
    pub osds_per_host: u32,
    pub link: LinkShape,
}

impl Default for LabSpec {
    /// 3 hosts with 2 OSDs each and 2 clients: the smallest lab where a size-3 pool puts one
    /// replica per host, and it fits a 2-core, 24 GiB machine.
    fn default() -> Self {
        LabSpec {
            cluster_hosts: 3,
            client_hosts: 2,
            osds_per_host: 2,
            link: LinkShape::default(),
        }
    }
}

/// Cluster host (runs Ceph daemons and sshd) or client host (sshd only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Cluster,
    Client,
}

/// One host of the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabHost {
    /// `node1`…, `client1`…: the inventory name and the CRUSH host bucket.
    pub name: String,
    pub role: Role,
    pub address: Ipv4Addr,
    /// The namespace, also the name of the veth end on the bridge: `pl-node1`.
    pub netns: String,
}

/// The whole lab, computed from a [`LabSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabPlan {
    pub spec: LabSpec,
    pub hosts: Vec<LabHost>,
}

impl LabPlan {
    /// Node N gets 198.18.0.(10+N), client N 198.18.0.(100+N).
    pub fn new(spec: LabSpec) -> Result<LabPlan, SandboxError> {
        let invalid = |reason: String| Err(SandboxError::InvalidOption { reason });
        if !(1..=MAX_CLUSTER_HOSTS).contains(&spec.cluster_hosts) {
            return invalid(format!(
                "--hosts {}: a lab has 1 to {MAX_CLUSTER_HOSTS} cluster hosts",
                spec.cluster_hosts
            ));
        }
        if spec.client_hosts > MAX_CLIENT_HOSTS {
            return invalid(format!(
                "--clients {}: a lab has at most {MAX_CLIENT_HOSTS} client hosts",
                spec.client_hosts
            ));
        }
        if !(1..=MAX_OSDS_PER_HOST).contains(&spec.osds_per_host) {
            return invalid(format!(
                "--osds-per-host {}: 1 to {MAX_OSDS_PER_HOST}",
                spec.osds_per_host
            ));
        }
        let host = |name: String, role, last: u32| LabHost {
            netns: format!("{NAME_PREFIX}{name}"),
            address: Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], last as u8),
            name,
            role,
        };
        let hosts = (1..=spec.cluster_hosts)
            .map(|n| host(format!("node{n}"), Role::Cluster, 10 + n))
            .chain(
                (1..=spec.client_hosts).map(|n| host(format!("client{n}"), Role::Client, 100 + n)),
            )
            .collect();
        Ok(LabPlan { spec, hosts })
    }

    pub fn cluster_hosts(&self) -> impl Iterator<Item = &LabHost> {
        self.hosts.iter().filter(|h| h.role == Role::Cluster)
    }

    pub fn client_hosts(&self) -> impl Iterator<Item = &LabHost> {
        self.hosts.iter().filter(|h| h.role == Role::Client)
    }

    pub fn host(&self, name: &str) -> Option<&LabHost> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// `198.18.0.0/24`.
    pub fn network(&self) -> String {
        format!("{}.{}.{}.0/{PREFIX_LEN}", SUBNET[0], SUBNET[1], SUBNET[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plan_names_and_addresses() {
        let plan = LabPlan::new(LabSpec::default()).unwrap();
        let names: Vec<(&str, String, &str)> = plan
            .hosts
            .iter()
            .map(|h| (h.name.as_str(), h.address.to_string(), h.netns.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("node1", "198.18.0.11".to_string(), "pl-node1"),
                ("node2", "198.18.0.12".into(), "pl-node2"),
                ("node3", "198.18.0.13".into(), "pl-node3"),
                ("client1", "198.18.0.101".into(), "pl-client1"),
                ("client2", "198.18.0.102".into(), "pl-client2"),
            ]
        );
        assert_eq!(plan.network(), "198.18.0.0/24");
    }

    #[test]
    fn every_address_is_in_the_benchmark_range_and_names_fit_an_interface() {
        let plan = LabPlan::new(LabSpec {
            cluster_hosts: MAX_CLUSTER_HOSTS,
            client_hosts: MAX_CLIENT_HOSTS,
            ..LabSpec::default()
        })
        .unwrap();
        let mut seen = std::collections::HashSet::new();
        for h in &plan.hosts {
            let o = h.address.octets();
            // 198.18.0.0/15
            assert!(o[0] == 198 && (o[1] & 0xfe) == 18, "{}", h.address);
            assert!(o[3] > 1 && o[3] < 255, "{}", h.address);
            assert!(seen.insert(h.address), "duplicate {}", h.address);
            // IFNAMSIZ - 1
            assert!(h.netns.len() <= 15, "{}", h.netns);
        }
    }

    #[test]
    fn out_of_range_sizes_are_refused() {
        for spec in [
            LabSpec {
                cluster_hosts: 0,
                ..LabSpec::default()
            },
            LabSpec {
                cluster_hosts: MAX_CLUSTER_HOSTS + 1,
                ..LabSpec::default()
            },
            LabSpec {
                client_hosts: MAX_CLIENT_HOSTS + 1,
                ..LabSpec::default()
            },
            LabSpec {
                osds_per_host: 0,
                ..LabSpec::default()
            },
        ] {
            let err = LabPlan::new(spec.clone()).unwrap_err();
            assert!(
                matches!(err, SandboxError::InvalidOption { .. }),
                "{spec:?}: {err}"
            );
        }
    }
}
