//! The load engine of `s3-bench` and `swift-bench`: PUT, GET or a weighted
//! mix against an object gateway through a [`Store`] (the S3 or the Swift
//! client), HDR latency histograms per operation, per-second series, errors
//! counted by kind and the client's own CPU. GET and mixed workloads prefill
//! the objects first (reported as the `prefill` phase); a warm-up is
//! excluded from the figures.
//!
//! [`run`] removes what it wrote before it returns, after a failure or a
//! Ctrl-C too: the buckets (containers) it created, emptied first, or in a
//! pre-existing `bucket:` only the keys under this run's prefix.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline_model::{Aggregate, Direction, Histogram, HistogramError, Metric, unit};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, MetricSpec, StageError, StageOutput};
use pipeline_stage_api::typed::{ByteSize, Seconds};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::client::{OpError, Payload};
use super::recorder::{MIB, Op, Phase, Recorder, stored};
use super::store::Store;
use super::{S3_BUCKET, S3_OBJECTS, bucket_name, key_prefix};

/// The load parameters `s3-bench` and `swift-bench` share (flattened into
/// each stage's `with:` beside its credentials).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct LoadConfig {
    /// What the requests do: `put`, `get`, `head` or `list` (the last three after a prefill), or `mixed` (weights in `mix`, after a prefill).
    #[serde(default)]
    pub workload: Workload,
    /// Weights of the operations of a `mixed` workload.
    #[serde(default)]
    pub mix: Mix,
    /// Size of every object (unless `object_sizes` or `object_size_range` is given).
    #[serde(default = "four_kib")]
    pub object_size: ByteSize,
    /// Sizes with weights instead of one size, e.g. `[{size: 4K, weight: 9}, {size: 1M, weight: 1}]`. Each key keeps its size for the run, so a GET checks what was PUT.
    #[serde(default)]
    pub object_sizes: Vec<WeightedSize>,
    /// Objects of this size or larger are PUT in parts: S3 multipart uploads, Swift segmented (dynamic large) objects. Latency is reported per whole object (`put`) and per part (`put-part`).
    #[serde(default)]
    pub multipart_threshold: Option<ByteSize>,
    /// Size of each part of a multipart PUT (at least 5 MiB, as S3 and radosgw require of all but the last).
    #[serde(default = "eight_mib")]
    pub part_size: ByteSize,
    /// Sizes spread evenly between `min` and `max` instead of one size. On S3 their bodies are signed `UNSIGNED-PAYLOAD` (hashing every length would cost the client more than the request).
    #[serde(default)]
    pub object_size_range: Option<SizeRange>,
    /// Requests in flight.
    #[serde(default = "sixteen")]
    pub concurrency: u32,
    /// How long the measured phase lasts (unless `operations` is set).
    #[serde(default = "ten_seconds")]
    pub duration: Seconds,
    /// Stop after this many measured operations instead of after `duration`.
    #[serde(default)]
    pub operations: Option<u64>,
    /// Load before the measured phase, excluded from the figures.
    #[serde(default = "no_time")]
    pub warmup: Seconds,
    /// Buckets the keys spread over (one bucket's index slows PUTs as it grows).
    #[serde(default = "one")]
    pub buckets: u32,
    /// Keys per bucket: the objects GET reads and PUT (over)writes.
    #[serde(default = "thousand")]
    pub objects_per_bucket: u32,
    /// Use this existing bucket instead of creating buckets: it is never deleted, and only this run's keys (its prefix) are removed from it.
    #[serde(default)]
    pub bucket: Option<String>,
    /// Threads of the client's runtime (the cores the load generator may use).
    #[serde(default = "two")]
    pub worker_threads: u32,
    /// A request not answered within this time counts as a `timeout` error.
    #[serde(default = "thirty_seconds")]
    pub request_timeout: Seconds,
    /// Share of failed requests (0..1) the stage tolerates; above it the stage fails with the counts. 0: any error fails it.
    #[serde(default)]
    pub max_error_rate: f64,
    /// Target operations per second of all requests together (default: as fast as `concurrency` allows). Requests then follow a fixed schedule and latency counts from each one's intended start, so a gateway that falls behind shows its queue instead of hiding it (coordinated omission).
    #[serde(default)]
    pub rate: Option<f64>,
    /// End the measured phase early once throughput is steady, like fio's `steadystate` and warp's `--autoterm`: when every second of the last `window` is within `within` percent of their mean. `duration` stays the limit; the report says whether steady state was reached.
    #[serde(default)]
    pub steady_state: Option<SteadyState>,
    /// With `on:` client hosts: what a host lost mid-run (its worker died, its SSH session broke, or it went silent) does: `fail` the stage (default), or `exclude` it: the other hosts' figures are reported, host=all without it, and the report says so.
    #[serde(default)]
    pub lost_hosts: LostHosts,
    /// With `on:` client hosts: a worker that sends nothing for this long (it says `alive` every second) counts as lost.
    #[serde(default = "ten_seconds")]
    pub worker_silence: Seconds,
}

/// What a client host lost mid-run does to the stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LostHosts {
    /// The stage fails, naming the host; the other workers are stopped.
    #[default]
    Fail,
    /// The stage reports the other hosts, marked as without the lost one.
    Exclude,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    #[default]
    Put,
    Get,
    /// HEAD of existing objects (metadata only).
    Head,
    /// One listing page (up to 1000 keys) of this run's prefix per request.
    List,
    Mixed,
}

/// One object size of a mix, and how often it comes.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightedSize {
    pub size: ByteSize,
    #[serde(default = "one")]
    pub weight: u32,
}

/// The smallest and the largest object size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SizeRange {
    pub min: ByteSize,
    pub max: ByteSize,
}

/// Largest object a run may write: the payload is kept in memory once.
const MAX_OBJECT_BYTES: u64 = 1 << 30;

/// When throughput counts as steady.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SteadyState {
    /// The seconds that must agree (default 10 s).
    #[serde(default = "ten_seconds")]
    pub window: Seconds,
    /// How far (percent) each second may be from their mean (default 5).
    #[serde(default = "five")]
    pub within: f64,
}

fn five() -> f64 {
    5.0
}

impl SteadyState {
    /// Whether the last `window` seconds of `per_second` are steady.
    fn reached(&self, per_second: &[f64]) -> bool {
        let w = self.window.0.as_secs() as usize;
        if w == 0 || per_second.len() < w {
            return false;
        }
        let last = &per_second[per_second.len() - w..];
        let mean = last.iter().sum::<f64>() / w as f64;
        mean > 0.0
            && last
                .iter()
                .all(|x| (x - mean).abs() <= self.within / 100.0 * mean)
    }
}

/// Weights of the operations of a mixed workload.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mix {
    #[serde(default)]
    pub get: u32,
    #[serde(default)]
    pub put: u32,
    #[serde(default)]
    pub delete: u32,
    #[serde(default)]
    pub head: u32,
    #[serde(default)]
    pub list: u32,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            get: 60,
            put: 30,
            delete: 10,
            head: 0,
            list: 0,
        }
    }
}

fn four_kib() -> ByteSize {
    ByteSize::kib(4)
}
fn eight_mib() -> ByteSize {
    ByteSize::mib(8)
}
fn sixteen() -> u32 {
    16
}
fn ten_seconds() -> Seconds {
    Seconds::secs(10)
}
fn thirty_seconds() -> Seconds {
    Seconds::secs(30)
}
fn no_time() -> Seconds {
    Seconds::secs(0)
}
fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}
fn thousand() -> u32 {
    1000
}

impl LoadConfig {
    fn needs_prefill(&self) -> bool {
        match self.workload {
            Workload::Put => false,
            Workload::Get | Workload::Head | Workload::List => true,
            Workload::Mixed => {
                let m = &self.mix;
                m.get + m.delete + m.head + m.list > 0
            }
        }
    }

