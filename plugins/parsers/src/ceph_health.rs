//! `ceph health detail --format json`: the cluster's health status and its
//! health checks. `ceph health --format json` has the same shape without the
//! checks' `detail` lists, and parses the same.
//!
//! ```text
//! {"status":"HEALTH_WARN","checks":{"OSD_DOWN":{"severity":"HEALTH_WARN",
//!   "summary":{"message":"1 osds down","count":1},"detail":[{"message":"..."}],
//!   "muted":false}},"mutes":[]}
//! ```

use serde_json::Value;

use crate::error::ParseError;
use crate::scan::json_document;

const TOOL: &str = "ceph health";

/// A health status, in order of badness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Ok,
    Warn,
    Err,
}

impl Status {
    /// `HEALTH_OK`, `HEALTH_WARN` or `HEALTH_ERR`, as Ceph writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "HEALTH_OK",
            Status::Warn => "HEALTH_WARN",
            Status::Err => "HEALTH_ERR",
        }
    }

    fn from_ceph(text: &str) -> Option<Self> {
        match text {
            "HEALTH_OK" => Some(Status::Ok),
            "HEALTH_WARN" => Some(Status::Warn),
            "HEALTH_ERR" => Some(Status::Err),
            _ => None,
        }
    }
}

/// One health check (`OSD_DOWN`, `POOL_NO_REDUNDANCY`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub code: String,
    pub severity: Status,
    /// The one-line summary, e.g. `1 osds down`.
    pub summary: String,
    /// How many things the check is about (OSDs, PGs, ...), when Ceph says.
    pub count: Option<u64>,
    /// Silenced with `ceph health mute`: Ceph leaves it out of the status.
    pub muted: bool,
    /// The `detail` lines (`ceph health detail` only), e.g. `osd.3 ... is down`.
    pub detail: Vec<String>,
}

/// What `ceph health [detail] --format json` reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub status: Status,
    /// In Ceph's order.
    pub checks: Vec<Check>,
}

/// Parses the output of `ceph health detail --format json` (lines before
/// the JSON, such as warnings, are skipped).
pub fn parse(text: &str) -> Result<Health, ParseError> {
    from_value(&json_document(TOOL, text)?, text)
}

/// The health in an already parsed document: `ceph health`'s whole output,
/// or the `health` member of `ceph status` (the same shape). `text` is the
/// output it came from, quoted when a field is missing.
pub(crate) fn from_value(doc: &Value, text: &str) -> Result<Health, ParseError> {
    let status = doc
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| ParseError::missing(TOOL, "a \"status\" field", text))?;
    let status = Status::from_ceph(status)
        .ok_or_else(|| ParseError::tool(TOOL, format!("unknown health status `{status}`")))?;
    let checks = match doc.get("checks") {
        None => Vec::new(),
        Some(Value::Object(checks)) => checks
            .iter()
            .map(|(code, check)| parse_check(code, check))
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ParseError::missing(TOOL, "\"checks\" as a mapping", text));
        }
    };
    Ok(Health { status, checks })
}

fn parse_check(code: &str, check: &Value) -> Result<Check, ParseError> {
    let severity = check
        .get("severity")
        .and_then(Value::as_str)
        .and_then(Status::from_ceph)
        .ok_or_else(|| {
            ParseError::tool(
                TOOL,
                format!("check {code}: no HEALTH_WARN or HEALTH_ERR severity"),
            )
        })?;
    let summary = check.get("summary");
    let message = |v: &Value| v.get("message").and_then(Value::as_str).map(String::from);
    Ok(Check {
        code: code.to_string(),
        severity,
        summary: summary.and_then(message).unwrap_or_default(),
        count: summary.and_then(|s| s.get("count")).and_then(Value::as_u64),
        muted: check.get("muted").and_then(Value::as_bool).unwrap_or(false),
        detail: check
            .get("detail")
            .and_then(Value::as_array)
            .map(|lines| lines.iter().filter_map(message).collect())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_order_by_badness() {
        assert!(Status::Ok < Status::Warn && Status::Warn < Status::Err);
        for s in [Status::Ok, Status::Warn, Status::Err] {
            assert_eq!(Status::from_ceph(s.as_str()), Some(s));
        }
    }

    #[test]
    fn not_health_output_is_an_error() {
        for text in [
            "",
            "Error initializing cluster client",
            "{\"fsid\": \"x\"}",
            "{\"status\": \"HEALTH_MAYBE\"}",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }
}
