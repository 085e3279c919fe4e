//! Where stages run: the pipeline's inventory of hosts and groups, and the
//! transport to them, the system's OpenSSH client (BatchMode, multiplexed
//! connections, strict host key checking unless the pipeline explicitly
//! relaxes it). The local machine needs no SSH.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Sp;

pub use pipeline_stage_api::hosts::{ALL, Host, LOCAL, StrictHostKeyChecking};

/// `inventory:` in a pipeline.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InventoryConfig {
    /// Defaults for every host.
    #[serde(default)]
    pub ssh: SshConfig,
    /// Hosts by name.
    #[serde(default)]
    pub hosts: BTreeMap<String, Sp<HostConfig>>,
    /// Named groups of host names (`mons`, `osds`, `clients`, ...).
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<Sp<String>>>,
    /// An Ansible INI inventory to read hosts and groups from (merged with the above).
    #[serde(default)]
    pub ansible: Option<Sp<String>>,
    /// Sample the CPUs, disks and NICs of this machine, of each stage's
    /// `on:` hosts and of the cluster hosts named here (mons, mgrs, osds,
    /// rgws, mdss) once a second beside every benchmark stage, and say which
    /// of them limited its figures. Default: true.
    #[serde(default)]
    pub watch: Option<Sp<bool>>,
}

/// SSH settings; every string may be a template (`{{ env.SSH_KEY }}`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    /// Private key file.
    #[serde(default)]
    pub key: Option<String>,
    /// A known_hosts file to check host keys against (default: the user's).
    #[serde(default)]
    pub known_hosts: Option<String>,
    /// `yes` (default): unknown host keys are refused. `accept-new` or `no`
    /// relax it, and must be written out explicitly.
    #[serde(default)]
    pub strict_host_key_checking: Option<StrictHostKeyChecking>,
    /// Seconds to wait for a connection.
    #[serde(default)]
    pub connect_timeout: Option<u32>,
    /// Extra `-o` options, e.g. `[Ciphers=aes128-gcm@openssh.com]`.
    #[serde(default)]
    pub options: Vec<String>,
    /// Path of a `pipeline` binary on every host, for stages that run a
    /// worker there (default: the runner copies its own binary, checked by
    /// sha256, into `~/.cache/pipeline/bin` on the host).
    #[serde(default)]
    pub pipeline: Option<String>,
}

/// One host in the inventory.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Name or IP address to connect to.
    pub address: String,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub key: Option<String>,
    /// Path of a `pipeline` binary on this host (Ansible: `pipeline_path`).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Each interface's speed, bits a second with k, M or G (`{eth0: 10G}`),
    /// for the network verdict where the kernel reports none or the wrong
    /// one (a VM's virtio NIC, a veth, a link capped upstream). It replaces
    /// `/sys/class/net/IF/speed`. Ansible: `pipeline_link_speed=eth0:10G,eth1:25G`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub link_speed: BTreeMap<String, String>,
}

/// The groups an Ansible inventory of a Ceph cluster (ceph-ansible's
/// names) puts the cluster's own hosts in: watched beside every benchmark
/// stage ([`crate::host_watch`]), where the stage runs or not.
pub const CLUSTER_GROUPS: &[&str] = &["mons", "mgrs", "osds", "rgws", "mdss"];
/// At most this many cluster hosts are watched (one SSH session each per stage).
pub const MAX_WATCHED_CLUSTER_HOSTS: usize = 64;