    /// The size of the object at key `index`: fixed for the run, so a GET
    /// knows what a PUT wrote.
    fn size_of(&self, index: usize) -> usize {
        let r = splitmix64(index as u64);
        if let Some(range) = &self.object_size_range {
            let span = range.max.0 - range.min.0 + 1;
            return (range.min.0 + r % span) as usize;
        }
        let total: u64 = self.object_sizes.iter().map(|w| u64::from(w.weight)).sum();
        if total == 0 {
            return self.object_size.0 as usize;
        }
        let mut pick = r % total;
        for w in &self.object_sizes {
            if pick < u64::from(w.weight) {
                return w.size.0 as usize;
            }
            pick -= u64::from(w.weight);
        }
        self.object_size.0 as usize
    }

    fn largest_object(&self) -> usize {
        if let Some(r) = &self.object_size_range {
            return r.max.0 as usize;
        }
        self.object_sizes
            .iter()
            .map(|w| w.size.0 as usize)
            .max()
            .unwrap_or(self.object_size.0 as usize)
    }

    /// The object sizes whose body hash is computed once (all but a range's).
    fn hashed_sizes(&self) -> Vec<usize> {
        if self.object_size_range.is_some() {
            return Vec::new();
        }
        if self.object_sizes.is_empty() {
            return vec![self.object_size.0 as usize];
        }
        self.object_sizes
            .iter()
            .map(|w| w.size.0 as usize)
            .collect()
    }

    fn describe_sizes(&self) -> String {
        if let Some(r) = &self.object_size_range {
            return format!("objects of {} to {} B", r.min.0, r.max.0);
        }
        if self.object_sizes.is_empty() {
            return format!("{} B objects", self.object_size.0);
        }
        let total: u32 = self.object_sizes.iter().map(|w| w.weight).sum();
        let parts: Vec<String> = self
            .object_sizes
            .iter()
            .map(|w| {
                format!(
                    "{} B ({:.0}%)",
                    w.size.0,
                    100.0 * f64::from(w.weight) / f64::from(total.max(1))
                )
            })
            .collect();
        format!("objects of {}", parts.join(", "))
    }

    fn slots(&self) -> usize {
        self.buckets as usize * self.objects_per_bucket as usize
    }

    fn describe_workload(&self) -> String {
        let what = match self.workload {
            Workload::Put => "PUT".to_string(),
            Workload::Get => "GET".to_string(),
            Workload::Head => "HEAD".to_string(),
            Workload::List => "LIST".to_string(),
            Workload::Mixed => {
                let m = &self.mix;
                format!(
                    "mixed get:put:delete:head:list = {}:{}:{}:{}:{}",
                    m.get, m.put, m.delete, m.head, m.list
                )
            }
        };
        let length = match self.operations {
            Some(n) => format!("{n} operations"),
            None => format!("{} s", self.duration.as_secs_f64()),
        };
        let rate = self
            .rate
            .map(|r| format!(" at a target rate of {r} ops/s"))
            .unwrap_or_default();
        format!(
            "{what} of {}, {} in flight{rate}, {length} after {} s warm-up, {} bucket(s) x {} keys",
            self.describe_sizes(),
            self.concurrency,
            self.warmup.as_secs_f64(),
            self.buckets,
            self.objects_per_bucket
        )
    }
}

/// What `s3-bench` and `swift-bench` say about themselves, but their name
/// and summary.
pub fn about(name: &'static str, summary: &'static str) -> pipeline_stage_api::typed::About {
    pipeline_stage_api::typed::About {
        name,
        summary,
        // It orchestrates its client hosts itself (`super::clients`).
        per_host: false,
        requires: Vec::new(),
        outputs: Vec::new(),
        metrics: metric_specs(),
    }
}

/// The metrics both stages report.
pub fn metric_specs() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new(
            "ops_per_s",
            unit::OPS_PER_S,
            "Operations per second, per `op` and `phase` (prefill, measure).",
        ),
        MetricSpec::new(
            "bandwidth",
            unit::MIB_PER_S,
            "Payload MiB/s, per `op` and `phase`.",
        ),
        MetricSpec::new(
            "ops",
            unit::COUNT,
            "Operations completed, per `op` and `phase` (prefill, warmup, measure).",
        ),
        MetricSpec::new(
            "bytes",
            unit::BYTES,
            "Payload bytes moved, per `op` and `phase`.",
        ),
        MetricSpec::new(
            "latency_mean",
            unit::MICROSECONDS,
            "Mean latency; also latency_p50/p90/p99/p99_9/max (from the HDR histogram `latency`).",
        ),
        MetricSpec::new(
            "ttfb_mean",
            unit::MICROSECONDS,
            "GET time to first byte; also ttfb_p50/p90/p99/p99_9/max (histogram `ttfb`).",
        ),
        MetricSpec::new(
            "errors",
            unit::COUNT,
            "Failed requests, per `op`, `phase` and `kind` (http-STATUS, timeout, connection-reset, connect, data-mismatch, other).",
        ),
        MetricSpec::new(
            "client_cpu_seconds",
            unit::SECONDS,
            "User+system CPU of the client process in the measured phase; also client_cpu_per_1000_ops.",
        ),
        MetricSpec::new(
            "gateway_cpu_seconds",
            unit::SECONDS,
            "User+system CPU of the radosgw processes of this machine in the measured phase, when the endpoint is on loopback; also gateway_cpu_per_1000_ops.",
        ),
        MetricSpec::new(
            "steady_state",
            unit::COUNT,
            "With `steady_state`: 1 when it was reached (the run ended there), 0 when not.",
        ),
        MetricSpec::new(
            "target_rate",
            unit::OPS_PER_S,
            "The `rate` asked for (only with one); ops_per_s is what was achieved.",
        ),
        MetricSpec::new(
            "warmup_seconds",
            unit::SECONDS,
            "Length of the warm-up excluded from the figures; also prefill_seconds, measure_seconds.",
        ),
    ]
}

impl LoadConfig {
    /// Problems with the load parameters and the stage's gateway URL
    /// (`url_param`, plain `http://` only), as `(parameter, message)`.
    pub fn check_with_url(
        &self,
        stage: &str,
        url_param: &str,
        url: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut p = Vec::new();
        if url.is_some_and(|u| !u.starts_with("http://")) {
            p.push((
                url_param.to_string(),
                format!("must start with http:// ({stage} speaks plain HTTP; TLS comes later)"),
            ));
        }
        p.extend(self.check());
        p
    }

