//! `inventory:` -> resolved hosts and groups; `on:` -> each stage's targets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{Node, NodeValue, PipelineConfig, Sp};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::hosts::{self, Host, HostConfig, Inventory, SshConfig, StrictHostKeyChecking};
use crate::template;

/// Host configurations by name, each with where it was written.
type HostConfigs = BTreeMap<String, (HostConfig, Loc)>;
/// Groups' member names by group, each with where it was written.
type Groups = BTreeMap<String, Vec<(String, Loc)>>;

/// The suite's `inventory:` (and the Ansible inventory it names) resolved:
/// its strings rendered, every host complete with the `ssh:` defaults, and
/// every group checked to name hosts the inventory has.
pub fn resolve_inventory(
    config: &PipelineConfig,
    vars: &Map<String, Value>,
    env: &BTreeMap<String, String>,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Inventory {
    let mut inventory = Inventory::default();
    let Some(inv) = &config.inventory else {
        return inventory;
    };
    let render = Render {
        env: template::environment(),
        ctx: template::context(serde_json::json!({ "env": env, "vars": vars })),
        source,
    };
    let mut configs = HostConfigs::new();
    let mut groups = Groups::new();
    if let Some(path) = &inv.ansible {
        match read_ansible(path, &render, diags) {
            Some((h, g)) => {
                configs = h;
                groups = g;
            }
            None => inventory.incomplete = true,
        }
    }
    for (name, host) in &inv.hosts {
        configs.insert(name.clone(), (host.value.clone(), host.loc));
    }
    for (name, members) in &inv.groups {
        groups.insert(
            name.clone(),
            members.iter().map(|m| (m.value.clone(), m.loc)).collect(),
        );
    }
    for (name, (cfg, loc)) in &configs {
        if let Some(host) = resolve_host(name, cfg, *loc, &inv.ssh, &render, diags) {
            inventory.hosts.insert(name.clone(), host);
        }
    }
    if !configs.is_empty() {
        // With an inventory, `local` is only used when named.
        inventory.hosts.remove(hosts::LOCAL);
        inventory.hosts.insert(hosts::LOCAL.into(), Host::local());
    }
    for (group, members) in groups {
        let names = known_members(&group, members, &inventory.hosts, source, diags);
        inventory.groups.insert(group, names);
    }
    inventory
}

/// Renders the inventory's strings, which may read env and vars
/// (`key: "{{ env.SSH_KEY }}"`); a string that cannot be rendered is
/// reported and kept as written.
struct Render<'a> {
    env: minijinja::Environment<'static>,
    ctx: minijinja::Value,
    source: &'a Arc<Source>,
}

impl Render<'_> {
    fn render(&self, text: &str, loc: Loc, diags: &mut Diagnostics) -> String {
        template::render(&self.env, text, &self.ctx).unwrap_or_else(|e| {
            diags.push(Diagnostic::error(format!("in `inventory`: {e}")).at(self.source, loc));
            text.to_string()
        })
    }
}

/// The hosts and groups of the Ansible inventory `path` names (relative
/// to the suite's folder), all located at `path`. `None`: it could not be
/// read (reported).
fn read_ansible(
    path: &Sp<String>,
    render: &Render<'_>,
    diags: &mut Diagnostics,
) -> Option<(HostConfigs, Groups)> {
    let source = render.source;
    let file = render.render(path, path.loc, diags);
    let file = source
        .path
        .parent()
        .map_or(PathBuf::from(&file), |d| d.join(&file));
    let is_yaml = file.extension().is_some_and(|e| e == "yml" || e == "yaml");
    let read = |t: String| {
        if is_yaml {
            hosts::read_ansible_yaml(&t)
        } else {
            hosts::read_ansible_ini(&t)
        }
        .map_err(|e| e.to_string())
    };
    match std::fs::read_to_string(&file)
        .map_err(|e| e.to_string())
        .and_then(read)
    {
        Ok((h, g)) => {
            let configs = h.into_iter().map(|(k, v)| (k, (v, path.loc))).collect();
            let groups = g
                .into_iter()
                .map(|(name, members)| (name, members.into_iter().map(|m| (m, path.loc)).collect()))
                .collect();
            Some((configs, groups))
        }
        Err(e) => {
            diags.push(
                Diagnostic::error(format!("cannot read Ansible inventory {}: {e}", file.display()))
                    .at(source, path.loc)
                    .with_help("an Ansible inventory: INI (`[group]` sections of `name ansible_host=ADDR` lines) or YAML (.yml/.yaml)"),
            );
            None
        }
    }
}

