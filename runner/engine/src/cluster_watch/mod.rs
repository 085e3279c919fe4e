//! The cluster's state beside each benchmark stage: `ceph status` once a
//! second while the stage runs ([`beside`]), kept as a compact series in the
//! stage's record, and a flag when the figures were measured while the
//! cluster was not clean ([`validity`]): PGs not active+clean (recovering,
//! backfilling, degraded, peering, scrubbing), or a health check that was
//! not there when the stage began.
//!
//! The samples come from `sampler.py`, run by the Python of the `ceph` CLI
//! over one librados connection: a `ceph status` CLI call costs 0.23 CPU-s
//! here, one over the open connection 0.4 ms.

pub mod validity;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipeline_parsers::ceph_status::{self, CLEAN, ClusterStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ceph::CephConnection;

const SAMPLER: &str = include_str!("sampler.py");

/// One sample a second.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Limit for connecting and for each `status`.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest line read from the sampler; a longer one (a cluster of thousands
/// of PG states?) is skipped, not buffered.
const MAX_LINE: u64 = 4 << 20;
/// At most this many samples per stage (over 27 h at 1 Hz); later ones are
/// counted, not kept, so memory stays bounded.
const MAX_SAMPLES: usize = 100_000;

/// What the cluster was doing during one stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterWatch {
    pub interval_s: f64,
    /// In time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<ClusterSample>,
    /// Samples beyond the kept ones (a stage of over a day).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// Why there are no samples, or why some are missing (the first error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the figures were measured while the cluster was not clean,
    /// e.g. "16 PGs were recovering (12 s of 30)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The cluster at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterSample {
    /// Seconds since the stage began (this machine's clock).
    pub t_s: f64,
    /// HEALTH_OK, HEALTH_WARN or HEALTH_ERR.
    pub health: String,
    /// The health checks raised (their codes), in Ceph's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    pub pgs: u64,
    /// The PGs not active+clean, by state (`active+undersized+degraded`: 21).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pgs_not_clean: std::collections::BTreeMap<String, u64>,
    pub osds: u64,
    pub osds_up: u64,
    pub osds_in: u64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub recovering_bytes_per_s: f64,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

impl ClusterSample {
    fn from_status(t_s: f64, s: &ClusterStatus) -> Self {
        let mut pgs_not_clean = std::collections::BTreeMap::new();
        for (state, n) in &s.pgs_by_state {
            if state != CLEAN {
                *pgs_not_clean.entry(state.clone()).or_insert(0) += n;
            }
        }
        ClusterSample {
            t_s,
            health: s.health.status.as_str().to_string(),
            checks: s
                .health
                .checks
                .iter()
                .filter(|c| !c.muted)
                .map(|c| c.code.clone())
                .collect(),
            pgs: s.num_pgs,
            pgs_not_clean,
            osds: s.num_osds,
            osds_up: s.num_up_osds,
            osds_in: s.num_in_osds,
            recovering_bytes_per_s: s.recovering_bytes_per_sec,
        }
    }

    /// PGs whose state has any of `words` among its `+`-joined parts.
    pub fn pgs_in_any(&self, words: &[&str]) -> u64 {
        ceph_status::pgs_in_any(
            self.pgs_not_clean.iter().map(|(s, n)| (s.as_str(), *n)),
            words,
        )
    }

    pub fn not_clean(&self) -> u64 {
        self.pgs_not_clean.values().sum()
    }
}

/// Runs `body` with the cluster watched beside it; the watch's samples and
/// its verdict. A watch that cannot start (no `ceph` CLI, no Python `rados`
/// module, the cluster unreachable) leaves the stage alone and says why.
pub fn beside<R>(conn: &CephConnection, body: impl FnOnce() -> R) -> (R, ClusterWatch) {
    let start = Instant::now();
    let epoch_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let mut sampler = match spawn(conn) {
        Ok(child) => child,
        Err(error) => {
            let result = body();
            return (
                result,
                ClusterWatch {
                    interval_s: INTERVAL.as_secs_f64(),
                    error: Some(error),
                    ..ClusterWatch::default()
                },
            );
        }
    };
    let watch = Arc::new(Mutex::new(ClusterWatch {
        interval_s: INTERVAL.as_secs_f64(),
        ..ClusterWatch::default()
    }));
    let stdout = sampler.stdout.take().expect("piped");
    let reader = {
        let watch = Arc::clone(&watch);
        std::thread::spawn(move || read_samples(stdout, epoch_start, &watch))
    };
    let result = body();
    let duration = start.elapsed().as_secs_f64();
    stop(&mut sampler);
    let _ = reader.join();
    let mut watch = std::mem::take(&mut *watch.lock().unwrap_or_else(|e| e.into_inner()));
    watch.unhealthy = validity::verdict(&watch.samples, duration);
    (result, watch)
}

/// The Python that runs `ceph` (its shebang, when it names a Python), else `python3`.
fn ceph_python() -> String {
    let from_shebang = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("ceph"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::File::open(p).ok())
            .and_then(|f| {
                let mut first = String::new();
                BufReader::new(f.take(256)).read_line(&mut first).ok()?;
                let interpreter = first.strip_prefix("#!")?.trim().to_string();
                // Only a Python: a `ceph` that is a wrapper script of some
                // other kind (a shell script around a container) would be
                // handed the sampler's source as its argument.
                let is_python = Path::new(&interpreter)
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python"));
                (Path::new(&interpreter).is_absolute() && !interpreter.contains(' ') && is_python)
                    .then_some(interpreter)
            })
    });
    from_shebang.unwrap_or_else(|| "python3".into())
}