    /// Problems with the load parameters, as `(parameter, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut p: Vec<(String, String)> = Vec::new();
        let mut bad = |name: &str, message: &str| p.push((name.into(), message.into()));
        if self.concurrency < 1 {
            bad("concurrency", "must be at least 1");
        }
        if self.worker_threads < 1 {
            bad("worker_threads", "must be at least 1");
        }
        if self.object_size.0 == 0 {
            bad("object_size", "must be more than 0");
        }
        if self.multipart_threshold.is_some() && self.part_size.0 < 5 << 20 {
            bad(
                "part_size",
                "must be at least 5 MiB (S3 and radosgw refuse smaller parts but the last)",
            );
        }
        if self.multipart_threshold.is_some_and(|t| t.0 == 0) {
            bad("multipart_threshold", "must be more than 0");
        }
        if !self.object_sizes.is_empty() && self.object_size_range.is_some() {
            bad(
                "object_sizes",
                "give `object_sizes` or `object_size_range`, not both",
            );
        }
        if self
            .object_sizes
            .iter()
            .any(|w| w.size.0 == 0 || w.weight == 0)
        {
            bad("object_sizes", "every size and weight must be more than 0");
        }
        if let Some(r) = &self.object_size_range
            && (r.min.0 == 0 || r.min.0 > r.max.0)
        {
            bad("object_size_range", "needs 0 < min <= max");
        }
        if self.largest_object() > MAX_OBJECT_BYTES as usize {
            bad(
                "object_size",
                "objects are at most 1 GiB (the payload is kept in memory)",
            );
        }
        if self.buckets < 1 || self.objects_per_bucket < 1 {
            bad(
                "objects_per_bucket",
                "buckets and objects_per_bucket must be at least 1",
            );
        }
        if self.operations.is_none() && self.duration.0.is_zero() {
            bad("duration", "must be more than 0 (or set `operations`)");
        }
        if self.operations == Some(0) {
            bad("operations", "must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.max_error_rate) {
            bad("max_error_rate", "is a share of requests, between 0 and 1");
        }
        if let Some(r) = self.rate
            && !(r.is_finite() && r > 0.0 && r <= 1e7)
        {
            bad(
                "rate",
                "is operations per second: more than 0 (at most 10000000)",
            );
        }
        if let Some(ss) = &self.steady_state {
            if self.operations.is_some() {
                bad(
                    "steady_state",
                    "ends a timed run early; it does not go with `operations`",
                );
            } else if ss.window.0.as_secs() < 2 || ss.window.0 > self.duration.0 {
                bad(
                    "steady_state",
                    "its `window` is whole seconds, at least 2 and at most `duration`",
                );
            } else if !(ss.within.is_finite() && ss.within > 0.0 && ss.within < 100.0) {
                bad(
                    "steady_state",
                    "its `within` is a percentage between 0 and 100",
                );
            }
        }
        if self.worker_silence.0 < Duration::from_secs(2) {
            bad(
                "worker_silence",
                "must be at least 2s (a worker says `alive` every second)",
            );
        }
        if self.bucket.is_some() && self.buckets != 1 {
            bad("buckets", "must be 1 with a pre-existing `bucket`");
        }
        if self.workload == Workload::Mixed {
            let m = &self.mix;
            if m.get + m.put + m.delete + m.head + m.list == 0 {
                bad("mix", "needs at least one weight above 0");
            } else if m.delete > 0 && m.put == 0 {
                bad(
                    "mix",
                    "deletes without puts empty the buckets; give `put` a weight",
                );
            }
        }
        p
    }

    /// What a run does, for `pipeline plan`; `bucket` names the store's
    /// buckets (`bucket`, `container`), `at` its address.
    pub fn plan(&self, bucket: &str, at: &str) -> Vec<Action> {
        let mut actions = Vec::new();
        match &self.bucket {
            Some(b) => actions.push(Action::note(format!(
                "use the existing {bucket} `{b}` at {at}; keys under this run's prefix only"
            ))),
            None => actions.push(Action::note(format!(
                "create {} {bucket}(s) named after the run id at {at}",
                self.buckets
            ))),
        }
        if self.needs_prefill() {
            actions.push(Action::note(format!(
                "prefill: PUT {} {} (reported as phase `prefill`)",
                self.slots(),
                self.describe_sizes()
            )));
        }
        actions.push(Action::note(self.describe_workload()));
        let removal = match &self.bucket {
            Some(b) => format!("delete this run's keys from `{b}` (the {bucket} stays)"),
            None => format!("empty and delete the {bucket}s this stage created"),
        };
        actions
            .push(Action::note(format!("{removal}, also after a failure or Ctrl-C")).destructive());
        actions
    }
}

/// What the load engine needs from where it runs: the stage's context in
/// the runner's process, or, on a client host, a worker's link to the
/// runner (`super::worker`).
pub trait LoadHost {
    /// The run's id: buckets and keys carry it.
    fn run_id(&self) -> &str;
    /// What names this load's buckets and keys within the run: the stage
    /// instance (a worker's adds its host, so that hosts never share keys).
    fn load_name(&self) -> &str;
    fn progress(&self, message: &str);
    fn is_cancelled(&self) -> bool;
    /// When the stage's time is up.
    fn deadline(&self) -> Option<Instant>;
    /// In the run's ledger before it exists: cleanup removes it even if
    /// this process dies right after.
    fn record_created(&mut self, kind: &str, name: &str);
    fn mark_removed(&mut self, kind: &str, name: &str);
    /// Called once the prefill is done; returns when the warm-up and the
    /// measured phase may start (hosts that start together wait here).
    fn wait_for_start(&self) -> Result<(), StageError> {
        Ok(())
    }
    /// Every 50 ms while the load runs: the operations completed in each
    /// finished second of the measured phase so far.
    fn measured_seconds(&self, _ops_per_second: &[f64]) {}
}

impl LoadHost for StageContext<'_> {
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn load_name(&self) -> &str {
        &self.instance_id
    }
    fn progress(&self, message: &str) {
        StageContext::progress(self, message);
    }
    fn is_cancelled(&self) -> bool {
        StageContext::is_cancelled(self)
    }
    fn deadline(&self) -> Option<Instant> {
        StageContext::deadline(self)
    }
    fn record_created(&mut self, kind: &str, name: &str) {
        StageContext::record_created(self, kind, name);
    }
    fn mark_removed(&mut self, kind: &str, name: &str) {
        StageContext::mark_removed(self, kind, name);
    }
}

/// When a load ran at full load, in wall-clock time, and what completed in
/// each tenth of a second of its measured phase: what the runner needs to
/// sum the rates of several hosts over the window they all ran in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The measured phase began (ns since the Unix epoch, this host's clock).
    pub measure_start_unix_ns: i64,
    /// No new request was issued after this (the end of `duration`, the
    /// last of `operations`, or a steady state); completions after it are
    /// the ramp-down.
    pub issuing_end_unix_ns: i64,
    /// Per operation, `[ops, bytes]` completed in each 100 ms since the
    /// measured phase began.
    pub tenths: std::collections::BTreeMap<String, Vec<[u64; 2]>>,
    /// User+system CPU seconds of the load's process in the measured phase.
    pub cpu_seconds: f64,
    /// The cores the load's runtime could use (worker_threads, at most the host's).
    pub cores: f64,
}

/// Runs the load against `store`: set-up (buckets, or the pre-existing one),
/// prefill, warm-up, the measured phase, then removal of what was written,
/// whatever happened before.
pub fn run(
    stage: &str,
    config: &LoadConfig,
    host: &mut dyn LoadHost,
    store: Store,
) -> Result<StageOutput, StageError> {
    run_with_window(stage, config, host, store).map(|(out, _)| out)
}

/// [`run`], with the measured phase's [`Window`].
pub fn run_with_window(
    stage: &str,
    config: &LoadConfig,
    host: &mut dyn LoadHost,
    store: Store,
) -> Result<(StageOutput, Window), StageError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads as usize)
        .enable_all()
        .build()
        .map_err(|e| StageError::io(format!("starting the {stage} runtime"), e))?;
    let mut target = Target {
        client: store,
        payload: Payload::with_hashes(config.largest_object(), &config.hashed_sizes()),
        buckets: Vec::new(),
        prefix: key_prefix(host.run_id(), host.load_name()),
        objects_per_bucket: config.objects_per_bucket as usize,
    };
    let created = runtime.block_on(set_up(config, host, &mut target));
    let target = Arc::new(target);
    let outcome = created.and_then(|()| measure(config, &*host, &runtime, &target));
    let cleaned = runtime.block_on(remove_written(stage, config, &target, host));
    let (rec, timing) = outcome?;
    cleaned?;
    let window = Window {
        measure_start_unix_ns: timing.measure_start_unix_ns,
        issuing_end_unix_ns: timing.issuing_end_unix_ns,
        tenths: rec.tenths(),
        cpu_seconds: timing.cpu_seconds,
        cores: usable_cores(config.worker_threads),
    };
    Ok((output(config, rec, &timing)?, window))
}
/// The gateway, the buckets and keys a run works on, and the one payload.
struct Target {
    client: Store,
    payload: Payload,
    buckets: Vec<String>,
    prefix: String,
    objects_per_bucket: usize,
}