impl Inventory {
    /// The hosts of [`CLUSTER_GROUPS`], each once, in inventory order of the groups.
    pub fn cluster_hosts(&self) -> Vec<Host> {
        let mut names: Vec<&String> = Vec::new();
        for group in CLUSTER_GROUPS {
            for name in self.groups.get(*group).into_iter().flatten() {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
            .into_iter()
            .filter_map(|n| self.hosts.get(n))
            .filter(|h| !h.is_local())
            .take(MAX_WATCHED_CLUSTER_HOSTS)
            .cloned()
            .collect()
    }
}

/// The resolved inventory: hosts by name, groups of names.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub hosts: BTreeMap<String, Host>,
    pub groups: BTreeMap<String, Vec<String>>,
    /// An inventory file could not be read (already reported): names
    /// it would have defined are not reported again as unknown.
    pub incomplete: bool,
}

impl Default for Inventory {
    fn default() -> Self {
        let mut hosts = BTreeMap::new();
        hosts.insert(LOCAL.to_string(), Host::local());
        Inventory {
            hosts,
            groups: BTreeMap::new(),
            incomplete: false,
        }
    }
}

impl Inventory {
    /// Hosts named by `on:` entries (host or group names), in order, once each.
    pub fn resolve(&self, names: &[String]) -> Result<Vec<Host>, UnknownTarget> {
        let mut out: Vec<Host> = Vec::new();
        for name in names {
            let members: Vec<String> = if let Some(group) = self.groups.get(name) {
                group.clone()
            } else if name == ALL {
                self.hosts
                    .keys()
                    .filter(|h| *h != LOCAL || self.hosts.len() == 1)
                    .cloned()
                    .collect()
            } else if self.hosts.contains_key(name) {
                vec![name.clone()]
            } else {
                return Err(UnknownTarget(name.clone()));
            };
            for m in members {
                if let Some(h) = self.hosts.get(&m)
                    && !out.iter().any(|o| o.name == h.name)
                {
                    out.push(h.clone());
                }
            }
        }
        Ok(out)
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.groups.keys().cloned().collect();
        names.push(ALL.to_string());
        names.extend(self.hosts.keys().cloned());
        names
    }
}

/// An `on:` entry that is neither a host nor a group of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no host or group `{0}` in the inventory")]
pub struct UnknownTarget(pub String);

/// Why an Ansible inventory could not be read. Lines are 1-based.
#[derive(Debug, thiserror::Error)]
pub enum AnsibleError {
    #[error("line {line}: unknown section kind `{kind}`")]
    UnknownSection { line: usize, kind: String },
    #[error("line {line}: expected key=value, found `{word}`")]
    NotKeyValue { line: usize, word: String },
    #[error("line {line}: the section header `{text}` has no closing `]`")]
    UnclosedHeader { line: usize, text: String },
    #[error("the groups' children form a cycle: {}", .0.join(" -> "))]
    ChildrenCycle(Vec<String>),
    #[error("group `{group}`: `{key}` must be a mapping (`NAME: {{...}}` per entry), not {found}")]
    NotAMapping {
        group: String,
        key: &'static str,
        found: &'static str,
    },
    /// `line` is known for a host line of an INI file, not for group vars.
    #[error("{}ansible_port `{value}` is not a port number", .line.map(|n| format!("line {n}: ")).unwrap_or_default())]
    BadPort { line: Option<usize>, value: String },
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::Error),
}

/// Hosts by name, and groups of host names.
pub type HostsAndGroups = (BTreeMap<String, HostConfig>, BTreeMap<String, Vec<String>>);

