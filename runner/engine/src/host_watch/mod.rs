//! This machine's CPUs, disks and network interfaces beside each benchmark
//! stage, once a second from `/proc` ([`beside`]), and a verdict on what
//! limited the stage's figures ([`verdict`]): every core busy, one core
//! saturated while the others idled (a single-threaded client), a disk at
//! its utilisation limit, a NIC at its link speed. Also what a person
//! reading a figure wants to know next to it: CPU the hypervisor took
//! (steal) and TCP segments retransmitted.
//!
//! Reading the four files costs about 0.1 ms of CPU a second (README,
//! "What limited each figure"); no process is started.

pub mod manifest;
pub mod osd_disks;
pub mod procfs;
pub mod procs;
pub mod remote;
pub mod verdict;

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pipeline_stage_api::hosts::Host;

use crate::bounded_series::{BoundedSeries, Merge, mean, mean_of_events, merge_maps};
use crate::cluster_watch::gateways::{self, GatewayActivity, GatewaySample};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One sample a second.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// The watched processes are read every this many samples: a walk of every
/// PID costs 8 to 9 ms of CPU in a host's shell here, most of the 1%-of-a-
/// core budget if done every second; every fifth second it is 0.2%.
pub const PROCESS_EVERY: u64 = 5;
/// Longest `/proc` file read (a machine with thousands of devices is cut, not buffered whole).
const MAX_FILE: u64 = 4 << 20;

/// What one host's resources did during one stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostWatch {
    /// `local` (the machine the runner runs on), or an inventory host.
    pub host: String,
    /// Seconds each sample after the first spans: 1, or on a stage longer
    /// than [`crate::bounded_series::MAX_POINTS`] seconds 2, 4, ... (its
    /// seconds merged so that memory stays bounded).
    pub interval_s: f64,
    /// In time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<HostSample>,
    /// Who took the CPU: the Ceph daemons and benchmark clients by name,
    /// every [`PROCESS_EVERY`] seconds, in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<procs::ProcessPoint>,
    /// Each radosgw on this host over the stage (an inventory host's, read
    /// over SSH; this machine's are the cluster watch's). The runner also
    /// puts them in the stage's `cluster.gateways`, with this host's name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<GatewayActivity>,
    /// CPU the host's gateway reader used (its start-up included), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_reader_cpu_s: Option<f64>,
    /// Why there are no samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Resources at their limit for at least half the stage, each with how
    /// long: "every core of local ≥ 90% busy (28 s of 30)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limited_by: Vec<String>,
    /// Worth knowing beside the figures, not a limit: steal, retransmits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<String>,
    /// The host whose record says this one's CPU and disk findings: both
    /// are network namespaces of one machine (one boot_id), and read the
    /// same `/proc/stat` and `/proc/diskstats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_machine_as: Option<String>,
    /// CPU time the watch itself used (reading and parsing `/proc`), so its
    /// cost is on record beside what it measured.
    #[serde(default)]
    pub sampler_cpu_s: f64,
    /// What the host is (read at the stage's start); the runner keeps one
    /// per host for the run (`host_manifests`), not one per stage.
    #[serde(skip)]
    pub manifest: Option<manifest::HostManifest>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// One second of one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostSample {
    /// Seconds since the stage began (this machine's clock), at the end of the second.
    pub t_s: f64,
    /// Each core's busy share (user, system, irq, softirq), in %. Niced
    /// user time is apart (`cpu_nice_pct`): it yields the core to any
    /// normal-priority thread, so it did not take the core from the benchmark.
    pub cpu_busy_pct: Vec<f64>,
    /// Share of all cores' time waiting on I/O, in %.
    #[serde(default)]
    pub cpu_iowait_pct: f64,
    /// Share of all cores' time the hypervisor gave to other guests, in %.
    #[serde(default)]
    pub cpu_steal_pct: f64,
    /// Shares of all cores' time in user, system and softirq, in %.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_user_pct: f64,
    /// Share of all cores' time in niced processes' user mode, in %.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_nice_pct: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_system_pct: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_softirq_pct: f64,
    /// `/proc/meminfo`'s MemTotal and MemAvailable at the reading, bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_total_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_available_bytes: u64,
    /// The block devices that did I/O.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disks: BTreeMap<String, DiskSample>,
    /// The interfaces that moved bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nics: BTreeMap<String, NicSample>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tcp_retransmits: u64,
    /// Each radosgw on the host over the second before the sample, by
    /// daemon name (an inventory host's; from the second sample on).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gateways: BTreeMap<String, GatewaySample>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiskSample {
    /// Share of the second the device had I/O in flight, in %.
    pub util_pct: f64,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    /// I/Os completed in the second.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub reads_per_s: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub writes_per_s: f64,
    /// Mean time those I/Os took, queue included (iostat's await), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub await_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NicSample {
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    /// Packets dropped in the second, received and sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

