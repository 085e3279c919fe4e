//! Checks of each stage: id, plugin, timeout, matrix, parameters, templates;
//! then expansion into planned instances.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::matrix::{self, Matrix};
use super::references::{self, NameScope};
use crate::config::{Grants, Node, NodeValue, PipelineConfig, Sp, StageConfig};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};
use crate::params;
use crate::plan::PlannedStage;
use crate::registry::{PluginError, RegisteredStage, Registry};
use crate::template;
use pipeline_stage_api::grants::env_grant_problem;

pub struct Scope<'a> {
    pub source: &'a Arc<Source>,
    pub registry: &'a Registry,
    /// Plugins from registries, fetched before the stages are compiled.
    pub oci: &'a super::oci_plugins::OciPlugins,
    pub vars: &'a Map<String, Value>,
    pub env: &'a BTreeMap<String, String>,
    pub inventory: &'a crate::hosts::Inventory,
    /// Main stages then cleanup stages, in file order.
    pub all_stages: Vec<&'a StageConfig>,
    /// Output names by stage id, for stages whose plugin resolves.
    pub stage_outputs: BTreeMap<String, Vec<String>>,
    /// The suite's `clients:`.
    pub clients: &'a super::clients::Clients,
}

impl Scope<'_> {
    fn err(&self, message: impl Into<String>, loc: Loc) -> Diagnostic {
        Diagnostic::error(message).at(self.source, loc)
    }
}

/// `offset`: index of `stages[0]` among all stages (0 for main, len(main) for cleanup).
pub fn compile_stages(
    scope: &Scope,
    stages: &[StageConfig],
    offset: usize,
    diags: &mut Diagnostics,
) -> Vec<PlannedStage> {
    let mut planned = Vec::new();
    for (i, stage) in stages.iter().enumerate() {
        planned.extend(compile_stage(scope, stage, offset + i, diags));
    }
    planned
}

fn compile_stage(
    scope: &Scope,
    stage: &StageConfig,
    index: usize,
    diags: &mut Diagnostics,
) -> Vec<PlannedStage> {
    let before = diags.len();
    check_id(scope, stage, diags);
    let plugin = find_plugin(scope, stage, diags);
    let timeout = check_timeout(scope, stage, diags);
    let targets =
        super::inventory::stage_targets(stage.on.as_ref(), scope.inventory, scope.source, diags);
    let parallel = check_parallel(scope, stage, diags);
    let sync_start = check_sync_start(
        scope,
        stage,
        plugin.as_ref(),
        targets.len(),
        parallel,
        diags,
    );
    let (repeat, repeat_pause) = repetitions(scope, stage, diags);
    let search = plugin
        .as_ref()
        .and_then(|p| check_search(scope, stage, p, diags));
    let during = check_during(scope, stage, diags);
    let matrix = stage
        .matrix
        .as_ref()
        .and_then(|m| matrix::parse(m, scope.source, diags));
    let with = with_entries(scope, stage, diags);
    let name_scope = name_scope(scope, stage, index, matrix.as_ref());
    check_templates(scope, stage, &with, &name_scope, diags);
    let client_scope = super::clients::StageScope {
        source: scope.source,
        registry: scope.registry,
        clients: scope.clients,
        vars: scope.vars,
        env: scope.env,
    };
    if let Some(plugin) = &plugin {
        check_params(scope, stage, plugin, &with, diags);
        check_grants(scope, stage, plugin, diags);
        super::clients::check_stage(&client_scope, stage, plugin, &targets, diags);
    }
    if diags.len() > before {
        return Vec::new();
    }
    let Some(plugin) = plugin else {
        return Vec::new();
    };
    let combos = matrix
        .as_ref()
        .map_or_else(|| vec![Vec::new()], Matrix::expand);
    let with_json: Map<String, Value> = with
        .iter()
        .map(|(k, v)| (k.key_text(), v.to_json()))
        .collect();
    let mut instances: Vec<PlannedStage> = Vec::new();
    for combo in combos {
        let instance_id = matrix::instance_id(&stage.id, &combo);
        let matrix: BTreeMap<String, Value> = combo.into_iter().collect();
        let client = super::clients::instance_client(
            &client_scope,
            stage,
            &plugin,
            &instance_id,
            &matrix,
            diags,
        );
        instances.push(PlannedStage {
            instance_id,
            stage_id: stage.id.value.clone(),
            plugin: plugin.clone(),
            description: stage.description.clone(),
            matrix,
            with: with_json.clone(),
            timeout,
            continue_on_error: stage.continue_on_error,
            when: stage.when.as_ref().map(|w| w.value.clone()),
            grants: stage
                .grants
                .as_ref()
                .map(|g| g.value.clone())
                .unwrap_or_default(),
            targets: targets.clone(),
            parallel,
            sync_start,
            repeat,
            repeat_pause,
            search: search.clone(),
            client,
            during: during.clone(),
        });
    }
    for instance in &instances {
        check_instance(scope, stage, instance, &with, diags);
    }
    instances
}

