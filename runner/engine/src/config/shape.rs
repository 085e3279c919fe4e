//! A first pass over the YAML, before typed deserialization, checked against
//! the pipeline's own JSON Schema: every unknown key (with "did you mean"),
//! every missing required key, every mapping given where a list belongs (and
//! the reverse), every value outside an enumeration — all found at once. serde
//! alone would stop at the first. Scalar types are left to serde, which says
//! precisely what it expected.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::node::{Node, NodeValue};
use crate::diagnostic::{Diagnostic, Diagnostics, Source, did_you_mean};

pub fn check(node: &Node, schema: &Value, source: &Arc<Source>) -> Diagnostics {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut diags = Diagnostics::default();
    Checker {
        defs: &defs,
        source,
        diags: &mut diags,
    }
    .check(node, schema, None);
    diags.sort();
    diags
}

struct Checker<'a> {
    defs: &'a Map<String, Value>,
    source: &'a Arc<Source>,
    diags: &'a mut Diagnostics,
}

/// `{"$ref": "#/$defs/X"}` -> the definition of X.
fn resolve<'s>(defs: &'s Map<String, Value>, schema: &'s Value) -> &'s Value {
    static ANY: Value = Value::Bool(true);
    match schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => defs.get(name).unwrap_or(&ANY),
        None => schema,
    }
}

impl Checker<'_> {
    /// `key`: the mapping key this value stands under, for messages.
    fn check(&mut self, node: &Node, schema: &Value, key: Option<&str>) {
        let defs = self.defs;
        let schema = resolve(defs, schema);
        if schema == &Value::Bool(true) || schema.as_object().is_some_and(Map::is_empty) {
            return;
        }
        if let Some(branches) = schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
        {
            let non_null: Vec<&Value> = branches
                .iter()
                .filter(|b| resolve(defs, b).get("type") != Some(&Value::from("null")))
                .collect();
            if matches!(node.value, NodeValue::Null) && non_null.len() < branches.len() {
                return;
            }
            // Several forms allowed (`on: name` or `on: [names]`; an env entry
            // as a name or a mapping): check against the form of the same kind.
            let same_kind: Vec<&Value> = non_null
                .iter()
                .copied()
                .filter(|b| kind_fits(node, resolve(defs, b)))
                .collect();
            match (non_null.as_slice(), same_kind.as_slice()) {
                ([only], _) | (_, [only]) => self.check(node, only, key),
                _ => {
                    let fits = non_null.iter().any(|b| {
                        let mut scratch = Diagnostics::default();
                        Checker {
                            defs: self.defs,
                            source: self.source,
                            diags: &mut scratch,
                        }
                        .check(node, b, key);
                        scratch.is_empty()
                    });
                    if !fits {
                        let kinds: Vec<&str> = non_null
                            .iter()
                            .filter_map(|b| kind_name(resolve(defs, b)))
                            .collect();
                        self.diags.push(
                            Diagnostic::error(format!(
                                "{} has none of the accepted forms",
                                subject(key)
                            ))
                            .at(self.source, node.loc)
                            .with_help_opt(
                                (!kinds.is_empty())
                                    .then(|| format!("write {}", kinds.join(" or "))),
                            ),
                        );
                    }
                }
            }
            return;
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if matches!(node.value, NodeValue::Null) && types.contains(&"null") {
            return;
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array)
            && let Some(text) = node.as_str()
            && !values.iter().any(|v| v.as_str() == Some(text))
        {
            let names: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
            self.diags.push(
                Diagnostic::error(format!("`{text}` is not one of {}", names.join(", ")))
                    .at(self.source, node.loc)
                    .with_help_opt(did_you_mean(text, names.iter().copied())),
            );
            return;
        }
        match &node.value {
            NodeValue::Map(entries) if types.contains(&"object") => {
                self.check_object(node, entries, schema)
            }
            NodeValue::Seq(items) if types.contains(&"array") => {
                if let Some(item_schema) = schema.get("items") {
                    for item in items {
                        self.check(item, item_schema, None);
                    }
                }
            }
            NodeValue::Map(_) | NodeValue::Seq(_)
                if !types.is_empty() && !types.contains(&"object") && !types.contains(&"array") =>
            {
                self.mismatch(node, &types, key, schema);
            }
            NodeValue::Map(_) if types.contains(&"array") => {
                self.mismatch(node, &types, key, schema)
            }
            NodeValue::Seq(_) if types.contains(&"object") => {
                self.mismatch(node, &types, key, schema)
            }
            NodeValue::String(_) | NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_)
                if types
                    .iter()
                    .all(|t| *t == "object" || *t == "array" || *t == "null")
                    && !types.is_empty() =>
            {
                self.mismatch(node, &types, key, schema);
            }
            _ => {} // scalars: serde checks them with precise messages
        }
    }

    fn check_object(&mut self, node: &Node, entries: &[(Node, Node)], schema: &Value) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        // Keys a misspelling stands for: not reported again as missing.
        let mut meant: Vec<String> = Vec::new();
        for (key, value) in entries {
            let name = key.key_text();
            match properties.and_then(|p| p.get(&name)) {
                Some(prop) => self.check(value, prop, Some(&name)),
                None => match additional {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> = properties
                            .map(|p| p.keys().map(String::as_str).collect())
                            .unwrap_or_default();
                        let suggestion = closest(&name, &known);
                        meant.extend(suggestion.clone());
                        self.diags.push(
                            Diagnostic::error(format!("unknown key `{name}`"))
                                .at(self.source, key.loc)
                                .with_help_opt(suggestion.map(|s| format!("did you mean `{s}`?")))
                                .with_help_opt(Some(format!(
                                    "valid keys here: {}",
                                    known.join(", ")
                                ))),
                        );
                    }
                    Some(extra @ Value::Object(_)) => self.check(value, extra, Some(&name)),
                    _ => {}
                },
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !entries.iter().any(|(k, _)| k.key_text() == r) && !meant.iter().any(|m| m == r)
                {
                    self.diags.push(
                        Diagnostic::error(format!("missing required key `{r}`"))
                            .at(self.source, node.loc)
                            .with_help(format!("add `{r}:` to this mapping")),
                    );
                }
            }
        }
    }

    fn mismatch(&mut self, node: &Node, types: &[&str], key: Option<&str>, schema: &Value) {
        let want: Vec<&str> = types
            .iter()
            .filter(|t| **t != "null")
            .map(|t| match *t {
                "object" => "a mapping",
                "array" => "a list",
                "string" => "a string",
                "integer" => "an integer",
                "number" => "a number",
                "boolean" => "true or false",
                other => other,
            })
            .collect();
        self.diags.push(
            Diagnostic::error(format!(
                "{} must be {}, found {}",
                subject(key),
                want.join(" or "),
                article(node.type_name())
            ))
            .at(self.source, node.loc)
            .with_help_opt(describe(schema)),
        );
    }
}

