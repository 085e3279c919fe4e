//! Pure interpretation of `ceph … -f json` outputs: is the cluster ready yet?
//!
//! HEALTH_OK can appear before PG stats settle, and the manager's PG count lags behind
//! pool creation (the gateway creates pools while we wait). So "all PGs active+clean"
//! means: the sum of `pg_num` over the pools in the OSD map equals both the number of PGs
//! the manager reports and the number of those that are active+clean.

use serde::Deserialize;
use serde_json::Value;

use crate::error::SandboxError;

fn parse<T: for<'de> Deserialize<'de>>(what: &str, json: &str) -> Result<T, SandboxError> {
    serde_json::from_str(json).map_err(|e| SandboxError::Parse {
        what: what.into(),
        detail: format!("{e} in {:?}", crate::logs::last_lines(json, 3)),
    })
}

/// The part of `ceph osd dump -f json` readiness needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct OsdDump {
    #[serde(default)]
    pub osds: Vec<OsdInfo>,
    #[serde(default)]
    pub pools: Vec<PoolInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct OsdInfo {
    pub osd: i64,
    pub up: u8,
    #[serde(rename = "in")]
    pub in_: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct PoolInfo {
    pub pool_name: String,
    pub pg_num: u64,
}

impl OsdDump {
    pub fn parse(json: &str) -> Result<OsdDump, SandboxError> {
        parse("`ceph osd dump -f json`", json)
    }
    /// OSDs that are both up and in.
    pub fn up_and_in(&self) -> usize {
        self.osds.iter().filter(|o| o.up == 1 && o.in_ == 1).count()
    }
    /// Ids of OSDs that are not up and in, for error messages.
    pub fn not_up_and_in(&self) -> Vec<i64> {
        self.osds
            .iter()
            .filter(|o| !(o.up == 1 && o.in_ == 1))
            .map(|o| o.osd)
            .collect()
    }
    /// Sum of `pg_num` over all pools: how many PGs must become active+clean.
    pub fn expected_pgs(&self) -> u64 {
        self.pools.iter().map(|p| p.pg_num).sum()
    }
}

/// The part of `ceph pg stat -f json` readiness needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PgStat {
    pub num_pgs: u64,
    /// `(state, count)`, e.g. `("active+clean", 33)`.
    pub by_state: Vec<(String, u64)>,
}

