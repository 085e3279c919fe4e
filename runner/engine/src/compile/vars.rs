//! `env:`, `vars:` (with `--set` overrides) and `cluster:`, resolved before
//! the stages because stage templates read them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::CompileOptions;
use crate::ceph::{CephConnection, ClusterConfig};
use crate::config::{Node, NodeValue, PipelineConfig, Sp};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::template;

/// A declared environment variable.
pub struct EnvVar {
    pub name: String,
    pub value: Option<String>,
    pub secret: bool,
}

/// Reads the variables listed under `env:`. A missing one is reported once,
/// here; templates may still name it (no second error).
pub fn read_env(
    config: &PipelineConfig,
    options: &CompileOptions,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Vec<EnvVar> {
    let mut vars: Vec<EnvVar> = Vec::new();
    for entry in &config.env {
        let Some((name, default, secret)) = env_entry(entry, source, diags) else {
            continue;
        };
        if vars.iter().any(|v| v.name == name) {
            diags.push(
                Diagnostic::error(format!("`{name}` is declared twice in `env`"))
                    .at(source, entry.loc)
                    .with_help("keep one declaration: with two, which default or `secret` applies is a guess"),
            );
            continue;
        }
        let value = (options.env)(&name).or(default);
        if value.is_none() {
            diags.push(
                Diagnostic::error(format!("environment variable `{name}` is not set"))
                    .at(source, entry.loc)
                    .with_help(format!("set it (`export {name}=...`) or give a default: `{{name: {name}, default: VALUE}}`")),
            );
        }
        if let Some(v) = value
            .as_deref()
            .filter(|v| secret && too_short_to_redact(v))
        {
            diags.push(
                Diagnostic::error(format!(
                    "the secret `{name}` is {} character(s) long: too short to hide",
                    v.chars().count()
                ))
                .at(source, entry.loc)
                .with_help(format!(
                    "secrets are replaced by `***` wherever they appear in outputs; one of fewer than {} characters would also blot out ordinary text and still be guessable. Use a longer value",
                    crate::secrets::MIN_SECRET_LEN
                )),
            );
        }
        vars.push(EnvVar {
            name,
            value,
            secret,
        });
    }
    vars
}

/// An empty secret (declared, set to nothing) hides nothing and is allowed.
fn too_short_to_redact(value: &str) -> bool {
    !value.is_empty() && value.chars().count() < crate::secrets::MIN_SECRET_LEN
}

fn env_entry(
    entry: &Node,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<(String, Option<String>, bool)> {
    let bad =
        |diags: &mut Diagnostics, loc, message: String| {
            diags.push(Diagnostic::error(message).at(source, loc).with_help(
                "write a variable name, or `{name: NAME, default: VALUE, secret: true}`",
            ));
            None
        };
    match &entry.value {
        NodeValue::String(name) if is_env_name(name) => Some((name.clone(), None, false)),
        NodeValue::String(name) => bad(
            diags,
            entry.loc,
            format!("`{name}` is not an environment variable name"),
        ),
        NodeValue::Map(pairs) => {
            let (mut name, mut default, mut secret) = (None, None, false);
            for (k, v) in pairs {
                match (k.key_text().as_str(), &v.value) {
                    ("name", NodeValue::String(n)) if is_env_name(n) => name = Some(n.clone()),
                    ("default", NodeValue::String(d)) => default = Some(d.clone()),
                    ("default", NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_)) => {
                        default = Some(v.to_json().to_string())
                    }
                    ("secret", NodeValue::Bool(b)) => secret = *b,
                    (key @ ("name" | "default" | "secret"), _) => {
                        return bad(diags, v.loc, format!("invalid `{key}` in an `env` entry"));
                    }
                    (key, _) => {
                        diags.push(
                            Diagnostic::error(format!("unknown key `{key}` in an `env` entry"))
                                .at(source, k.loc)
                                .with_help_opt(did_you_mean(key, ["name", "default", "secret"]))
                                .with_help_opt(Some("keys: name, default, secret".into())),
                        );
                        return None;
                    }
                }
            }
            match name {
                Some(n) => Some((n, default, secret)),
                None => bad(diags, entry.loc, "an `env` entry needs `name`".into()),
            }
        }
        _ => bad(
            diags,
            entry.loc,
            format!("invalid `env` entry: found {}", entry.type_name()),
        ),
    }
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// `cluster.flags`, each one of [`crate::cluster_flags::ALLOWED`], once.
pub fn cluster_flags(
    config: &PipelineConfig,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Vec<String> {
    let Some(cluster) = config.cluster.as_ref() else {
        return Vec::new();
    };
    let mut flags: Vec<String> = Vec::new();
    for flag in &cluster.flags {
        if !crate::cluster_flags::ALLOWED.contains(&flag.as_str()) {
            diags.push(
                Diagnostic::error(format!("`{}` is not an OSD flag a suite may set", **flag))
                    .at(source, flag.loc)
                    .with_help(format!(
                        "`cluster.flags` takes {}: they pause background work and change no data",
                        crate::cluster_flags::ALLOWED.join(", ")
                    )),
            );
        } else if flags.contains(&flag.value) {
            diags.push(
                Diagnostic::error(format!("OSD flag `{}` is listed twice", **flag))
                    .at(source, flag.loc),
            );
        } else {
            flags.push(flag.value.clone());
        }
    }
    flags
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