/// Where readings come from: this machine's `/proc`, or a host's over SSH.
enum Source {
    Local,
    Remote(Box<remote::Session>),
}

impl Source {
    /// One reading, with the watched processes when `procs`.
    fn read(&mut self, procs: bool) -> Result<procfs::Snapshot, String> {
        match self {
            Source::Local => {
                let mut snapshot =
                    read_snapshot().ok_or_else(|| "/proc/stat is not readable".to_string())?;
                if procs {
                    snapshot.procs = Some(procs::parse(&procs::read_local()));
                }
                Ok(snapshot)
            }
            Source::Remote(session) => session.read(procs),
        }
    }

    /// Each gateway's counters, on an inventory host that has gateways.
    fn read_gateways(&mut self) -> Option<BTreeMap<String, pipeline_parsers::rgw_perf::Counters>> {
        let Source::Remote(session) = self else {
            return None;
        };
        let reading = session.gateways.as_mut()?.read();
        // A gateway session that ended (its Python killed?) is not asked again.
        reading.inspect_err(|_| session.gateways = None).ok()
    }

    /// What the host is; `None` when its session could not say.
    fn manifest(&mut self) -> Option<manifest::HostManifest> {
        match self {
            Source::Local => Some(manifest::local()),
            Source::Remote(session) => session.manifest().ok(),
        }
    }

    /// What each interface can carry.
    fn rates(&self, samples: &[HostSample]) -> BTreeMap<String, procfs::LinkRate> {
        match self {
            Source::Local => local_rates(samples),
            Source::Remote(session) => session.rates.clone(),
        }
    }
}

type Stop = Arc<(Mutex<bool>, Condvar)>;

/// Fewer samples than this on every host judge nothing (a stage of a
/// second or two: `ceph df`), neither a limit nor its absence.
pub const MIN_SAMPLES_TO_JUDGE: usize = 3;

/// The verdict when nothing was saturated: some host was watched for at
/// least [`MIN_SAMPLES_TO_JUDGE`] seconds and no host had a CPU, disk or NIC
/// at its limit, so the figures are what the cluster's latency allowed at
/// the stage's concurrency.
pub fn latency_bound(watches: &[HostWatch]) -> bool {
    watches
        .iter()
        .any(|w| w.samples.len() >= MIN_SAMPLES_TO_JUDGE)
        && watches.iter().all(|w| w.limited_by.is_empty())
}

/// Runs `body` with this machine and each of `remotes` watched beside it;
/// each host's samples and verdict, this machine first. A host that cannot
/// be watched (its session fails) gets a record that says why.
pub fn beside<R>(remotes: &[Host], body: impl FnOnce() -> R) -> (R, Vec<HostWatch>) {
    beside_live(remotes, None, &osd_disks::OsdDisks::default(), None, body)
}