/// The stage's `during:` actions, checked.
fn check_during(
    scope: &Scope,
    stage: &StageConfig,
    diags: &mut Diagnostics,
) -> Vec<crate::during::PlannedAction> {
    let (planned, problems) = crate::during::check(&stage.during);
    for (message, loc, hint) in problems {
        diags.push(scope.err(message, loc).with_help(hint));
    }
    planned
}

/// The stage's `timeout:`, a duration over zero.
fn check_timeout(
    scope: &Scope,
    stage: &StageConfig,
    diags: &mut Diagnostics,
) -> Option<std::time::Duration> {
    stage
        .timeout
        .as_ref()
        .and_then(|t| match params::parse_duration(t) {
            Ok(d) if d.is_zero() => {
                diags.push(
                    scope
                        .err("`timeout` must be more than zero", t.loc)
                        .with_help("e.g. `timeout: 10m`"),
                );
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                diags.push(
                    scope
                        .err(format!("invalid `timeout`: {e}"), t.loc)
                        .with_help("write a duration such as 90s, 5m or 1h30m"),
                );
                None
            }
        })
}

/// How many of the stage's hosts run at once (`parallel:`, at least 1).
fn check_parallel(scope: &Scope, stage: &StageConfig, diags: &mut Diagnostics) -> usize {
    match &stage.parallel {
        Some(p) if p.value == 0 => {
            diags.push(scope.err("`parallel` must be at least 1", p.loc));
            1
        }
        Some(p) => p.value as usize,
        None => DEFAULT_PARALLEL,
    }
}

/// The names the stage's templates may read: vars, env, its matrix axes,
/// and the outputs of the stages before it (stage `index` among all).
fn name_scope<'a>(
    scope: &'a Scope,
    stage: &'a StageConfig,
    index: usize,
    matrix: Option<&Matrix>,
) -> NameScope<'a> {
    NameScope {
        vars: scope.vars,
        env: scope.env,
        axes: matrix
            .map(|m| m.axes.iter().map(|(a, _)| a.clone()).collect())
            .unwrap_or_default(),
        earlier: scope.all_stages[..index.min(scope.all_stages.len())]
            .iter()
            .map(|s| (s.id.as_str(), s.uses.as_str()))
            .collect(),
        all: scope.all_stages.iter().map(|s| s.id.as_str()).collect(),
        outputs: &scope.stage_outputs,
        current: stage.id.as_str(),
        matrix_broken: stage.matrix.is_some() && matrix.is_none(),
    }
}

/// Hosts run at once when a stage does not say (`parallel:`).
const DEFAULT_PARALLEL: usize = 16;

