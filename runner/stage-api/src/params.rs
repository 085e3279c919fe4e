//! Stage parameters: their declared types, and the checks and conversions
//! that turn the `with:` mapping of a pipeline into validated [`Params`].
//!
//! Checked twice: at `validate`/`plan` time on the literal values (templates
//! are accepted as strings until rendered), and at run time after rendering,
//! when every value must have its declared type.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

/// Validated parameters: durations as seconds (number), sizes as bytes (integer).
pub type Params = Map<String, Value>;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ParamType {
    String,
    Integer,
    Number,
    Bool,
    /// `90s`, `5m`, `1h30m`, `250ms`, or a number of seconds. Stored as seconds.
    Duration,
    /// `4096`, `4K`, `4KiB`, `1M`, `2G` (binary multiples). Stored as bytes.
    Size,
    /// One of the listed strings.
    Enum {
        values: Vec<String>,
    },
    /// A list of values of one type.
    List {
        item: Box<ParamType>,
    },
    /// A mapping of strings to any values.
    Map,
    /// Anything (passed through as JSON).
    Any,
}

impl ParamType {
    pub fn enumeration(values: &[&str]) -> Self {
        ParamType::Enum {
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    pub fn list(item: ParamType) -> Self {
        ParamType::List {
            item: Box::new(item),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ParamType::String => "string".into(),
            ParamType::Integer => "integer".into(),
            ParamType::Number => "number".into(),
            ParamType::Bool => "boolean".into(),
            ParamType::Duration => "duration (e.g. 30s, 5m)".into(),
            ParamType::Size => "size (e.g. 4K, 4M, 1G)".into(),
            ParamType::Enum { values } => format!("one of {}", values.join(", ")),
            ParamType::List { item } => format!("list of {}", item.describe()),
            ParamType::Map => "mapping".into(),
            ParamType::Any => "any value".into(),
        }
    }
}

/// One declared parameter.
#[derive(Debug, Clone, Serialize)]
pub struct ParamSpec {
    pub name: String,
    #[serde(flatten)]
    pub ty: ParamType,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    pub doc: String,
}

impl ParamSpec {
    pub fn required(name: &str, ty: ParamType, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            ty,
            required: true,
            default: None,
            doc: doc.into(),
        }
    }

    pub fn optional(name: &str, ty: ParamType, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            ty,
            required: false,
            default: None,
            doc: doc.into(),
        }
    }

    pub fn with_default(name: &str, ty: ParamType, default: Value, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            ty,
            required: false,
            default: Some(default),
            doc: doc.into(),
        }
    }
}

/// Converts a value to the declared type, or says why it cannot be.
/// Strings are accepted for numbers and booleans because rendered templates
/// are strings (`"{{ matrix.threads }}"` -> `"16"`).
pub fn coerce(ty: &ParamType, value: &Value) -> Result<Value, String> {
    let got = || format!("expected {}, found {}", ty.describe(), json_type(value));
    match ty {
        ParamType::Any => Ok(value.clone()),
        // YAML reads `[echo, 1]` and `[true]` as a number and a boolean; as
        // command arguments they are meant as text.
        ParamType::String => match value {
            Value::String(_) => Ok(value.clone()),
            Value::Number(n) => Ok(Value::String(n.to_string())),
            Value::Bool(b) => Ok(Value::String(b.to_string())),
            _ => Err(got()),
        },
        ParamType::Integer => match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(value.clone()),
            Value::String(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("expected an integer, found `{s}`")),
            _ => Err(got()),
        },
        ParamType::Number => match value {
            Value::Number(_) => Ok(value.clone()),
            Value::String(s) => s
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("expected a number, found `{s}`")),
            _ => Err(got()),
        },
        ParamType::Bool => match value {
            Value::Bool(_) => Ok(value.clone()),
            Value::String(s) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
            _ => Err(got()),
        },
        ParamType::Duration => match value {
            Value::Number(n) => Ok(Value::from(n.as_f64().unwrap_or(0.0))),
            Value::String(s) => parse_duration(s)
                .map(|d| Value::from(d.as_secs_f64()))
                .map_err(|e| format!("{e} (found `{s}`)")),
            _ => Err(got()),
        },
        ParamType::Size => match value {
            Value::Number(n) if n.is_u64() => Ok(value.clone()),
            Value::String(s) => parse_size(s)
                .map(Value::from)
                .map_err(|e| format!("{e} (found `{s}`)")),
            _ => Err(got()),
        },
        ParamType::Enum { values } => match value {
            Value::String(s) if values.contains(s) => Ok(value.clone()),
            Value::String(s) => Err(format!(
                "`{s}` is not one of {}{}",
                values.join(", "),
                crate::suggest::did_you_mean(s, values.iter().map(String::as_str))
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default()
            )),
            _ => Err(got()),
        },
        ParamType::List { item } => match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| coerce(item, v).map_err(|e| format!("item {}: {e}", i + 1)))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            _ => Err(got()),
        },
        ParamType::Map => match value {
            Value::Object(_) => Ok(value.clone()),
            _ => Err(got()),
        },
    }
}

pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// `90s`, `5m`, `1h30m`, `250ms`, `2.5s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return secs_to_duration(secs);
    }
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit after `{rest}` (use ms, s, m or h)"))?;
        let (num, tail) = rest.split_at(num_end);
        let value: f64 = num
            .parse()
            .map_err(|_| "expected a duration such as 30s, 5m or 1h30m".to_string())?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let factor = match unit.trim() {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "unknown duration unit `{unit}` (use ms, s, m or h)"
                ));
            }
        };
        total += value * factor;
        rest = next;
    }
    secs_to_duration(total)
}

fn secs_to_duration(secs: f64) -> Result<Duration, String> {
    if secs.is_finite() && (0.0..1e9).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err("duration out of range".into())
    }
}

/// `4096`, `4K`/`4KiB`/`4k`, `4M`, `1G`, `1T`: binary multiples, as Ceph and fio use.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let value: u64 = num
        .parse()
        .map_err(|_| "expected a size such as 4096, 4K, 4M or 1G".to_string())?;
    let factor: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        other => return Err(format!("unknown size unit `{other}` (use K, M, G or T)")),
    };
    value
        .checked_mul(factor)
        .ok_or_else(|| "size too large".to_string())
}

/// Typed access to validated parameters, for stage implementations.
pub trait ParamsExt {
    fn str(&self, name: &str) -> Option<&str>;
    fn i64(&self, name: &str) -> Option<i64>;
    fn u64(&self, name: &str) -> Option<u64>;
    fn f64(&self, name: &str) -> Option<f64>;
    fn bool(&self, name: &str) -> Option<bool>;
    fn duration(&self, name: &str) -> Option<Duration>;
    fn strings(&self, name: &str) -> Vec<String>;
}

impl ParamsExt for Params {
    fn str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }
    fn i64(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(Value::as_i64)
    }
    fn u64(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(Value::as_u64)
    }
    fn f64(&self, name: &str) -> Option<f64> {
        self.get(name).and_then(Value::as_f64)
    }
    fn bool(&self, name: &str) -> Option<bool> {
        self.get(name).and_then(Value::as_bool)
    }
    fn duration(&self, name: &str) -> Option<Duration> {
        self.f64(name).and_then(|s| secs_to_duration(s).ok())
    }
    fn strings(&self, name: &str) -> Vec<String> {
        match self.get(name) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("12").unwrap(), Duration::from_secs(12));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("4X").is_err());
        assert!(parse_size("99999999999999T").is_err());
    }

    #[test]
    fn coercion_from_rendered_strings() {
        assert_eq!(
            coerce(&ParamType::Integer, &json!("16")).unwrap(),
            json!(16)
        );
        assert_eq!(
            coerce(&ParamType::Bool, &json!("true")).unwrap(),
            json!(true)
        );
        assert!(coerce(&ParamType::Integer, &json!("16x")).is_err());
        let e = coerce(&ParamType::enumeration(&["write", "seq"]), &json!("wirte")).unwrap_err();
        assert!(e.contains("did you mean `write`?"), "{e}");
    }
}