impl PgStat {
    /// Pacific nests the numbers under `pg_summary`; older releases put them at the top.
    pub fn parse(json: &str) -> Result<PgStat, SandboxError> {
        let value: Value = parse("`ceph pg stat -f json`", json)?;
        let summary = value.get("pg_summary").unwrap_or(&value);
        let num_pgs = summary
            .get("num_pgs")
            .and_then(Value::as_u64)
            .ok_or_else(|| SandboxError::Parse {
                what: "`ceph pg stat -f json`".into(),
                detail: format!("no num_pgs in {json:?}"),
            })?;
        let by_state = summary
            .get("num_pg_by_state")
            .and_then(Value::as_array)
            .map(|states| {
                states
                    .iter()
                    .filter_map(|s| {
                        Some((
                            s.get("name")?.as_str()?.to_string(),
                            s.get("num")?.as_u64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(PgStat { num_pgs, by_state })
    }

    pub fn active_clean(&self) -> u64 {
        self.by_state
            .iter()
            .filter(|(state, _)| state == "active+clean")
            .map(|(_, n)| n)
            .sum()
    }
}

/// Verdict on PG readiness, comparing the OSD map with the manager's PG stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgReadiness {
    pub expected: u64,
    pub reported: u64,
    pub active_clean: u64,
    pub other_states: Vec<(String, u64)>,
}

impl PgReadiness {
    pub fn new(dump: &OsdDump, stat: &PgStat) -> PgReadiness {
        PgReadiness {
            expected: dump.expected_pgs(),
            reported: stat.num_pgs,
            active_clean: stat.active_clean(),
            other_states: stat
                .by_state
                .iter()
                .filter(|(state, _)| state != "active+clean")
                .cloned()
                .collect(),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.expected > 0 && self.reported == self.expected && self.active_clean == self.expected
    }

    /// `pgs 33/33 active+clean`, or with what the rest is doing.
    pub fn describe(&self) -> String {
        let mut text = format!("pgs {}/{} active+clean", self.active_clean, self.expected);
        if !self.other_states.is_empty() {
            let others: Vec<String> = self
                .other_states
                .iter()
                .map(|(state, n)| format!("{n} {state}"))
                .collect();
            text.push_str(&format!(" ({})", others.join(", ")));
        }
        if self.reported != self.expected {
            text.push_str(&format!(
                " (manager reports {} of {} pgs)",
                self.reported, self.expected
            ));
        }
        text
    }
}

/// `ceph health -f json` as one line: `HEALTH_OK` or `HEALTH_WARN: 1 osds down; …`.
pub(crate) fn health_summary(json: &str) -> Result<String, SandboxError> {
    let value: Value = parse("`ceph health -f json`", json)?;
    let status =
        value
            .get("status")
            .and_then(Value::as_str)
            .ok_or_else(|| SandboxError::Parse {
                what: "`ceph health -f json`".into(),
                detail: "no status".into(),
            })?;
    let checks: Vec<&Value> = value
        .get("checks")
        .and_then(Value::as_object)
        .map(|checks| checks.values().collect())
        .unwrap_or_default();
    let messages = |muted: bool| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.get("muted").and_then(Value::as_bool).unwrap_or(false) == muted)
            .filter_map(|c| c.pointer("/summary/message")?.as_str())
            .collect()
    };
    let (active, muted) = (messages(false), messages(true));
    let mut text = status.to_string();
    if !active.is_empty() {
        text = format!("{text}: {}", active.join("; "));
    }
    if !muted.is_empty() {
        text = format!("{text} (muted: {})", muted.join("; "));
    }
    Ok(text)
}

/// Monitors in quorum, from `ceph quorum_status -f json`.
pub(crate) fn quorum_names(json: &str) -> Result<Vec<String>, SandboxError> {
    #[derive(Deserialize)]
    struct Quorum {
        quorum_names: Vec<String>,
    }
    Ok(parse::<Quorum>("`ceph quorum_status -f json`", json)?.quorum_names)
}

/// Whether a manager is active, from `ceph mgr stat -f json`.
pub(crate) fn mgr_available(json: &str) -> Result<bool, SandboxError> {
    #[derive(Deserialize)]
    struct MgrStat {
        available: bool,
    }
    Ok(parse::<MgrStat>("`ceph mgr stat -f json`", json)?.available)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real outputs captured from a sandbox (Ceph 16.2.15), in `tests/data`.
    fn data(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }

    #[test]
    fn clean_cluster_is_ready() {
        let dump = OsdDump::parse(&data("osd_dump_clean.json")).unwrap();
        assert_eq!(dump.up_and_in(), 3);
        assert_eq!(dump.expected_pgs(), 33); // 4 rgw pools x 8 + device_health_metrics x 1
        let stat = PgStat::parse(&data("pg_stat_clean.json")).unwrap();
        let verdict = PgReadiness::new(&dump, &stat);
        assert!(verdict.is_ready(), "{verdict:?}");
        assert_eq!(verdict.describe(), "pgs 33/33 active+clean");
    }

    #[test]
    fn new_pool_still_creating_is_not_ready() {
        let dump = OsdDump::parse(&data("osd_dump_new_pool.json")).unwrap();
        assert_eq!(dump.expected_pgs(), 65);
        let stat = PgStat::parse(&data("pg_stat_creating.json")).unwrap();
        let verdict = PgReadiness::new(&dump, &stat);
        assert!(!verdict.is_ready());
        assert_eq!(
            verdict.describe(),
            "pgs 33/65 active+clean (32 creating+peering)"
        );
        let settled = PgStat::parse(&data("pg_stat_clean_after_pool.json")).unwrap();
        assert!(PgReadiness::new(&dump, &settled).is_ready());
    }

    #[test]
    fn manager_lagging_behind_osd_map_is_not_ready() {
        // The manager still reports 33 clean PGs while the OSD map already has a new pool.
        let dump = OsdDump::parse(&data("osd_dump_new_pool.json")).unwrap();
        let stale = PgStat::parse(&data("pg_stat_clean.json")).unwrap();
        let verdict = PgReadiness::new(&dump, &stale);
        assert!(!verdict.is_ready());
        assert!(verdict.describe().contains("manager reports 33 of 65"));
    }

    #[test]
    fn down_osd_is_seen() {
        let dump = OsdDump::parse(&data("osd_dump_down.json")).unwrap();
        assert_eq!(dump.up_and_in(), 2);
        assert_eq!(dump.not_up_and_in(), vec![2]);
        let stat = PgStat::parse(&data("pg_stat_down.json")).unwrap();
        assert!(!PgReadiness::new(&dump, &stat).is_ready());
    }

    #[test]
    fn empty_pool_list_is_not_ready() {
        let verdict = PgReadiness::new(
            &OsdDump {
                osds: vec![],
                pools: vec![],
            },
            &PgStat::default(),
        );
        assert!(!verdict.is_ready());
    }

    #[test]
    fn flat_pg_stat_of_older_releases() {
        let stat =
            PgStat::parse(r#"{"num_pg_by_state":[{"name":"active+clean","num":8}],"num_pgs":8}"#)
                .unwrap();
        assert_eq!(stat.active_clean(), 8);
    }

    #[test]
    fn health_lines() {
        assert_eq!(
            health_summary(&data("health_ok.json")).unwrap(),
            "HEALTH_OK"
        );
        assert_eq!(
            health_summary(&data("health_noout.json")).unwrap(),
            "HEALTH_WARN: noout flag(s) set"
        );
        let down = health_summary(&data("health_osd_down.json")).unwrap();
        assert!(
            down.starts_with("HEALTH_WARN: 1 osds down; Degraded"),
            "{down}"
        );
        // 18.2.7 after the sandbox muted the mgr modules' PyO3 failures.
        assert_eq!(
            health_summary(&data("health_detail_mgr_pyo3_muted_18.2.7.json")).unwrap(),
            "HEALTH_OK (muted: 13 mgr modules have failed dependencies)"
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for garbage in ["", "hints = 1", "{}", "[]", "{\"pg_summary\":{}}"] {
            assert!(PgStat::parse(garbage).is_err(), "{garbage:?}");
            assert!(health_summary(garbage).is_err(), "{garbage:?}");
            assert!(quorum_names(garbage).is_err(), "{garbage:?}");
        }
        assert!(OsdDump::parse("not json").is_err());
    }

    #[test]
    fn quorum_and_mgr() {
        let q =
            r#"{"election_epoch":3,"quorum":[0],"quorum_names":["a"],"quorum_leader_name":"a"}"#;
        assert_eq!(quorum_names(q).unwrap(), vec!["a"]);
        let m = r#"{"epoch":4,"available":true,"active_name":"x","num_standby":0}"#;
        assert!(mgr_available(m).unwrap());
    }
}
