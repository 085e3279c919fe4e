//! A YAML value that remembers where it was written. Stage parameters, vars
//! and matrices are free-form in the pipeline file and only checked later
//! against a plugin's parameter schema; to point at the bad value then, every
//! node keeps its `line:col`.

use std::fmt;

use schemars::JsonSchema;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::diagnostic::Loc;

/// A located value. Deserializes from any YAML node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    pub loc: Loc,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    String(String),
    Seq(Vec<Node>),
    /// Keys keep their own locations so an unknown parameter name can be shown.
    Map(Vec<(Node, Node)>),
}

impl Node {
    pub fn new(value: NodeValue, loc: Loc) -> Self {
        Node { value, loc }
    }

    /// The YAML type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "boolean",
            NodeValue::Int(_) => "integer",
            NodeValue::Float(_) => "number",
            NodeValue::String(_) => "string",
            NodeValue::Seq(_) => "list",
            NodeValue::Map(_) => "mapping",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            NodeValue::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The key as text (`matrix` axes, parameter names): YAML allows any
    /// scalar as a key.
    pub fn key_text(&self) -> String {
        match &self.value {
            NodeValue::String(s) => s.clone(),
            other => Node::new(other.clone(), self.loc).to_json().to_string(),
        }
    }

    /// Whether this value (or anything inside it) is a template.
    pub fn has_template(&self) -> bool {
        match &self.value {
            NodeValue::String(s) => crate::template::is_template(s),
            NodeValue::Seq(items) => items.iter().any(Node::has_template),
            NodeValue::Map(entries) => entries.iter().any(|(_, v)| v.has_template()),
            _ => false,
        }
    }

    /// Plain JSON view, dropping locations.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            NodeValue::String(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.key_text(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<NodeValue>::deserialize(d)?;
        let loc = Loc::new(
            spanned.referenced.line() as u32,
            spanned.referenced.column() as u32,
        );
        Ok(Node::new(spanned.value, loc))
    }
}

impl Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl JsonSchema for Node {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AnyValue".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!(true)
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeValue, E> {
        i64::try_from(v)
            .map(NodeValue::Int)
            .or(Ok(NodeValue::Float(v as f64)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::String(v))
    }

    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<Node, Node>()? {
            entries.push((k, v));
        }
        Ok(NodeValue::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_locations_of_keys_and_values() {
        let n: Node = serde_saphyr::from_str("a: 1\nb:\n  - x\n  - {c: true}\n").unwrap();
        let m = n.as_map().unwrap();
        assert_eq!(m[0].0.loc, Loc::new(1, 1));
        assert_eq!(m[0].1.loc, Loc::new(1, 4));
        assert_eq!(m[1].0.key_text(), "b");
        let NodeValue::Seq(items) = &m[1].1.value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].loc, Loc::new(3, 5));
        assert_eq!(items[1].as_map().unwrap()[0].1.value, NodeValue::Bool(true));
    }
}
