//! The pipeline schema for editors (`pipeline schema`, committed as
//! `schemas/pipeline.schema.json`): [`super::pipeline_schema`] plus, for each
//! stage that describes its `with:` as a JSON Schema (the typed native
//! stages), that schema under `uses: NAME`, so an editor completes and checks
//! the parameters of the stage a block uses.
//!
//! `validate` does not use this: it checks the file's structure against
//! [`super::pipeline_schema`] and the parameters against the stages' declared
//! types ([`crate::params::coerce`]), with its own messages. The parameter
//! schemas here accept what `coerce` accepts, so that an editor flags no file
//! that `validate` passes: a template string wherever a scalar parameter (or
//! an item of a list parameter) goes, numbers and booleans written as
//! strings, and numbers or booleans where text goes (`command: [echo, 1]`).

use serde_json::{Map, Value, json};

/// Where the stages' `with:` schemas go in `$defs`: `with.NAME`.
fn def_name(stage: &str) -> String {
    format!("with.{stage}")
}

/// `$defs` entries for the forms `coerce` accepts besides the typed value.
const TEMPLATE: &str = "Template";
const INTEGER_TEXT: &str = "IntegerText";
const NUMBER_TEXT: &str = "NumberText";
const BOOLEAN_TEXT: &str = "BooleanText";

fn text_forms() -> Map<String, Value> {
    let mut defs = Map::new();
    defs.insert(
        TEMPLATE.into(),
        json!({
            "description": "A template (`{{ vars.NAME }}`, `{{ matrix.AXIS }}`, ...), rendered before the stage runs.",
            "type": "string",
            "pattern": "\\{\\{|\\{%",
        }),
    );
    defs.insert(
        INTEGER_TEXT.into(),
        json!({"description": "An integer written as text.", "type": "string", "pattern": "^\\s*[+-]?[0-9]+\\s*$"}),
    );
    defs.insert(
        NUMBER_TEXT.into(),
        json!({
            "description": "A number written as text.",
            "type": "string",
            "pattern": "^\\s*[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?\\s*$",
        }),
    );
    defs.insert(
        BOOLEAN_TEXT.into(),
        json!({"description": "A boolean written as text.", "enum": ["true", "false"]}),
    );
    defs
}

fn reference(def: &str) -> Value {
    json!({"$ref": format!("#/$defs/{def}")})
}

/// [`super::pipeline_schema`] with a `with:` schema per stage:
/// `allOf: [{if: {uses: NAME}, then: {with: SCHEMA}}, ...]` on a stage.
/// `stages`: (stage name, the JSON Schema of its `with:` mapping).
pub fn pipeline_schema_with_stages(stages: &[(String, Value)]) -> Value {
    let mut schema = super::pipeline_schema();
    if stages.is_empty() {
        return schema;
    }
    let mut conditions = Vec::new();
    let mut defs = text_forms();
    for (name, with) in stages {
        defs.insert(def_name(name), with_schema(with.clone()));
        conditions.push(json!({
            "if": {"properties": {"uses": {"const": name}}, "required": ["uses"]},
            "then": {"properties": {"with": reference(&def_name(name))}},
        }));
    }
    if let Some(all) = schema.get_mut("$defs").and_then(Value::as_object_mut) {
        if let Some(stage) = all.get_mut("StageConfig").and_then(Value::as_object_mut) {
            stage.insert("allOf".into(), Value::Array(conditions));
        }
        all.extend(defs);
    }
    schema
}

/// A stage's `with:` schema as a block of a pipeline file: empty (`with:`
/// alone, YAML's null) is allowed, and each parameter takes what `coerce` takes.
fn with_schema(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        if let Some(Value::Object(properties)) = obj.get_mut("properties") {
            for value in properties.values_mut() {
                *value = as_written(value.take());
            }
        }
        obj.insert("type".into(), json!(["object", "null"]));
    }
    schema
}

/// What a pipeline may write for a parameter of this schema (the rules of
/// `coerce`). Lists are checked item by item; mappings are passed to the
/// stage as written, so inside them only the schema's own types hold.
fn as_written(schema: Value) -> Value {
    let Value::Object(mut obj) = schema else {
        return schema;
    };
    if let Some(key) = ["anyOf", "oneOf"]
        .into_iter()
        .find(|k| obj.contains_key(*k))
    {
        if is_enumeration(&obj[key]) {
            return or(obj, &[TEMPLATE]);
        }
        // An Option: what each alternative takes.
        if let Some(Value::Array(branches)) = obj.get_mut(key) {
            for branch in branches.iter_mut() {
                *branch = as_written(branch.take());
            }
        }
        return Value::Object(obj);
    }
    let mut types: Vec<String> = match obj.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    let has = |t: &str| types.iter().any(|x| x == t);
    if has("array") {
        if let Some(items) = obj.get_mut("items") {
            *items = as_written(items.take());
        }
        return Value::Object(obj);
    }
    if has("object") || types.is_empty() {
        return Value::Object(obj);
    }
    if obj.contains_key("enum") || obj.contains_key("const") {
        return or(obj, &[TEMPLATE]);
    }
    if has("string") {
        // Durations and sizes take any text already; plain text also takes
        // numbers and booleans (YAML reads `[echo, 1]` as a number).
        if !obj.contains_key("format") {
            types.extend(["number".to_string(), "boolean".to_string()]);
            obj.insert("type".into(), json!(types));
        }
        return Value::Object(obj);
    }
    if has("integer") {
        return or(obj, &[INTEGER_TEXT, TEMPLATE]);
    }
    if has("number") {
        return or(obj, &[NUMBER_TEXT, TEMPLATE]);
    }
    if has("boolean") {
        return or(obj, &[BOOLEAN_TEXT, TEMPLATE]);
    }
    Value::Object(obj)
}

