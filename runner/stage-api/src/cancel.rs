//! Cancellation as a stage sees it: a token the engine cancels on Ctrl-C or
//! SIGTERM (the engine's signal handlers only count signals).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Cancelled once a shared counter passes the threshold it was created with.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    count: Arc<AtomicUsize>,
    threshold: usize,
}

impl CancelToken {
    pub fn is_cancelled(&self) -> bool {
        self.count.load(Ordering::SeqCst) > self.threshold
    }
}

impl CancelToken {
    /// A token cancelled when `count` rises above `threshold`.
    pub fn after(count: Arc<AtomicUsize>, threshold: usize) -> Self {
        CancelToken { count, threshold }
    }
}