/// Whether the stage's hosts start together (`sync_start: true`). That
/// needs a plugin that waits for the other hosts before its measured
/// command, and every host at once: hosts in sequential batches cannot.
fn check_sync_start(
    scope: &Scope,
    stage: &StageConfig,
    plugin: Option<&RegisteredStage>,
    hosts: usize,
    parallel: usize,
    diags: &mut Diagnostics,
) -> bool {
    let Some(sync) = stage.sync_start.as_ref().filter(|s| s.value) else {
        return false;
    };
    if let Some(plugin) = plugin.filter(|p| !p.description.sync_start) {
        let able: Vec<&str> = scope
            .registry
            .iter()
            .filter(|r| r.description.sync_start)
            .map(|r| r.description.name.as_str())
            .collect();
        diags.push(
            scope
                .err(
                    format!(
                        "`{}` cannot start its hosts together (`sync_start`)",
                        plugin.description.name
                    ),
                    sync.loc,
                )
                .with_help(format!(
                    "stages that can: {}; or remove `sync_start`",
                    able.join(", ")
                )),
        );
    }
    if parallel < hosts {
        let (setting, loc) = match &stage.parallel {
            Some(p) => (format!("`parallel: {parallel}`"), p.loc),
            None => (format!("`parallel` ({parallel} unless set)"), sync.loc),
        };
        diags.push(
            scope
                .err(
                    format!(
                        "`sync_start` needs all {hosts} hosts at once, but {setting} runs them in sequential batches"
                    ),
                    loc,
                )
                .with_help(format!(
                    "set `parallel: {hosts}` (or more), or remove `sync_start`"
                )),
        );
    }
    true
}

/// The stage's `search:`, checked against what its plugin can be searched by.
fn check_search(
    scope: &Scope,
    stage: &StageConfig,
    plugin: &RegisteredStage,
    diags: &mut Diagnostics,
) -> Option<crate::knee::PlannedSearch> {
    let config = stage.search.as_ref()?;
    let rate_search = plugin.stage.rate_search();
    match crate::knee::config::check(
        config,
        &plugin.description.name,
        rate_search.as_ref(),
        &plugin.description.metrics,
        scope.source,
    ) {
        Ok(planned) => Some(planned),
        Err(problems) => {
            for d in problems {
                diags.push(d);
            }
            None
        }
    }
}

/// Most repetitions of one instance: a typo (`repeat: 1000000`) should not
/// turn a suite into a week-long run.
const MAX_REPEAT: u32 = 1000;

/// `repeat` (1 to [`MAX_REPEAT`]) and `repeat_pause` (a duration, only
/// with `repeat` above 1).
fn repetitions(
    scope: &Scope,
    stage: &StageConfig,
    diags: &mut Diagnostics,
) -> (u32, std::time::Duration) {
    let repeat = match &stage.repeat {
        Some(r) if r.value == 0 || r.value > MAX_REPEAT => {
            diags.push(
                scope
                    .err(format!("`repeat` must be from 1 to {MAX_REPEAT}"), r.loc)
                    .with_help("e.g. `repeat: 3` runs each instance three times in a row"),
            );
            1
        }
        Some(r) => r.value,
        None => 1,
    };
    let pause = match &stage.repeat_pause {
        None => std::time::Duration::ZERO,
        Some(p) => match params::parse_duration(p) {
            Ok(d) => {
                if stage.repeat.as_ref().is_none_or(|r| r.value <= 1) {
                    diags.push(
                        scope
                            .err(
                                "`repeat_pause` without `repeat` above 1 has no effect",
                                p.loc,
                            )
                            .with_help("add `repeat: 3`, or remove `repeat_pause`"),
                    );
                }
                d
            }
            Err(e) => {
                diags.push(
                    scope
                        .err(format!("invalid `repeat_pause`: {e}"), p.loc)
                        .with_help("write a duration such as 10s or 1m"),
                );
                std::time::Duration::ZERO
            }
        },
    };
    (repeat, pause)
}

fn check_id(scope: &Scope, stage: &StageConfig, diags: &mut Diagnostics) {
    let id = &stage.id;
    let valid = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        diags.push(
            scope
                .err(format!("invalid stage id `{}`", id.value), id.loc)
                .with_help(
                    "ids use letters, digits, `-` and `_`, and start with a letter or digit",
                ),
        );
    } else if id.len() > MAX_ID_BYTES {
        diags.push(
            scope
                .err(
                    format!(
                        "stage id is {} characters long; at most {MAX_ID_BYTES}",
                        id.len()
                    ),
                    id.loc,
                )
                .with_help("it names the stage's folder in the run folder: keep it short"),
        );
    }
}

