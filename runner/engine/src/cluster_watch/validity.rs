//! Whether a stage's figures were measured on a clean cluster. A stage is
//! flagged when any sample of its watch had PGs not active+clean, or a
//! health check that its first sample did not have (one already raised
//! when the stage began, such as a pool without redundancy, is the
//! cluster's standing state, not something that happened under the load).
//!
//! A cluster in HEALTH_ERR flags the stage however long it has been so.
//! The verdict names each condition with its worst count and how long it
//! lasted: "16 PGs were recovering (12 s of 30); health check OSD_DOWN
//! raised at 5 s".

use super::ClusterSample;

/// PG conditions, each by the state words that mean it, in the order the
/// verdict names them.
const CONDITIONS: [(&str, &[&str]); 5] = [
    ("recovering", &["recovering", "recovery_wait"]),
    ("backfilling", &["backfilling", "backfill_wait"]),
    ("scrubbing", &["scrubbing"]),
    ("degraded", &["degraded", "undersized"]),
    (
        "peering",
        &["peering", "activating", "creating", "down", "stale"],
    ),
];

/// The flag of a stage that ran `duration_s` with these samples (each after
/// the first spanning `sample_s` seconds), or `None` when every sample was clean.
pub fn verdict(samples: &[ClusterSample], sample_s: f64, duration_s: f64) -> Option<String> {
    let first = samples.first()?;
    let total = duration_s.round().max(1.0);
    let secs = |n: usize| (n as f64 * sample_s).min(total);
    let mut parts = Vec::new();
    // HEALTH_ERR (a full OSD, PGs down or incomplete) makes every figure
    // suspect, even when the stage began with it: a standing error is no
    // baseline (a full OSD blocks writes until the stage times out).
    let errored: Vec<&ClusterSample> = samples
        .iter()
        .filter(|s| s.health == "HEALTH_ERR")
        .collect();
    if !errored.is_empty() {
        let mut checks: Vec<&str> = errored
            .iter()
            .flat_map(|s| s.checks.iter().map(String::as_str))
            .collect();
        checks.sort();
        checks.dedup();
        parts.push(format!(
            "the cluster was HEALTH_ERR{} ({:.0} s of {total:.0})",
            if checks.is_empty() {
                String::new()
            } else {
                format!(" ({})", checks.join(", "))
            },
            secs(errored.len())
        ));
    }
    let mut named_any = vec![false; samples.len()];
    for (word, states) in CONDITIONS {
        let counts: Vec<u64> = samples.iter().map(|s| s.pgs_in_any(states)).collect();
        let during = counts.iter().filter(|n| **n > 0).count();
        if during == 0 {
            continue;
        }
        for (named, n) in named_any.iter_mut().zip(&counts) {
            *named |= *n > 0;
        }
        let worst = counts.iter().max().copied().unwrap_or(0);
        parts.push(format!(
            "{worst} {} {word} ({:.0} s of {total:.0})",
            pgs(worst),
            secs(during)
        ));
    }
    // Not clean in a way none of the above names (e.g. `active+remapped`).
    let other: Vec<u64> = samples
        .iter()
        .zip(&named_any)
        .filter(|(_, named)| !**named)
        .map(|(s, _)| s.not_clean())
        .filter(|n| *n > 0)
        .collect();
    if let Some(worst) = other.iter().max() {
        parts.push(format!(
            "{worst} {} not active+clean ({:.0} s of {total:.0})",
            pgs(*worst),
            secs(other.len())
        ));
    }
    let mut raised: Vec<(&str, f64)> = Vec::new();
    for s in samples {
        for code in &s.checks {
            if !first.checks.contains(code) && !raised.iter().any(|(c, _)| c == code) {
                raised.push((code, s.t_s));
            }
        }
    }
    for (code, at) in raised {
        parts.push(format!("health check {code} raised at {at:.0} s"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn pgs(n: u64) -> &'static str {
    if n == 1 { "PG was" } else { "PGs were" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sample(t_s: f64, states: &[(&str, u64)], checks: &[&str]) -> ClusterSample {
        ClusterSample {
            t_s,
            health: if checks.is_empty() {
                "HEALTH_OK"
            } else {
                "HEALTH_WARN"
            }
            .into(),
            checks: checks.iter().map(|c| c.to_string()).collect(),
            pgs: 65,
            pgs_not_clean: states
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect::<BTreeMap<_, _>>(),
            osds: 6,
            osds_up: 6,
            osds_in: 6,
            recovering_bytes_per_s: 0.0,
            osd_ops: BTreeMap::new(),
            gateways: BTreeMap::new(),
        }
    }

    #[test]
    fn a_clean_stage_is_not_flagged() {
        let samples: Vec<_> = (0..10).map(|t| sample(t as f64, &[], &[])).collect();
        assert_eq!(verdict(&samples, 1.0, 10.2), None);
        assert_eq!(verdict(&[], 1.0, 10.0), None);
    }

    /// An hour's stage, kept in bounded memory (its seconds merged into
    /// 8-second points): 12 s of recovery at 1000 s (three points, 24 s) and a check raised at
    /// 2000 s are still found, their times to a point's width.
    #[test]
    fn an_hour_long_stage_merged_in_memory_still_flags_a_short_condition() {
        use crate::bounded_series::BoundedSeries;
        let mut series = BoundedSeries::default();
        for t in 0..3600 {
            let states: &[(&str, u64)] = if (1000..1012).contains(&t) {
                &[("active+recovering", 9)]
            } else {
                &[]
            };
            let checks: &[&str] = if (2000..2003).contains(&t) {
                &["OSD_DOWN"]
            } else {
                &[]
            };
            series.push(sample(t as f64, states, checks));
        }
        let (samples, width) = series.finish();
        assert!(samples.len() <= crate::bounded_series::MAX_POINTS + 1);
        assert_eq!(width, 8);
        assert_eq!(
            verdict(&samples, width as f64, 3600.0).as_deref(),
            Some(
                "9 PGs were recovering (24 s of 3600); \
                 health check OSD_DOWN raised at 2000 s"
            )
        );
    }

    #[test]
    fn a_standing_health_check_is_not_flagged_a_new_one_is() {
        let samples = vec![
            sample(0.0, &[], &["POOL_NO_REDUNDANCY"]),
            sample(1.0, &[], &["POOL_NO_REDUNDANCY"]),
            sample(2.0, &[], &["POOL_NO_REDUNDANCY", "OSDMAP_FLAGS"]),
        ];
        assert_eq!(
            verdict(&samples, 1.0, 3.0).as_deref(),
            Some("health check OSDMAP_FLAGS raised at 2 s")
        );
        assert_eq!(verdict(&samples[..2], 1.0, 2.0), None);
    }

    /// As a memstore OSD's used-bytes counter that wrapped around (16 EiB
    /// used) left the sandbox: full from before the stage began.
    #[test]
    fn a_standing_health_error_flags_the_stage() {
        let full = |t: f64| ClusterSample {
            health: "HEALTH_ERR".into(),
            ..sample(t, &[], &["OSD_FULL", "POOL_FULL"])
        };
        let samples = [full(0.0), full(1.0), full(2.0)];
        assert_eq!(
            verdict(&samples, 1.0, 3.0).as_deref(),
            Some("the cluster was HEALTH_ERR (OSD_FULL, POOL_FULL) (3 s of 3)")
        );
    }

    #[test]
    fn recovery_under_load_names_each_condition_its_worst_count_and_time() {
        let mut samples: Vec<_> = (0..5).map(|t| sample(t as f64, &[], &[])).collect();
        for t in 5..11 {
            samples.push(sample(
                t as f64,
                &[("active+undersized+degraded", 21), ("active+clean", 0)],
                &["OSD_DOWN", "PG_DEGRADED"],
            ));
        }
        for t in 11..16 {
            samples.push(sample(
                t as f64,
                &[
                    ("active+recovering+degraded", 16 - (t - 11) as u64),
                    ("active+recovery_wait+degraded", 4),
                ],
                &["PG_DEGRADED"],
            ));
        }
        for t in 16..30 {
            samples.push(sample(t as f64, &[], &[]));
        }
        assert_eq!(
            verdict(&samples, 1.0, 30.1).as_deref(),
            Some(
                "20 PGs were recovering (5 s of 30); 21 PGs were degraded (11 s of 30); \
                 health check OSD_DOWN raised at 5 s; health check PG_DEGRADED raised at 5 s"
            )
        );
    }

    #[test]
    fn scrubs_and_other_states_are_named() {
        let samples = vec![
            sample(0.0, &[("active+clean+scrubbing+deep", 1)], &[]),
            sample(1.0, &[("active+remapped", 3)], &[]),
        ];
        assert_eq!(
            verdict(&samples, 1.0, 2.0).as_deref(),
            Some("1 PG was scrubbing (1 s of 2); 3 PGs were not active+clean (1 s of 2)")
        );
    }
}
