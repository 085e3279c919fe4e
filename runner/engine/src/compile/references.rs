//! Names a template may read, checked before anything runs: `vars.X` must be a
//! variable, `matrix.X` an axis of this stage, `env.X` a declared variable,
//! `stages.ID.outputs.KEY` an output of an EARLIER stage.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::{Node, NodeValue, StageConfig};
use crate::diagnostic::did_you_mean;
use crate::template;

pub const RUN_FIELDS: &[&str] = &["id", "dir", "name"];
const ROOTS: &[&str] = &["vars", "matrix", "env", "run", "stages"];

/// What a template in one stage may see.
pub struct NameScope<'a> {
    pub vars: &'a Map<String, Value>,
    pub env: &'a BTreeMap<String, String>,
    pub axes: Vec<String>,
    /// Stages whose outputs exist when this one runs: (id, plugin name).
    pub earlier: Vec<(&'a str, &'a str)>,
    /// All stage ids, to tell "later" from "missing".
    pub all: Vec<&'a str>,
    /// Output names of each stage whose plugin could be resolved (native or file).
    pub outputs: &'a BTreeMap<String, Vec<String>>,
    /// The id of the stage the templates belong to.
    pub current: &'a str,
    /// The stage has a `matrix:` that did not compile (already reported):
    /// its axes are unknown, so `matrix.X` is not checked.
    pub matrix_broken: bool,
}

/// Checks one template or expression; returns (message, help) problems.
pub fn check(text: &str, is_expression: bool, scope: &NameScope) -> Vec<(String, Option<String>)> {
    let env = template::environment();
    let text = if is_expression {
        template::strip_braces(text)
    } else {
        text
    };
    let names = match template::referenced_names(&env, text, is_expression) {
        Ok(n) => n,
        Err(e) => {
            return vec![(
                format!("template syntax error: {e}"),
                Some("templates look like `{{ vars.name }}`".into()),
            )];
        }
    };
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    let mut problems: Vec<_> = names.iter().filter_map(|n| check_name(n, scope)).collect();
    if let Some(unknown) = template::unknown_callable(text, is_expression) {
        problems.push((
            format!("template: {unknown}"),
            Some("minijinja's built-in filters and tests are available (e.g. `lower`, `default`, `int`, `join`); see https://docs.rs/minijinja/latest/minijinja/filters/".into()),
        ));
    }
    problems
}

fn check_name(name: &str, scope: &NameScope) -> Option<(String, Option<String>)> {
    let parts: Vec<&str> = name.split('.').collect();
    let root = parts[0];
    let field = parts.get(1).copied();
    match root {
        "vars" => {
            let key = field?;
            (!scope.vars.contains_key(key)).then(|| {
                (
                    format!("undefined variable `vars.{key}`"),
                    did_you_mean(key, scope.vars.keys().map(String::as_str))
                        .or(Some("declare it under `vars:`".into())),
                )
            })
        }
        "matrix" => {
            let key = field?;
            if scope.matrix_broken {
                return None;
            }
            (!scope.axes.iter().any(|a| a == key)).then(|| {
                let help = if scope.axes.is_empty() {
                    Some("this stage has no `matrix`".to_string())
                } else {
                    did_you_mean(key, scope.axes.iter().map(String::as_str))
                        .or(Some(format!("axes: {}", scope.axes.join(", "))))
                };
                (format!("undefined matrix axis `matrix.{key}`"), help)
            })
        }
        "env" => {
            let key = field?;
            (!scope.env.contains_key(key)).then(|| {
                (
                    format!("environment variable `{key}` is not declared"),
                    Some(format!("list it under `env:` (e.g. `env: [{key}]`); only declared variables are visible")),
                )
            })
        }
        "run" => {
            let key = field?;
            (!RUN_FIELDS.contains(&key)).then(|| {
                (
                    format!("unknown run field `run.{key}`"),
                    Some(format!("run fields: {}", RUN_FIELDS.join(", "))),
                )
            })
        }
        "stages" => check_stage_ref(&parts, scope),
        // minijinja's global functions (`range(3)`, `dict(a=1)`).
        "range" | "dict" | "namespace" | "debug" => None,
        _ => Some((
            format!("undefined name `{root}`"),
            did_you_mean(root, ROOTS.iter().copied())
                .or(Some(format!("templates can read {}", ROOTS.join(", ")))),
        )),
    }
}

fn check_stage_ref(parts: &[&str], scope: &NameScope) -> Option<(String, Option<String>)> {
    let id = parts.get(1).copied()?;
    let Some((_, plugin)) = scope.earlier.iter().find(|(s, _)| *s == id) else {
        if id == scope.current {
            return Some((
                format!("stage `{id}` reads its own outputs"),
                Some("outputs exist only once the stage has run: take the value from `vars:` or from an earlier stage".into()),
            ));
        }
        if scope.all.contains(&id) {
            return Some((
                format!("stage `{id}` runs later; its outputs do not exist yet"),
                Some("a stage can only read outputs of stages listed before it".into()),
            ));
        }
        return Some((
            format!("no stage `{id}`"),
            did_you_mean(id, scope.all.iter().copied()),
        ));
    };
    match parts.get(2).copied() {
        None | Some("status") => None,
        Some("outputs") => {
            let key = parts.get(3).copied()?;
            // An unresolved plugin is reported where it is named; no second error here.
            let outputs = scope.outputs.get(id)?;
            (!outputs.iter().any(|o| o == key)).then(|| {
                (
                    format!("stage `{id}` ({plugin}) has no output `{key}`"),
                    did_you_mean(key, outputs.iter().map(String::as_str)).or(Some(
                        if outputs.is_empty() {
                            format!("`{plugin}` has no outputs")
                        } else {
                            format!("outputs: {}", outputs.join(", "))
                        },
                    )),
                )
            })
        }
        Some(other) => Some((
            format!("unknown field `stages.{id}.{other}`"),
            Some("use `stages.ID.outputs.NAME` or `stages.ID.status`".into()),
        )),
    }
}

/// Ids of stages whose outputs a stage's templates read.
pub fn stage_dependencies(stage: &StageConfig) -> Vec<String> {
    let env = template::environment();
    let mut texts: Vec<(String, bool)> = Vec::new();
    if let Some(w) = &stage.with {
        collect_strings(w, &mut texts);
    }
    if let Some(w) = &stage.when {
        texts.push((w.value.clone(), true));
    }
    let mut deps = Vec::new();
    for (text, expr) in texts {
        let text = if expr {
            template::strip_braces(&text).to_string()
        } else {
            text
        };
        if let Ok(names) = template::referenced_names(&env, &text, expr) {
            for n in names {
                if let Some(id) = n.strip_prefix("stages.").and_then(|r| r.split('.').next())
                    && !deps.iter().any(|d: &String| d == id)
                {
                    deps.push(id.to_string());
                }
            }
        }
    }
    deps
}

fn collect_strings(node: &Node, out: &mut Vec<(String, bool)>) {
    match &node.value {
        NodeValue::String(s) if template::is_template(s) => out.push((s.clone(), false)),
        NodeValue::Seq(items) => items.iter().for_each(|n| collect_strings(n, out)),
        NodeValue::Map(entries) => entries.iter().for_each(|(_, v)| collect_strings(v, out)),
        _ => {}
    }
}
