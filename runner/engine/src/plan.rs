//! The checked, fully expanded plan: every stage instance after matrix
//! expansion, with its parameters still holding the templates that can only
//! be rendered at run time (outputs of earlier stages).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use crate::ceph::CephConnection;
use crate::config::ReportConfig;
use crate::diagnostic::Source;
use crate::params::{self, Params};
use crate::registry::RegisteredStage;
use crate::report::charts::names::fnv1a;
use crate::secrets::Redactor;
use crate::stage::PlanContext;
use crate::template;

pub struct Plan {
    pub source: Arc<Source>,
    pub name: String,
    pub description: Option<String>,
    pub vars: serde_json::Map<String, serde_json::Value>,
    pub env: BTreeMap<String, String>,
    pub redactor: Redactor,
    pub ceph: CephConnection,
    /// `cluster.watch`: the cluster's state is sampled beside each stage
    /// that reports figures ([`crate::cluster_watch`]).
    pub cluster_watch: bool,
    /// `cluster.watch_osds`: each OSD's counters with the cluster's state.
    pub watch_osds: bool,
    /// `inventory.watch`: CPUs, disks and NICs beside each benchmark stage
    /// ([`crate::host_watch`]).
    pub watch_hosts: bool,
    /// `cluster.flags`: OSD flags set for the run ([`crate::cluster_flags`]).
    pub cluster_flags: Vec<String>,
    /// The inventory's cluster hosts (mons, mgrs, osds, rgws, mdss), watched
    /// beside every benchmark stage ([`crate::host_watch`]).
    pub cluster_hosts: Vec<crate::hosts::Host>,
    pub stages: Vec<PlannedStage>,
    pub cleanup: Vec<PlannedStage>,
    pub report: ReportConfig,
    /// `report.compare_to`: the baseline this run compares itself with.
    pub comparison: Option<PlannedComparison>,
    /// Runs of the whole suite (its `repeat:`, at least 1), and the pause between them.
    pub repeat: u32,
    pub repeat_pause: std::time::Duration,
    /// The suite's lock file (`SUITE.lock`) as read, when its plugins come
    /// from registries: the run folder keeps a copy beside pipeline.yaml.
    pub lock_text: Option<String>,
}

/// The baseline of `report.compare_to`, and `report.thresholds`.
#[derive(Debug, Clone)]
pub struct PlannedComparison {
    /// Its results.json.
    pub baseline: std::path::PathBuf,
    /// As the suite wrote it.
    pub shown: String,
    pub thresholds: crate::compare::Thresholds,
}

#[derive(Clone)]
pub struct PlannedStage {
    /// `id` or `id[axis=value,...]`.
    pub instance_id: String,
    pub stage_id: String,
    pub plugin: RegisteredStage,
    pub description: Option<String>,
    pub matrix: BTreeMap<String, serde_json::Value>,
    /// The `with:` mapping, templates not yet rendered.
    pub with: serde_json::Map<String, serde_json::Value>,
    pub timeout: Option<Duration>,
    pub continue_on_error: bool,
    pub when: Option<String>,
    /// Capabilities the pipeline grants (WASM plugins only use them).
    pub grants: crate::config::Grants,
    /// Hosts named by `on:` (this machine by default).
    pub targets: Vec<crate::hosts::Host>,
    /// At most this many hosts at once.
    pub parallel: usize,
    /// `sync_start`: the hosts start their measured command at one instant.
    pub sync_start: bool,
    /// Runs of each instance (`repeat:`, at least 1), and the pause between them.
    pub repeat: u32,
    pub repeat_pause: Duration,
    /// `search:`: each repetition finds the knee instead of running once.
    pub search: Option<crate::knee::PlannedSearch>,
    /// `client:`: the client tools this instance runs (`None`: this
    /// machine's own, unnamed).
    pub client: Option<StageClient>,
    /// `during:`: actions beside the stage; their words are templates.
    pub during: Vec<crate::during::PlannedAction>,
}

/// A stage instance's `client:`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct StageClient {
    /// Its name in the suite's `clients:` (`None`: a root given on the stage).
    pub name: Option<String>,
    /// Where its tools come from; `None`: this machine's own.
    pub root: Option<pipeline_stage_api::client_root::ClientRoot>,
}

impl StageClient {
    /// `18.2 (root /var/cache/pipeline/roots/trixie, entered through chroot)`.
    pub fn describe(&self) -> String {
        let name = self.name.as_deref().unwrap_or("unnamed");
        match &self.root {
            Some(root) => format!(
                "{name} (root {}, entered through chroot in a private mount namespace)",
                root.root.display()
            ),
            None => format!("{name} (this machine's own tools)"),
        }
    }
}

