//! Which OSD a saturated disk serves, so that a disk finding names it
//! ("disk: sdb of osd3 (osd.7 of osd3) ≥ 90% utilised"). Read from what a
//! `ceph-info` stage recorded earlier in the run: `ceph osd metadata` gives
//! each OSD's hostname (the host's `/proc/sys/kernel/hostname`) and the
//! whole disks under it (`devices`: `sdb`, or `nvme0n1,sdb` with a separate
//! DB device), and `ceph osd tree` gives its CRUSH host. A watched host's
//! disk is an OSD's when the host's hostname is the OSD's and the disk is
//! among its devices. The text comes from the cluster: names that are not
//! short and printable are left out.

use std::collections::BTreeMap;

use serde_json::Value;

/// At most this many OSDs are read.
const MAX_OSDS: usize = 4096;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct OsdDisks {
    osds: Vec<OsdDisk>,
}

#[derive(Debug, Clone, PartialEq)]
struct OsdDisk {
    id: u64,
    hostname: String,
    devices: Vec<String>,
    crush_host: Option<String>,
}

fn name(v: &Value) -> Option<String> {
    let text = v.as_str()?.trim();
    (!text.is_empty() && text.len() <= 64 && text.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| text.to_string())
}

impl OsdDisks {
    /// From a run's recorded environment (none when no `ceph-info` ran).
    pub fn from_environment(environment: &BTreeMap<String, Value>) -> Self {
        match environment.get("ceph osd metadata") {
            Some(metadata) => Self::read(metadata, environment.get("ceph osd tree")),
            None => Self::default(),
        }
    }

    /// From `ceph osd metadata -f json` and `ceph osd tree -f json`.
    pub fn read(metadata: &Value, tree: Option<&Value>) -> Self {
        let mut crush_host: BTreeMap<u64, String> = BTreeMap::new();
        let nodes = tree.and_then(|t| t.get("nodes")).and_then(Value::as_array);
        for node in nodes.into_iter().flatten().take(MAX_OSDS * 2) {
            if node.get("type").and_then(Value::as_str) != Some("host") {
                continue;
            }
            let (Some(host), Some(children)) = (
                node.get("name").and_then(name),
                node.get("children").and_then(Value::as_array),
            ) else {
                continue;
            };
            for id in children.iter().filter_map(Value::as_u64) {
                crush_host.insert(id, host.clone());
            }
        }
        let listed = metadata.as_array().map(Vec::as_slice).unwrap_or_default();
        let osds = listed
            .iter()
            .take(MAX_OSDS)
            .filter_map(|osd| {
                let id = osd.get("id").and_then(Value::as_u64)?;
                let hostname = osd.get("hostname").and_then(name)?;
                let devices = osd.get("devices").and_then(Value::as_str)?;
                let devices: Vec<String> = devices
                    .split(',')
                    .filter_map(|d| name(&Value::from(d)))
                    .collect();
                Some(OsdDisk {
                    id,
                    hostname,
                    devices,
                    crush_host: crush_host.get(&id).cloned(),
                })
            })
            .collect();
        Self { osds }
    }

    /// The disks of the host whose hostname is `hostname` that serve OSDs,
    /// each with the words that name them: `osd.1 of node1`, or
    /// `osd.1, osd.4 of node1` for a disk two OSDs share.
    pub fn on_host(&self, hostname: &str) -> BTreeMap<String, String> {
        let mut by_disk: BTreeMap<&str, Vec<&OsdDisk>> = BTreeMap::new();
        for osd in self.osds.iter().filter(|o| o.hostname == hostname) {
            for device in &osd.devices {
                by_disk.entry(device).or_default().push(osd);
            }
        }
        by_disk
            .into_iter()
            .map(|(disk, osds)| (disk.to_string(), words(&osds)))
            .collect()
    }
}

fn words(osds: &[&OsdDisk]) -> String {
    let ids: Vec<String> = osds.iter().map(|o| format!("osd.{}", o.id)).collect();
    let hosts: Vec<&Option<String>> = osds.iter().map(|o| &o.crush_host).collect();
    match hosts.first() {
        Some(Some(host)) if hosts.iter().all(|h| *h == hosts[0]) => {
            format!("{} of {host}", ids.join(", "))
        }
        _ => ids.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/../../plugins/parsers/tests/data/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_labs_loop_devices_are_named_by_their_osd_and_its_crush_host() {
        // Captured from the lab: six OSDs on one machine ("vm"), each on a
        // loop device, two per CRUSH host node1..node3.
        let osds = OsdDisks::read(
            &fixture("ceph-osd-metadata-16.2.15-lab.json"),
            Some(&fixture("ceph-osd-tree-16.2.15-lab.json")),
        );
        let here = osds.on_host("vm");
        assert_eq!(here.len(), 6, "{here:?}");
        // Loop devices are numbered in the order they were attached, not by OSD.
        assert_eq!(here["loop0"], "osd.0 of node1");
        assert_eq!(here["loop5"], "osd.1 of node1");
        assert_eq!(here["loop1"], "osd.2 of node2");
        assert_eq!(here["loop2"], "osd.5 of node3");
        assert!(osds.on_host("elsewhere").is_empty());
    }

    #[test]
    fn shared_devices_missing_trees_and_hostile_names() {
        let metadata = serde_json::json!([
            {"id": 1, "hostname": "osd3", "devices": "nvme0n1,sdb"},
            {"id": 4, "hostname": "osd3", "devices": "nvme0n1,sdc"},
            {"id": 5, "hostname": "osd3", "devices": "sd\u{1b}[2Jd"},
            {"id": 6, "hostname": "\u{1b}]0;x", "devices": "sde"},
            {"hostname": "osd3", "devices": "sdf"},
            "not an OSD",
        ]);
        let tree = serde_json::json!({"nodes": [
            {"id": -3, "name": "osd3", "type": "host", "children": [4, 1]},
        ]});
        let here = OsdDisks::read(&metadata, Some(&tree)).on_host("osd3");
        assert_eq!(
            here,
            BTreeMap::from([
                ("nvme0n1".to_string(), "osd.1, osd.4 of osd3".to_string()),
                ("sdb".to_string(), "osd.1 of osd3".to_string()),
                ("sdc".to_string(), "osd.4 of osd3".to_string()),
            ])
        );
        let untreed = OsdDisks::read(&metadata, None).on_host("osd3");
        assert_eq!(untreed["nvme0n1"], "osd.1, osd.4");
        assert!(
            OsdDisks::read(&Value::from("garbage"), None)
                .osds
                .is_empty()
        );
        assert!(OsdDisks::from_environment(&BTreeMap::new()).osds.is_empty());
    }
}