/// "`matrix`" or "this value", for messages.
fn subject(key: Option<&str>) -> String {
    key.map_or_else(|| "this value".to_string(), |k| format!("`{k}`"))
}

/// The closest known key, if close enough to be a typo.
fn closest(name: &str, known: &[&str]) -> Option<String> {
    did_you_mean(name, known.iter().copied()).and_then(|h| h.split('`').nth(1).map(str::to_string))
}

/// Whether a node is of the kind (mapping, list, scalar) a schema describes.
fn kind_fits(node: &Node, schema: &Value) -> bool {
    match (&node.value, kind_name(schema)) {
        (NodeValue::Map(_), Some(k)) => k == "a mapping",
        (NodeValue::Seq(_), Some(k)) => k == "a list",
        (_, Some(k)) => k == "a name",
        (_, None) => false,
    }
}

fn kind_name(schema: &Value) -> Option<&'static str> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    if types.contains(&"object") {
        Some("a mapping")
    } else if types.contains(&"array") {
        Some("a list")
    } else {
        Some("a name")
    }
}

fn article(type_name: &str) -> String {
    match type_name {
        "integer" => "an integer".into(),
        "null" => "nothing".into(),
        other => format!("a {other}"),
    }
}

fn describe(schema: &Value) -> Option<String> {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_every_unknown_key_at_once() {
        let text = "name: x\nstges: []\nstages:\n  - id: a\n    uses: exec\n    wiht: {}\n  - id: b\n    usse: exec\n";
        let src = Source::new("t.yaml", text);
        let node = super::super::parse::parse_node(&src).unwrap();
        let diags = check(&node, &super::super::pipeline_schema(), &src);
        let text = diags.to_string();
        assert_eq!(diags.len(), 3, "{text}");
        assert!(
            text.contains("unknown key `stges`") && text.contains("did you mean `stages`?"),
            "{text}"
        );
        assert!(
            text.contains("unknown key `wiht`") && text.contains("did you mean `with`?"),
            "{text}"
        );
        // A misspelt required key is reported once, as the misspelling.
        assert!(
            text.contains("unknown key `usse`") && text.contains("did you mean `uses`?"),
            "{text}"
        );
        assert!(!text.contains("missing required key"), "{text}");
    }

    #[test]
    fn accepts_the_example_pipelines() {
        for file in ["smoke", "full-baseline", "ec-vs-replica", "multi-host"] {
            let path = format!("{}/../../pipelines/{file}.yaml", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).unwrap();
            let node = super::super::parse::parse_node(&Source::new(&path, text.clone())).unwrap();
            let diags = check(
                &node,
                &super::super::pipeline_schema(),
                &Source::new(&path, text.clone()),
            );
            assert!(diags.is_empty(), "{path}: {diags}");
        }
    }
}
