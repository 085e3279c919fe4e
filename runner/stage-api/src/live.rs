//! Figures of a running stage, as they are measured: where `pipeline run
//! --metrics-listen` gets the per-second series it serves while the stage
//! is still going (the engine's `live_metrics`). A stage hands each finished
//! second of a series to its context ([`StageContext::live_point`]); with
//! nobody listening that is a no-op.
//!
//! [`StageContext::live_point`]: crate::context::StageContext::live_point

/// Takes the latest point of each per-second series of running stages.
pub trait LiveSink: Send + Sync {
    /// `series` of stage instance `instance` on `host` was `value` (in
    /// `unit`) over the second ending `t_s` seconds into the measured phase.
    /// The names are the stage's own series names (those of its
    /// `series-*.json` files), so a scraped value can be found in the file.
    fn point(&self, instance: &str, host: &str, series: &str, unit: &str, t_s: f64, value: f64);
}
