//! `clients:` and a stage's `client:`: which client tools a stage runs,
//! this machine's own or those of a client root (a Debian root with another
//! Ceph release). Everything is checked before the run: the root exists,
//! holds the stage's tools, and the stage can and may run from it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{Node, NodeValue, PipelineConfig, StageConfig};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::plan::StageClient;
use crate::registry::{RegisteredStage, Registry};
use crate::template;
use pipeline_stage_api::client_root::{self, ClientRoot};

/// The suite's `clients:`, resolved.
#[derive(Debug, Default)]
pub struct Clients {
    /// In file order: name, root (`None`: this machine's own tools), and
    /// where the root is written.
    entries: Vec<(String, Option<PathBuf>, Loc)>,
}

impl Clients {
    fn get(&self, name: &str) -> Option<&(String, Option<PathBuf>, Loc)> {
        self.entries.iter().find(|(n, _, _)| n == name)
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _, _)| n.as_str())
    }
}

/// Reads `clients:`: each root rendered (it may read `env` and `vars`) and
/// checked to be a folder of this machine.
pub fn resolve_clients(
    config: &PipelineConfig,
    vars: &Map<String, Value>,
    env: &BTreeMap<String, String>,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Clients {
    let mut clients = Clients::default();
    let Some(node) = &config.clients else {
        return clients;
    };
    let Some(entries) = node.as_map() else {
        if !matches!(node.value, NodeValue::Null) {
            diags.push(
                Diagnostic::error(format!(
                    "`clients` must be a mapping of names to clients, found {}",
                    node.type_name()
                ))
                .at(source, node.loc)
                .with_help("e.g. `clients: {\"16.2\": {}, \"18.2\": {root: /var/cache/pipeline/roots/trixie}}`"),
            );
        }
        return clients;
    };
    let ctx = template::context(serde_json::json!({ "env": env, "vars": vars }));
    for (key, value) in entries {
        let name = key.key_text();
        let root = value
            .as_map()
            .and_then(|fields| fields.iter().find(|(k, _)| k.key_text() == "root"))
            .map(|(_, v)| v);
        let resolved = root.and_then(|r| {
            let text = render_root(r, &ctx, "clients", source, diags)?;
            check_root(&text, r.loc, source, diags)
        });
        let loc = root.map_or(key.loc, |r| r.loc);
        clients.entries.push((name, resolved, loc));
    }
    clients
}

/// A root as written (a string, perhaps a template), rendered.
fn render_root(
    node: &Node,
    ctx: &minijinja::Value,
    within: &str,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<String> {
    let Some(text) = node.as_str() else {
        diags.push(
            Diagnostic::error(format!(
                "`root` must be a folder's path, found {}",
                node.type_name()
            ))
            .at(source, node.loc),
        );
        return None;
    };
    match template::render(&template::environment(), text, ctx) {
        Ok(rendered) => Some(rendered),
        Err(e) => {
            diags.push(
                Diagnostic::error(format!("in `{within}`: {e}"))
                    .at(source, node.loc)
                    .with_help(
                        "a root may read `env.NAME` (names listed under `env:`) and `vars.NAME`",
                    ),
            );
            None
        }
    }
}

/// The root folder, when it is an absolute path of an existing folder of
/// this machine other than `/`.
fn check_root(
    text: &str,
    loc: Loc,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<PathBuf> {
    let path = PathBuf::from(text);
    let problem = if !path.is_absolute() {
        Some((
            format!("client root `{text}` is not an absolute path"),
            "write the folder's full path, e.g. /var/cache/pipeline/roots/trixie".to_string(),
        ))
    } else if path.parent().is_none() {
        Some((
            "client root `/` is this machine itself".to_string(),
            "leave out `root` for this machine's own tools".to_string(),
        ))
    } else if !path.is_dir() {
        Some((
            format!("client root `{text}` is not a folder of this machine"),
            "build one with `scripts/ceph-root.sh 18.2` (or 20.2), which prints its path"
                .to_string(),
        ))
    } else {
        None
    };
    match problem {
        Some((message, help)) => {
            diags.push(Diagnostic::error(message).at(source, loc).with_help(help));
            None
        }
        None => Some(path),
    }
}

/// What a stage's `client:` needs to be checked against.
pub struct StageScope<'a> {
    pub source: &'a Arc<Source>,
    pub registry: &'a Registry,
    pub clients: &'a Clients,
    pub vars: &'a Map<String, Value>,
    pub env: &'a BTreeMap<String, String>,
}

/// Checks that hold for every instance of a stage with `client:`: its
/// plugin can run from a client root, and it runs on this machine only.
pub fn check_stage(
    scope: &StageScope,
    stage: &StageConfig,
    plugin: &RegisteredStage,
    targets: &[crate::hosts::Host],
    diags: &mut Diagnostics,
) {
    let Some(node) = &stage.client else { return };
    let err = |m: String| Diagnostic::error(m).at(scope.source, node.loc);
    if !plugin.description.client_root {
        let able: Vec<&str> = scope
            .registry
            .iter()
            .filter(|r| r.description.client_root)
            .map(|r| r.description.name.as_str())
            .collect();
        diags.push(
            err(format!(
                "`{}` cannot run from a client (`client:`)",
                plugin.description.name
            ))
            .with_help(format!(
                "stages whose tools can come from a client: {}; or remove `client`",
                able.join(", ")
            )),
        );
    }
    if targets.iter().any(|h| !h.is_local()) {
        diags.push(
            err("a client is a set of tools on this machine, but the stage runs on other hosts (`on:`)".into())
                .with_help("run the stage here (remove `on:`), or install the release on those hosts"),
        );
    }
}

/// The client of one instance: its `client:` rendered with the instance's
/// matrix values, looked up in `clients:` (or a root of its own), and its
/// root checked to hold the stage's tools.
pub fn instance_client(
    scope: &StageScope,
    stage: &StageConfig,
    plugin: &RegisteredStage,
    instance: &str,
    matrix: &BTreeMap<String, Value>,
    diags: &mut Diagnostics,
) -> Option<StageClient> {
    let node = stage.client.as_ref()?;
    let at_instance = |m: String| {
        if matrix.is_empty() {
            m
        } else {
            format!("{m} (in {instance})")
        }
    };
    let err = |m: String| Diagnostic::error(at_instance(m)).at(scope.source, node.loc);
    let ctx = template::context(serde_json::json!({
        "env": scope.env, "vars": scope.vars, "matrix": matrix,
    }));
    let client = match &node.value {
        NodeValue::Map(fields) => {
            let root = fields
                .iter()
                .find(|(k, _)| k.key_text() == "root")?
                .1
                .clone();
            let text = render_root(&root, &ctx, "client", scope.source, diags)?;
            let root = check_root(&text, root.loc, scope.source, diags)?;
            StageClient {
                name: None,
                root: Some(ClientRoot { name: None, root }),
            }
        }
        _ => {
            let text = match node
                .as_str()
                .map(|t| template::render(&template::environment(), t, &ctx))
            {
                Some(Ok(name)) => name,
                Some(Err(e)) => {
                    diags.push(err(format!("in `client`: {e}")).with_help(
                        "`client` is known before the run: it may read `vars`, `env` and `matrix`, not stage outputs",
                    ));
                    return None;
                }
                // A number such as `18.2` is a name too.
                None => node.key_text(),
            };
            let Some((name, root, _)) = scope.clients.get(&text) else {
                let known: Vec<&str> = scope.clients.names().collect();
                diags.push(
                    err(format!("no client `{text}` in `clients:`"))
                        .with_help_opt(did_you_mean(&text, known.iter().copied()))
                        .with_help(if known.is_empty() {
                            "name clients under a top-level `clients:` (or write `client: {root: PATH}`)".to_string()
                        } else {
                            format!("clients: {}", known.join(", "))
                        }),
                );
                return None;
            };
            StageClient {
                name: Some(name.clone()),
                root: root.clone().map(|root| ClientRoot {
                    name: Some(name.clone()),
                    root,
                }),
            }
        }
    };
    if let Some(root) = &client.root {
        check_root_tools(scope, node.loc, plugin, root, &at_instance, diags);
    }
    Some(client)
}

/// The root holds the programs the stage runs (and `sh`, which starts
/// rados-bench's writes), and this runner may enter it.
fn check_root_tools(
    scope: &StageScope,
    loc: Loc,
    plugin: &RegisteredStage,
    client: &ClientRoot,
    at_instance: &dyn Fn(String) -> String,
    diags: &mut Diagnostics,
) {
    let mut tools: Vec<&str> = plugin
        .description
        .requires
        .iter()
        .map(String::as_str)
        .collect();
    tools.push("sh");
    let missing = client_root::missing_tools(&client.root, &tools);
    if !missing.is_empty() {
        diags.push(
            Diagnostic::error(at_instance(format!(
                "client {} has no {} (looked in its /usr/bin, /bin, /usr/sbin, /sbin, /usr/local)",
                client.describe(),
                missing
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
            .at(scope.source, loc)
            .with_help(format!(
                "a `{}` stage runs {}; install them in the root (`chroot {} apt-get install ceph-common fio`)",
                plugin.description.name,
                tools
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                client.root.display()
            )),
        );
    }
    if !is_root_user() {
        diags.push(
            Diagnostic::error(at_instance(format!(
                "running from client {} needs root: its commands enter it through a private mount namespace and chroot",
                client.describe()
            )))
            .at(scope.source, loc)
            .with_help("run the suite as root, or leave out `client`"),
        );
    }
}

fn is_root_user() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
