//! Small helpers shared by the parsers: number and unit reading, and finding
//! the JSON document inside a tool output that has other lines around it.

use serde_json::Value;

use crate::error::{ParseError, quote};

/// Parses a number as the tools print it (`0.203392`, `2.066e-05`, `78`).
/// Non-finite values (`nan`, `-nan`, `inf`, which rados bench prints when a
/// run had no samples) are `None`: a metric must be a real number.
pub(crate) fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A JSON value as a number. Accepts strings too, because `rados bench
/// --format json` prints every figure as a string (`"bandwidth": "312.933"`).
pub(crate) fn json_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|v| v.is_finite()),
        Value::String(s) => number(s),
        _ => None,
    }
}

/// Multiplier of an SI bit-rate prefix as iperf prints it (`K`, `M`, `G`,
/// `T`, or none): iperf's `Mbits/sec` is 10^6 bit/s.
pub(crate) fn decimal_prefix(prefix: &str) -> Option<f64> {
    match prefix {
        "" => Some(1.0),
        "K" | "k" => Some(1e3),
        "M" => Some(1e6),
        "G" => Some(1e9),
        "T" => Some(1e12),
        "P" => Some(1e15),
        _ => None,
    }
}

/// Multiplier of a byte unit as Ceph prints it. Ceph's `byte_u_t` prints
/// `B`, `KiB`, `MiB`, … and its older `prettybyte_t` printed `bytes`, `kB`,
/// `MB`, … but shifted by 10 bits as well, so every spelling is binary here.
pub(crate) fn ceph_byte_unit(unit: &str) -> Option<f64> {
    let prefix = unit
        .trim_end_matches("ytes")
        .trim_end_matches('B')
        .trim_end_matches('b')
        .trim_end_matches('i');
    let power = match prefix {
        "" => 0,
        "k" | "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        "E" => 6,
        _ => return None,
    };
    Some(1024f64.powi(power))
}

/// Lines of `text` without their line terminator (`\n` or `\r\n`).
pub(crate) fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// Finds the JSON document in `text` — the first line that starts with `{`
/// (tools print `hints = 1`, warnings or errors before it) — and parses the
/// first JSON value from there, ignoring anything after it.
pub(crate) fn json_document(tool: &'static str, text: &str) -> Result<Value, ParseError> {
    let mut offset = 0;
    let mut start = None;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with('{') {
            start = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(start) = start else {
        return Err(ParseError::missing(
            tool,
            "a JSON document (a line starting with '{')",
            text,
        ));
    };
    let body = &text[start..];
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => Ok(value),
        Some(Err(e)) => {
            let skipped = text[..start].matches('\n').count();
            let line_idx = e.line().saturating_sub(1);
            let line = body.lines().nth(line_idx).unwrap_or("");
            Err(ParseError::Json {
                tool,
                expected: "a complete JSON document".into(),
                detail: e.to_string(),
                line_no: skipped + line_idx + 1,
                line: quote(line),
            })
        }
        None => Err(ParseError::missing(tool, "a JSON document", text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(number("2.066e-05"), Some(2.066e-05));
        assert_eq!(number(" 78 "), Some(78.0));
        assert_eq!(number("-nan"), None);
        assert_eq!(number("inf"), None);
        assert_eq!(number("-"), None);
    }

    #[test]
    fn ceph_units_are_binary() {
        assert_eq!(ceph_byte_unit("B"), Some(1.0));
        assert_eq!(ceph_byte_unit("bytes"), Some(1.0));
        assert_eq!(ceph_byte_unit("KiB"), Some(1024.0));
        assert_eq!(ceph_byte_unit("kB"), Some(1024.0));
        assert_eq!(ceph_byte_unit("MiB"), Some(1048576.0));
        assert_eq!(ceph_byte_unit("GiB"), Some(1073741824.0));
        assert_eq!(ceph_byte_unit("XB"), None);
    }

    #[test]
    fn json_after_noise_and_before_trailer() {
        let v = json_document("t", "noise\n{\"a\": \"1\"}\ntrailer\n").unwrap();
        assert_eq!(json_number(&v["a"]), Some(1.0));
    }

    #[test]
    fn json_error_quotes_line() {
        let e = json_document("t", "noise\n{\n \"a\": ,\n}\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 3"), "{msg}");
        assert!(msg.contains("\"\\\"a\\\": ,\""), "{msg}");
    }
}
