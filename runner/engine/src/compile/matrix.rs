//! `matrix:`: the cartesian product of value lists, minus `exclude` entries.
//!
//! ```yaml
//! matrix:
//!   bs: [4K, 4M]
//!   mode: [seq, rand]
//!   exclude:
//!     - {bs: 4M, mode: rand}
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::config::{Node, NodeValue};
use crate::diagnostic::{Diagnostic, Diagnostics, Source, did_you_mean};

/// Upper bound on instances per stage: a typo like `[1..1000]` x 5 axes must
/// not plan a million stages.
pub const MAX_INSTANCES: usize = 1024;

pub struct Matrix {
    pub axes: Vec<(String, Vec<Value>)>,
    pub exclude: Vec<BTreeMap<String, Value>>,
}

/// Parses and checks a matrix node.
pub fn parse(node: &Node, source: &Arc<Source>, diags: &mut Diagnostics) -> Option<Matrix> {
    let Some(entries) = node.as_map() else {
        diags.push(
            Diagnostic::error(format!(
                "`matrix` must be a mapping of axis names to lists, found {}",
                node.type_name()
            ))
            .at(source, node.loc)
            .with_help("e.g. `matrix: {bs: [4K, 4M], threads: [1, 16]}`"),
        );
        return None;
    };
    let before = diags.len();
    let mut axes: Vec<(String, Vec<Value>)> = Vec::new();
    let mut exclude_node = None;
    for (k, v) in entries {
        let name = k.key_text();
        if name == "exclude" {
            exclude_node = Some(v);
            continue;
        }
        if !is_identifier(&name) {
            diags.push(
                Diagnostic::error(format!("matrix axis `{name}` is not a valid name"))
                    .at(source, k.loc)
                    .with_help(
                        "use letters, digits and `_` so templates can read it as `matrix.NAME`",
                    ),
            );
            continue;
        }
        if let Some(values) = parse_axis(&name, v, source, diags) {
            axes.push((name, values));
        }
    }
    if axes.is_empty() && diags.len() == before {
        diags.push(
            Diagnostic::error("`matrix` has no axes")
                .at(source, node.loc)
                .with_help("add at least one `name: [values]` entry, or remove `matrix`"),
        );
    }
    let exclude = match exclude_node {
        Some(ex) => parse_exclude(ex, &axes, source, diags)?,
        None => Vec::new(),
    };
    if diags.len() > before {
        return None;
    }
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    if total > MAX_INSTANCES {
        diags.push(
            Diagnostic::error(format!(
                "the matrix expands to {total} instances (limit {MAX_INSTANCES})"
            ))
            .at(source, node.loc)
            .with_help("split the stage or trim the value lists"),
        );
        return None;
    }
    let m = Matrix { axes, exclude };
    if m.expand().is_empty() {
        diags.push(
            Diagnostic::error("`exclude` removes every combination of the matrix")
                .at(source, node.loc)
                .with_help("the stage would never run; loosen `exclude`"),
        );
        return None;
    }
    Some(m)
}