/// Longest stage id: it names a folder (255 bytes on Linux file systems),
/// with room for the matrix values an instance adds.
const MAX_ID_BYTES: usize = 100;

fn find_plugin(
    scope: &Scope,
    stage: &StageConfig,
    diags: &mut Diagnostics,
) -> Option<RegisteredStage> {
    let uses = &stage.uses;
    let base_dir = scope
        .source
        .path
        .parent()
        .unwrap_or(std::path::Path::new("."));
    // A registry plugin that could not be fetched was reported already.
    match resolve_plugin(scope.registry, base_dir, stage, scope.oci)? {
        Ok(Some(p)) => Some(p),
        Ok(None) => {
            diags.push(
                scope
                    .err(format!("unknown plugin `{}`", uses.value), uses.loc)
                    .with_help(
                        did_you_mean(uses, scope.registry.names()).unwrap_or_else(|| {
                            format!(
                                "available: {} (see `pipeline plugins list`)",
                                scope.registry.names().collect::<Vec<_>>().join(", ")
                            )
                        }),
                    ),
            );
            None
        }
        Err(error) => {
            // A pin that refuses the file is the pin's fault: point at it.
            let loc = match (&stage.sha256, &error) {
                (Some(pin), PluginError::Pin(_)) => pin.loc,
                _ => uses.loc,
            };
            diags.push(scope.err(format!("cannot load plugin `{}`: {error}", uses.value), loc));
            None
        }
    }
}

/// The plugin a stage's `uses` names: native, a plugin file, or a registry
/// plugin (as the local file it was fetched to, checked against its digest
/// and the stage's own `sha256:` pin when it has one). `None` for a registry
/// plugin that was not fetched.
pub(super) fn resolve_plugin(
    registry: &Registry,
    base_dir: &std::path::Path,
    stage: &StageConfig,
    oci: &super::oci_plugins::OciPlugins,
) -> Option<Result<Option<RegisteredStage>, PluginError>> {
    let pin = stage.sha256.as_ref().map(|s| s.value.as_str());
    if !pipeline_oci::is_oci(&stage.uses) {
        return Some(registry.resolve(&stage.uses, base_dir, pin));
    }
    let fetched = oci.fetched.get(&stage.uses.value)?;
    let local = super::oci_plugins::local_uses(fetched);
    let resolved = registry.resolve(&local, base_dir, Some(pin.unwrap_or(&fetched.wasm)));
    Some(resolved.map(|found| {
        found.map(|mut p| {
            p.origin = super::oci_plugins::origin(&stage.uses, fetched);
            p
        })
    }))
}

/// Grants must name capabilities the plugin asks for: granting `exec` to a
/// plugin that never runs commands is a mistake worth pointing out.
fn check_grants(
    scope: &Scope,
    stage: &StageConfig,
    plugin: &RegisteredStage,
    diags: &mut Diagnostics,
) {
    let Some(grants) = &stage.grants else { return };
    let asks = &plugin.description.capabilities;
    let given = [
        ("exec", !grants.exec.is_empty()),
        ("files", grants.files.is_some()),
        ("http", !grants.http.is_empty()),
    ];
    check_env_grant(scope, grants, diags);
    for (capability, granted) in given {
        if granted && !asks.iter().any(|c| c == capability) {
            diags.push(
                scope
                    .err(
                        format!(
                            "`{}` does not ask for the `{capability}` capability",
                            plugin.description.name
                        ),
                        grants.loc,
                    )
                    .with_help(if asks.is_empty() {
                        format!(
                            "`{}` needs no grants; remove `grants`",
                            plugin.description.name
                        )
                    } else {
                        format!("it asks for: {}", asks.join(", "))
                    }),
            );
        }
    }
    // The host parses each grant the same way at run time; a malformed one
    // fails `validate` rather than the stage.
    for text in &grants.http {
        if let Err(e) = pipeline_stage_api::http_url::UrlGrant::parse(text) {
            diags.push(
                scope
                    .err(
                        format!("grants.http `{}` {e}", text.escape_debug()),
                        grants.loc,
                    )
                    .with_help(
                        "a grant is `http://HOST[:PORT][/PATH]`, e.g. `http://127.0.0.1:7480/`",
                    ),
            );
        }
    }
}