/// Reads an Ansible INI inventory: `[group]` sections of
/// `name ansible_host=ADDR ansible_user=U ansible_port=P ansible_ssh_private_key_file=K`
/// lines. `[group:vars]` and `[group:children]` sections are understood
/// (children are expanded; vars apply `ansible_user`/`ansible_port`).
pub fn read_ansible_ini(text: &str) -> Result<HostsAndGroups, AnsibleError> {
    let mut hosts: BTreeMap<String, HostConfig> = BTreeMap::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut group_vars: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut section = ("ungrouped".to_string(), "hosts");
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split(['#', ';']).next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') && !line.ends_with(']') {
            return Err(AnsibleError::UnclosedHeader {
                line: n + 1,
                text: line.to_string(),
            });
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = match header.split_once(':') {
                Some((g, "vars")) => (g.to_string(), "vars"),
                Some((g, "children")) => (g.to_string(), "children"),
                Some((_, other)) => {
                    return Err(AnsibleError::UnknownSection {
                        line: n + 1,
                        kind: other.to_string(),
                    });
                }
                None => (header.to_string(), "hosts"),
            };
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default().to_string();
        match section.1 {
            "children" => children.entry(section.0.clone()).or_default().push(first),
            "vars" => {
                if let Some((k, v)) = line.split_once('=') {
                    group_vars
                        .entry(section.0.clone())
                        .or_default()
                        .push((k.trim().into(), v.trim().into()));
                }
            }
            _ => {
                let host = hosts.entry(first.clone()).or_insert_with(|| HostConfig {
                    address: first.clone(),
                    ..Default::default()
                });
                for word in words {
                    let Some((k, v)) = word.split_once('=') else {
                        return Err(AnsibleError::NotKeyValue {
                            line: n + 1,
                            word: word.to_string(),
                        });
                    };
                    apply_ansible_var(host, k, v).map_err(|e| e.at_line(n + 1))?;
                }
                groups.entry(section.0.clone()).or_default().push(first);
            }
        }
    }
    for (group, vars) in &group_vars {
        for member in groups.get(group).cloned().unwrap_or_default() {
            if let Some(h) = hosts.get_mut(&member) {
                for (k, v) in vars {
                    apply_ansible_var(h, k, v)?;
                }
            }
        }
    }
    // Children of children too; a cycle is refused (as Ansible does).
    let mut expanded = BTreeMap::new();
    for group in children.keys() {
        let members = members_of(group, &children, &groups, &mut Vec::new())?;
        expanded.insert(group.clone(), members);
    }
    groups.extend(expanded);
    groups.remove("ungrouped");
    Ok((hosts, groups))
}

/// A group's hosts and, recursively, its children's; `path` is the chain of
/// groups being expanded (for the cycle check).
fn members_of(
    group: &str,
    children: &BTreeMap<String, Vec<String>>,
    groups: &BTreeMap<String, Vec<String>>,
    path: &mut Vec<String>,
) -> Result<Vec<String>, AnsibleError> {
    if let Some(start) = path.iter().position(|g| g == group) {
        let mut cycle = path[start..].to_vec();
        cycle.push(group.to_string());
        return Err(AnsibleError::ChildrenCycle(cycle));
    }
    path.push(group.to_string());
    let mut members = groups.get(group).cloned().unwrap_or_default();
    for kid in children.get(group).into_iter().flatten() {
        for host in members_of(kid, children, groups, path)? {
            if !members.contains(&host) {
                members.push(host);
            }
        }
    }
    path.pop();
    Ok(members)
}