impl Target {
    fn slot(&self, index: usize) -> (&str, String) {
        let bucket = &self.buckets[index / self.objects_per_bucket];
        (
            bucket,
            format!("{}{:08}", self.prefix, index % self.objects_per_bucket),
        )
    }
}

async fn set_up(
    config: &LoadConfig,
    ctx: &mut dyn LoadHost,
    t: &mut Target,
) -> Result<(), StageError> {
    // The first request tells whether the gateway takes the credentials:
    // one clear message instead of a wall of 401s or 403s.
    t.client
        .connect()
        .await
        .map_err(|e| t.client.first_request_error(&e))?;
    if let Some(bucket) = &config.bucket {
        // Recorded first: a run stopped halfway still has keys to remove.
        ctx.record_created(S3_OBJECTS, &format!("{bucket}/{}", t.prefix));
        t.client
            .list_keys(bucket, &t.prefix)
            .await
            .map_err(|e| t.client.first_request_error(&e))?;
        t.buckets.push(bucket.clone());
        return Ok(());
    }
    for index in 0..config.buckets {
        let name = bucket_name(ctx.run_id(), ctx.load_name(), index);
        // In the ledger first: a process killed while the request is out
        // (a worker on a lost host) still has its bucket removed by cleanup.
        ctx.record_created(S3_BUCKET, &name);
        match t.client.create_bucket(&name).await {
            Ok(()) => {}
            Err(e) => {
                ctx.mark_removed(S3_BUCKET, &name);
                return Err(if index == 0 {
                    t.client.first_request_error(&e)
                } else {
                    StageError::failed(format!("creating bucket `{name}` failed: {e}"))
                });
            }
        }
        t.buckets.push(name);
    }
    Ok(())
}

const ABSENT: u8 = 0;
const PRESENT: u8 = 1;
const BUSY: u8 = 2;

/// The state of every key, so that a GET reads an object that exists and
/// no two requests work on one key at once.
struct Slots(Vec<AtomicU8>);

impl Slots {
    fn new(count: usize, state: u8) -> Self {
        Slots((0..count).map(|_| AtomicU8::new(state)).collect())
    }

    /// Takes a random key fit for `op`; `None` when none was found quickly.
    fn claim(&self, op: Op, rng: &mut Rng) -> Option<(usize, u8)> {
        for _ in 0..64 {
            let i = rng.below(self.0.len() as u64) as usize;
            let now = self.0[i].load(Ordering::Relaxed);
            let fits = match op {
                Op::Put | Op::PutPart => now != BUSY,
                Op::Get | Op::Delete | Op::Head | Op::List => now == PRESENT,
            };
            if fits
                && self.0[i]
                    .compare_exchange(now, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return Some((i, now));
            }
        }
        None
    }

    fn release(&self, index: usize, state: u8) {
        self.0[index].store(state, Ordering::Release);
    }
}

/// SplitMix64 of a key index: its size, the same every time it is asked.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xorshift64*: cheap per-worker randomness for key and operation choice.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn pick_op(config: &LoadConfig, rng: &mut Rng) -> Op {
    match config.workload {
        Workload::Put => Op::Put,
        Workload::Get => Op::Get,
        Workload::Head => Op::Head,
        Workload::List => Op::List,
        Workload::Mixed => {
            let m = &config.mix;
            let weights = [
                (Op::Get, m.get),
                (Op::Put, m.put),
                (Op::Delete, m.delete),
                (Op::Head, m.head),
                (Op::List, m.list),
            ];
            let total: u32 = weights.iter().map(|(_, w)| w).sum();
            let mut r = rng.below(u64::from(total)) as u32;
            for (op, w) in weights {
                if r < w {
                    return op;
                }
                r -= w;
            }
            Op::Get
        }
    }
}

/// What the workers share with the controller.
struct Shared {
    target: Arc<Target>,
    config: LoadConfig,
    slots: Slots,
    recorder: Mutex<Recorder>,
    /// The phase new requests count in (a [`Phase`] as u8).
    phase: AtomicU8,
    measure_start: Mutex<Option<Instant>>,
    /// No new requests (the ones in flight finish and are counted).
    stop_issuing: AtomicBool,
    /// Measured operations left to issue (`operations`), or `u64::MAX`.
    tickets: AtomicU64,
    /// Prefill: the next key to write.
    next_prefill: AtomicU64,
    /// With a target `rate`: when each request is due (set as the load starts).
    schedule: std::sync::OnceLock<Schedule>,
}

/// The fixed request schedule of a target rate: request k is due at
/// `start + k / rate`, whether or not the gateway kept up with the ones before.
struct Schedule {
    start: Instant,
    interval: Duration,
    next: AtomicU64,
}

impl Schedule {
    fn next_due(&self) -> Instant {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        self.start + self.interval.mul_f64(k as f64)
    }
}

fn phase_of(v: u8) -> Phase {
    match v {
        0 => Phase::Prefill,
        1 => Phase::Warmup,
        _ => Phase::Measure,
    }
}

fn phase_code(p: Phase) -> u8 {
    match p {
        Phase::Prefill => 0,
        Phase::Warmup => 1,
        Phase::Measure => 2,
    }
}

type Answer = Result<(u64, Option<Duration>), OpError>;

/// One request; its latency (and a GET's time to first byte) counts from
/// `started`: now, or when a target rate's schedule wanted it sent.
async fn one_request(
    shared: &Shared,
    phase: Phase,
    op: Op,
    index: usize,
    started: Instant,
) -> (Answer, Instant) {
    let t = &shared.target;
    let (bucket, key) = t.slot(index);
    let size = shared.config.size_of(index);
    let multipart = shared
        .config
        .multipart_threshold
        .is_some_and(|threshold| size as u64 >= threshold.0);
    let result = match op {
        // (A part is never drawn as an operation of its own.)
        Op::Put | Op::PutPart if multipart => {
            let body = t.payload.bytes.slice(..size);
            let part_size = shared.config.part_size.0 as usize;
            match t.client.put_multipart(bucket, &key, body, part_size).await {
                Ok((bytes, parts)) => {
                    let mut rec = shared.recorder.lock().expect("recorder lock");
                    let since = into_measure(shared);
                    for (part_bytes, took) in parts {
                        rec.success(phase, Op::PutPart, part_bytes, took, None, since);
                    }
                    Ok((bytes, None))
                }
                Err(e) => Err(e),
            }
        }
        Op::Put | Op::PutPart => t
            .client
            .put_object(bucket, &key, t.payload.body(size))
            .await
            .map(|b| (b, None)),
        Op::Get => t
            .client
            .get_object(bucket, &key, &t.payload.bytes[..size], started)
            .await
            .map(|g| (g.bytes, Some(g.ttfb))),
        Op::Delete => t
            .client
            .delete_object(bucket, &key)
            .await
            .map(|()| (0, None)),
        Op::Head => t
            .client
            .head_object(bucket, &key, size as u64)
            .await
            .map(|()| (0, None)),
        Op::List => t
            .client
            .list_page(bucket, &t.prefix)
            .await
            .map(|_| (0, None)),
    };
    (result, started)
}