/// As [`beside`], each second's sample of each host also handed to `live`
/// (`--metrics-listen`) as it is read; a saturated disk that serves one of
/// `osds` is named by it. With `gateway_conf` (the suite's ceph.conf path),
/// each inventory host's radosgw daemons are read too.
pub fn beside_live<R>(
    remotes: &[Host],
    live: Option<Arc<crate::live_metrics::LiveMetrics>>,
    osds: &osd_disks::OsdDisks,
    gateway_conf: Option<&str>,
    body: impl FnOnce() -> R,
) -> (R, Vec<HostWatch>) {
    let start = Instant::now();
    let stop: Stop = Arc::new((Mutex::new(false), Condvar::new()));
    let mut running = Vec::new();
    let mut failed = Vec::new();
    let mut sources = vec![(crate::hosts::LOCAL.to_string(), Ok(Source::Local))];
    for host in remotes.iter().filter(|h| !h.is_local()) {
        let source = remote::Session::open(host).map(|s| Source::Remote(Box::new(s)));
        sources.push((host.name.clone(), source));
    }
    for (name, source) in sources {
        match source {
            Ok(source) => {
                let child = match &source {
                    Source::Remote(session) => Some(session.clients.clone()),
                    Source::Local => None,
                };
                let stop = Arc::clone(&stop);
                let live = live.clone().map(|l| (l, name.clone()));
                let conf = gateway_conf.map(str::to_string);
                let thread = std::thread::spawn(move || {
                    sample_until(&stop, start, source, live.as_ref(), conf.as_deref())
                });
                running.push((name, child, thread));
            }
            Err(error) => failed.push(HostWatch {
                host: name,
                error: Some(error),
                ..HostWatch::default()
            }),
        }
    }
    let result = body();
    let duration = start.elapsed().as_secs_f64();
    {
        let (lock, cvar) = &*stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cvar.notify_all();
    }
    let mut watches = Vec::new();
    for (name, child, thread) in running {
        // A host that stopped answering holds its thread in a read: its
        // session is killed after a grace, which ends the read.
        let grace = Instant::now() + INTERVAL * 3;
        while !thread.is_finished() && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(clients) = &child
            && !thread.is_finished()
        {
            clients.kill();
        }
        let (mut watch, rates) = thread.join().unwrap_or_else(|_| {
            (
                HostWatch {
                    error: Some("the host sampler panicked".into()),
                    ..HostWatch::default()
                },
                BTreeMap::new(),
            )
        });
        if let Some(clients) = &child {
            clients.end();
        }
        watch.host = name;
        let osds_on = watch
            .manifest
            .as_ref()
            .and_then(|m| m.hostname.as_deref())
            .map(|hostname| osds.on_host(hostname))
            .unwrap_or_default();
        let found = verdict::verdict(
            &watch.host,
            &watch.samples,
            watch.interval_s,
            &watch.processes,
            duration,
            &rates,
            &osds_on,
        );
        watch.limited_by = found.limited_by;
        watch.observations = found.observations;
        watches.push(watch);
    }
    one_finding_per_kernel(&mut watches);
    watches.extend(failed);
    (result, watches)
}

/// Hosts that show one boot_id are network namespaces of one machine (as a
/// lab's hosts are): they share its CPUs and block devices, and each reads
/// the same /proc/stat and /proc/diskstats. Their CPU and disk findings are
/// the machine's, so they are said once, on the first of those hosts (this
/// machine, when it is one of them), naming the others. A NIC belongs to its
/// namespace, so network findings stay with their host.
fn one_finding_per_kernel(watches: &mut [HostWatch]) {
    let machine_wide =
        |finding: &String| finding.starts_with("CPU: ") || finding.starts_with("disk: ");
    let mut first_of: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut sharing: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (i, watch) in watches.iter_mut().enumerate() {
        let Some(boot) = watch.manifest.as_ref().and_then(|m| m.boot_id.clone()) else {
            continue;
        };
        match first_of.get(&boot) {
            Some((first, first_host)) => {
                sharing.entry(*first).or_default().push(watch.host.clone());
                watch.limited_by.retain(|f| !machine_wide(f));
                watch.same_machine_as = Some(first_host.clone());
            }
            None => {
                first_of.insert(boot, (i, watch.host.clone()));
            }
        }
    }
    for (first, others) in sharing {
        let said = format!("; one machine with {}", others.join(", "));
        for finding in watches[first]
            .limited_by
            .iter_mut()
            .filter(|f| machine_wide(f))
        {
            finding.push_str(&said);
        }
    }
}

