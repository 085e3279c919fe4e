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
//!
//! Where each part is: [`config`] (the parameters, what they derive and
//! describe) and [`checks`] (what `pipeline validate` says of them); [`host`]
//! (what the engine needs from where it runs: [`LoadHost`]); [`engine`] (the
//! requests: keys, randomness, the rate's schedule, the workers);
//! [`phases`] (prefill, warm-up and the measured phase, moved along by the
//! [`phases::PhaseController`]); [`cpu`] (the client's and a local gateway's
//! CPU); [`buckets`] (creating the run's buckets and removing what it
//! wrote); [`figures`] (the metrics it declares and reports).

mod buckets;
mod checks;
mod config;
mod cpu;
mod engine;
mod figures;
mod host;
mod phases;
mod search;

use std::sync::Arc;

use pipeline_stage_api::stage::{StageError, StageOutput};
use serde::{Deserialize, Serialize};

use super::client::Payload;
use super::key_prefix;
use super::store::Store;
use engine::Target;

pub use config::{LoadConfig, LostHosts, Mix, SizeRange, SteadyState, WeightedSize, Workload};
pub use figures::{about, metrics};
pub use host::LoadHost;
pub use search::rate_search;

/// When a load ran at full load, in wall-clock time, and what completed in
/// each tenth of a second of its measured phase: what the runner needs to
/// sum the rates of several hosts over the window they all ran in.
///
/// Read from a worker only as [`Window::checked`] allows: a window whose
/// end precedes its start, a negative CPU time or an absurd core count is
/// not the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "UncheckedWindow")]
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

/// A [`Window`] as a worker sent it, before [`Window::checked`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UncheckedWindow {
    measure_start_unix_ns: i64,
    issuing_end_unix_ns: i64,
    tenths: std::collections::BTreeMap<String, Vec<[u64; 2]>>,
    cpu_seconds: f64,
    cores: f64,
}

/// Tenths of a second a window may hold: ten days of them.
const MAX_TENTHS: usize = 8_640_000;

impl TryFrom<UncheckedWindow> for Window {
    type Error = String;

    fn try_from(w: UncheckedWindow) -> Result<Window, String> {
        Window {
            measure_start_unix_ns: w.measure_start_unix_ns,
            issuing_end_unix_ns: w.issuing_end_unix_ns,
            tenths: w.tenths,
            cpu_seconds: w.cpu_seconds,
            cores: w.cores,
        }
        .checked()
    }
}

impl Window {
    /// The window, if it is one a load can have measured, else what is
    /// wrong with it, by field.
    pub fn checked(self) -> Result<Window, String> {
        if self.issuing_end_unix_ns < self.measure_start_unix_ns {
            return Err(format!(
                "window.issuing_end_unix_ns {} precedes window.measure_start_unix_ns {}",
                self.issuing_end_unix_ns, self.measure_start_unix_ns
            ));
        }
        if !(self.cpu_seconds.is_finite() && self.cpu_seconds >= 0.0) {
            return Err(format!(
                "window.cpu_seconds is {}: not a CPU time",
                self.cpu_seconds
            ));
        }
        if !(self.cores.is_finite() && self.cores > 0.0 && self.cores <= 65_536.0) {
            return Err(format!("window.cores is {}: not a core count", self.cores));
        }
        if self.tenths.len() > 16 {
            return Err(format!(
                "window.tenths has {} operations (at most 16)",
                self.tenths.len()
            ));
        }
        for (op, tenths) in &self.tenths {
            let plain = !op.is_empty()
                && op.len() <= 32
                && op.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            if !plain {
                return Err("window.tenths holds an operation that is not a name".into());
            }
            if tenths.len() > MAX_TENTHS {
                return Err(format!(
                    "window.tenths.{op} has {} tenths (at most {MAX_TENTHS})",
                    tenths.len()
                ));
            }
        }
        Ok(self)
    }
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
    let created = runtime.block_on(buckets::set_up(config, host, &mut target));
    let target = Arc::new(target);
    let outcome = created.and_then(|()| phases::measure(config, &*host, &runtime, &target));
    let cleanup_by = buckets::cleanup_deadline(host.deadline(), std::time::Instant::now());
    let cleaned = runtime.block_on(buckets::remove_written(
        stage, config, &target, host, cleanup_by,
    ));
    let (rec, timing) = outcome?;
    cleaned?;
    let window = Window {
        measure_start_unix_ns: timing.measure_start_unix_ns,
        issuing_end_unix_ns: timing.issuing_end_unix_ns,
        tenths: rec.tenths(),
        cpu_seconds: timing.cpu_seconds,
        cores: cpu::usable_cores(config.worker_threads),
    };
    Ok((figures::output(config, rec, &timing)?, window))
}