impl PlannedStage {
    /// Whether the engine runs this stage once per host (vs. once, locally).
    pub fn fans_out(&self) -> bool {
        self.plugin.description.per_host && !(self.targets.len() == 1 && self.targets[0].is_local())
    }
}

impl PlannedStage {
    /// Renders templates and checks every value against the plugin's
    /// parameter types; fills defaults.
    pub fn resolve_params(
        &self,
        env: &minijinja::Environment<'_>,
        ctx: &minijinja::Value,
    ) -> Result<Params, Vec<String>> {
        let mut out = Params::new();
        let mut problems = Vec::new();
        for spec in &self.plugin.description.params {
            match self.with.get(&spec.name) {
                Some(raw) => match template::render_json(env, raw, ctx)
                    .map_err(|e| format!("`{}`: {e}", spec.name))
                    .and_then(|v| {
                        params::coerce(&spec.ty, &v).map_err(|e| format!("`{}`: {e}", spec.name))
                    }) {
                    Ok(v) => {
                        out.insert(spec.name.clone(), v);
                    }
                    Err(e) => problems.push(e),
                },
                None => {
                    if let Some(default) = &spec.default {
                        out.insert(spec.name.clone(), default.clone());
                    } else if spec.required {
                        problems.push(format!("missing required parameter `{}`", spec.name));
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems)
        }
    }
}

impl Plan {
    /// The folder under `stages/` of each stage instance (cleanup included),
    /// by instance id. Ids are made file-name safe (`sanitize`); where two
    /// ids of the run come out the same (matrix values `a/b` and `a_b`), each
    /// of them gets a short hash of its id, so no instance's files land in
    /// another's folder.
    pub fn stage_folders(&self) -> BTreeMap<String, String> {
        let ids: Vec<&str> = self
            .stages
            .iter()
            .chain(&self.cleanup)
            .map(|s| s.instance_id.as_str())
            .collect();
        let mut by_folder: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for id in &ids {
            by_folder
                .entry(crate::context::sanitize(id))
                .or_default()
                .push(id);
        }
        let mut folders = BTreeMap::new();
        for (folder, owners) in by_folder {
            let mut distinct = owners.clone();
            distinct.sort_unstable();
            distinct.dedup();
            for id in owners {
                let name = if distinct.len() > 1 {
                    format!("{folder}-{:08x}", fnv1a(id.as_bytes()) as u32)
                } else {
                    folder.clone()
                };
                folders.insert(id.to_string(), name);
            }
        }
        folders
    }

    /// Context for rendering: vars, env, run; `stages` filled in as they finish.
    pub fn template_context(
        &self,
        run: &serde_json::Value,
        matrix: &BTreeMap<String, serde_json::Value>,
        stages: &serde_json::Value,
    ) -> minijinja::Value {
        crate::template::context(serde_json::json!({
            "vars": self.vars,
            "env": self.env,
            "run": run,
            "matrix": matrix,
            "stages": stages,
        }))
    }

    /// Stage outputs that are only known at run time, shown as placeholders.
    fn placeholder_stages(&self) -> serde_json::Value {
        let mut stages = serde_json::Map::new();
        for s in self.stages.iter().chain(&self.cleanup) {
            let outputs: serde_json::Map<String, serde_json::Value> = s
                .plugin
                .description
                .outputs
                .iter()
                .map(|o| {
                    (
                        o.name.clone(),
                        format!("<stages.{}.outputs.{}>", s.stage_id, o.name).into(),
                    )
                })
                .collect();
            stages.insert(
                s.stage_id.clone(),
                serde_json::json!({"outputs": outputs, "status": format!("<stages.{}.status>", s.stage_id)}),
            );
        }
        serde_json::Value::Object(stages)
    }

    /// What `pipeline plan` prints.
    pub fn render_text(&self) -> String {
        let env = template::environment();
        let run = serde_json::json!({"id": "<run id>", "dir": "<run dir>", "name": self.name});
        let stages = self.placeholder_stages();
        let mut out = String::new();
        self.write_header(&mut out);
        let mut destructive = 0;
        for (title, list) in [
            ("stages", &self.stages),
            ("cleanup (always runs)", &self.cleanup),
        ] {
            let _ = writeln!(out, "\n{title}:");
            if list.is_empty() {
                let _ = writeln!(out, "  (none)");
            }
            for (i, s) in list.iter().enumerate() {
                let ctx = self.template_context(&run, &s.matrix, &stages);
                self.write_stage(&mut out, i + 1, s);
                destructive += self.write_params_and_actions(&mut out, s, &env, &ctx);
            }
        }
        let _ = writeln!(
            out,
            "\n{} stage instance(s), {} cleanup, {} destructive action(s)",
            self.stages.len(),
            self.cleanup.len(),
            destructive
        );
        out
    }

    /// The suite: its name and file, description, vars (redacted) and cluster.
    fn write_header(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "pipeline: {} ({})",
            self.name,
            self.source.path.display()
        );
        if let Some(d) = &self.description {
            for line in d.trim().lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        if !self.vars.is_empty() {
            let _ = writeln!(out, "vars:");
            for (k, v) in &self.vars {
                let _ = writeln!(out, "  {k} = {}", self.redactor.redact(&v.to_string()));
            }
        }
        let cluster = crate::exec::shell_words(&self.ceph.cli_args());
        let cluster = if cluster.is_empty() {
            "Ceph defaults (/etc/ceph/ceph.conf, client.admin)".to_string()
        } else {
            self.redactor.redact(&cluster)
        };
        let _ = writeln!(out, "cluster: {cluster}");
    }

    /// A stage instance's line, with its `when`, client, hosts and the
    /// capabilities its plugin asks for.
    fn write_stage(&self, out: &mut String, number: usize, s: &PlannedStage) {
        let _ = write!(
            out,
            "  {}. {} [{}]",
            number, s.instance_id, s.plugin.description.name
        );
        if let Some(t) = s.timeout {
            let _ = write!(out, " timeout={}", crate::exec::format_duration(t));
        }
        if s.continue_on_error {
            let _ = write!(out, " continue_on_error");
        }
        let _ = writeln!(out);
        if let Some(w) = &s.when {
            let _ = writeln!(out, "     when: {w}");
        }
        if let Some(client) = &s.client {
            let _ = writeln!(out, "     client: {}", client.describe());
        }
        if !(s.targets.len() == 1 && s.targets[0].is_local()) {
            let hosts: Vec<String> = s.targets.iter().map(|h| h.describe()).collect();
            let how = if s.fans_out() && s.sync_start {
                format!("once per host, {} at a time, started together", s.parallel)
            } else if s.fans_out() {
                format!("once per host, {} at a time", s.parallel)
            } else {
                "orchestrated by the stage".into()
            };
            let _ = writeln!(out, "     on: {} ({how})", hosts.join(", "));
        }
        if !s.plugin.description.capabilities.is_empty() {
            let _ = writeln!(
                out,
                "     plugin {} asks for [{}]; allowed: {}",
                s.plugin.origin,
                s.plugin.description.capabilities.join(", "),
                s.grants.describe()
            );
        }
    }

    /// A stage instance's parameters as they would be resolved now, and
    /// the actions its plugin says it would take; returns how many of those
    /// are destructive. Parameters that need earlier stages' outputs are
    /// shown as resolved at run time.
    fn write_params_and_actions(
        &self,
        out: &mut String,
        s: &PlannedStage,
        env: &minijinja::Environment<'_>,
        ctx: &minijinja::Value,
    ) -> usize {
        let mut destructive = 0;
        match s.resolve_params(env, ctx) {
            Ok(params) => {
                for (k, v) in &params {
                    let shown = self.redactor.redact(&v.to_string());
                    let _ = writeln!(out, "     {k}: {shown}");
                }
                let pctx = PlanContext {
                    instance_id: &s.instance_id,
                    ceph: &self.ceph,
                    targets: &s.targets,
                };
                for action in s.plugin.stage.plan(&params, &pctx) {
                    let mark = if action.destructive {
                        destructive += 1;
                        "!! DESTRUCTIVE"
                    } else {
                        "->"
                    };
                    let text = match &action.command {
                        Some(argv) => {
                            format!("{}: {}", action.summary, crate::exec::shell_words(argv))
                        }
                        None => action.summary.clone(),
                    };
                    // One line per action, whatever the plugin wrote:
                    // no line breaks or escapes that forge or erase a mark.
                    let text = crate::terminal::line(&self.redactor.redact(&text));
                    let _ = writeln!(out, "     {mark} {text}");
                }
            }
            Err(problems) => {
                for p in problems {
                    let _ = writeln!(out, "     (resolved at run time) {p}");
                }
            }
        }
        destructive
    }
}
