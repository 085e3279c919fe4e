//! The `--format json` form of `rados bench` output.
//!
//! rados prints `hints = 1` before the document, and dumps every figure with
//! a printf format, so every value is a string (`"bandwidth": "312.933"`).
//! The write benchmark dumps `stddev_iops` with `%d` from a double, so that
//! figure can be garbage; it is kept as printed (direction `None`, never a
//! headline) — prefer the text output when both are available.

use serde_json::{Map, Value};

use super::{Parsed, Row, TOOL, fields};
use crate::error::ParseError;
use crate::scan::{json_document, json_number};

pub(super) fn parse(text: &str) -> Result<Parsed, ParseError> {
    let doc = json_document(TOOL, text)?;
    let mut parsed = Parsed::default();
    if let Value::Object(map) = &doc {
        visit(map, &mut parsed);
    }
    Ok(parsed)
}

/// Reads summary keys and the `datas` rows of one object, descending into
/// nested objects in case a release wraps the section (`{"bench": {…}}`).
fn visit(map: &Map<String, Value>, parsed: &mut Parsed) {
    for (key, value) in map {
        match value {
            Value::Array(rows) if key == "datas" => {
                parsed.rows.extend(rows.iter().filter_map(row));
            }
            Value::Object(inner) => visit(inner, parsed),
            _ => {
                if let (Some(field), Some(v)) = (fields::lookup(key), json_number(value)) {
                    parsed.set(field, v);
                    parsed.write |= fields::is_write_count(key);
                }
            }
        }
    }
}

fn row(v: &Value) -> Option<Row> {
    Some(Row {
        sec: json_number(v.get("sec")?)?,
        cur_ops: v.get("cur_ops").and_then(json_number),
        cur_bw: v.get("cur_bw").and_then(json_number),
        avg_lat: v.get("avg_lat").and_then(json_number),
    })
}
