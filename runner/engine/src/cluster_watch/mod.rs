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

pub mod gateways;
pub mod osds;
pub mod validity;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipeline_parsers::ceph_status::{self, CLEAN, ClusterStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounded_series::{BoundedSeries, Merge, mean, merge_maps};
use crate::ceph::CephConnection;

pub(crate) const SAMPLER: &str = include_str!("sampler.py");

/// One sample a second.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Limit for connecting and for each `status`.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest line read from the sampler; a longer one (a cluster of thousands
/// of PG states?) is skipped, not buffered.
const MAX_LINE: u64 = 4 << 20;

/// What the cluster was doing during one stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterWatch {
    /// Seconds each sample after the first spans: 1, or on a stage longer
    /// than [`crate::bounded_series::MAX_POINTS`] seconds 2, 4, ... (its
    /// seconds merged so that memory stays bounded).
    pub interval_s: f64,
    /// In time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<ClusterSample>,
    /// Why there are no samples, or why some are missing (the first error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Set when the figures were measured while the cluster was not clean,
    /// e.g. "16 PGs were recovering (12 s of 30)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy: Option<String>,
    /// Each OSD over the stage (from the OSDs' own counters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub osds: Vec<osds::OsdActivity>,
    /// Each radosgw on this machine over the stage (from its admin socket).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<gateways::GatewayActivity>,
    /// Worth knowing beside the figures: an OSD much slower than the
    /// others, requests queued in a gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<String>,
    /// CPU time the sampler used (user + system, its start-up and
    /// connection included), as it reported when it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_cpu_s: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The cluster at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Each up OSD over the second before the sample, by id (from the
    /// second sample on; at most 64 OSDs are read).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub osd_ops: std::collections::BTreeMap<u32, osds::OsdSample>,
    /// Each radosgw on this machine over the second before the sample, by
    /// daemon name (from the second sample on).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub gateways: std::collections::BTreeMap<String, gateways::GatewaySample>,
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
            osd_ops: std::collections::BTreeMap::new(),
            gateways: std::collections::BTreeMap::new(),
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

/// Health severities, mildest first.
const HEALTH_ORDER: [&str; 3] = ["HEALTH_OK", "HEALTH_WARN", "HEALTH_ERR"];

impl Merge for ClusterSample {
    /// The worst of the span: its worst health, every check raised in it,
    /// each PG state at its highest count, the fewest OSDs up and in, so a
    /// condition that held for a second is still in the point that spans
    /// it. Rates are time-weighted means.
    fn merge(&mut self, later: &Self, a: f64, b: f64) {
        self.t_s = later.t_s;
        let rank = |h: &str| HEALTH_ORDER.iter().position(|x| *x == h);
        if rank(&later.health) >= rank(&self.health) {
            self.health = later.health.clone();
        }
        for check in &later.checks {
            if !self.checks.contains(check) {
                self.checks.push(check.clone());
            }
        }
        self.pgs = later.pgs;
        for (state, n) in &later.pgs_not_clean {
            let kept = self.pgs_not_clean.entry(state.clone()).or_insert(0);
            *kept = (*kept).max(*n);
        }
        self.osds = later.osds;
        self.osds_up = self.osds_up.min(later.osds_up);
        self.osds_in = self.osds_in.min(later.osds_in);
        self.recovering_bytes_per_s = mean(
            self.recovering_bytes_per_s,
            a,
            later.recovering_bytes_per_s,
            b,
        );
        merge_maps(&mut self.osd_ops, &later.osd_ops, a, b);
        merge_maps(&mut self.gateways, &later.gateways, a, b);
    }
}

/// The sampler of a run: one process, started at the first watched stage
/// and kept until the run ends (its Python start and connection cost
/// 0.04 CPU-s, paid once instead of at every stage). Between stages its
/// lines are read and dropped; a stage opens a window and gets the samples
/// of that window.
pub struct Sampler {
    child: Child,
    shared: Arc<Mutex<Shared>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// What the reader thread and the stages share.
#[derive(Default)]
struct Shared {
    /// The stage being watched; `None` between stages.
    window: Option<Window>,
    /// The CPU time the sampler reported with its latest line.
    cpu_s: f64,
    /// The sampler's output ended (it exited, or was killed).
    ended: bool,
}

/// One stage's samples as they come in.
struct Window {
    epoch_start: f64,
    cpu_at_open: f64,
    /// Everything but the samples, which are in `series`.
    watch: ClusterWatch,
    series: BoundedSeries<ClusterSample>,
    osd_deltas: osds::Deltas,
    gateway_deltas: gateways::Deltas,
}

impl Window {
    fn new(epoch_start: f64, cpu_at_open: f64) -> Window {
        Window {
            epoch_start,
            cpu_at_open,
            watch: ClusterWatch {
                interval_s: INTERVAL.as_secs_f64(),
                ..ClusterWatch::default()
            },
            series: BoundedSeries::default(),
            osd_deltas: osds::Deltas::default(),
            gateway_deltas: gateways::Deltas::default(),
        }
    }