/// One host as the runner reaches it: its own settings, else the `ssh:`
/// defaults, strings rendered. `None` for a reserved name (reported); an
/// empty or invalid address is reported, the host kept.
fn resolve_host(
    name: &str,
    cfg: &HostConfig,
    loc: Loc,
    ssh: &SshConfig,
    render: &Render<'_>,
    diags: &mut Diagnostics,
) -> Option<Host> {
    let source = render.source;
    if name == hosts::LOCAL || name == hosts::ALL {
        diags.push(
            Diagnostic::error(format!("`{name}` is a reserved host name"))
                .at(source, loc)
                .with_help("`local` is this machine and `all` every host; choose another name"),
        );
        return None;
    }
    let key = cfg
        .key
        .as_ref()
        .or(ssh.key.as_ref())
        .map(|k| PathBuf::from(render.render(k, loc, diags)));
    let known_hosts = ssh
        .known_hosts
        .as_ref()
        .map(|k| PathBuf::from(render.render(k, loc, diags)));
    let address = render.render(&cfg.address, loc, diags);
    // An empty address would reach ssh as no host at all (or an option).
    if address.trim().is_empty() || address.starts_with('-') {
        diags.push(
            Diagnostic::error(format!(
                "host `{name}` has {} address",
                if address.trim().is_empty() {
                    "an empty"
                } else {
                    "an invalid"
                }
            ))
            .at(source, loc)
            .with_help("write the host's name or IP address, e.g. `{address: 10.0.0.11}`"),
        );
    }
    let mut link_bits = BTreeMap::new();
    for (nic, speed) in &cfg.link_speed {
        match parse_link_speed(speed) {
            Some(bits) if !nic.is_empty() => {
                link_bits.insert(nic.clone(), bits);
            }
            _ => diags.push(
                Diagnostic::error(format!(
                    "host `{name}`: link speed `{nic}: {speed}` is not an interface and a speed"
                ))
                .at(source, loc)
                .with_help(
                    "give bits a second with k, M or G, e.g. `link_speed: {eth0: 10G}` (Ansible: `pipeline_link_speed=eth0:10G`)",
                ),
            ),
        }
    }
    Some(Host {
        name: name.to_string(),
        address: Some(address),
        user: cfg
            .user
            .clone()
            .or_else(|| ssh.user.clone())
            .map(|u| render.render(&u, loc, diags)),
        port: cfg.port.or(ssh.port),
        key,
        known_hosts,
        strict: ssh
            .strict_host_key_checking
            .unwrap_or(StrictHostKeyChecking::Yes),
        connect_timeout: ssh.connect_timeout.unwrap_or(10),
        options: ssh.options.clone(),
        pipeline: cfg
            .pipeline
            .clone()
            .or_else(|| ssh.pipeline.clone())
            .map(|p| render.render(&p, loc, diags)),
        link_bits,
    })
}

/// `10G`, `2500M`, `100k`, `1.5G`, `10Gbit`, `10G/s`: bits a second; `None`
/// for anything else (no unit, a byte unit, zero or negative).
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    let t = t.strip_suffix("bit").unwrap_or(t);
    let (number, scale) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 1e3),
        (i, 'M') => (&t[..i], 1e6),
        (i, 'G') => (&t[..i], 1e9),
        (i, 'T') => (&t[..i], 1e12),
        _ => return None,
    };
    let n: f64 = number.trim().parse().ok()?;
    (n.is_finite() && n > 0.0 && n * scale <= 1e15).then_some(n * scale)
}

/// A group's members that the inventory defines; each other name is
/// reported.
fn known_members(
    group: &str,
    members: Vec<(String, Loc)>,
    hosts: &BTreeMap<String, Host>,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Vec<String> {
    let mut names = Vec::new();
    for (member, loc) in members {
        if hosts.contains_key(&member) {
            names.push(member);
        } else {
            diags.push(
                Diagnostic::error(format!(
                    "group `{group}` names host `{member}`, which the inventory does not define"
                ))
                .at(source, loc)
                .with_help_opt(did_you_mean(&member, hosts.keys().map(String::as_str))),
            );
        }
    }
    names
}

/// The hosts a stage's `on:` names (default: this machine).
pub fn stage_targets(
    on: Option<&Node>,
    inventory: &Inventory,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Vec<Host> {
    let Some(node) = on else {
        return vec![Host::local()];
    };
    let entries: Vec<(String, Loc)> = match &node.value {
        NodeValue::String(s) => vec![(s.clone(), node.loc)],
        NodeValue::Seq(items) => items
            .iter()
            .filter_map(|i| match &i.value {
                NodeValue::String(s) => Some((s.clone(), i.loc)),
                _ => {
                    diags.push(
                        Diagnostic::error(format!(
                            "`on` entries are host or group names, found {}",
                            i.type_name()
                        ))
                        .at(source, i.loc),
                    );
                    None
                }
            })
            .collect(),
        _ => {
            diags.push(
                Diagnostic::error(format!(
                    "`on` must be a host or group name, or a list of them, found {}",
                    node.type_name()
                ))
                .at(source, node.loc)
                .with_help("e.g. `on: osds` or `on: [node1, node2]`"),
            );
            return Vec::new();
        }
    };
    let mut hosts = Vec::new();
    for (name, loc) in entries {
        match inventory.resolve(std::slice::from_ref(&name)) {
            Ok(found) => {
                for h in found {
                    if !hosts.iter().any(|x: &Host| x.name == h.name) {
                        hosts.push(h);
                    }
                }
            }
            // Reported once, as the unreadable inventory file.
            Err(_) if inventory.incomplete => {}
            Err(unknown) => diags.push(
                Diagnostic::error(format!("`on`: {unknown}"))
                    .at(source, loc)
                    .with_help(
                        did_you_mean(&name, inventory.names().iter().map(String::as_str))
                            .unwrap_or_else(|| {
                                format!("hosts and groups: {}", inventory.names().join(", "))
                            }),
                    ),
            ),
        }
    }
    if hosts.is_empty() && diags.is_empty() {
        diags.push(Diagnostic::error("`on` names no hosts (an empty group?)").at(source, node.loc));
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::parse_link_speed;

    #[test]
    fn link_speeds_are_bits_a_second_with_a_unit() {
        assert_eq!(parse_link_speed("10G"), Some(10e9));
        assert_eq!(parse_link_speed("2500M"), Some(2.5e9));
        assert_eq!(parse_link_speed("1.5Gbit"), Some(1.5e9));
        assert_eq!(parse_link_speed(" 100M/s "), Some(100e6));
        assert_eq!(parse_link_speed("200k"), Some(200e3));
        for bad in [
            "10", "10GB", "G", "-1G", "0M", "NaNG", "1e300G", "", "ten G",
        ] {
            assert_eq!(parse_link_speed(bad), None, "{bad}");
        }
    }
}