/// How far into the measured phase a request finishing now is.
fn into_measure(shared: &Shared) -> Duration {
    shared
        .measure_start
        .lock()
        .expect("measure_start lock")
        .map_or(Duration::ZERO, |s| {
            Instant::now().saturating_duration_since(s)
        })
}

fn record(shared: &Shared, phase: Phase, op: Op, result: &Answer, started: Instant) {
    let latency = started.elapsed();
    let since = into_measure(shared);
    let mut rec = shared.recorder.lock().expect("recorder lock");
    match result {
        Ok((bytes, ttfb)) => rec.success(phase, op, *bytes, latency, *ttfb, since),
        Err(e) => rec.error(phase, op, e.kind()),
    }
}

/// A worker of the prefill: writes keys in order until all are written.
async fn prefill_worker(shared: Arc<Shared>, mut abort: watch::Receiver<bool>) {
    let total = shared.slots.0.len() as u64;
    loop {
        let index = shared.next_prefill.fetch_add(1, Ordering::Relaxed);
        if index >= total {
            return;
        }
        let (result, started) = tokio::select! {
            r = one_request(&shared, Phase::Prefill, Op::Put, index as usize, Instant::now()) => r,
            _ = abort.wait_for(|a| *a) => return,
        };
        let state = if result.is_ok() { PRESENT } else { ABSENT };
        shared.slots.release(index as usize, state);
        record(&shared, Phase::Prefill, Op::Put, &result, started);
    }
}

/// A worker of the warm-up and measured phases.
async fn load_worker(shared: Arc<Shared>, seed: u64, mut abort: watch::Receiver<bool>) {
    let mut rng = Rng::new(seed);
    loop {
        if shared.stop_issuing.load(Ordering::Relaxed) {
            return;
        }
        let op = pick_op(&shared.config, &mut rng);
        let Some((index, before)) = shared.slots.claim(op, &mut rng) else {
            tokio::task::yield_now().await;
            continue;
        };
        // With a target rate, wait for this request's slot in the schedule;
        // its latency counts from then, even when it is issued late.
        let due = match shared.schedule.get() {
            Some(schedule) => {
                let due = schedule.next_due();
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    _ = abort.wait_for(|a| *a) => return,
                }
                // A timed run issues only what is due before its end.
                let end = (shared.config.operations.is_none())
                    .then(|| *shared.measure_start.lock().expect("measure_start lock"))
                    .flatten()
                    .map(|s| s + shared.config.duration.0);
                if shared.stop_issuing.load(Ordering::Relaxed) || end.is_some_and(|e| due >= e) {
                    shared.slots.release(index, before);
                    return;
                }
                Some(due)
            }
            None => None,
        };
        let phase = phase_of(shared.phase.load(Ordering::Acquire));
        if phase == Phase::Measure && !take_ticket(&shared.tickets) {
            shared.slots.release(index, before);
            return;
        }
        let started = due.unwrap_or_else(Instant::now);
        let (result, started) = tokio::select! {
            r = one_request(&shared, phase, op, index, started) => r,
            _ = abort.wait_for(|a| *a) => return,
        };
        let after = match (op, &result) {
            (Op::Put | Op::PutPart, Ok(_))
            | (Op::Get | Op::Head | Op::List, _)
            | (Op::Delete, Err(_)) => PRESENT,
            (Op::Delete, Ok(_)) => ABSENT,
            (Op::Put | Op::PutPart, Err(_)) => before,
        };
        shared.slots.release(index, after);
        record(&shared, phase, op, &result, started);
    }
}

fn take_ticket(tickets: &AtomicU64) -> bool {
    tickets
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            left.checked_sub(1)
        })
        .is_ok()
}

/// How long each phase lasted and what the client's CPU did in the measured one.
struct Timing {
    prefill: Duration,
    warmup: Duration,
    measure: Duration,
    cpu_seconds: f64,
    /// With `steady_state`: whether it was reached (and the run ended early).
    steady: Option<bool>,
    /// User+system CPU of the radosgw processes on this machine in the
    /// measured phase, when the endpoint is on loopback.
    gateway_cpu_seconds: Option<f64>,
    /// Wall-clock bounds of the measured phase at full load (see [`Window`]).
    measure_start_unix_ns: i64,
    issuing_end_unix_ns: i64,
}

fn unix_ns(t: std::time::SystemTime) -> i64 {
    pipeline_stage_api::clock::unix_ns(t).clamp(0, i64::MAX as i128) as i64
}

/// User+system CPU seconds of every `radosgw` process on this machine.
fn local_gateway_cpu() -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let mut total = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        // By the program it runs, not by `comm`: that is the main thread's
        // name, and radosgw 18.2 renames its main thread (`notif-worker0`).
        if !runs_radosgw(&entry.path()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so split at the last `)`.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let (Some(u), Some(s)) = (fields.get(11), fields.get(12))
            && let (Ok(u), Ok(s)) = (u.parse::<u64>(), s.parse::<u64>())
        {
            total += u + s;
            found = true;
        }
    }
    found.then(|| total as f64 / ticks as f64)
}

/// Whether the process at `/proc/PID` was started as `radosgw` (its argv[0],
/// which any user may read, unlike its `exe` link).
fn runs_radosgw(proc_dir: &std::path::Path) -> bool {
    std::fs::read(proc_dir.join("cmdline")).is_ok_and(|cmdline| {
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        argv0.rsplit(|b| *b == b'/').next() == Some(b"radosgw".as_slice())
    })
}

/// This process's resource usage so far (`None` if the kernel refuses).
pub(crate) fn own_usage() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage the pointer points to.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    // SAFETY: rc == 0: getrusage initialized it (and it was zeroed before).
    (rc == 0).then(|| unsafe { usage.assume_init() })
}