    /// The stage's watch, its samples in.
    fn into_watch(self) -> ClusterWatch {
        let (samples, width) = self.series.finish();
        ClusterWatch {
            samples,
            interval_s: width as f64 * INTERVAL.as_secs_f64(),
            ..self.watch
        }
    }
}

impl Sampler {
    fn spawn(conn: &CephConnection, osds: bool) -> Result<Sampler, String> {
        let mut child = spawn(conn, osds)?;
        // It outlives the stage that started it: not a process the stage
        // left running.
        crate::orphans::spare(child.id() as i32);
        let stdout = child.stdout.take().expect("piped");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let reader = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || read_samples(stdout, &shared))
        };
        Ok(Sampler {
            child,
            shared,
            reader: Some(reader),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        stop(&mut self.child);
        crate::orphans::unspare(self.child.id() as i32);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Runs `body` with the cluster watched beside it (and each OSD's counters,
/// when `osds`) by the run's `sampler`, started here when there is none or
/// it has ended; the watch's samples and its verdict. A watch that cannot
/// start (no `ceph` CLI, no Python `rados` module, the cluster unreachable)
/// leaves the stage alone and says why.
pub fn beside<R>(
    sampler: &mut Option<Sampler>,
    conn: &CephConnection,
    osds: bool,
    body: impl FnOnce() -> R,
) -> (R, ClusterWatch) {
    if sampler.as_ref().is_some_and(|s| s.lock().ended) {
        *sampler = None;
    }
    // A sampler started here reads the cluster at once by itself.
    let started_now = sampler.is_none();
    if sampler.is_none() {
        match Sampler::spawn(conn, osds) {
            Ok(started) => *sampler = Some(started),
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
        }
    }
    let running = sampler.as_mut().expect("started above");
    let start = Instant::now();
    {
        let mut shared = running.lock();
        let cpu = shared.cpu_s;
        shared.window = Some(Window::new(epoch_now(), cpu));
    }
    // A line on its stdin makes the sampler read the cluster now, not at
    // its next second: the stage's first sample is its state as it began.
    if let Some(stdin) = running.child.stdin.as_mut().filter(|_| !started_now) {
        let _ = stdin.write_all(b"now\n").and_then(|()| stdin.flush());
    }
    let result = body();
    let duration = start.elapsed().as_secs_f64();
    let (mut watch, cpu_s) = {
        let mut shared = running.lock();
        let cpu_now = shared.cpu_s;
        let window = shared.window.take().expect("opened above");
        let cpu = (cpu_now >= window.cpu_at_open).then_some(cpu_now - window.cpu_at_open);
        let mut watch = window.into_watch();
        if shared.ended && watch.samples.is_empty() && watch.error.is_none() {
            watch.error = Some("the cluster sampler ended".into());
        }
        (watch, cpu)
    };
    watch.sampler_cpu_s = cpu_s.map(|c| (c * 1e3).round() / 1e3);
    watch.unhealthy = validity::verdict(&watch.samples, watch.interval_s, duration);
    watch.osds = osds::activity(&watch.samples, watch.interval_s);
    watch.observations = osds::slow_osds(&watch.osds);
    watch.gateways = gateways::activity(&watch.samples, watch.interval_s);
    watch.observations.extend(gateways::notes(&watch.gateways));
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

fn spawn(conn: &CephConnection, osds: bool) -> Result<Child, String> {
    let python = ceph_python();
    Command::new(&python)
        .arg("-c")
        .arg(SAMPLER)
        .arg(INTERVAL.as_secs_f64().to_string())
        .arg(CALL_TIMEOUT.as_secs_f64().to_string())
        .arg(if osds { "1" } else { "0" })
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
    /// The manager's `osd perf`.
    #[serde(default)]
    osd_perf: Option<serde_json::Value>,
    /// Each OSD's `perf dump osd`, by id.
    #[serde(default)]
    osd_counters: std::collections::BTreeMap<String, serde_json::Value>,
    /// Each local radosgw's `perf dump` counters, by daemon name.
    #[serde(default)]
    gateways: std::collections::BTreeMap<String, serde_json::Value>,
    /// The CPU time the sampler has used so far (every line has it; its
    /// last line, when it stops, has nothing else).
    #[serde(default)]
    cpu_s: Option<f64>,
}

/// Reads the sampler's lines until it ends: each one's CPU time, and while
/// a stage's window is open, its sample into the window.
fn read_samples(stdout: impl Read, shared: &Mutex<Shared>) {
    let mut lines = BufReader::new(stdout);
    let mut line = Vec::new();
    let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        line.clear();
        let read = (&mut lines).take(MAX_LINE).read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => {
                lock().ended = true;
                return;
            }
            Ok(_) if !line.ends_with(b"\n") => {
                // Over MAX_LINE: skip to the end of that line.
                let mut rest = Vec::new();
                if lines.read_until(b'\n', &mut rest).map_or(true, |n| n == 0) {
                    lock().ended = true;
                    return;
                }
                if let Some(w) = lock().window.as_mut() {
                    note_error(&mut w.watch, "a sample over 4 MiB was skipped".into());
                }
                continue;
            }
            Ok(_) => {}
        }
        let parsed = serde_json::from_slice::<Line>(&line);
        let mut shared = lock();
        if let Ok(Some(cpu_s)) = parsed.as_ref().map(|l| l.cpu_s)
            && cpu_s.is_finite()
            && cpu_s >= 0.0
        {
            shared.cpu_s = cpu_s;
        }
        let Some(window) = shared.window.as_mut() else {
            continue;
        };
        match parsed
            .map_err(|e| format!("unreadable sample: {e}"))
            .and_then(|l| window.sample(l))
        {
            Ok(None) => {}
            Ok(Some(sample)) => window.series.push(sample),
            Err(error) => note_error(&mut window.watch, error),
        }
    }
}

impl Window {
    /// The sample a line makes; `None` for a line with only the sampler's
    /// CPU time (its last, when it stops).
    fn sample(&mut self, mut l: Line) -> Result<Option<ClusterSample>, String> {
        if let Some(error) = l.error.take() {
            return Err(crate::terminal::line(&error).chars().take(300).collect());
        }
        // Read before the stage began (the sampler was mid-reading when
        // the window opened): the stage's own first reading follows.
        if l.t < self.epoch_start {
            return Ok(None);
        }
        let Some(status) = l.status.take() else {
            return if l.cpu_s.is_some() {
                Ok(None)
            } else {
                Err("a sample without a status".into())
            };
        };
        let mut parsed = ceph_status::parse(&status.to_string()).map_err(|e| e.to_string())?;
        if let Some(pgs) = &l.pg_stat {
            let pgs = ceph_status::parse_pg_stat(&pgs.to_string()).map_err(|e| e.to_string())?;
            parsed = parsed.with_pgs(pgs);
        }
        let t_s = (l.t - self.epoch_start).max(0.0);
        let mut sample = ClusterSample::from_status(t_s, &parsed);
        sample.osd_ops = osd_sample(&mut self.osd_deltas, t_s, &l);
        sample.gateways = self.gateway_deltas.sample(t_s, gateway_readings(&l));
        Ok(Some(sample))
    }
}

/// The OSDs' second before `t_s`. An OSD whose dump does not parse is left
/// out of that second (and differenced afresh later), as is the manager's
/// view when `osd perf` does not parse: nothing in a sample is guessed.
fn osd_sample(
    deltas: &mut osds::Deltas,
    t_s: f64,
    line: &Line,
) -> std::collections::BTreeMap<u32, osds::OsdSample> {
    use pipeline_parsers::osd_perf;
    let counters = line
        .osd_counters
        .iter()
        .filter_map(|(id, dump)| {
            let id = id.parse::<u32>().ok()?;
            let counters = osd_perf::parse_perf_dump(&dump.to_string()).ok()?;
            Some((id, counters))
        })
        .collect();
    let latencies = line
        .osd_perf
        .as_ref()
        .and_then(|v| osd_perf::parse_osd_perf(&v.to_string()).ok())
        .unwrap_or_default();
    deltas.sample(t_s, &counters, &latencies)
}

/// Each gateway's counters in a sample line; one whose dump is an error
/// or does not parse, or whose name is not a daemon's, is left out.
fn gateway_readings(
    line: &Line,
) -> std::collections::BTreeMap<String, pipeline_parsers::rgw_perf::Counters> {
    gateway_counters(&line.gateways)
}

/// Each gateway's counters in the sampler's `gateways` map (here, or the
/// answer of an inventory host's: [`crate::host_watch::remote`]); one whose
/// dump is an error or does not parse, or whose name is not a daemon's, is
/// left out, and at most 8 are kept.
pub fn gateway_counters(
    dumps: &std::collections::BTreeMap<String, serde_json::Value>,
) -> std::collections::BTreeMap<String, pipeline_parsers::rgw_perf::Counters> {
    dumps
        .iter()
        .filter(|(name, _)| gateways::plausible_name(name))
        .filter_map(|(name, dump)| {
            let counters = pipeline_parsers::rgw_perf::counters(&dump.to_string()).ok()?;
            Some((name.clone(), counters))
        })
        .take(8)
        .collect()
}

fn note_error(w: &mut ClusterWatch, error: String) {
    if w.error.is_none() {
        w.error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines read with a stage's window open from the start (its epoch
    /// at 100 s): its watch, and the sampler's last CPU time.
    fn window_of(text: &str) -> (ClusterWatch, f64) {
        let shared = Mutex::new(Shared {
            window: Some(Window::new(100.0, 0.0)),
            ..Shared::default()
        });
        read_samples(text.as_bytes(), &shared);
        let mut shared = shared.into_inner().unwrap();
        assert!(shared.ended, "the end of the output is the sampler's end");
        (shared.window.take().unwrap().into_watch(), shared.cpu_s)
    }

    #[test]
    fn lines_between_stages_are_dropped_but_their_cpu_time_is_kept() {
        let shared = Mutex::new(Shared::default());
        let line = serde_json::json!({"t": 1.0, "error": "not in a stage", "cpu_s": 0.05});
        read_samples(format!("{line}\n").as_bytes(), &shared);
        let shared = shared.into_inner().unwrap();
        assert!(shared.window.is_none() && shared.ended);
        assert_eq!(shared.cpu_s, 0.05);
    }

    #[test]
    fn sampler_lines_become_samples_and_errors_are_kept_once() {
        let status =
            include_str!("../../../../plugins/parsers/tests/data/ceph-status-16.2.15-local.json");
        let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
        let text = format!(
            "{}\n{}\n{}\nnot json\n{}\n",
            serde_json::json!({"t": 101.5, "status": status}),
            serde_json::json!({"t": 102.5, "error": "timed out"}),
            serde_json::json!({"t": 103.0, "error": "again"}),
            serde_json::json!({"t": 104.0, "cpu_s": 0.1234}),
        );
        let (w, cpu_s) = window_of(&text);
        assert_eq!(w.samples.len(), 1);
        let s = &w.samples[0];
        assert_eq!(
            (s.t_s, s.health.as_str(), s.pgs, s.osds_up),
            (1.5, "HEALTH_OK", 49, 3)
        );
        assert_eq!(s.not_clean(), 0);
        assert_eq!(w.error.as_deref(), Some("timed out"));
        assert_eq!(cpu_s, 0.1234);
    }

    /// A hostile or broken sampler: a line over 4 MiB is skipped, not
    /// buffered; a gateway named with escape codes and OSD dumps that are
    /// not numbers are left out; nothing panics.
    #[test]
    fn oversized_lines_and_hostile_names_are_left_out() {
        let status =
            include_str!("../../../../plugins/parsers/tests/data/ceph-status-16.2.15-local.json");
        let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
        let huge = format!("{{\"t\": 101, \"error\": \"{}\"}}", "x".repeat(5 << 20));
        let hostile = serde_json::json!({
            "t": 102.0,
            "status": status,
            "osd_counters": {"0": {"osd": {"op_w": "many"}}, "x": {"osd": {}}},
            "gateways": {"rgw\u{1b}[2J": {"rgw": {"req": 1, "failed_req": 0, "get": 0, "get_b": 0, "put": 0, "put_b": 0}}},
        });
        let (w, _) = window_of(&format!("{huge}\n{hostile}\n"));
        assert_eq!(w.error.as_deref(), Some("a sample over 4 MiB was skipped"));
        assert_eq!(w.samples.len(), 1);
        assert!(w.samples[0].osd_ops.is_empty() && w.samples[0].gateways.is_empty());
    }

    #[test]
    fn the_sampler_asks_for_every_counter_the_parser_reads() {
        for name in pipeline_parsers::osd_perf::COUNTERS {
            assert!(SAMPLER.contains(&format!("\"{name}\"")), "{name}");
        }
    }

    #[test]
    fn two_readings_of_an_osds_counters_give_its_second_and_the_stage() {
        let data = |f: &str| {
            let path = format!(
                "{}/../../plugins/parsers/tests/data/{f}",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(path).unwrap();
            serde_json::from_str::<serde_json::Value>(text.trim()).unwrap()
        };
        let status = data("ceph-status-16.2.15-local.json");
        let perf = data("ceph-osd-perf-16.2.15-local.json");
        // The captured dump (op_w 26, 2.41 s in all), then the same OSD 1 s
        // later with 100 more writes that took 0.5 s.
        let first = data("ceph-tell-osd-perf-dump-osd-16.2.15-local.json");
        let mut second = first.clone();
        let osd = &mut second["osd"];
        osd["op_w"] = serde_json::json!(126);
        osd["op_w_latency"]["avgcount"] = serde_json::json!(126);
        osd["op_w_latency"]["sum"] = serde_json::json!(2.406698043 + 0.5);
        osd["op_wip"] = serde_json::json!(4);
        let line = |t: f64, dump: &serde_json::Value| serde_json::json!({"t": t, "status": status, "osd_perf": perf, "osd_counters": {"1": dump}});
        let text = format!("{}\n{}\n", line(101.0, &first), line(102.0, &second));
        let (w, _) = window_of(&text);
        assert_eq!(w.samples.len(), 2);
        assert!(
            w.samples[0].osd_ops.is_empty(),
            "a first reading is a baseline"
        );
        let o = &w.samples[1].osd_ops[&1];
        assert_eq!((o.writes_per_s, o.reads_per_s), (100.0, 0.0));
        assert_eq!((o.write_latency_ms, o.ops_in_progress), (Some(5.0), 4));
        assert!(o.commit_latency_ms.is_some(), "osd perf lists osd.1");
        let activity = osds::activity(&w.samples, w.interval_s);
        assert_eq!(activity.len(), 1);
        assert_eq!(
            (activity[0].writes, activity[0].write_latency_ms),
            (100, Some(5.0))
        );
    }
}