/// `grants.env` names variables for the programs the plugin runs: each a
/// valid name the plugin may set, and only beside an `exec` grant.
fn check_env_grant(scope: &Scope, grants: &Sp<Grants>, diags: &mut Diagnostics) {
    for name in &grants.env {
        if let Some(problem) = env_grant_problem(name) {
            diags.push(
                scope
                    .err(format!("grants.env: {problem}"), grants.loc)
                    .with_help(
                        "grant only variables the plugin's programs read, e.g. `env: [CEPH_ARGS]`",
                    ),
            );
        }
    }
    if !grants.env.is_empty() && grants.exec.is_empty() {
        diags.push(
            scope
                .err("grants.env sets variables for programs the plugin runs, but no program is granted", grants.loc)
                .with_help("add the programs to `grants.exec`, or remove `env`"),
        );
    }
}

fn with_entries(scope: &Scope, stage: &StageConfig, diags: &mut Diagnostics) -> Vec<(Node, Node)> {
    match &stage.with {
        None => Vec::new(),
        Some(Node {
            value: NodeValue::Null,
            ..
        }) => Vec::new(),
        Some(Node {
            value: NodeValue::Map(entries),
            ..
        }) => entries.clone(),
        Some(other) => {
            diags.push(
                scope
                    .err(
                        format!(
                            "`with` must be a mapping of parameters, found {}",
                            other.type_name()
                        ),
                        other.loc,
                    )
                    .with_help("write `with:` followed by indented `name: value` lines"),
            );
            Vec::new()
        }
    }
}

fn check_templates(
    scope: &Scope,
    stage: &StageConfig,
    with: &[(Node, Node)],
    names: &NameScope,
    diags: &mut Diagnostics,
) {
    let mut report = |loc: Loc, problems: Vec<(String, Option<String>)>| {
        for (message, help) in problems {
            diags.push(scope.err(message, loc).with_help_opt(help));
        }
    };
    fn walk(node: &Node, f: &mut dyn FnMut(&Node)) {
        match &node.value {
            NodeValue::Seq(items) => items.iter().for_each(|n| walk(n, f)),
            NodeValue::Map(entries) => entries.iter().for_each(|(_, v)| walk(v, f)),
            _ => f(node),
        }
    }
    for (_, value) in with {
        walk(value, &mut |n| {
            if let Some(s) = n.as_str().filter(|s| template::is_template(s)) {
                report(n.loc, references::check(s, false, names));
            }
        });
    }
    if let Some(when) = &stage.when {
        report(when.loc, references::check(when, true, names));
    }
}

