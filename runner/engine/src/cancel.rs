//! Ctrl-C and SIGTERM. The first signal cancels the benchmark stages; cleanup
//! still runs (it must: pools and objects would otherwise be left behind).
//! A second signal during cleanup cancels cleanup too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use pipeline_stage_api::cancel::CancelToken;

/// Counts received signals; a token is cancelled once the count passes its threshold.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    count: Arc<AtomicUsize>,
}

impl Signals {
    /// Installs handlers for SIGINT and SIGTERM that only count.
    pub fn install() -> std::io::Result<Self> {
        let signals = Signals::default();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let count = signals.count.clone();
            // SAFETY: the handler only does an atomic add, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    count.fetch_add(1, Ordering::SeqCst);
                })?;
            }
        }
        Ok(signals)
    }

    pub fn received(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Cancelled by the next signal from now on.
    pub fn token(&self) -> CancelToken {
        CancelToken::after(self.count.clone(), self.received())
    }

    /// For tests and programmatic cancellation.
    pub fn raise(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}
