//! `ceph status --format json`: the cluster's state at one instant (health,
//! placement groups by state, recovery, OSDs up and in), as the engine's
//! cluster watch samples it once a second beside a benchmark stage.
//!
//! ```text
//! {"health":{"status":"HEALTH_WARN","checks":{"OSD_DOWN":{...}}},
//!  "osdmap":{"num_osds":6,"num_up_osds":4,"num_in_osds":6,...},
//!  "pgmap":{"pgs_by_state":[{"state_name":"active+undersized+degraded","count":21},...],
//!           "num_pgs":65,"recovering_objects_per_sec":12,"recovering_bytes_per_sec":49152,...}, ...}
//! ```
//! The recovery rates appear only while something recovers; absent, they are 0.

use serde_json::Value;

use crate::ceph_health::{self, Health};
use crate::error::ParseError;
use crate::scan::json_document;

const TOOL: &str = "ceph status";

/// The PG state every PG of a healthy, idle cluster is in.
pub const CLEAN: &str = "active+clean";

/// What one `ceph status` said.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStatus {
    pub health: Health,
    pub num_pgs: u64,
    /// `(state, count)` in Ceph's order, e.g. `("active+clean", 49)`.
    pub pgs_by_state: Vec<(String, u64)>,
    pub num_osds: u64,
    pub num_up_osds: u64,
    pub num_in_osds: u64,
    pub recovering_bytes_per_sec: f64,
    pub recovering_objects_per_sec: f64,
}

impl ClusterStatus {
    /// PGs in any state but `active+clean`.
    pub fn pgs_not_clean(&self) -> u64 {
        self.pgs_by_state
            .iter()
            .filter(|(state, _)| state != CLEAN)
            .map(|(_, n)| n)
            .sum()
    }

    /// PGs whose state has `word` among its `+`-joined parts (`recovering`,
    /// `backfilling`, `scrubbing`, `degraded`, ...). `scrubbing` also counts
    /// deep scrubs (`scrubbing+deep`).
    pub fn pgs_in(&self, word: &str) -> u64 {
        pgs_in_any(
            self.pgs_by_state.iter().map(|(s, n)| (s.as_str(), *n)),
            &[word],
        )
    }
}

/// Of `(state, count)` pairs, the PGs whose state has any of `words` among
/// its `+`-joined parts.
pub fn pgs_in_any<'a>(states: impl IntoIterator<Item = (&'a str, u64)>, words: &[&str]) -> u64 {
    states
        .into_iter()
        .filter(|(state, _)| state.split('+').any(|part| words.contains(&part)))
        .map(|(_, n)| n)
        .sum()
}

/// What `ceph pg stat --format json` says of the PGs: the manager's own
/// view, fresher than the digest of it that `ceph status` carries (the
/// monitor's copy lags by up to its digest period: a pool created a second
/// ago is missing there, or its PGs still `unknown` after the manager has
/// them active+clean).
#[derive(Debug, Clone, PartialEq)]
pub struct PgStat {
    pub num_pgs: u64,
    pub pgs_by_state: Vec<(String, u64)>,
    pub recovering_bytes_per_sec: f64,
    pub recovering_objects_per_sec: f64,
}

impl ClusterStatus {
    /// The PG figures replaced by the manager's own (`ceph pg stat`).
    pub fn with_pgs(mut self, pgs: PgStat) -> Self {
        self.num_pgs = pgs.num_pgs;
        self.pgs_by_state = pgs.pgs_by_state;
        self.recovering_bytes_per_sec = pgs.recovering_bytes_per_sec;
        self.recovering_objects_per_sec = pgs.recovering_objects_per_sec;
        self
    }
}

