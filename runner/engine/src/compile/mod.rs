//! `compile()`: the pipeline file as written -> a checked [`Plan`]. Every
//! check is a small function that adds diagnostics; all problems are reported
//! together, and nothing runs unless there are none.

mod clients;
mod inventory;
mod matrix;
mod oci_plugins;
mod references;
mod stages;
mod vars;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::config::{PipelineConfig, parse};
use crate::diagnostic::{Diagnostic, Diagnostics, Source, did_you_mean};
use crate::plan::Plan;
use crate::registry::Registry;
use crate::secrets::Redactor;

/// Inputs besides the file.
pub struct CompileOptions<'a> {
    /// `--set key=value`.
    pub overrides: Vec<(String, String)>,
    /// `--only ID`: run just these stages (cleanup always runs).
    pub only: Vec<String>,
    /// Environment lookup (the process environment, or a fixed map in tests).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `--locked`: every `oci://` plugin must be in the suite's lock file,
    /// and the lock must list nothing else.
    pub locked: bool,
}

impl Default for CompileOptions<'_> {
    fn default() -> Self {
        CompileOptions {
            overrides: Vec::new(),
            only: Vec::new(),
            env: &|name| std::env::var(name).ok(),
            locked: false,
        }
    }
}

/// Reads, parses and compiles a pipeline file.
pub fn compile_file(
    path: &Path,
    registry: &Registry,
    options: &CompileOptions,
) -> Result<Plan, Diagnostics> {
    let source = Source::read(path)?;
    compile_source(&source, registry, options)
}

pub fn compile_source(
    source: &Arc<Source>,
    registry: &Registry,
    options: &CompileOptions,
) -> Result<Plan, Diagnostics> {
    let config = parse::parse_pipeline(source)?;
    compile(source, &config, registry, options)
}

pub fn compile(
    source: &Arc<Source>,
    config: &PipelineConfig,
    registry: &Registry,
    options: &CompileOptions,
) -> Result<Plan, Diagnostics> {
    let mut diags = Diagnostics::default();
    let at = |d: Diagnostic, loc| d.at(source, loc);

    check_name(config, &mut diags, source);
    check_max_cv(config, &mut diags, source);
    let comparison = check_comparison(config, &mut diags, source);
    let (repeat, repeat_pause) = suite_repetitions(config, &mut diags, source);
    let env_vars = vars::read_env(config, options, source, &mut diags);
    let redactor = Redactor::new(
        env_vars
            .iter()
            .filter(|e| e.secret)
            .filter_map(|e| e.value.clone()),
    );
    let env: BTreeMap<String, String> = env_vars
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect();
    let vars = vars::resolve_vars(config, options, &env, source, &mut diags);
    let ceph = vars::resolve_cluster(config, &vars, &env, source, &mut diags);
    let cluster_flags = vars::cluster_flags(config, source, &mut diags);
    let inventory = inventory::resolve_inventory(config, &vars, &env, source, &mut diags);
    let clients = clients::resolve_clients(config, &vars, &env, source, &mut diags);

    let oci = oci_plugins::resolve(source, config, options, &mut diags);
    let scope = stages::Scope {
        source,
        registry,
        oci: &oci,
        vars: &vars,
        env: &env,
        inventory: &inventory,
        all_stages: config.stages.iter().chain(&config.cleanup).collect(),
        stage_outputs: stage_outputs(source, config, registry, &oci),
        clients: &clients,
    };
    let main = stages::compile_stages(&scope, &config.stages, 0, &mut diags);
    let cleanup = stages::compile_stages(&scope, &config.cleanup, config.stages.len(), &mut diags);
    stages::check_unique_ids(source, config, &mut diags);

    let mut main = main;
    if !options.only.is_empty() {
        let known: Vec<&str> = config.stages.iter().map(|s| s.id.as_str()).collect();
        for id in &options.only {
            if !known.contains(&id.as_str()) {
                diags.push(
                    Diagnostic::error(format!("--only `{id}`: no such stage"))
                        .with_help_opt(did_you_mean(id, known.iter().copied()))
                        .with_help_opt(Some(format!("stages: {}", known.join(", ")))),
                );
            }
        }
        let selected = |id: &str| options.only.iter().any(|o| o == id);
        for s in config.stages.iter().filter(|s| selected(&s.id)) {
            for dep in references::stage_dependencies(s) {
                if !selected(&dep) && known.contains(&dep.as_str()) {
                    diags.push(at(
                        Diagnostic::error(format!(
                            "stage `{}` uses outputs of `{dep}`, which --only leaves out",
                            s.id.value
                        ))
                        .with_help(format!("add `--only {dep}`")),
                        s.id.loc,
                    ));
                }
            }
        }
        main.retain(|p| selected(&p.stage_id));
    }

    if !diags.is_empty() {
        diags.sort();
        return Err(diags);
    }
    Ok(Plan {
        source: source.clone(),
        name: config.name.value.clone(),
        description: config.description.clone(),
        vars,
        env,
        redactor,
        ceph: ceph.unwrap_or_default(),
        cluster_watch: config
            .cluster
            .as_ref()
            .and_then(|c| c.watch.as_ref())
            .is_none_or(|w| **w),
        watch_osds: config
            .cluster
            .as_ref()
            .and_then(|c| c.watch_osds.as_ref())
            .is_none_or(|w| **w),
        watch_hosts: config
            .inventory
            .as_ref()
            .and_then(|i| i.watch.as_ref())
            .is_none_or(|w| **w),
        cluster_flags,
        cluster_hosts: inventory.cluster_hosts(),
        stages: main,
        cleanup,
        report: config.report.clone(),
        comparison,
        repeat,
        repeat_pause,
        lock_text: oci.lock_text,
    })
}

