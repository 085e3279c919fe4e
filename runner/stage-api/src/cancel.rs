//! Cancellation as a stage sees it: a token the engine cancels on Ctrl-C or
//! SIGTERM. A stage may poll it ([`CancelToken::is_cancelled`]) or await it
//! ([`CancelToken::cancelled`]) from any async runtime: the future needs no
//! runtime of its own, only the waker it is polled with.
//!
//! Signal handlers may not take locks, so a request has two halves: counting
//! it (an atomic add, safe in a handler) and waking the futures that wait for
//! it (takes a lock; the engine does it from a small watcher thread).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Where cancellation comes from: a count of requests (signals), and the
/// futures waiting for the next one.
#[derive(Debug, Default)]
pub struct CancelSource {
    requests: AtomicUsize,
    next_waiter: AtomicU64,
    waiters: Mutex<BTreeMap<u64, Waker>>,
}

impl CancelSource {
    /// How many cancellation requests have been counted.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Counts a request without waking anyone: the only half a signal
    /// handler may do (an atomic add). Follow it with [`wake`](Self::wake)
    /// from an ordinary thread.
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes every future waiting on a token of this source; each checks its
    /// token again and waits on if its threshold has not been passed.
    pub fn wake(&self) {
        let wakers = std::mem::take(&mut *self.lock_waiters());
        for waker in wakers.into_values() {
            waker.wake();
        }
    }

    /// Counts a request and wakes the waiters (not from a signal handler).
    pub fn request(&self) {
        self.count_request();
        self.wake();
    }

    /// A token cancelled by the next request from now on.
    pub fn token(self: &Arc<Self>) -> CancelToken {
        CancelToken {
            source: self.clone(),
            threshold: self.requests(),
        }
    }

    fn lock_waiters(&self) -> MutexGuard<'_, BTreeMap<u64, Waker>> {
        // A waker that panicked while the list was held leaves it usable.
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Cancelled once its source has counted more requests than when the token
/// was made. `CancelToken::default()` is never cancelled.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    source: Arc<CancelSource>,
    threshold: usize,
}

impl CancelToken {
    pub fn is_cancelled(&self) -> bool {
        self.source.requests() > self.threshold
    }

    /// Waits `duration` unless the token is cancelled first; `false` when
    /// it was (then at most ~50 ms after the request). For code without an
    /// async runtime: the engine's pause between repetitions, a stage
    /// polling the cluster (through [`crate::context::StageContext::sleep`]).
    pub fn sleep(&self, duration: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + duration;
        loop {
            if self.is_cancelled() {
                return false;
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
        }
    }

    /// Resolves when the token is cancelled (at once if it already is).
    /// Owns a clone of the token, so it can move into a spawned task.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use pipeline_stage_api::cancel::CancelSource;
    ///
    /// let source = Arc::new(CancelSource::default());
    /// let token = source.token(); // a stage gets it from `ctx.cancel_token()`
    /// source.request(); // Ctrl-C, as the engine relays it
    /// let runtime = tokio::runtime::Builder::new_current_thread()
    ///     .enable_time()
    ///     .build()
    ///     .unwrap();
    /// let outcome = runtime.block_on(async {
    ///     tokio::select! {
    ///         _ = token.cancelled() => "stopped",
    ///         _ = tokio::time::sleep(Duration::from_secs(10)) => "load finished",
    ///     }
    /// });
    /// assert_eq!(outcome, "stopped");
    /// ```
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
            waiter: None,
        }
    }
}

/// The future of [`CancelToken::cancelled`].
#[derive(Debug)]
#[must_use = "a future does nothing unless awaited"]
pub struct Cancelled {
    token: CancelToken,
    /// Its entry in the source's waiter list while it waits.
    waiter: Option<u64>,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            self.forget_waiter();
            return Poll::Ready(());
        }
        let source = self.token.source.clone();
        let id = *self
            .waiter
            .get_or_insert_with(|| source.next_waiter.fetch_add(1, Ordering::Relaxed));
        source.lock_waiters().insert(id, cx.waker().clone());
        // Checked again after registering: a request counted in between
        // either is seen here or its wake() finds the waker just stored.
        if self.token.is_cancelled() {
            self.forget_waiter();
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Cancelled {
    fn forget_waiter(&mut self) {
        if let Some(id) = self.waiter.take() {
            self.token.source.lock_waiters().remove(&id);
        }
    }
}

impl Drop for Cancelled {
    /// A future dropped unfinished (the other branch of a `select!` won)
    /// leaves no waker behind: a loop that makes one per iteration stays small.
    fn drop(&mut self) {
        self.forget_waiter();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_token_is_cancelled_by_the_next_request_only() {
        let source = Arc::new(CancelSource::default());
        let first = source.token();
        source.request();
        let second = source.token();
        assert!(first.is_cancelled());
        assert!(!second.is_cancelled());
        source.request();
        assert!(second.is_cancelled());
        assert!(!CancelToken::default().is_cancelled());
    }

    #[test]
    fn a_sleep_ends_when_the_token_is_cancelled() {
        let source = Arc::new(CancelSource::default());
        let token = source.token();
        let requester = {
            let source = source.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                source.request();
            })
        };
        // An hour, cut short by the request: `false`, long before the hour.
        assert!(!token.sleep(Duration::from_secs(3600)));
        requester.join().unwrap();
        // A token that is never cancelled sleeps to the end: `true`.
        assert!(CancelToken::default().sleep(Duration::from_millis(10)));
    }

    #[test]
    fn select_returns_because_of_cancellation() {
        let source = Arc::new(CancelSource::default());
        let token = source.token();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            source.request();
        });
        let started = std::time::Instant::now();
        let why = runtime.block_on(async {
            tokio::select! {
                _ = token.cancelled() => "cancelled",
                _ = tokio::time::sleep(Duration::from_secs(10)) => "slept",
            }
        });
        canceller.join().unwrap();
        assert_eq!(why, "cancelled");
        // Sanity ceiling only (the machine is noisy): far below the 10 s sleep.
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_already_cancelled_token_resolves_at_once() {
        let source = Arc::new(CancelSource::default());
        let token = source.token();
        source.request();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // No timer in this runtime: only a ready future can finish the select.
        let why = runtime.block_on(async {
            tokio::select! {
                biased;
                _ = token.cancelled() => "cancelled",
                _ = std::future::pending::<()>() => "pending",
            }
        });
        assert_eq!(why, "cancelled");
    }

    #[test]
    fn dropped_futures_leave_no_waker_behind() {
        let source = Arc::new(CancelSource::default());
        let token = source.token();
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..100 {
            // As in a `select!` loop whose other branch wins every time.
            let mut waiting = Box::pin(token.cancelled());
            assert!(waiting.as_mut().poll(&mut cx).is_pending());
            assert_eq!(source.lock_waiters().len(), 1);
        }
        assert!(source.lock_waiters().is_empty());
    }

    #[test]
    fn a_request_wakes_tokens_of_a_later_threshold_without_resolving_them() {
        // Like cleanup's token: made after the first Ctrl-C, it waits for a second.
        let source = Arc::new(CancelSource::default());
        source.request();
        let cleanup = source.token();
        let mut waiting = Box::pin(cleanup.cancelled());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        source.wake(); // a spurious wake: the count did not move
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        source.request();
        assert!(waiting.as_mut().poll(&mut cx).is_ready());
        assert!(source.lock_waiters().is_empty());
    }
}
