//! Limits of one plugin call: a time budget enforced by epoch interruption,
//! and a memory cap per linear memory.
//!
//! Time: the engine's epoch advances every [`TICK`](crate::engine::TICK); a
//! store's deadline is one tick ahead and the callback decides whether the
//! guest may go on. It stops the guest when the stage's own deadline
//! (`timeout:`) has passed, when the run is interrupted, or when the guest has
//! computed for longer than its budget. Time spent in host calls (a `ceph`
//! command that takes a minute) does not count against the guest's budget:
//! those calls have their own timeouts, and epoch checks only run in wasm.

use std::time::{Duration, Instant};

use pipeline_stage_api::params::{DurationError, SizeError};

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Bytes per linear memory of an instance.
    pub memory: usize,
    /// Guest compute time for `run` (host calls excluded).
    pub run_time: Duration,
    /// Guest compute time for `describe`, `check` and `plan`.
    pub call_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: 512 << 20,
            run_time: Duration::from_secs(300),
            call_time: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// Defaults, overridden by `PIPELINE_WASM_MEMORY` (a size: `256M`) and
    /// `PIPELINE_WASM_TIME` (a duration for `run`: `30s`).
    pub fn from_env() -> Result<Self, LimitsError> {
        let mut limits = Limits::default();
        if let Ok(value) = std::env::var("PIPELINE_WASM_MEMORY") {
            let bytes = pipeline_stage_api::params::parse_size(&value)
                .map_err(|source| LimitsError::Memory { value, source })?;
            limits.memory = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Ok(value) = std::env::var("PIPELINE_WASM_TIME") {
            limits.run_time = pipeline_stage_api::params::parse_duration(&value)
                .map_err(|source| LimitsError::Time { value, source })?;
            limits.call_time = limits.call_time.min(limits.run_time);
        }
        Ok(limits)
    }
}

/// A malformed limit in the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("PIPELINE_WASM_MEMORY={value}: {source}")]
    Memory { value: String, source: SizeError },
    #[error("PIPELINE_WASM_TIME={value}: {source}")]
    Time {
        value: String,
        source: DurationError,
    },
}

/// Why a guest was stopped (carried through wasmtime as the trap's error).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Stopped {
    #[error("ran for more than {} without finishing (a runaway loop?) and was stopped", fmt(*.0))]
    Budget(Duration),
    #[error("was still running at the stage's deadline and was stopped")]
    Deadline,
    #[error("was stopped because the run was interrupted")]
    Cancelled,
    #[error("tried to grow a memory to {} MiB, over its cap of {} MiB, and was stopped", .wanted >> 20, .cap >> 20)]
    Memory { wanted: usize, cap: usize },
}

fn fmt(d: Duration) -> String {
    pipeline_stage_api::exec::format_duration(d)
}

/// The clock of one call: when it started, its deadlines, and how long the
/// guest has been waiting on the host.
#[derive(Debug, Clone)]
pub struct CallClock {
    pub started: Instant,
    pub budget: Duration,
    pub deadline: Option<Instant>,
    pub in_host: Duration,
}

impl CallClock {
    pub fn new(budget: Duration, deadline: Option<Instant>) -> Self {
        CallClock {
            started: Instant::now(),
            budget,
            deadline,
            in_host: Duration::ZERO,
        }
    }

    /// `Some(reason)` when the guest must stop now.
    pub fn check(&self, cancelled: bool) -> Option<Stopped> {
        if cancelled {
            return Some(Stopped::Cancelled);
        }
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return Some(Stopped::Deadline);
        }
        let computing = now
            .duration_since(self.started)
            .saturating_sub(self.in_host);
        (computing > self.budget).then_some(Stopped::Budget(self.budget))
    }
}

/// Caps every linear memory; a guest asking for more is stopped with a
/// [`Stopped::Memory`] trap rather than left to fail in its own way (Python
/// traps, Rust aborts, C may not check at all).
#[derive(Debug)]
pub struct MemoryCap {
    pub cap: usize,
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            return Err(wasmtime::Error::new(Stopped::Memory {
                wanted: desired,
                cap: self.cap,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; a million is far beyond any real guest.
        Ok(desired <= 1_000_000)
    }
}
