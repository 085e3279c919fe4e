//! Where the load runs: the stage's context in the runner's process, or a
//! worker's link to the runner on a client host.

use std::time::Instant;

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::StageError;

/// What the load engine needs from where it runs: the stage's context in
/// the runner's process, or, on a client host, a worker's link to the
/// runner (`remote_worker::WorkerLink`, in `objgw::worker`).
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
    /// The last finished second of a series (`--metrics-listen`); see
    /// `StageContext::live_point`.
    fn live_point(&self, _series: &str, _unit: &str, _t_s: f64, _value: f64) {}
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
    fn live_point(&self, series: &str, unit: &str, t_s: f64, value: f64) {
        StageContext::live_point(self, series, unit, t_s, value);
    }
}