/// User+system CPU seconds of this process so far.
fn process_cpu_seconds() -> f64 {
    let Some(usage) = own_usage() else {
        return 0.0;
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Why the controller stopped the workers early.
enum Interrupted {
    Cancelled,
    Deadline,
}

/// Polls every 50 ms until every worker is done, the run is cancelled, or
/// the stage's time is up; on the latter two it aborts the requests in
/// flight. `tick` moves the phases along.
async fn supervise(
    ctx: &dyn LoadHost,
    abort: &watch::Sender<bool>,
    handles: &[tokio::task::JoinHandle<()>],
    mut tick: impl FnMut(),
) -> Result<(), Interrupted> {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let interrupted = if ctx.is_cancelled() {
            Some(Interrupted::Cancelled)
        } else if ctx.deadline().is_some_and(|d| Instant::now() >= d) {
            Some(Interrupted::Deadline)
        } else {
            None
        };
        if let Some(why) = interrupted {
            let _ = abort.send(true);
            for h in handles {
                h.abort();
            }
            return Err(why);
        }
        tick();
        if handles.iter().all(|h| h.is_finished()) {
            return Ok(());
        }
    }
}

fn interrupted_error(why: Interrupted, phase: &str) -> StageError {
    match why {
        Interrupted::Cancelled => StageError::Cancelled,
        Interrupted::Deadline => {
            StageError::Timeout(format!("the stage's timeout (in the {phase})"))
        }
    }
}

fn measure(
    config: &LoadConfig,
    ctx: &dyn LoadHost,
    runtime: &tokio::runtime::Runtime,
    target: &Arc<Target>,
) -> Result<(Recorder, Timing), StageError> {
    let prefill = config.needs_prefill();
    let shared = Arc::new(Shared {
        target: Arc::clone(target),
        config: config.clone(),
        slots: Slots::new(config.slots(), if prefill { BUSY } else { ABSENT }),
        recorder: Mutex::new(Recorder::default()),
        phase: AtomicU8::new(phase_code(Phase::Prefill)),
        measure_start: Mutex::new(None),
        stop_issuing: AtomicBool::new(false),
        tickets: AtomicU64::new(config.operations.unwrap_or(u64::MAX)),
        next_prefill: AtomicU64::new(0),
        schedule: std::sync::OnceLock::new(),
    });
    let (abort_tx, abort_rx) = watch::channel(false);

    let prefill_time = if prefill {
        ctx.progress(&format!("prefill: {} objects", config.slots()));
        let started = Instant::now();
        let handles: Vec<_> = (0..config.concurrency)
            .map(|_| runtime.spawn(prefill_worker(Arc::clone(&shared), abort_rx.clone())))
            .collect();
        runtime
            .block_on(supervise(ctx, &abort_tx, &handles, || {}))
            .map_err(|why| interrupted_error(why, "prefill"))?;
        let rec = shared.recorder.lock().expect("recorder lock");
        let (ops, errors) = rec.totals(Phase::Prefill);
        fail_on_errors(
            config,
            ops,
            errors,
            &rec.error_summary(Phase::Prefill),
            "prefill",
        )?;
        started.elapsed()
    } else {
        Duration::ZERO
    };

    // Hosts that start together wait for each other here, prefilled.
    ctx.wait_for_start()?;
    let warmup = config.warmup.0;
    let start = Instant::now();
    let wall_start = std::time::SystemTime::now();
    let wall = |t: Instant| unix_ns(wall_start + t.saturating_duration_since(start));
    let mut issuing_end: Option<Instant> = None;
    // Finished seconds of the measured phase handed to the host so far.
    let mut seconds_handed = 0;
    let mut cpu_start = process_cpu_seconds();
    // A gateway on this machine: its CPU over the measured phase too.
    let local_gateway = target.client.is_loopback();
    let mut gateway_start = local_gateway.then(local_gateway_cpu).flatten();
    if warmup.is_zero() {
        *shared.measure_start.lock().expect("measure_start lock") = Some(start);
        shared
            .phase
            .store(phase_code(Phase::Measure), Ordering::Release);
    } else {
        shared
            .phase
            .store(phase_code(Phase::Warmup), Ordering::Release);
    }
    ctx.progress(&config.describe_workload());
    if let Some(rate) = config.rate {
        let _ = shared.schedule.set(Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate),
            next: AtomicU64::new(0),
        });
    }
    let handles: Vec<_> = (0..config.concurrency)
        .map(|i| {
            runtime.spawn(load_worker(
                Arc::clone(&shared),
                u64::from(i) + 1,
                abort_rx.clone(),
            ))
        })
        .collect();
    let by_count = config.operations.is_some();
    let mut steady = false;
    let tick = || {
        let now = Instant::now();
        let mut measure_start = shared.measure_start.lock().expect("measure_start lock");
        if measure_start.is_none() && now.duration_since(start) >= warmup {
            *measure_start = Some(now);
            shared
                .phase
                .store(phase_code(Phase::Measure), Ordering::Release);
            cpu_start = process_cpu_seconds();
            gateway_start = local_gateway.then(local_gateway_cpu).flatten();
        }
        if !by_count
            && let Some(s) = *measure_start
            && now.duration_since(s) >= config.duration.0
        {
            shared.stop_issuing.store(true, Ordering::Relaxed);
        }
        // Once a second has finished, not every tick: the recorder's lock
        // is the workers' too.
        let finished_seconds = measure_start.map(|s| now.duration_since(s).as_secs());
        if finished_seconds.is_some_and(|n| n > seconds_handed) {
            seconds_handed = finished_seconds.unwrap_or(0);
            ctx.measured_seconds(
                &shared
                    .recorder
                    .lock()
                    .expect("recorder lock")
                    .ops_per_second(),
            );
        }
        if let Some(ss) = &config.steady_state
            && measure_start.is_some()
            && !steady
            && !shared.stop_issuing.load(Ordering::Relaxed)
            && ss.reached(
                &shared
                    .recorder
                    .lock()
                    .expect("recorder lock")
                    .ops_per_second(),
            )
        {
            steady = true;
            shared.stop_issuing.store(true, Ordering::Relaxed);
        }
        if issuing_end.is_none() && shared.stop_issuing.load(Ordering::Relaxed) {
            issuing_end = Some(now);
        }
    };
    runtime
        .block_on(supervise(ctx, &abort_tx, &handles, tick))
        .map_err(|why| interrupted_error(why, "measured phase"))?;
    let end = Instant::now();
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    let gateway_cpu_seconds = gateway_start
        .zip(local_gateway.then(local_gateway_cpu).flatten())
        .map(|(start, end)| (end - start).max(0.0));
    let measure_started = shared
        .measure_start
        .lock()
        .expect("measure_start lock")
        .unwrap_or(end);
    let timing = Timing {
        prefill: prefill_time,
        warmup: measure_started.duration_since(start),
        measure: end.duration_since(measure_started),
        cpu_seconds,
        steady: config.steady_state.as_ref().map(|_| steady),
        gateway_cpu_seconds,
        measure_start_unix_ns: wall(measure_started),
        // An `operations` run stops issuing when its tickets are gone,
        // which the controller does not see: its last completion then.
        issuing_end_unix_ns: wall(issuing_end.unwrap_or(end)),
    };
    let rec = std::mem::take(&mut *shared.recorder.lock().expect("recorder lock"));
    let (ops, errors) = rec.totals(Phase::Measure);
    fail_on_errors(
        config,
        ops,
        errors,
        &rec.error_summary(Phase::Measure),
        "measured phase",
    )?;
    Ok((rec, timing))
}

/// Fails when the share of failed requests passes `max_error_rate`.
fn fail_on_errors(
    config: &LoadConfig,
    ops: u64,
    errors: u64,
    summary: &str,
    phase: &str,
) -> Result<(), StageError> {
    if errors == 0 {
        return Ok(());
    }
    let rate = errors as f64 / (ops + errors) as f64;
    if rate <= config.max_error_rate {
        return Ok(());
    }
    Err(StageError::failed(format!(
        "{errors} of {} requests failed in the {phase} ({summary}), more than max_error_rate {}",
        ops + errors,
        config.max_error_rate
    )))
}

/// Deletes every key under `prefix` in `bucket` (a missing key is fine).
async fn empty_bucket(
    client: &Store,
    bucket: &str,
    prefix: &str,
    config: &LoadConfig,
    problems: &mut Vec<String>,
) {
    let keys = match client.list_keys(bucket, prefix).await {
        Ok(keys) => keys,
        Err(e) => {
            problems.push(format!("listing bucket `{bucket}` to empty it failed: {e}"));
            return;
        }
    };
    let width = (config.concurrency as usize).max(1);
    for chunk in keys.chunks(width) {
        let deletes = chunk.iter().map(|key| client.delete_object(bucket, key));
        for (key, result) in chunk.iter().zip(join_all(deletes).await) {
            if let Err(e) = result
                && !matches!(e, OpError::Status { status: 404, .. })
            {
                problems.push(format!("deleting `{bucket}/{key}` failed: {e}"));
            }
        }
    }
}