/// Reads the counters once a second until told to stop, and once more then
/// (so the stage's last part is in), each reading a sample of the second
/// before. Also returns what the source knows of its interfaces' rates.
fn sample_until(
    stop: &(Mutex<bool>, Condvar),
    start: Instant,
    mut source: Source,
    live: Option<&(Arc<crate::live_metrics::LiveMetrics>, String)>,
    gateway_conf: Option<&str>,
) -> (HostWatch, BTreeMap<String, procfs::LinkRate>) {
    let cpu_at_start = thread_cpu_s();
    let mut series = BoundedSeries::default();
    let mut processes = BoundedSeries::default();
    let mut watch = sample_loop(
        stop,
        start,
        &mut source,
        live,
        gateway_conf,
        &mut series,
        &mut processes,
    );
    let (samples, width) = series.finish();
    watch.samples = samples;
    watch.processes = processes.finish().0;
    watch.interval_s = width as f64 * INTERVAL.as_secs_f64();
    watch.gateways = gateways::activity_of(
        watch.samples.iter().map(|s| (s.t_s, &s.gateways)),
        watch.interval_s,
    );
    if let Source::Remote(session) = &source {
        watch.gateway_reader_cpu_s = session.gateways.as_ref().and_then(|g| g.cpu_s);
    }
    watch.sampler_cpu_s = ((thread_cpu_s() - cpu_at_start) * 1e6).round() / 1e6;
    let rates = source.rates(&watch.samples);
    if let Source::Remote(session) = source {
        // Its stdin closes here: the shell on the host ends.
        drop(session);
    }
    (watch, rates)
}

