//! Where each daemon of a sandbox runs: all on 127.0.0.1 (the single-node sandbox), or
//! spread over the hosts of a lab (`lab/`), each host a network namespace of its own.
//!
//! `up` writes it to `topology.json`; `status` and `down` read it back, so they know how
//! many OSDs to expect and which namespace a daemon lives in.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::daemons::{Daemon, OSD_COUNT};
use crate::error::SandboxError;
use crate::lab::LabPlan;

/// One place a daemon can run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Place {
    /// The CRUSH host bucket and inventory name (`node1`), or `localhost`.
    pub host: String,
    pub address: Ipv4Addr,
    /// The network namespace the daemon is started in (`ip netns exec`), if any.
    pub netns: Option<String>,
}

impl Place {
    fn loopback() -> Place {
        Place {
            host: "localhost".into(),
            address: Ipv4Addr::LOCALHOST,
            netns: None,
        }
    }
}

/// Where every daemon of one sandbox runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Topology {
    /// By Ceph name: `mon.a`, `mgr.x`, `osd.0`…, `client.rgw.sandbox`.
    pub places: BTreeMap<String, Place>,
    pub osd_count: u32,
    /// The network every daemon binds in (`public_network`).
    pub public_network: String,
    /// Distinct hosts: the failure domain is the host when there are enough of them.
    pub hosts: Vec<String>,
}

/// A pool of the default size 3 needs three hosts to put one replica on each.
pub(crate) const HOSTS_FOR_HOST_FAILURE_DOMAIN: usize = 3;

impl Topology {
    /// The single-node sandbox: everything on 127.0.0.1, three OSDs on one host.
    pub fn single() -> Topology {
        let mut places = BTreeMap::new();
        let daemons = [Daemon::mon(), Daemon::mgr(), Daemon::rgw()]
            .into_iter()
            .chain((0..OSD_COUNT).map(Daemon::osd));
        for daemon in daemons {
            places.insert(daemon.name(), Place::loopback());
        }
        Topology {
            places,
            osd_count: OSD_COUNT,
            public_network: "127.0.0.1/32".into(),
            hosts: vec!["localhost".into()],
        }
    }

    /// A lab: the monitor on the first cluster host, the manager on the second, the gateway
    /// on the third (or the last there is), `osds_per_host` OSDs on every cluster host.
    pub fn lab(plan: &LabPlan) -> Topology {
        let cluster: Vec<Place> = plan
            .cluster_hosts()
            .map(|h| Place {
                host: h.name.clone(),
                address: h.address,
                netns: Some(h.netns.clone()),
            })
            .collect();
        let pick = |i: usize| cluster[i.min(cluster.len() - 1)].clone();
        let mut places = BTreeMap::new();
        places.insert(Daemon::mon().name(), pick(0));
        places.insert(Daemon::mgr().name(), pick(1));
        places.insert(Daemon::rgw().name(), pick(2));
        let mut id = 0;
        for place in &cluster {
            for _ in 0..plan.spec.osds_per_host {
                places.insert(Daemon::osd(id).name(), place.clone());
                id += 1;
            }
        }
        Topology {
            places,
            osd_count: id,
            public_network: plan.network(),
            hosts: cluster.iter().map(|p| p.host.clone()).collect(),
        }
    }

    /// Where `daemon` runs; the loopback for a daemon the topology does not list.
    pub fn place(&self, daemon: &Daemon) -> Place {
        self.places
            .get(&daemon.name())
            .cloned()
            .unwrap_or_else(Place::loopback)
    }

    pub fn is_lab(&self) -> bool {
        self.places.values().any(|p| p.netns.is_some())
    }

    /// The monitor's address vector (`mon_host`, `monmaptool --addv`).
    pub fn mon_addrv(&self) -> String {
        let a = self.place(&Daemon::mon()).address;
        format!("[v2:{a}:3300,v1:{a}:6789]")
    }

    /// Replicas go to different hosts when there are at least three of them, else to
    /// different OSDs (`osd_crush_chooseleaf_type` 1 or 0).
    pub fn failure_domain_is_host(&self) -> bool {
        self.hosts.len() >= HOSTS_FOR_HOST_FAILURE_DOMAIN
    }

    /// Every Ceph daemon, in start order: mon, mgr, OSDs, gateway.
    pub fn daemons(&self) -> Vec<Daemon> {
        let mut all = vec![Daemon::mon(), Daemon::mgr()];
        all.extend((0..self.osd_count).map(Daemon::osd));
        all.push(Daemon::rgw());
        all
    }

    pub(crate) fn write(&self, path: &Path) -> Result<(), SandboxError> {
        let json = serde_json::to_string_pretty(self).map_err(|e| SandboxError::Parse {
            what: "sandbox topology".into(),
            detail: e.to_string(),
        })?;
        std::fs::write(path, json + "\n").map_err(SandboxError::io("write", path))
    }

    /// The saved topology; a sandbox without one (absent folder, or made before labs
    /// existed) is the single-node one.
    pub(crate) fn read(path: &Path) -> Result<Topology, SandboxError> {
        match std::fs::read_to_string(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Topology::single()),
            Err(e) => Err(SandboxError::io("read", path)(e)),
            Ok(text) => serde_json::from_str(&text).map_err(|e| SandboxError::Parse {
                what: path.display().to_string(),
                detail: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::{LabPlan, LabSpec};

    #[test]
    fn single_is_three_osds_on_loopback() {
        let t = Topology::single();
        assert_eq!(t.osd_count, 3);
        assert_eq!(t.daemons().len(), 6);
        assert!(!t.is_lab() && !t.failure_domain_is_host());
        assert_eq!(t.mon_addrv(), "[v2:127.0.0.1:3300,v1:127.0.0.1:6789]");
    }

    #[test]
    fn default_lab_spreads_daemons_over_hosts() {
        let plan = LabPlan::new(LabSpec::default()).unwrap();
        let t = Topology::lab(&plan);
        assert_eq!(t.osd_count, 6);
        assert!(t.is_lab() && t.failure_domain_is_host());
        assert_eq!(t.place(&Daemon::mon()).host, "node1");
        assert_eq!(t.place(&Daemon::mgr()).host, "node2");
        assert_eq!(t.place(&Daemon::rgw()).host, "node3");
        assert_eq!(t.place(&Daemon::osd(3)).host, "node2");
        assert_eq!(t.place(&Daemon::osd(5)).host, "node3");
        assert_eq!(t.mon_addrv(), "[v2:198.18.0.11:3300,v1:198.18.0.11:6789]");
        assert_eq!(t.public_network, "198.18.0.0/24");
        let dir = std::env::temp_dir().join(format!("sbx-topology-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("topology.json");
        t.write(&path).unwrap();
        let back = Topology::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back, t);
        assert_eq!(
            Topology::read(Path::new("/nonexistent/topology.json")).unwrap(),
            Topology::single()
        );
    }

    #[test]
    fn a_damaged_topology_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("sbx-topology-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("topology.json");
        std::fs::write(&path, "{\"osd_count\": \"many\"").unwrap();
        let error = Topology::read(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(error.contains("topology.json"), "{error}");
    }

    #[test]
    fn one_host_lab_puts_everything_on_it() {
        let plan = LabPlan::new(LabSpec {
            cluster_hosts: 1,
            client_hosts: 0,
            ..LabSpec::default()
        })
        .unwrap();
        let t = Topology::lab(&plan);
        assert_eq!(t.place(&Daemon::rgw()).host, "node1");
        assert!(!t.failure_domain_is_host());
    }
}