/// Reads an Ansible YAML inventory (`all: {hosts: ..., children: {GROUP:
/// {hosts: ..., vars: ..., children: ...}}}`). A group's members include its
/// children's; group `vars` apply to its hosts.
pub fn read_ansible_yaml(text: &str) -> Result<HostsAndGroups, AnsibleError> {
    use crate::config::{Node, NodeValue};
    let root: Node = serde_saphyr::from_str(text)?;
    let mut hosts: BTreeMap<String, HostConfig> = BTreeMap::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();

    fn entries(node: Option<&Node>) -> Vec<(String, Node)> {
        match node.map(|n| &n.value) {
            Some(NodeValue::Map(pairs)) => pairs
                .iter()
                .map(|(k, v)| (k.key_text(), v.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }
    fn field<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
        node.as_map()?
            .iter()
            .find(|(k, _)| k.key_text() == key)
            .map(|(_, v)| v)
    }
    fn scalar(node: &Node) -> String {
        match &node.value {
            NodeValue::String(s) => s.clone(),
            _ => node.to_json().to_string(),
        }
    }
    /// `hosts`, `vars` and `children` are mappings (or empty): a list
    /// there (`hosts: [a, b]`) would otherwise read as no hosts at all.
    fn check_shape(name: &str, group: &Node) -> Result<(), AnsibleError> {
        for key in ["hosts", "vars", "children"] {
            let found = match field(group, key).map(|n| &n.value) {
                None | Some(NodeValue::Map(_)) | Some(NodeValue::Null) => continue,
                Some(NodeValue::Seq(_)) => "a list",
                Some(_) => "a single value",
            };
            return Err(AnsibleError::NotAMapping {
                group: name.to_string(),
                key,
                found,
            });
        }
        Ok(())
    }
    fn walk(
        name: &str,
        group: &Node,
        inherited: &[(String, String)],
        hosts: &mut BTreeMap<String, HostConfig>,
        groups: &mut BTreeMap<String, Vec<String>>,
    ) -> Result<Vec<String>, AnsibleError> {
        check_shape(name, group)?;
        let mut vars = inherited.to_vec();
        vars.extend(
            entries(field(group, "vars"))
                .into_iter()
                .map(|(k, v)| (k, scalar(&v))),
        );
        let mut members = Vec::new();
        for (host, settings) in entries(field(group, "hosts")) {
            let h = hosts.entry(host.clone()).or_insert_with(|| HostConfig {
                address: host.clone(),
                ..Default::default()
            });
            for (k, v) in &vars {
                apply_ansible_var(h, k, v)?;
            }
            for (k, v) in entries(Some(&settings)) {
                apply_ansible_var(h, &k, &scalar(&v))?;
            }
            members.push(host);
        }
        for (child, node) in entries(field(group, "children")) {
            members.extend(walk(&child, &node, &vars, hosts, groups)?);
        }
        groups
            .entry(name.to_string())
            .or_default()
            .extend(members.clone());
        Ok(members)
    }
    for (name, node) in entries(Some(&root)) {
        walk(&name, &node, &[], &mut hosts, &mut groups)?;
    }
    groups.remove(ALL); // `all` is built in
    groups.remove("ungrouped");
    Ok((hosts, groups))
}

impl AnsibleError {
    fn at_line(self, line: usize) -> Self {
        match self {
            AnsibleError::BadPort { value, .. } => AnsibleError::BadPort {
                line: Some(line),
                value,
            },
            other => other,
        }
    }
}

fn apply_ansible_var(host: &mut HostConfig, key: &str, value: &str) -> Result<(), AnsibleError> {
    let value = value.trim_matches(['"', '\'']);
    match key {
        "ansible_host" | "ansible_ssh_host" => host.address = value.into(),
        "ansible_user" | "ansible_ssh_user" => host.user = Some(value.into()),
        "ansible_port" | "ansible_ssh_port" => {
            host.port = Some(value.parse().map_err(|_| AnsibleError::BadPort {
                line: None,
                value: value.to_string(),
            })?)
        }
        "ansible_ssh_private_key_file" => host.key = Some(value.into()),
        "pipeline_path" => host.pipeline = Some(value.into()),
        "pipeline_link_speed" => {
            for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
                let (nic, speed) = pair.split_once(':').unwrap_or((pair, ""));
                host.link_speed
                    .insert(nic.trim().to_string(), speed.trim().to_string());
            }
        }
        _ => {} // other Ansible variables do not concern us
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_link_speeds_are_read_per_host() {
        let ini = "[osds]\nosd1 ansible_host=10.0.0.11 pipeline_link_speed=ens3:10G,ens4:25G\n";
        let (hosts, _) = read_ansible_ini(ini).unwrap();
        let speeds: Vec<(&str, &str)> = hosts["osd1"]
            .link_speed
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(speeds, [("ens3", "10G"), ("ens4", "25G")]);
    }

    #[test]
    fn ini_children_nest_and_a_cycle_is_refused() {
        let ini = "[a]\nh1\n[b]\nh2\n[c:children]\nb\n[top:children]\na\nc\n";
        let (_, groups) = read_ansible_ini(ini).unwrap();
        assert_eq!(groups["top"], ["h1", "h2"], "children of children count");
        let cycle = "[a:children]\nb\n[b:children]\nc\n[c:children]\na\n";
        let e = read_ansible_ini(cycle).unwrap_err().to_string();
        assert_eq!(e, "the groups' children form a cycle: a -> b -> c -> a");
    }

    #[test]
    fn broken_inventories_say_what_is_broken() {
        let e = read_ansible_ini("[mons\nmon1\n").unwrap_err().to_string();
        assert_eq!(e, "line 1: the section header `[mons` has no closing `]`");
        let e = read_ansible_yaml("all:\n  hosts: [node1, node2]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "group `all`: `hosts` must be a mapping (`NAME: {...}` per entry), not a list"
        );
    }

    #[test]
    fn reads_ansible_ini() {
        let ini = "[mons]\nmon1 ansible_host=10.0.0.1\n\n[osds]\nosd1 ansible_host=10.0.0.2 ansible_port=2222\nosd2\n\n[osds:vars]\nansible_user=ceph\n\n[ceph:children]\nmons\nosds\n";
        let (hosts, groups) = read_ansible_ini(ini).unwrap();
        assert_eq!(hosts["osd1"].port, Some(2222));
        assert_eq!(hosts["osd1"].user.as_deref(), Some("ceph"));
        assert_eq!(hosts["osd2"].address, "osd2");
        assert_eq!(groups["ceph"], ["mon1", "osd1", "osd2"]);
        assert_eq!(
            read_ansible_ini("[a]\nh1 ansible_port=x\n")
                .unwrap_err()
                .to_string(),
            "line 2: ansible_port `x` is not a port number"
        );
        assert_eq!(
            read_ansible_ini("[a]\nh1\n[a:vars]\nansible_port=x\n")
                .unwrap_err()
                .to_string(),
            "ansible_port `x` is not a port number"
        );
        assert!(matches!(
            read_ansible_ini("[a:hosts]\n"),
            Err(AnsibleError::UnknownSection { line: 1, .. })
        ));
    }

    #[test]
    fn reads_ansible_yaml() {
        let yaml = "all:\n  children:\n    osds:\n      hosts:\n        osd1:\n          ansible_host: 10.0.0.2\n        osd2:\n      vars:\n        ansible_user: ceph\n    mons:\n      hosts:\n        mon1: {ansible_host: 10.0.0.1, ansible_port: 2222}\n";
        let (hosts, groups) = read_ansible_yaml(yaml).unwrap();
        assert_eq!(hosts["osd1"].address, "10.0.0.2");
        assert_eq!(hosts["osd2"].user.as_deref(), Some("ceph"));
        assert_eq!(hosts["mon1"].port, Some(2222));
        assert_eq!(groups["osds"], ["osd1", "osd2"]);
        assert!(!groups.contains_key("all"));
    }

    #[test]
    fn resolves_groups_and_hosts() {
        let mut inv = Inventory::default();
        inv.hosts.insert(
            "n1".into(),
            Host {
                name: "n1".into(),
                address: Some("a".into()),
                ..Host::local()
            },
        );
        inv.hosts.insert(
            "n2".into(),
            Host {
                name: "n2".into(),
                address: Some("b".into()),
                ..Host::local()
            },
        );
        inv.groups
            .insert("osds".into(), vec!["n2".into(), "n1".into()]);
        let names = |v: Vec<Host>| v.into_iter().map(|h| h.name).collect::<Vec<_>>();
        assert_eq!(
            names(inv.resolve(&["osds".into(), "n1".into()]).unwrap()),
            ["n2", "n1"]
        );
        assert_eq!(names(inv.resolve(&["all".into()]).unwrap()), ["n1", "n2"]);
        assert_eq!(
            inv.resolve(&["nope".into()]).unwrap_err(),
            UnknownTarget("nope".into())
        );
    }
}