/// This thread's CPU time (user + system), in seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The watch's record but its samples, which go into `series`.
fn sample_loop(
    stop: &(Mutex<bool>, Condvar),
    start: Instant,
    source: &mut Source,
    live: Option<&(Arc<crate::live_metrics::LiveMetrics>, String)>,
    gateway_conf: Option<&str>,
    series: &mut BoundedSeries<HostSample>,
    processes: &mut BoundedSeries<procs::ProcessPoint>,
) -> HostWatch {
    let mut watch = HostWatch::default();
    let mut gateway_deltas = gateways::Deltas::default();
    let mut readings: u64 = 0;
    let mut before = match source.read(true) {
        Ok(s) => s,
        Err(e) => {
            watch.error = Some(e);
            return watch;
        }
    };
    let mut before_at = Instant::now();
    let mut procs_before = before.procs.take().map(|p| (p, before_at));
    // Inside the first second: its rates use the time that really passed.
    watch.manifest = source.manifest();
    if let (Source::Remote(session), Some(conf)) = (&mut *source, gateway_conf) {
        session.open_gateways(conf);
    }
    if let Some(readings) = source.read_gateways() {
        // The baseline each gateway's first second is counted from.
        gateway_deltas.sample(start.elapsed().as_secs_f64(), readings);
    }
    let mut next = before_at + INTERVAL;
    loop {
        let stopped = {
            let (lock, cvar) = stop;
            let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*done {
                let left = next.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                done = cvar
                    .wait_timeout(done, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *done
        };
        let seconds = before_at.elapsed().as_secs_f64();
        // A stage's tail shorter than a fifth of a second says little; it is not a sample.
        if !stopped || seconds >= 0.2 {
            readings += 1;
            // The last reading has them too: the stage's tail is in.
            let with_procs = stopped || readings.is_multiple_of(PROCESS_EVERY);
            match source.read(with_procs) {
                Ok(mut after) => {
                    // Stamped when the reading is complete: the runner's clock for every host.
                    let now = Instant::now();
                    if let Some(procs_after) = after.procs.take() {
                        if let Some((procs_then, then)) = &procs_before {
                            let span_s = now.duration_since(*then).as_secs_f64();
                            processes.push(procs::ProcessPoint {
                                t_s: (now.duration_since(start).as_secs_f64() * 1000.0).round()
                                    / 1000.0,
                                span_s: (span_s * 1000.0).round() / 1000.0,
                                by_name: procs::between(procs_then, &procs_after, span_s),
                            });
                        }
                        procs_before = Some((procs_after, now));
                    }
                    let seconds = now.duration_since(before_at).as_secs_f64();
                    let t_s = now.duration_since(start).as_secs_f64();
                    let mut sample = procfs::between(&before, &after, seconds, t_s);
                    if let Some(readings) = source.read_gateways() {
                        let read_at = start.elapsed().as_secs_f64();
                        sample.gateways = gateway_deltas.sample(read_at, readings);
                    }
                    if let Some((live, host)) = live {
                        live.host_sample(host, &sample);
                    }
                    series.push(sample);
                    before = after;
                    before_at = now;
                }
                Err(e) => {
                    let at = start.elapsed().as_secs_f64();
                    watch.error = Some(format!("{e} at {at:.0} s"));
                    return watch;
                }
            }
        }
        if stopped {
            return watch;
        }
        next += INTERVAL;
        // After a stall (a suspended machine, a slow host), the next reading is a second from now.
        let now = Instant::now();
        if next < now {
            next = now + INTERVAL;
        }
    }
}

fn read_bounded(path: &str) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn read_snapshot() -> Option<procfs::Snapshot> {
    let stat = read_bounded("/proc/stat")?;
    let mut snapshot = procfs::snapshot(
        &stat,
        &read_bounded("/proc/net/dev").unwrap_or_default(),
        &read_bounded("/proc/net/snmp").unwrap_or_default(),
        &read_bounded("/proc/diskstats").unwrap_or_default(),
        &read_bounded("/proc/meminfo").unwrap_or_default(),
    );
    // Whole devices only (a partition's I/O is its disk's too), as /sys/block lists them.
    snapshot
        .disks
        .retain(|name, _| std::path::Path::new("/sys/block").join(name).exists());
    Some(snapshot)
}

/// The link speed and egress shaping of each interface the samples name,
/// on this machine (`/sys/class/net/IF/speed`, `tc -j qdisc show`, once per stage).
impl Merge for HostSample {
    /// Shares and rates: time-weighted means; retransmits and drops:
    /// summed; available memory: its lowest.
    fn merge(&mut self, later: &Self, a: f64, b: f64) {
        self.t_s = later.t_s;
        let cores = self.cpu_busy_pct.len().max(later.cpu_busy_pct.len());
        self.cpu_busy_pct = (0..cores)
            .map(|i| {
                let x = self.cpu_busy_pct.get(i).copied().unwrap_or(0.0);
                let y = later.cpu_busy_pct.get(i).copied().unwrap_or(0.0);
                mean(x, a, y, b)
            })
            .collect();
        for (mine, theirs) in [
            (&mut self.cpu_iowait_pct, later.cpu_iowait_pct),
            (&mut self.cpu_steal_pct, later.cpu_steal_pct),
            (&mut self.cpu_user_pct, later.cpu_user_pct),
            (&mut self.cpu_nice_pct, later.cpu_nice_pct),
            (&mut self.cpu_system_pct, later.cpu_system_pct),
            (&mut self.cpu_softirq_pct, later.cpu_softirq_pct),
        ] {
            *mine = mean(*mine, a, theirs, b);
        }
        if later.memory_total_bytes > 0 {
            self.memory_available_bytes = if self.memory_total_bytes > 0 {
                self.memory_available_bytes
                    .min(later.memory_available_bytes)
            } else {
                later.memory_available_bytes
            };
            self.memory_total_bytes = later.memory_total_bytes;
        }
        merge_maps(&mut self.disks, &later.disks, a, b);
        merge_maps(&mut self.nics, &later.nics, a, b);
        merge_maps(&mut self.gateways, &later.gateways, a, b);
        self.tcp_retransmits += later.tcp_retransmits;
    }
}

impl Merge for DiskSample {
    /// Rates and utilisation: time-weighted means; await: weighted by the I/Os.
    fn merge(&mut self, l: &Self, a: f64, b: f64) {
        self.await_ms = mean_of_events(
            self.await_ms,
            (self.reads_per_s + self.writes_per_s) * a,
            l.await_ms,
            (l.reads_per_s + l.writes_per_s) * b,
        );
        self.util_pct = mean(self.util_pct, a, l.util_pct, b);
        self.read_bytes_per_s = mean(self.read_bytes_per_s, a, l.read_bytes_per_s, b);
        self.write_bytes_per_s = mean(self.write_bytes_per_s, a, l.write_bytes_per_s, b);
        self.reads_per_s = mean(self.reads_per_s, a, l.reads_per_s, b);
        self.writes_per_s = mean(self.writes_per_s, a, l.writes_per_s, b);
    }
}

impl Merge for NicSample {
    /// Rates: time-weighted means; drops: summed.
    fn merge(&mut self, l: &Self, a: f64, b: f64) {
        self.rx_bytes_per_s = mean(self.rx_bytes_per_s, a, l.rx_bytes_per_s, b);
        self.tx_bytes_per_s = mean(self.tx_bytes_per_s, a, l.tx_bytes_per_s, b);
        self.dropped += l.dropped;
    }
}

fn local_rates(samples: &[HostSample]) -> BTreeMap<String, procfs::LinkRate> {
    let mut names: Vec<&String> = samples.iter().flat_map(|s| s.nics.keys()).collect();
    names.sort();
    names.dedup();
    let mut speeds = String::new();
    for n in names {
        if let Some(mbit) = read_bounded(&format!("/sys/class/net/{n}/speed")) {
            speeds.push_str(&format!("{n} {}\n", mbit.trim()));
        }
    }
    let mut rates = BTreeMap::new();
    procfs::parse_speeds(&speeds, &mut rates);
    let tc = std::process::Command::new("tc")
        .args(["-j", "qdisc", "show"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    if let Ok(out) = tc {
        let json: String = String::from_utf8_lossy(&out.stdout)
            .chars()
            .take(MAX_FILE as usize)
            .collect();
        procfs::parse_tc_qdiscs(&json, &mut rates);
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_of_two_seconds_has_two_or_three_samples_of_this_machine() {
        let (value, watches) = beside(&[], || {
            std::thread::sleep(Duration::from_millis(2100));
            7
        });
        assert_eq!(value, 7);
        assert_eq!(watches.len(), 1);
        let watch = &watches[0];
        assert_eq!(watch.host, "local");
        assert!((2..=3).contains(&watch.samples.len()), "{watch:?}");
        let cores = procfs::parse_stat(&read_bounded("/proc/stat").unwrap()).len();
        for s in &watch.samples {
            assert_eq!(s.cpu_busy_pct.len(), cores, "{s:?}");
            assert!(s.cpu_busy_pct.iter().all(|p| (0.0..=100.0).contains(p)));
        }
        assert!(watch.samples.windows(2).all(|w| w[0].t_s < w[1].t_s));
    }

    #[test]
    fn hosts_of_one_machine_say_its_cpu_and_disk_findings_once() {
        let watched = |host: &str, boot: &str, limits: &[&str]| HostWatch {
            host: host.into(),
            limited_by: limits.iter().map(|l| l.to_string()).collect(),
            manifest: Some(manifest::HostManifest {
                boot_id: (!boot.is_empty()).then(|| boot.to_string()),
                ..Default::default()
            }),
            ..HostWatch::default()
        };
        let disk = "disk: loop0 of {} ≥ 90% utilised (9 s of 12)";
        let of = |h: &str| disk.replace("{}", h);
        let mut watches = vec![
            watched("local", "a", &[&of("local")]),
            watched(
                "client1",
                "a",
                &[&of("client1"), "network: eth0 of client1 sent ≥ 90%"],
            ),
            watched("node1", "a", &[&of("node1")]),
            watched("far", "b", &[&of("far")]),
            watched("unknown", "", &[&of("unknown")]),
        ];
        one_finding_per_kernel(&mut watches);
        let judged_on: Vec<Option<&str>> = watches
            .iter()
            .map(|w| w.same_machine_as.as_deref())
            .collect();
        assert_eq!(judged_on, [None, Some("local"), Some("local"), None, None]);
        let limits: Vec<Vec<String>> = watches.into_iter().map(|w| w.limited_by).collect();
        assert_eq!(
            limits,
            [
                vec![of("local") + "; one machine with client1, node1"],
                vec!["network: eth0 of client1 sent ≥ 90%".to_string()],
                vec![],
                vec![of("far")],
                vec![of("unknown")],
            ]
        );
    }

    #[test]
    fn latency_bound_needs_enough_seconds_and_no_limit_on_any_host() {
        let watched = |samples: usize, limited: &[&str]| HostWatch {
            samples: vec![HostSample::default(); samples],
            limited_by: limited.iter().map(|l| l.to_string()).collect(),
            ..HostWatch::default()
        };
        assert!(latency_bound(&[watched(3, &[]), watched(0, &[])]));
        assert!(!latency_bound(&[watched(2, &[])]), "too short to judge");
        assert!(!latency_bound(&[watched(5, &[]), watched(5, &["disk"])]));
        assert!(!latency_bound(&[]));
    }
}
