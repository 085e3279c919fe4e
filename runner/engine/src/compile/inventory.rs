//! `inventory:` -> resolved hosts and groups; `on:` -> each stage's targets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{Node, NodeValue, PipelineConfig};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::hosts::{self, Host, HostConfig, Inventory, StrictHostKeyChecking};
use crate::template;

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
    let tenv = template::environment();
    let ctx = template::context(serde_json::json!({ "env": env, "vars": vars }));
    // Inventory strings may read env and vars (`key: "{{ env.SSH_KEY }}"`).
    let render = |text: &str, loc: Loc, diags: &mut Diagnostics| -> String {
        template::render(&tenv, text, &ctx).unwrap_or_else(|e| {
            diags.push(Diagnostic::error(format!("in `inventory`: {e}")).at(source, loc));
            text.to_string()
        })
    };
    let ssh = &inv.ssh;
    let mut configs: BTreeMap<String, (HostConfig, Loc)> = BTreeMap::new();
    let mut groups: BTreeMap<String, Vec<(String, Loc)>> = BTreeMap::new();
    if let Some(path) = &inv.ansible {
        let file = render(path, path.loc, diags);
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
                configs.extend(h.into_iter().map(|(k, v)| (k, (v, path.loc))));
                for (name, members) in g {
                    groups.insert(name, members.into_iter().map(|m| (m, path.loc)).collect());
                }
            }
            Err(e) => {
                inventory.incomplete = true;
                diags.push(
                    Diagnostic::error(format!("cannot read Ansible inventory {}: {e}", file.display()))
                        .at(source, path.loc)
                        .with_help("an Ansible inventory: INI (`[group]` sections of `name ansible_host=ADDR` lines) or YAML (.yml/.yaml)"),
                );
            }
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
        if name == hosts::LOCAL || name == hosts::ALL {
            diags.push(
                Diagnostic::error(format!("`{name}` is a reserved host name"))
                    .at(source, *loc)
                    .with_help("`local` is this machine and `all` every host; choose another name"),
            );
            continue;
        }
        let key = cfg
            .key
            .as_ref()
            .or(ssh.key.as_ref())
            .map(|k| PathBuf::from(render(k, *loc, diags)));
        let known_hosts = ssh
            .known_hosts
            .as_ref()
            .map(|k| PathBuf::from(render(k, *loc, diags)));
        let address = render(&cfg.address, *loc, diags);
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
                .at(source, *loc)
                .with_help("write the host's name or IP address, e.g. `{address: 10.0.0.11}`"),
            );
        }
        inventory.hosts.insert(
            name.clone(),
            Host {
                name: name.clone(),
                address: Some(address),
                user: cfg
                    .user
                    .clone()
                    .or_else(|| ssh.user.clone())
                    .map(|u| render(&u, *loc, diags)),
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
                    .map(|p| render(&p, *loc, diags)),
            },
        );
    }
    if !configs.is_empty() {
        // With an inventory, `local` is only used when named.
        inventory.hosts.remove(hosts::LOCAL);
        inventory.hosts.insert(hosts::LOCAL.into(), Host::local());
    }
    for (group, members) in groups {
        let mut names = Vec::new();
        for (member, loc) in members {
            if inventory.hosts.contains_key(&member) {
                names.push(member);
            } else {
                diags.push(
                    Diagnostic::error(format!(
                        "group `{group}` names host `{member}`, which the inventory does not define"
                    ))
                    .at(source, loc)
                    .with_help_opt(did_you_mean(
                        &member,
                        inventory.hosts.keys().map(String::as_str),
                    )),
                );
            }
        }
        inventory.groups.insert(group, names);
    }
    inventory
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
