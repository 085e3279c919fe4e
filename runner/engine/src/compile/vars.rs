//! `env:`, `vars:` (with `--set` overrides) and `cluster:`, resolved before
//! the stages because stage templates read them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::CompileOptions;
use crate::ceph::{CephConnection, ClusterConfig};
use crate::config::{EnvVarConfig, Node, NodeValue, PipelineConfig, Sp};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::template;

pub fn read_env(
    config: &PipelineConfig,
    options: &CompileOptions,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for entry in &config.env {
        let name = entry.name();
        let default = match entry {
            EnvVarConfig::Detailed(d) => d.default.clone(),
            EnvVarConfig::Name(_) => None,
        };
        match (options.env)(name).or(default) {
            Some(value) => {
                env.insert(name.value.clone(), value);
            }
            None => diags.push(
                Diagnostic::error(format!("environment variable `{}` is not set", name.value))
                    .at(source, name.loc)
                    .with_help(format!(
                        "set it (`export {}=...`) or give a default: `{{name: {}, default: VALUE}}`",
                        name.value, name.value
                    )),
            ),
        }
    }
    env
}

pub fn resolve_vars(
    config: &PipelineConfig,
    options: &CompileOptions,
    env: &BTreeMap<String, String>,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Map<String, Value> {
    let mut vars: Vec<(String, Node)> = Vec::new();
    match &config.vars {
        None => {}
        Some(Node {
            value: NodeValue::Map(entries),
            ..
        }) => {
            for (k, v) in entries {
                vars.push((k.key_text(), v.clone()));
            }
        }
        Some(Node {
            value: NodeValue::Null,
            ..
        }) => {}
        Some(other) => diags.push(
            Diagnostic::error(format!(
                "`vars` must be a mapping, found {}",
                other.type_name()
            ))
            .at(source, other.loc)
            .with_help("write `vars:` followed by indented `name: value` lines"),
        ),
    }
    for (key, text) in &options.overrides {
        let value = parse_scalar(text);
        match vars.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => diags.push(
                Diagnostic::error(format!("--set {key}: the pipeline has no variable `{key}`"))
                    .with_help_opt(did_you_mean(key, vars.iter().map(|(k, _)| k.as_str())))
                    .with_help_opt(
                        Some(format!(
                            "variables: {}",
                            vars.iter()
                                .map(|(k, _)| k.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                        .filter(|_| !vars.is_empty()),
                    ),
            ),
        }
    }
    // Vars may read the environment (`pool: "{{ env.POOL }}"`), nothing else.
    let tenv = template::environment();
    let ctx = crate::template::context(serde_json::json!({ "env": env }));
    let mut out = Map::new();
    for (key, node) in vars {
        let json = node.to_json();
        if node.has_template() {
            match template::render_json(&tenv, &json, &ctx) {
                Ok(v) => {
                    out.insert(key, v);
                }
                Err(e) => diags.push(
                    Diagnostic::error(format!("in variable `{key}`: {e}"))
                        .at(source, node.loc)
                        .with_help(
                            "variables may only read `env.NAME` for names listed under `env:`",
                        ),
                ),
            }
        } else {
            out.insert(key, json);
        }
    }
    out
}

/// A `--set` value is read as a YAML scalar: `3` is a number, `true` a bool.
fn parse_scalar(text: &str) -> Node {
    serde_saphyr::from_str::<Node>(text)
        .ok()
        .filter(|n| {
            !matches!(n.value, NodeValue::Map(_) | NodeValue::Seq(_))
                || text.trim_start().starts_with(['[', '{'])
        })
        .map(|n| Node::new(n.value, Loc::default()))
        .unwrap_or_else(|| Node::new(NodeValue::String(text.to_string()), Loc::default()))
}

pub fn resolve_cluster(
    config: &PipelineConfig,
    vars: &Map<String, Value>,
    env: &BTreeMap<String, String>,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<CephConnection> {
    let cluster: &ClusterConfig = config.cluster.as_ref()?;
    let tenv = template::environment();
    let ctx = crate::template::context(serde_json::json!({ "env": env, "vars": vars }));
    let mut render = |field: &Option<Sp<String>>| -> Option<String> {
        let f = field.as_ref()?;
        match template::render(&tenv, f, &ctx) {
            Ok(v) if v.trim().is_empty() => None,
            Ok(v) => Some(v),
            Err(e) => {
                diags.push(Diagnostic::error(format!("in `cluster`: {e}")).at(source, f.loc));
                None
            }
        }
    };
    let mut conn = CephConnection {
        conf: render(&cluster.conf),
        name: render(&cluster.name),
        keyring: render(&cluster.keyring),
        args: Vec::new(),
        command_timeout: 120.0,
    };
    if conn.conf.is_none() {
        conn.conf = CephConnection::default().conf;
    }
    for a in &cluster.args {
        if let Some(v) = render(&Some(a.clone())) {
            conn.args.push(v);
        }
    }
    if let Some(t) = &cluster.command_timeout {
        match crate::params::parse_duration(t) {
            Ok(d) => conn.command_timeout = d.as_secs_f64(),
            Err(e) => diags.push(
                Diagnostic::error(format!("invalid `command_timeout`: {e}"))
                    .at(source, t.loc)
                    .with_help("write a duration such as 60s or 5m"),
            ),
        }
    }
    Some(conn)
}