/// `{enum}`/`{const}` alternatives only (an enum whose variants have docs).
fn is_enumeration(branches: &Value) -> bool {
    branches.as_array().is_some_and(|bs| {
        !bs.is_empty()
            && bs
                .iter()
                .all(|b| b.get("const").is_some() || b.get("enum").is_some())
    })
}

/// `schema` or one of the `$defs` forms; the description and default stay on
/// the outside, where editors look for them.
fn or(mut schema: Map<String, Value>, forms: &[&str]) -> Value {
    let mut outer = Map::new();
    for key in ["description", "default"] {
        if let Some(v) = schema.remove(key) {
            outer.insert(key.into(), v);
        }
    }
    let mut alternatives = vec![Value::Object(schema)];
    alternatives.extend(forms.iter().map(|f| reference(f)));
    outer.insert("anyOf".into(), Value::Array(alternatives));
    Value::Object(outer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage_with() -> Value {
        json!({
            "description": "`with:` of a `demo` stage.",
            "type": "object",
            "properties": {
                "pool": {"description": "Pool.", "type": "string"},
                "mode": {"description": "Mode.", "type": "string", "enum": ["write", "seq"], "default": "write"},
                "threads": {"description": "Threads.", "type": "integer", "default": 16},
                "ratio": {"type": "number"},
                "verify": {"type": "boolean"},
                "seconds": {"type": ["number", "string"], "format": "duration"},
                "codes": {"type": "array", "items": {"type": "integer"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "metrics": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "scale": {"type": ["number", "null"]}},
                    "additionalProperties": false,
                }},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "env": {"type": ["object", "null"], "additionalProperties": true},
                "any": true,
            },
            "additionalProperties": false,
            "required": ["pool"],
        })
    }

    #[test]
    fn stages_get_their_with_schema_under_uses() {
        let schema = pipeline_schema_with_stages(&[("demo".into(), stage_with())]);
        let condition = &schema["$defs"]["StageConfig"]["allOf"][0];
        assert_eq!(condition["if"]["properties"]["uses"]["const"], "demo");
        assert_eq!(
            condition["then"]["properties"]["with"]["$ref"],
            "#/$defs/with.demo"
        );
        assert_eq!(schema["$defs"][TEMPLATE]["pattern"], "\\{\\{|\\{%");
        let with = &schema["$defs"]["with.demo"];
        assert_eq!(with["type"], json!(["object", "null"]));
        assert_eq!(with["required"], json!(["pool"]));
        assert_eq!(with["additionalProperties"], false);
        // The rest of the pipeline schema is untouched.
        let plain = super::super::pipeline_schema();
        let mut extended = schema.clone();
        extended["$defs"]["StageConfig"]
            .as_object_mut()
            .unwrap()
            .remove("allOf");
        let defs = extended["$defs"].as_object_mut().unwrap();
        defs.remove("with.demo");
        for form in text_forms().keys() {
            defs.remove(form);
        }
        assert_eq!(extended, plain);
        assert_eq!(pipeline_schema_with_stages(&[]), plain);
    }

    #[test]
    fn parameters_take_what_coerce_takes() {
        let with = with_schema(stage_with());
        let props = &with["properties"];
        let forms = |p: &Value| -> Vec<Value> { p["anyOf"].as_array().unwrap()[1..].to_vec() };
        // Text also takes numbers and booleans; durations any text already.
        assert_eq!(
            props["pool"],
            json!({"description": "Pool.", "type": ["string", "number", "boolean"]})
        );
        assert_eq!(props["seconds"], stage_with()["properties"]["seconds"]);
        // Enums take a template; description and default stay outside.
        assert_eq!(props["mode"]["description"], "Mode.");
        assert_eq!(props["mode"]["default"], "write");
        assert_eq!(
            props["mode"]["anyOf"][0],
            json!({"type": "string", "enum": ["write", "seq"]})
        );
        assert_eq!(forms(&props["mode"]), [reference(TEMPLATE)]);
        assert_eq!(
            forms(&props["threads"]),
            [reference(INTEGER_TEXT), reference(TEMPLATE)]
        );
        assert_eq!(
            forms(&props["ratio"]),
            [reference(NUMBER_TEXT), reference(TEMPLATE)]
        );
        assert_eq!(
            forms(&props["verify"]),
            [reference(BOOLEAN_TEXT), reference(TEMPLATE)]
        );
        // A list is checked item by item, and is not a template itself.
        assert_eq!(props["codes"]["type"], "array");
        assert_eq!(
            forms(&props["codes"]["items"]),
            [reference(INTEGER_TEXT), reference(TEMPLATE)]
        );
        assert_eq!(
            props["args"]["items"]["type"],
            json!(["string", "number", "boolean"])
        );
        // Mappings go to the stage as written: their own types only.
        assert_eq!(props["metrics"], stage_with()["properties"]["metrics"]);
        assert_eq!(props["env"], stage_with()["properties"]["env"]);
        assert_eq!(props["any"], json!(true));
        // An Option: what its value takes, or null.
        assert_eq!(
            forms(&props["limit"]["anyOf"][0]),
            [reference(INTEGER_TEXT), reference(TEMPLATE)]
        );
        assert_eq!(props["limit"]["anyOf"][1], json!({"type": "null"}));
    }

    #[test]
    fn documented_enum_variants_take_a_template() {
        let documented = json!({"oneOf": [
            {"const": "higher", "description": "More is better."},
            {"enum": ["lower", "none"], "type": "string"},
        ]});
        assert_eq!(
            as_written(documented.clone()),
            json!({"anyOf": [documented, reference(TEMPLATE)]})
        );
    }
}