/// Parses `ceph pg stat --format json`:
/// `{"pg_ready":true,"pg_summary":{"num_pg_by_state":[{"name":"active+clean","num":49}],"num_pgs":49,...}}`.
pub fn parse_pg_stat(text: &str) -> Result<PgStat, ParseError> {
    const TOOL: &str = "ceph pg stat";
    let doc = json_document(TOOL, text)?;
    let summary = doc
        .get("pg_summary")
        .ok_or_else(|| ParseError::missing(TOOL, "a \"pg_summary\" member", text))?;
    let num_pgs = summary
        .get("num_pgs")
        .and_then(Value::as_u64)
        .ok_or_else(|| ParseError::missing(TOOL, "a count \"num_pgs\"", text))?;
    let states = pg_states(summary, ("num_pg_by_state", "name", "num"), TOOL, text)?;
    let rate = |field: &str| summary.get(field).and_then(Value::as_f64).unwrap_or(0.0);
    Ok(PgStat {
        num_pgs,
        pgs_by_state: states,
        recovering_bytes_per_sec: rate("recovering_bytes_per_sec"),
        recovering_objects_per_sec: rate("recovering_objects_per_sec"),
    })
}

/// A list of PG states and their counts under `parent`, by the member names
/// of each tool (`status`: `pgs_by_state`, `state_name`, `count`; `pg stat`:
/// `num_pg_by_state`, `name`, `num`). A cluster without pools has no PGs and
/// Ceph leaves the list out: no states.
fn pg_states(
    parent: &Value,
    (list, name, count): (&str, &str, &str),
    tool: &'static str,
    text: &str,
) -> Result<Vec<(String, u64)>, ParseError> {
    match parent.get(list) {
        None => Ok(Vec::new()),
        Some(Value::Array(states)) => states
            .iter()
            .map(|s| {
                match (
                    s.get(name).and_then(Value::as_str),
                    s.get(count).and_then(Value::as_u64),
                ) {
                    (Some(state), Some(n)) => Ok((state.to_string(), n)),
                    _ => Err(ParseError::missing(
                        tool,
                        format!("{list} entries with a {name} and a {count}"),
                        text,
                    )),
                }
            })
            .collect(),
        Some(_) => Err(ParseError::missing(
            tool,
            format!("\"{list}\" as a list"),
            text,
        )),
    }
}

/// Parses `ceph status --format json` (lines before the JSON are skipped).
pub fn parse(text: &str) -> Result<ClusterStatus, ParseError> {
    let doc = json_document(TOOL, text)?;
    let health = doc
        .get("health")
        .ok_or_else(|| ParseError::missing(TOOL, "a \"health\" member", text))?;
    let health = ceph_health::from_value(health, text)?;
    let pgmap = doc
        .get("pgmap")
        .ok_or_else(|| ParseError::missing(TOOL, "a \"pgmap\" member", text))?;
    let osdmap = doc
        .get("osdmap")
        .ok_or_else(|| ParseError::missing(TOOL, "an \"osdmap\" member", text))?;
    // Ceph 14 and older nest the counts one level deeper (osdmap.osdmap).
    let osdmap = osdmap.get("osdmap").unwrap_or(osdmap);
    let count = |map: &Value, field: &str| {
        map.get(field)
            .and_then(Value::as_u64)
            .ok_or_else(|| ParseError::missing(TOOL, format!("a count \"{field}\""), text))
    };
    let rate = |field: &str| pgmap.get(field).and_then(Value::as_f64).unwrap_or(0.0);
    let pgs_by_state = pg_states(pgmap, ("pgs_by_state", "state_name", "count"), TOOL, text)?;
    Ok(ClusterStatus {
        health,
        num_pgs: count(pgmap, "num_pgs")?,
        pgs_by_state,
        num_osds: count(osdmap, "num_osds")?,
        num_up_osds: count(osdmap, "num_up_osds")?,
        num_in_osds: count(osdmap, "num_in_osds")?,
        recovering_bytes_per_sec: rate("recovering_bytes_per_sec"),
        recovering_objects_per_sec: rate("recovering_objects_per_sec"),
    })
}