/// One axis's values (`bs: [4K, 4M]`): scalars, each listed once. `None`
/// when the axis has no list of values; values that are not scalars or are
/// listed twice are reported, and the axis is kept for the checks of
/// `exclude`.
fn parse_axis(
    name: &str,
    v: &Node,
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<Vec<Value>> {
    let items = match &v.value {
        NodeValue::Seq(items) if items.is_empty() => {
            diags.push(
                Diagnostic::error(format!("matrix axis `{name}` has no values"))
                    .at(source, v.loc)
                    .with_help("list at least one value, or remove the axis"),
            );
            return None;
        }
        NodeValue::Seq(items) => items,
        _ => {
            diags.push(
                Diagnostic::error(format!(
                    "matrix axis `{name}` must be a list, found {}",
                    v.type_name()
                ))
                .at(source, v.loc)
                .with_help(format!("write `{name}: [a, b]`")),
            );
            return None;
        }
    };
    let values: Vec<Value> = items.iter().map(Node::to_json).collect();
    for (i, item) in items.iter().enumerate() {
        if matches!(item.value, NodeValue::Seq(_) | NodeValue::Map(_)) {
            diags.push(
                Diagnostic::error(format!(
                    "matrix axis `{name}`: values must be scalars, found a {}",
                    item.type_name()
                ))
                .at(source, item.loc),
            );
        } else if values[..i].contains(&values[i]) {
            diags.push(
                Diagnostic::error(format!("matrix axis `{name}` lists {} twice", values[i]))
                    .at(source, item.loc)
                    .with_help(
                        "each combination would run twice under the same id; remove the duplicate",
                    ),
            );
        }
    }
    Some(values)
}

/// The `exclude:` list: partial combinations, each naming axes of the
/// matrix and values they have. `None` when it is not a list.
fn parse_exclude(
    ex: &Node,
    axes: &[(String, Vec<Value>)],
    source: &Arc<Source>,
    diags: &mut Diagnostics,
) -> Option<Vec<BTreeMap<String, Value>>> {
    let mut exclude = Vec::new();
    let NodeValue::Seq(items) = &ex.value else {
        diags.push(
            Diagnostic::error("`exclude` must be a list of partial combinations")
                .at(source, ex.loc)
                .with_help("e.g. `exclude: [{bs: 4M, mode: rand}]`"),
        );
        return None;
    };
    for item in items {
        let Some(pairs) = item.as_map() else {
            diags.push(
                Diagnostic::error(format!(
                    "an `exclude` entry must be a mapping, found {}",
                    item.type_name()
                ))
                .at(source, item.loc),
            );
            continue;
        };
        let mut combo = BTreeMap::new();
        for (k, v) in pairs {
            let axis = k.key_text();
            match axes.iter().find(|(a, _)| *a == axis) {
                None => diags.push(
                    Diagnostic::error(format!(
                        "`exclude` names axis `{axis}`, which the matrix does not have"
                    ))
                    .at(source, k.loc)
                    .with_help_opt(did_you_mean(&axis, axes.iter().map(|(a, _)| a.as_str()))),
                ),
                Some((_, values)) if !values.contains(&v.to_json()) => diags.push(
                    Diagnostic::error(format!(
                        "`exclude` value {} is not among axis `{axis}`'s values",
                        v.to_json()
                    ))
                    .at(source, v.loc)
                    .with_help(format!(
                        "`{axis}` has: {}",
                        values
                            .iter()
                            .map(Value::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                ),
                Some(_) => {
                    combo.insert(axis, v.to_json());
                }
            }
        }
        exclude.push(combo);
    }
    Some(exclude)
}

impl Matrix {
    /// Combinations in order: the first axis varies slowest.
    pub fn expand(&self) -> Vec<Vec<(String, Value)>> {
        let mut combos: Vec<Vec<(String, Value)>> = vec![Vec::new()];
        for (axis, values) in &self.axes {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((axis.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        combos.retain(|c| {
            !self.exclude.iter().any(|ex| {
                ex.iter()
                    .all(|(k, v)| c.iter().any(|(ck, cv)| ck == k && cv == v))
            })
        });
        combos
    }
}

/// `id[bs=4K,mode=seq]`.
pub fn instance_id(stage_id: &str, combo: &[(String, Value)]) -> String {
    if combo.is_empty() {
        return stage_id.to_string();
    }
    let parts: Vec<String> = combo
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("{stage_id}[{}]", parts.join(","))
}

pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_excludes() {
        let node: Node = serde_saphyr::from_str(
            "bs: [4K, 4M]\nmode: [seq, rand]\nexclude:\n  - {bs: 4M, mode: rand}\n",
        )
        .unwrap();
        let mut diags = Diagnostics::default();
        let m = parse(&node, &Source::new("m.yaml", ""), &mut diags).unwrap();
        let ids: Vec<String> = m.expand().iter().map(|c| instance_id("r", c)).collect();
        assert_eq!(
            ids,
            [
                "r[bs=4K,mode=seq]",
                "r[bs=4K,mode=rand]",
                "r[bs=4M,mode=seq]"
            ]
        );
    }
}