fn check_params(
    scope: &Scope,
    stage: &StageConfig,
    plugin: &RegisteredStage,
    with: &[(Node, Node)],
    diags: &mut Diagnostics,
) {
    let specs = &plugin.description.params;
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in with {
        let name = key.key_text();
        if seen.contains(&name) {
            diags.push(scope.err(format!("parameter `{name}` is given twice"), key.loc));
            continue;
        }
        seen.push(name.clone());
        let Some(spec) = specs.iter().find(|s| s.name == name) else {
            diags.push(
                scope
                    .err(
                        format!("`{}` has no parameter `{name}`", plugin.description.name),
                        key.loc,
                    )
                    .with_help(
                        did_you_mean(&name, specs.iter().map(|s| s.name.as_str())).unwrap_or_else(
                            || {
                                format!(
                                    "parameters: {} (see `pipeline plugins describe {}`)",
                                    specs
                                        .iter()
                                        .map(|s| s.name.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                    plugin.description.name
                                )
                            },
                        ),
                    ),
            );
            continue;
        };
        // Literal values are checked now; templated ones once rendered.
        if !value.has_template()
            && let Err(e) = params::coerce(&spec.ty, &value.to_json())
        {
            diags.push(
                scope
                    .err(format!("parameter `{name}`: {e}"), value.loc)
                    .with_help(format!("`{name}` is {}: {}", spec.ty.describe(), spec.doc)),
            );
        }
    }
    for spec in specs.iter().filter(|s| s.required && s.default.is_none()) {
        if !seen.contains(&spec.name) {
            let loc = stage.with.as_ref().map_or(stage.uses.loc, |w| w.loc);
            diags.push(
                scope
                    .err(
                        format!(
                            "`{}` needs parameter `{}`",
                            plugin.description.name, spec.name
                        ),
                        loc,
                    )
                    .with_help(format!(
                        "add `{}: ...` under `with:` ({}: {})",
                        spec.name,
                        spec.ty.describe(),
                        spec.doc
                    )),
            );
        }
    }
}

/// Renders what can be rendered before the run (everything but stage
/// outputs) and lets the plugin check the combination.
fn check_instance(
    scope: &Scope,
    stage: &StageConfig,
    instance: &PlannedStage,
    with: &[(Node, Node)],
    diags: &mut Diagnostics,
) {
    let reads_outputs = references::stage_dependencies(stage);
    let env = template::environment();
    // Shaped like a real run: a template such as `pipeline-{{ run.id }}`
    // must pass the checks a real id passes (no spaces, no brackets).
    let run = serde_json::json!({
        "id": "20000101T000000Z-000000-validate",
        "dir": "/runs/20000101T000000Z-000000-validate",
        "name": "validate",
    });
    let ctx = crate::template::context(serde_json::json!({
        "vars": scope.vars, "env": scope.env, "run": run, "matrix": instance.matrix, "stages": {},
    }));
    let at_instance = |m: String| {
        if instance.matrix.is_empty() {
            m
        } else {
            format!("{m} (in {})", instance.instance_id)
        }
    };
    let mut resolvable = reads_outputs.is_empty();
    for (key, value) in with {
        if !value.has_template() {
            continue;
        }
        let name = key.key_text();
        let Some(spec) = instance
            .plugin
            .description
            .params
            .iter()
            .find(|s| s.name == name)
        else {
            continue;
        };
        match template::render_json(&env, &value.to_json(), &ctx) {
            Ok(rendered) => {
                if let Err(e) = params::coerce(&spec.ty, &rendered) {
                    diags.push(
                        scope.err(at_instance(format!("parameter `{name}`: {e}")), value.loc),
                    );
                    resolvable = false;
                }
            }
            Err(_) => resolvable = false, // reads stage outputs: checked at run time
        }
    }
    if !resolvable {
        return;
    }
    if let Ok(params) = instance.resolve_params(&env, &ctx) {
        for (param, message) in instance.plugin.stage.check(&params) {
            let loc = with
                .iter()
                .find(|(k, _)| k.key_text() == param)
                .map_or(stage.uses.loc, |(_, v)| v.loc);
            diags.push(scope.err(at_instance(format!("parameter `{param}`: {message}")), loc));
        }
        if let (Some(search), Some(rate_search)) =
            (&stage.search, instance.plugin.stage.rate_search())
        {
            for (param, message) in (rate_search.check)(&params) {
                // `options.rw` is under `options`.
                let top = param.split('.').next().unwrap_or_default();
                let loc = with
                    .iter()
                    .find(|(k, _)| k.key_text() == top)
                    .map_or(search.loc, |(_, v)| v.loc);
                diags.push(scope.err(
                    at_instance(format!(
                        "`search:` cannot set the rate: `{param}` {message}"
                    )),
                    loc,
                ));
            }
        }
    }
}

pub fn check_unique_ids(source: &Arc<Source>, config: &PipelineConfig, diags: &mut Diagnostics) {
    let mut seen: Vec<(&str, Loc)> = Vec::new();
    for stage in config.stages.iter().chain(&config.cleanup) {
        if let Some((_, first)) = seen.iter().find(|(id, _)| *id == stage.id.as_str()) {
            diags.push(
                Diagnostic::error(format!("duplicate stage id `{}`", stage.id.value))
                    .at(source, stage.id.loc)
                    .with_help(format!(
                        "first used on line {}; ids must be unique across `stages` and `cleanup`",
                        first.line
                    )),
            );
        } else {
            seen.push((stage.id.as_str(), stage.id.loc));
        }
    }
}
