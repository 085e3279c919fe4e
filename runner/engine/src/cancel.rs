//! Ctrl-C and SIGTERM. The first signal cancels the benchmark stages; cleanup
//! still runs (it must: pools and objects would otherwise be left behind).
//! A second signal during cleanup cancels cleanup too.
//!
//! The handler counts the signal (an atomic add) and writes a byte to a
//! self-pipe; a small watcher thread reading the pipe wakes the futures
//! waiting on `CancelToken::cancelled()` (waking takes a lock, which a
//! handler must not). The thread blocks in `read`, so a wake-up follows the
//! signal within the time it takes to schedule a thread.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

pub use pipeline_stage_api::cancel::{CancelSource, CancelToken};

/// Counts received signals; a token is cancelled once the count passes its threshold.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    source: Arc<CancelSource>,
}

impl Signals {
    /// Installs handlers for SIGINT and SIGTERM that count and wake the watcher.
    pub fn install() -> std::io::Result<Self> {
        let signals = Signals::default();
        let (mut wake_reader, wake_writer) = UnixStream::pair()?;
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let source = signals.source.clone();
            // SAFETY: the handler only does an atomic add, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || source.count_request())?;
            }
            // Registered second: signal-hook runs a signal's actions in
            // registration order, so the count is up before the watcher wakes.
            signal_hook::low_level::pipe::register(sig, wake_writer.try_clone()?)?;
        }
        let source = signals.source.clone();
        std::thread::Builder::new()
            .name("signal-waker".into())
            .spawn(move || {
                let mut buf = [0u8; 64];
                // Runs for the life of the process (nothing closes the pipe).
                loop {
                    match wake_reader.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => source.wake(),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            })?;
        Ok(signals)
    }

    pub fn received(&self) -> usize {
        self.source.requests()
    }

    /// Cancelled by the next signal from now on.
    pub fn token(&self) -> CancelToken {
        self.source.token()
    }

    /// For tests and programmatic cancellation: counts as a signal, and
    /// wakes waiting futures at once.
    pub fn raise(&self) {
        self.source.request();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::{Duration, Instant};

    /// Wakes a parked thread and says so: just enough of an executor for one future.
    struct Unpark {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.woken.store(true, Ordering::SeqCst);
            self.thread.unpark();
        }
    }

    /// Polls `future` again only when its waker was called, so it can only
    /// finish because something woke it; panics after a generous ceiling.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let unpark = Arc::new(Unpark {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        });
        let waker = Waker::from(unpark.clone());
        let mut cx = Context::from_waker(&waker);
        let ceiling = Instant::now() + Duration::from_secs(20);
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
            while !unpark.woken.swap(false, Ordering::SeqCst) {
                assert!(Instant::now() < ceiling, "the future was never woken");
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
    }

    /// A real SIGINT reaches a waiting future through the handler's pipe
    /// and the watcher thread (the future has no other way to be woken).
    #[test]
    fn a_signal_wakes_a_waiting_future() {
        let signals = Signals::install().unwrap();
        let token = signals.token();
        let sender = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: signalling our own process, whose handler is installed.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGINT);
            }
        });
        block_on(token.cancelled());
        sender.join().unwrap();
        assert!(token.is_cancelled());
        assert_eq!(signals.received(), 1);
        // The next token waits for the next signal; raise() counts as one.
        let next = signals.token();
        assert!(!next.is_cancelled());
        signals.raise();
        block_on(next.cancelled());
    }
}
