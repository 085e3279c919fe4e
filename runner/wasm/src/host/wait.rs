//! Guest waits under the call's limits.
//!
//! Epoch interruption only stops a guest that is running wasm code; a guest
//! blocked in a host call is out of its reach. Every wait a guest can start
//! through WASI (with no preopens and no sockets: `std::thread::sleep`,
//! i.e. a `wasi:clocks` subscription, and any other pollable) ends in
//! `wasi:io/poll`'s `poll` or `pollable.block`. Those two are shadowed here
//! by versions that race the wait against the call's limits: the stage's
//! deadline and Ctrl-C during `run`, the compute budget during `describe`,
//! `check` and `plan` (which have no deadline of their own). When a limit
//! wins, the guest is stopped with the same [`Stopped`] trap the epoch
//! callback raises.
//!
//! During `run` a wait is host time, like `exec` and `http`: it does not use
//! up the guest's compute budget, only the stage's time. Elsewhere it counts
//! as the call's time, so `plan` cannot sleep past its budget.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi_io::bindings::wasi::io::poll::{Host as _, HostPollable as _};

use super::{HostState, Phase};
use crate::engine::TICK;
use crate::limits::{CallClock, Stopped};

/// The `wasi:io/poll` that `wasmtime_wasi::p2::add_to_linker_sync` links
/// (wasmtime-wasi 48); guests importing any 0.2.x version resolve to it.
const POLL_INTERFACE: &str = "wasi:io/poll@0.2.12";

type Wait<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// Replaces `poll` and `pollable.block` (call after `add_to_linker_sync`).
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL_INTERFACE)?;
    poll.func_wrap(
        "poll",
        |mut store, (pollables,): (Vec<Resource<DynPollable>>,)| {
            let state: &mut HostState = store.data_mut();
            state
                .bounded_wait(|table| Box::pin(table.poll(pollables)))
                .map(|ready| (ready,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store, (pollable,): (Resource<DynPollable>,)| {
            let state: &mut HostState = store.data_mut();
            state.bounded_wait(|table| Box::pin(table.block(pollable)))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

impl HostState {
    /// Runs `wait` on the resource table until it finishes or a limit of
    /// the call is reached (then the guest is stopped).
    fn bounded_wait<R>(
        &mut self,
        wait: impl for<'a> FnOnce(&'a mut ResourceTable) -> Wait<'a, R>,
    ) -> wasmtime::Result<R> {
        let started = Instant::now();
        let mut clock = self.clock.clone();
        let in_run = self.setup.phase == Phase::Run;
        if in_run {
            // Waiting is not computing: only the deadline and Ctrl-C apply.
            clock.budget = Duration::MAX;
        }
        let cancelled = self.setup.cancelled.clone();
        let table = &mut self.table;
        let outcome = wasmtime_wasi::runtime::in_tokio(async move {
            tokio::select! {
                r = wait(table) => Ok(r),
                stop = limits(clock, cancelled) => Err(stop),
            }
        });
        if in_run {
            self.clock.in_host += started.elapsed();
        }
        match outcome {
            Ok(r) => r,
            Err(stop) => Err(wasmtime::Error::new(stop)),
        }
    }
}

/// Resolves with the reason to stop once a limit of the call is reached.
async fn limits(clock: CallClock, cancelled: Arc<AtomicBool>) -> Stopped {
    loop {
        if let Some(stop) = clock.check(cancelled.load(Ordering::Relaxed)) {
            return stop;
        }
        tokio::time::sleep(TICK).await;
    }
}