/// Removes what this stage wrote: every key under its prefix, then the
/// buckets it created. Runs after success, failure and cancellation alike;
/// each request is bounded by the request timeout.
async fn remove_written(
    stage: &str,
    config: &LoadConfig,
    target: &Target,
    ctx: &mut dyn LoadHost,
) -> Result<(), StageError> {
    let client = &target.client;
    let mut problems = Vec::new();
    for bucket in &target.buckets {
        // A PUT aborted on our side after it was sent can still land on the
        // gateway a moment later (after Ctrl-C or a deadline): a bucket that
        // is "not empty" once emptied is listed and emptied again, a bounded
        // number of times.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let before = problems.len();
            empty_bucket(client, bucket, &target.prefix, config, &mut problems).await;
            if config.bucket.is_some() {
                if problems.len() == before {
                    ctx.mark_removed(S3_OBJECTS, &format!("{bucket}/{}", target.prefix));
                }
                break;
            }
            match client.delete_bucket(bucket).await {
                Ok(()) => {
                    ctx.mark_removed(S3_BUCKET, bucket);
                    break;
                }
                Err(OpError::Status { status: 409, .. }) if attempt < 10 => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => {
                    problems.push(format!("deleting bucket `{bucket}` failed: {e}"));
                    break;
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StageError::failed(format!(
            "{stage} could not remove what it wrote: {}",
            problems.join("; ")
        )))
    }
}

/// Awaits futures concurrently on the current task (no extra crate).
async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in pinned.iter_mut().zip(results.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

fn output(
    config: &LoadConfig,
    mut rec: Recorder,
    timing: &Timing,
) -> Result<StageOutput, StageError> {
    let mut out = StageOutput {
        series: rec.series(),
        ..Default::default()
    };
    let (metrics, histograms) = figures(&rec, timing)
        .map_err(|e| StageError::failed(format!("cannot store a latency histogram: {e}")))?;
    out.metrics = metrics;
    out.histograms = histograms;
    out.notes.push(config.describe_workload());
    if let Some(rate) = config.rate {
        out.metrics.push(
            Metric::new("target_rate", rate, unit::OPS_PER_S, Direction::None)
                .aggregate(Aggregate::Sum),
        );
        let (ops, errors) = rec.totals(Phase::Measure);
        let achieved = (ops + errors) as f64 / timing.measure.as_secs_f64().max(1e-9);
        out.notes.push(format!(
            "target rate {rate} ops/s, {achieved:.1} achieved: latencies count from each request's intended start (coordinated omission corrected)"
        ));
        if achieved < 0.95 * rate {
            out.notes.push(format!(
                "the load fell behind its schedule ({achieved:.1} of {rate} ops/s): requests waited for a free slot of the {} in flight, and their latencies include that wait",
                config.concurrency
            ));
        }
    }
    if let (Some(ss), Some(reached)) = (&config.steady_state, timing.steady) {
        out.metrics.push(
            Metric::new(
                "steady_state",
                if reached { 1.0 } else { 0.0 },
                unit::COUNT,
                Direction::None,
            )
            .aggregate(Aggregate::Min),
        );
        out.notes.push(if reached {
            format!(
                "steady state reached after {:.1} s: every second of the last {} s within {}% of their mean; the measured phase ended there",
                timing.measure.as_secs_f64(),
                ss.window.as_secs_f64(),
                ss.within
            )
        } else {
            format!(
                "steady state NOT reached in {:.1} s (no {} s window within {}% of its mean): the figures may still be moving",
                timing.measure.as_secs_f64(),
                ss.window.as_secs_f64(),
                ss.within
            )
        });
    }
    if let Some(note) = client_bound(timing, config.worker_threads) {
        out.notes.push(note);
    }
    Ok(out)
}

/// A note when the client used (nearly) all the cores its runtime may use:
/// then the figures say more about the client than about the gateway.
fn client_bound(timing: &Timing, worker_threads: u32) -> Option<String> {
    let cores = usable_cores(worker_threads);
    let busy = timing.cpu_seconds / timing.measure.as_secs_f64().max(1e-9);
    (busy >= 0.8 * cores).then(|| {
        format!(
            "the figures are client-bound: the client used {busy:.2} of the {cores:.0} core(s) its runtime may use (worker_threads: {worker_threads})"
        )
    })
}

/// The cores a load's runtime may keep busy: its worker threads, at most
/// the machine's.
fn usable_cores(worker_threads: u32) -> f64 {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    (worker_threads as usize).min(online) as f64
}

/// Metrics and histograms of every phase and operation.
fn figures(
    rec: &Recorder,
    timing: &Timing,
) -> Result<(Vec<Metric>, Vec<Histogram>), HistogramError> {
    let mut metrics = Vec::new();
    let mut histograms = Vec::new();
    let mut measured_ops = 0;
    for (&(phase, op), s) in rec.phases() {
        let labelled = |m: Metric| m.label("op", op.as_str()).label("phase", phase.as_str());
        let m = |name: &str, value: f64, unit: &str, direction: Direction, rule: Aggregate| {
            labelled(Metric::new(name, value, unit, direction).aggregate(rule))
        };
        metrics.push(m(
            "ops",
            s.ops as f64,
            unit::COUNT,
            Direction::None,
            Aggregate::Sum,
        ));
        metrics.push(m(
            "bytes",
            s.bytes as f64,
            unit::BYTES,
            Direction::None,
            Aggregate::Sum,
        ));
        for (kind, n) in &s.errors {
            let e = m(
                "errors",
                *n as f64,
                unit::COUNT,
                Direction::Lower,
                Aggregate::Sum,
            );
            metrics.push(e.label("kind", kind.as_str()));
        }
        let seconds = match phase {
            Phase::Prefill => timing.prefill,
            Phase::Warmup => continue,
            Phase::Measure => timing.measure,
        }
        .as_secs_f64();
        if phase == Phase::Measure {
            measured_ops += s.ops;
        }
        if s.ops == 0 || seconds <= 0.0 {
            continue;
        }
        let headline = |m: Metric| {
            if phase == Phase::Measure {
                m.headline()
            } else {
                m
            }
        };
        let rate = s.ops as f64 / seconds;
        let mib_s = s.bytes as f64 / MIB / seconds;
        metrics.push(headline(m(
            "ops_per_s",
            rate,
            unit::OPS_PER_S,
            Direction::Higher,
            Aggregate::Sum,
        )));
        // HEAD and LIST move no payload: no bandwidth row for them.
        if s.bytes > 0 {
            metrics.push(headline(m(
                "bandwidth",
                mib_s,
                unit::MIB_PER_S,
                Direction::Higher,
                Aggregate::Sum,
            )));
        }
        let mut distributions = vec![("latency", &s.latency_us)];
        if !s.ttfb_us.is_empty() {
            distributions.push(("ttfb", &s.ttfb_us));
        }
        for (name, hdr) in distributions {
            let us = |suffix: &str, value: f64, rule: Aggregate| {
                m(
                    &format!("{name}_{suffix}"),
                    value,
                    unit::MICROSECONDS,
                    Direction::Lower,
                    rule,
                )
            };
            metrics.push(us("mean", hdr.mean(), Aggregate::mean_weighted_by("ops")));
            for (suffix, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99_9", 0.999)] {
                let p = us(
                    suffix,
                    hdr.value_at_quantile(q) as f64,
                    Aggregate::histogram(name, q),
                );
                let p = if suffix == "p99" && name == "latency" {
                    headline(p)
                } else {
                    p
                };
                metrics.push(p);
            }
            metrics.push(us("max", hdr.max() as f64, Aggregate::Max));
            let h = stored(name, hdr)?;
            histograms.push(h.label("op", op.as_str()).label("phase", phase.as_str()));
        }
    }
    let seconds = |name: &str, d: Duration| {
        Metric::new(name, d.as_secs_f64(), unit::SECONDS, Direction::None).aggregate(Aggregate::Max)
    };
    metrics.push(seconds("prefill_seconds", timing.prefill));
    metrics.push(seconds("warmup_seconds", timing.warmup));
    metrics.push(seconds("measure_seconds", timing.measure));
    if let Some(g) = timing.gateway_cpu_seconds {
        metrics.push(
            Metric::new("gateway_cpu_seconds", g, unit::SECONDS, Direction::Lower)
                .aggregate(Aggregate::Max),
        );
        if measured_ops > 0 {
            metrics.push(
                Metric::new(
                    "gateway_cpu_per_1000_ops",
                    g * 1000.0 / measured_ops as f64,
                    unit::SECONDS,
                    Direction::Lower,
                )
                .aggregate(Aggregate::None),
            );
        }
    }
    let cpu = Metric::new(
        "client_cpu_seconds",
        timing.cpu_seconds,
        unit::SECONDS,
        Direction::Lower,
    );
    metrics.push(cpu.aggregate(Aggregate::Sum));
    if measured_ops > 0 {
        let per_1000 = timing.cpu_seconds * 1000.0 / measured_ops as f64;
        let m = Metric::new(
            "client_cpu_per_1000_ops",
            per_1000,
            unit::SECONDS,
            Direction::Lower,
        );
        metrics.push(m.aggregate(Aggregate::None));
    }
    Ok((metrics, histograms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(with: serde_json::Value) -> LoadConfig {
        serde_json::from_value(with).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let c = config(serde_json::json!({}));
        assert_eq!(c.workload, Workload::Put);
        assert_eq!(c.concurrency, 16);
        assert!(!c.needs_prefill());
        assert!(c.check().is_empty());
        let bad = config(serde_json::json!({
            "workload": "mixed", "mix": {"get": 1, "delete": 1}, "concurrency": 0
        }));
        let params: Vec<String> = bad.check().into_iter().map(|(p, _)| p).collect();
        assert_eq!(params, vec!["concurrency", "mix"]);
    }

    #[test]
    fn the_mix_picks_operations_by_weight() {
        let c = config(
            serde_json::json!({"workload": "mixed", "mix": {"get": 60, "put": 30, "delete": 10}}),
        );
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            let i = match pick_op(&c, &mut rng) {
                Op::Get => 0,
                Op::Put => 1,
                Op::Delete => 2,
                Op::Head | Op::List | Op::PutPart => unreachable!("no weight"),
            };
            counts[i] += 1;
        }
        assert!((5500..6500).contains(&counts[0]), "{counts:?}");
        assert!((2500..3500).contains(&counts[1]), "{counts:?}");
        assert!((700..1300).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn a_schedule_spaces_requests_by_the_rate_whatever_came_before() {
        let start = Instant::now();
        let s = Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / 50.0),
            next: AtomicU64::new(0),
        };
        assert_eq!(s.next_due(), start);
        assert_eq!(s.next_due(), start + Duration::from_millis(20));
        for _ in 0..98 {
            s.next_due();
        }
        assert_eq!(s.next_due(), start + Duration::from_secs(2));
        let bad = config(serde_json::json!({"rate": 0}));
        assert_eq!(bad.check()[0].0, "rate");
        let good = config(serde_json::json!({"rate": 50}));
        assert!(good.check().is_empty());
        assert!(
            good.describe_workload()
                .contains("at a target rate of 50 ops/s")
        );
    }

    #[test]
    fn steady_state_is_every_second_of_the_window_near_their_mean() {
        let ss = SteadyState {
            window: Seconds::secs(3),
            within: 5.0,
        };
        assert!(!ss.reached(&[100.0, 100.0]), "shorter than the window");
        assert!(ss.reached(&[10.0, 400.0, 100.0, 103.0, 98.0]));
        assert!(!ss.reached(&[100.0, 100.0, 120.0]));
        assert!(!ss.reached(&[0.0, 0.0, 0.0]), "no load is not steady load");
        let c = config(serde_json::json!({"steady_state": {"window": "3s"}, "duration": "10s"}));
        assert!(c.check().is_empty(), "{:?}", c.check());
        let bad = config(serde_json::json!({"steady_state": {}, "operations": 10}));
        assert_eq!(bad.check()[0].0, "steady_state");
    }

    #[test]
    fn each_key_keeps_one_size_drawn_by_the_weights() {
        let c = config(serde_json::json!({
            "object_sizes": [{"size": 1024, "weight": 3}, {"size": 65536, "weight": 1}]
        }));
        assert!(c.check().is_empty(), "{:?}", c.check());
        assert_eq!(c.largest_object(), 65536);
        assert_eq!(c.hashed_sizes(), vec![1024, 65536]);
        let small = (0..10_000).filter(|i| c.size_of(*i) == 1024).count();
        assert!((7000..8000).contains(&small), "{small}");
        assert!((0..100).all(|i| c.size_of(i) == c.size_of(i)));
        assert!(
            c.describe_sizes().contains("1024 B (75%)"),
            "{}",
            c.describe_sizes()
        );

        let r = config(serde_json::json!({"object_size_range": {"min": 1000, "max": 2000}}));
        assert!((0..1000).all(|i| (1000..=2000).contains(&r.size_of(i))));
        assert!(r.hashed_sizes().is_empty(), "a range is sent unsigned");
        let both = config(serde_json::json!({
            "object_sizes": [{"size": 1}], "object_size_range": {"min": 1, "max": 2}
        }));
        assert_eq!(both.check()[0].0, "object_sizes");
        let huge = config(serde_json::json!({"object_size": 2147483648u64}));
        assert_eq!(huge.check()[0].0, "object_size");
    }

    #[test]
    fn a_key_is_claimed_by_one_request_at_a_time() {
        let slots = Slots::new(1, PRESENT);
        let mut rng = Rng::new(1);
        assert_eq!(slots.claim(Op::Get, &mut rng), Some((0, PRESENT)));
        assert_eq!(slots.claim(Op::Put, &mut rng), None);
        slots.release(0, ABSENT);
        assert_eq!(slots.claim(Op::Get, &mut rng), None);
        assert_eq!(slots.claim(Op::Put, &mut rng), Some((0, ABSENT)));
    }

    #[test]
    fn errors_fail_the_stage_unless_tolerated() {
        let strict = config(serde_json::json!({}));
        let err = fail_on_errors(&strict, 99, 1, "put http-503: 1", "measured phase").unwrap_err();
        assert!(
            err.to_string().contains("1 of 100 requests failed"),
            "{err}"
        );
        assert!(err.to_string().contains("put http-503: 1"), "{err}");
        let lenient = config(serde_json::json!({"max_error_rate": 0.05}));
        assert!(fail_on_errors(&lenient, 99, 1, "", "measured phase").is_ok());
        let tickets = AtomicU64::new(1);
        assert!(take_ticket(&tickets));
        assert!(!take_ticket(&tickets));
    }

    #[test]
    fn figures_carry_rules_and_histograms() {
        let mut rec = Recorder::default();
        for ms in [1, 2, 3, 4] {
            let d = Duration::from_millis(ms);
            rec.success(
                Phase::Measure,
                Op::Get,
                4096,
                d,
                Some(d / 2),
                Duration::ZERO,
            );
        }
        let timing = Timing {
            prefill: Duration::ZERO,
            warmup: Duration::ZERO,
            measure: Duration::from_secs(2),
            cpu_seconds: 0.5,
            steady: None,
            gateway_cpu_seconds: Some(1.0),
            measure_start_unix_ns: 0,
            issuing_end_unix_ns: 2_000_000_000,
        };
        let (metrics, histograms) = figures(&rec, &timing).unwrap();
        let find = |name: &str| metrics.iter().find(|m| m.name == name).unwrap();
        assert_eq!(find("ops_per_s").value, 2.0);
        assert_eq!(
            find("latency_p99").aggregate,
            Aggregate::histogram("latency", 0.99)
        );
        assert_eq!(find("client_cpu_per_1000_ops").value, 125.0);
        assert_eq!(find("gateway_cpu_per_1000_ops").value, 250.0);
        assert_eq!(histograms.len(), 2);
        assert_eq!(histograms[1].name, "ttfb");
        assert!(client_bound(&timing, 2).is_none());
    }
}
