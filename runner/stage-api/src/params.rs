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

/// Why a value does not fit a parameter's declared type. The message is what
/// `validate` prints after `parameter `NAME`: `.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CoerceError {
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// [`ParamType::describe`] of the declared type.
        expected: String,
        /// [`json_type`] of the value.
        found: &'static str,
    },
    #[error("expected an integer, found `{0}`")]
    NotAnInteger(String),
    #[error("expected a number, found `{0}`")]
    NotANumber(String),
    #[error("{source} (found `{text}`)")]
    Duration { text: String, source: DurationError },
    #[error("{source} (found `{text}`)")]
    Size { text: String, source: SizeError },
    #[error("`{value}` is not one of {}{}", .allowed.join(", "), .hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default())]
    NotAllowed {
        value: String,
        allowed: Vec<String>,
        /// "did you mean `x`?" when one of `allowed` is close.
        hint: Option<String>,
    },
    /// Item `index` (1-based) of a list.
    #[error("item {index}: {source}")]
    Item {
        index: usize,
        source: Box<CoerceError>,
    },
}

/// Converts a value to the declared type, or says why it cannot be.
/// Strings are accepted for numbers and booleans because rendered templates
/// are strings (`"{{ matrix.threads }}"` -> `"16"`).
pub fn coerce(ty: &ParamType, value: &Value) -> Result<Value, CoerceError> {
    let got = || CoerceError::WrongType {
        expected: ty.describe(),
        found: json_type(value),
    };
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
                .map_err(|_| CoerceError::NotAnInteger(s.clone())),
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
                .ok_or_else(|| CoerceError::NotANumber(s.clone())),
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
                .map_err(|source| CoerceError::Duration {
                    text: s.clone(),
                    source,
                }),
            _ => Err(got()),
        },
        ParamType::Size => match value {
            Value::Number(n) if n.is_u64() => Ok(value.clone()),
            Value::String(s) => {
                parse_size(s)
                    .map(Value::from)
                    .map_err(|source| CoerceError::Size {
                        text: s.clone(),
                        source,
                    })
            }
            _ => Err(got()),
        },
        ParamType::Enum { values } => match value {
            Value::String(s) if values.contains(s) => Ok(value.clone()),
            Value::String(s) => Err(CoerceError::NotAllowed {
                value: s.clone(),
                allowed: values.clone(),
                hint: crate::suggest::did_you_mean(s, values.iter().map(String::as_str)),
            }),
            _ => Err(got()),
        },
        ParamType::List { item } => match value {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    coerce(item, v).map_err(|e| CoerceError::Item {
                        index: i + 1,
                        source: Box::new(e),
                    })
                })
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

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    /// A number with nothing after it, in a text with units (`1h30`).
    #[error("missing unit after `{0}` (use us, ms, s, m or h)")]
    MissingUnit(String),
    #[error("expected a duration such as 30s, 5m or 1h30m")]
    Malformed,
    #[error("unknown duration unit `{0}` (use us, ms, s, m or h)")]
    UnknownUnit(String),
    /// Negative, not finite, or beyond a billion seconds.
    #[error("duration out of range")]
    OutOfRange,
}

/// `90s`, `5m`, `1h30m`, `250ms`, `500us`, `2.5s` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return secs_to_duration(secs);
    }
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| DurationError::MissingUnit(rest.to_string()))?;
        let (num, tail) = rest.split_at(num_end);
        let value: f64 = num.parse().map_err(|_| DurationError::Malformed)?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let factor = match unit.trim() {
            "us" | "µs" => 0.000_001,
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(DurationError::UnknownUnit(unit.trim().to_string())),
        };
        total += value * factor;
        rest = next;
    }
    secs_to_duration(total)
}

fn secs_to_duration(secs: f64) -> Result<Duration, DurationError> {
    if secs.is_finite() && (0.0..1e9).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(DurationError::OutOfRange)
    }
}

/// Why a text is not a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("expected a size such as 4096, 4K, 4M or 1G")]
    Malformed,
    #[error("unknown size unit `{0}` (use K, M, G or T)")]
    UnknownUnit(String),
    /// More than 2^64 - 1 bytes.
    #[error("size too large")]
    TooLarge,
}

/// `4096`, `4K`/`4KiB`/`4k`, `4M`, `1G`, `1T`: binary multiples, as Ceph and fio use.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let value: u64 = num.parse().map_err(|_| SizeError::Malformed)?;
    let factor: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        other => return Err(SizeError::UnknownUnit(other.to_string())),
    };
    value.checked_mul(factor).ok_or(SizeError::TooLarge)
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
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(
            parse_duration("5 minutes"),
            Err(DurationError::UnknownUnit("minutes".into()))
        );
        assert_eq!(parse_duration("-1"), Err(DurationError::OutOfRange));
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_duration("1h30").unwrap_err().to_string(),
            "missing unit after `30` (use us, ms, s, m or h)"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("4X"), Err(SizeError::UnknownUnit("X".into())));
        assert_eq!(parse_size("99999999999999T"), Err(SizeError::TooLarge));
        assert_eq!(parse_size("K"), Err(SizeError::Malformed));
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
        assert_eq!(
            coerce(&ParamType::Integer, &json!("16x")),
            Err(CoerceError::NotAnInteger("16x".into()))
        );
        let e = coerce(&ParamType::enumeration(&["write", "seq"]), &json!("wirte")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`wirte` is not one of write, seq; did you mean `write`?"
        );
    }

    #[test]
    fn coercion_errors_say_where_and_what() {
        let e = coerce(&ParamType::list(ParamType::Size), &json!(["4K", "4X"])).unwrap_err();
        assert!(matches!(e, CoerceError::Item { index: 2, .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "item 2: unknown size unit `X` (use K, M, G or T) (found `4X`)"
        );
        assert_eq!(
            coerce(&ParamType::Bool, &json!([1]))
                .unwrap_err()
                .to_string(),
            "expected boolean, found list"
        );
    }
}