fn spawn(conn: &CephConnection) -> Result<Child, String> {
    let python = ceph_python();
    Command::new(&python)
        .arg("-c")
        .arg(SAMPLER)
        .arg(INTERVAL.as_secs_f64().to_string())
        .arg(CALL_TIMEOUT.as_secs_f64().to_string())
        .args(conn.cli_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {python} for the cluster watch: {e}"))
}

/// Closes the sampler's stdin (it ends within a second), then kills it if it has not.
fn stop(child: &mut Child) {
    drop(child.stdin.take());
    let deadline = Instant::now() + CALL_TIMEOUT + INTERVAL;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[derive(Deserialize)]
struct Line {
    t: f64,
    #[serde(default)]
    status: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<String>,
    /// The manager's `pg stat`, when it answered.
    #[serde(default)]
    pg_stat: Option<serde_json::Value>,
}

fn read_samples(stdout: impl Read, epoch_start: f64, watch: &Mutex<ClusterWatch>) {
    let mut lines = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut lines).take(MAX_LINE).read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) if !line.ends_with(b"\n") => {
                // Over MAX_LINE: skip to the end of that line.
                let mut rest = Vec::new();
                if lines.read_until(b'\n', &mut rest).map_or(true, |n| n == 0) {
                    return;
                }
                note_error(watch, "a sample over 4 MiB was skipped".into());
                continue;
            }
            Ok(_) => {}
        }
        let sample = serde_json::from_slice::<Line>(&line)
            .map_err(|e| format!("unreadable sample: {e}"))
            .and_then(|l| {
                if let Some(error) = l.error {
                    return Err(crate::terminal::line(&error).chars().take(300).collect());
                }
                let status = l.status.ok_or("a sample without a status")?;
                let mut parsed =
                    ceph_status::parse(&status.to_string()).map_err(|e| e.to_string())?;
                if let Some(pgs) = &l.pg_stat {
                    let pgs =
                        ceph_status::parse_pg_stat(&pgs.to_string()).map_err(|e| e.to_string())?;
                    parsed = parsed.with_pgs(pgs);
                }
                let t_s = (l.t - epoch_start).max(0.0);
                Ok(ClusterSample::from_status(t_s, &parsed))
            });
        match sample {
            Ok(sample) => {
                let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
                if w.samples.len() < MAX_SAMPLES {
                    w.samples.push(sample);
                } else {
                    w.dropped += 1;
                }
            }
            Err(error) => note_error(watch, error),
        }
    }
}

fn note_error(watch: &Mutex<ClusterWatch>, error: String) {
    let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
    if w.error.is_none() {
        w.error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_lines_become_samples_and_errors_are_kept_once() {
        let status =
            include_str!("../../../../plugins/parsers/tests/data/ceph-status-16.2.15-local.json");
        let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
        let text = format!(
            "{}\n{}\n{}\nnot json\n",
            serde_json::json!({"t": 101.5, "status": status}),
            serde_json::json!({"t": 102.5, "error": "timed out"}),
            serde_json::json!({"t": 103.0, "error": "again"}),
        );
        let watch = Mutex::new(ClusterWatch::default());
        read_samples(text.as_bytes(), 100.0, &watch);
        let w = watch.into_inner().unwrap();
        assert_eq!(w.samples.len(), 1);
        let s = &w.samples[0];
        assert_eq!(
            (s.t_s, s.health.as_str(), s.pgs, s.osds_up),
            (1.5, "HEALTH_OK", 49, 3)
        );
        assert_eq!(s.not_clean(), 0);
        assert_eq!(w.error.as_deref(), Some("timed out"));
    }
}