/// The suite's `repeat` (1 to 1000; not with a stage's own `repeat`) and
/// `repeat_pause`.
fn suite_repetitions(
    config: &PipelineConfig,
    diags: &mut Diagnostics,
    source: &Arc<Source>,
) -> (u32, std::time::Duration) {
    let repeat = match &config.repeat {
        Some(r) if r.value == 0 || r.value > 1000 => {
            diags.push(
                Diagnostic::error("`repeat` must be from 1 to 1000")
                    .with_help(
                        "e.g. `repeat: 3` runs the whole suite, cleanup included, three times",
                    )
                    .at(source, r.loc),
            );
            1
        }
        Some(r) => r.value,
        None => 1,
    };
    if repeat > 1 {
        for stage in config.stages.iter().chain(&config.cleanup) {
            if let Some(r) = stage.repeat.as_ref().filter(|r| r.value > 1) {
                diags.push(
                    Diagnostic::error(format!(
                        "stage `{}` repeats itself, and the whole suite repeats too",
                        stage.id.value
                    ))
                    .with_help("keep one: the suite's `repeat:` or the stages' own")
                    .at(source, r.loc),
                );
            }
        }
    }
    let pause = match &config.repeat_pause {
        None => std::time::Duration::ZERO,
        Some(p) => match crate::params::parse_duration(p) {
            Ok(d) => d,
            Err(e) => {
                diags.push(
                    Diagnostic::error(format!("invalid `repeat_pause`: {e}"))
                        .with_help("write a duration such as 10s or 1m")
                        .at(source, p.loc),
                );
                std::time::Duration::ZERO
            }
        },
    };
    (repeat, pause)
}

/// `report.thresholds` parse, and `report.compare_to` names a readable run.
fn check_comparison(
    config: &PipelineConfig,
    diags: &mut Diagnostics,
    source: &Arc<Source>,
) -> Option<crate::plan::PlannedComparison> {
    let mut thresholds = crate::compare::Thresholds::default();
    for (metric, percent) in &config.report.thresholds {
        if let Err(e) = thresholds.add(&format!("{metric}={}", percent.value)) {
            diags.push(
                Diagnostic::error(format!("`report.thresholds`: {e}"))
                    .with_help("write `metric: -5%`; the sign only documents which way is bad")
                    .at(source, percent.loc),
            );
        }
    }
    let target = config.report.compare_to.as_ref()?;
    let base = source.path.parent().unwrap_or(std::path::Path::new("."));
    let path = base.join(&target.value);
    let results_file = if path.is_dir() {
        path.join(crate::results::RESULTS_FILE)
    } else {
        path.clone()
    };
    if !results_file.is_file() {
        diags.push(
            Diagnostic::error(format!(
                "`report.compare_to`: no run at `{}` (looked for {})",
                target.value,
                results_file.display()
            ))
            .with_help("name a run folder or its results.json, relative to this file's folder")
            .at(source, target.loc),
        );
        return None;
    }
    Some(crate::plan::PlannedComparison {
        baseline: results_file,
        shown: target.value.clone(),
        thresholds,
    })
}

/// `report.max_cv` is a percentage above zero.
fn check_max_cv(config: &PipelineConfig, diags: &mut Diagnostics, source: &Arc<Source>) {
    if let Some(cv) = &config.report.max_cv
        && !(cv.value.is_finite() && cv.value > 0.0)
    {
        diags.push(
            Diagnostic::error("`report.max_cv` must be a percentage above zero")
                .with_help("e.g. `max_cv: 10` flags repeated figures whose spread is above 10%")
                .at(source, cv.loc),
        );
    }
}

/// Output names of every stage whose plugin resolves (native stages and plugin
/// files alike), so templates can be checked against them.
fn stage_outputs(
    source: &Arc<Source>,
    config: &PipelineConfig,
    registry: &Registry,
    oci: &oci_plugins::OciPlugins,
) -> BTreeMap<String, Vec<String>> {
    let base_dir = source.path.parent().unwrap_or(Path::new("."));
    config
        .stages
        .iter()
        .chain(&config.cleanup)
        .filter_map(|s| {
            let plugin = stages::resolve_plugin(registry, base_dir, s, oci)?
                .ok()
                .flatten()?;
            Some((
                s.id.value.clone(),
                plugin
                    .description
                    .outputs
                    .iter()
                    .map(|o| o.name.clone())
                    .collect(),
            ))
        })
        .collect()
}

/// Longest pipeline name: it is part of every run folder's name (255 bytes
/// on Linux file systems, with the timestamp before it).
const MAX_NAME_BYTES: usize = 200;

fn check_name(config: &PipelineConfig, diags: &mut Diagnostics, source: &Arc<Source>) {
    let name = &config.name;
    if name.trim().is_empty() {
        diags.push(
            Diagnostic::error("the pipeline name is empty")
                .at(source, name.loc)
                .with_help("give the suite a short name, e.g. `name: full-baseline`"),
        );
    } else if name.len() > MAX_NAME_BYTES {
        diags.push(
            Diagnostic::error(format!(
                "the pipeline name is {} bytes long; at most {MAX_NAME_BYTES}",
                name.len()
            ))
            .at(source, name.loc)
            .with_help("it becomes part of the run folder name: a short name, and put prose in `description:`"),
        );
    } else if name.chars().any(|c| c == '/' || c.is_control()) {
        diags.push(
            Diagnostic::error("the pipeline name may not contain `/` or control characters")
                .at(source, name.loc)
                .with_help("it becomes part of the run folder name"),
        );
    }
}
