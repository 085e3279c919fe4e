//! The phases of a run: prefill (when the workload reads), the host's
//! start (hosts that start together wait for each other), warm-up and the
//! measured phase, which the [`PhaseController`] moves along while the
//! workers run, supervised every 50 ms until they are done.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use pipeline_stage_api::stage::StageError;
use tokio::sync::watch;

use super::super::recorder::{Phase, Recorder};
use super::config::LoadConfig;
use super::cpu::CpuMeter;
use super::engine::{Schedule, Shared, Target, load_worker, phase_code, prefill_worker};
use super::host::LoadHost;

/// How long each phase lasted and what the client's CPU did in the measured one.
pub(super) struct Timing {
    pub(super) prefill: Duration,
    pub(super) warmup: Duration,
    pub(super) measure: Duration,
    pub(super) cpu_seconds: f64,
    /// With `steady_state`: whether it was reached (and the run ended early).
    pub(super) steady: Option<bool>,
    /// User+system CPU of the radosgw processes on this machine in the
    /// measured phase, when the endpoint is on loopback.
    pub(super) gateway_cpu_seconds: Option<f64>,
    /// Wall-clock bounds of the measured phase at full load (see [`Window`](super::Window)).
    pub(super) measure_start_unix_ns: i64,
    pub(super) issuing_end_unix_ns: i64,
}

pub(super) fn unix_ns(t: SystemTime) -> i64 {
    pipeline_stage_api::clock::unix_ns(t).clamp(0, i64::MAX as i128) as i64
}

/// Why the controller stopped the workers early.
pub(super) enum Interrupted {
    Cancelled,
    Deadline,
}

/// Polls every 50 ms until every worker is done, the run is cancelled, or
/// the stage's time is up; on the latter two it aborts the requests in
/// flight. `tick` moves the phases along.
pub(super) async fn supervise(
    ctx: &dyn LoadHost,
    abort: &watch::Sender<bool>,
    handles: &[tokio::task::JoinHandle<()>],
    mut tick: impl FnMut(Instant),
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
        tick(Instant::now());
        if handles.iter().all(|h| h.is_finished()) {
            return Ok(());
        }
    }
}

pub(super) fn interrupted_error(why: Interrupted, phase: &str) -> StageError {
    match why {
        Interrupted::Cancelled => StageError::Cancelled,
        Interrupted::Deadline => {
            StageError::Timeout(format!("the stage's timeout (in the {phase})"))
        }
    }
}

/// Prefill (when the workload needs one), the start, warm-up and the
/// measured phase; what the requests recorded, and how long each phase took.
pub(super) fn measure(
    config: &LoadConfig,
    ctx: &dyn LoadHost,
    runtime: &tokio::runtime::Runtime,
    target: &Arc<Target>,
) -> Result<(Recorder, Timing), StageError> {
    let prefill = config.needs_prefill();
    let shared = Arc::new(Shared::new(target, config, prefill));
    let (abort_tx, abort_rx) = watch::channel(false);
    let prefill_time = if prefill {
        run_prefill(config, ctx, runtime, &shared, (&abort_tx, &abort_rx))?
    } else {
        Duration::ZERO
    };

    // Hosts that start together wait for each other here, prefilled.
    ctx.wait_for_start()?;
    let mut phases = PhaseController::begin(config, &shared, ctx, target.client.is_loopback());
    ctx.progress(&config.describe_workload());
    if let Some(rate) = config.rate {
        let _ = shared.schedule.set(Schedule::new(phases.start, rate));
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
    runtime
        .block_on(supervise(ctx, &abort_tx, &handles, |now| phases.tick(now)))
        .map_err(|why| interrupted_error(why, "measured phase"))?;
    let timing = phases.finish(prefill_time);
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

/// Writes every key once; returns how long it took.
fn run_prefill(
    config: &LoadConfig,
    ctx: &dyn LoadHost,
    runtime: &tokio::runtime::Runtime,
    shared: &Arc<Shared>,
    (abort_tx, abort_rx): (&watch::Sender<bool>, &watch::Receiver<bool>),
) -> Result<Duration, StageError> {
    ctx.progress(&format!("prefill: {} objects", config.slots()));
    let started = Instant::now();
    let handles: Vec<_> = (0..config.concurrency)
        .map(|_| runtime.spawn(prefill_worker(Arc::clone(shared), abort_rx.clone())))
        .collect();
    runtime
        .block_on(supervise(ctx, abort_tx, &handles, |_| {}))
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
    Ok(started.elapsed())
}

/// Moves a started load through warm-up and the measured phase. At each
/// [`tick`](Self::tick) it starts the measured phase once the warm-up is
/// over, stops new requests at the end of `duration` or at a steady state,
/// and hands the host every finished second; [`finish`](Self::finish) says
/// how long each phase took. It alone writes the phase, the measured
/// phase's start and the stop of the [`Shared`] state the workers read.
pub(super) struct PhaseController<'a> {
    config: &'a LoadConfig,
    shared: &'a Shared,
    host: &'a dyn LoadHost,
    /// The warm-up began: the load's start.
    start: Instant,
    /// The same instant in wall-clock time.
    wall_start: SystemTime,
    /// When the measured phase began, once it has.
    measure_start: Option<Instant>,
    /// The CPU since the measured phase began (since the start until then).
    cpu: CpuMeter,
    /// Finished seconds of the measured phase handed to the host so far.
    seconds_handed: u64,
    /// Steady state was reached (and new requests stopped there).
    steady: bool,
    /// When new requests stopped, once the controller stopped them.
    issuing_end: Option<Instant>,
}

impl<'a> PhaseController<'a> {
    /// The load starts now: with a warm-up, in it; without, measured at once.
    pub(super) fn begin(
        config: &'a LoadConfig,
        shared: &'a Shared,
        host: &'a dyn LoadHost,
        local_gateway: bool,
    ) -> Self {
        let start = Instant::now();
        let mut phases = PhaseController {
            config,
            shared,
            host,
            start,
            wall_start: SystemTime::now(),
            measure_start: None,
            // A gateway on this machine: its CPU over the measured phase too.
            cpu: CpuMeter::start(local_gateway),
            seconds_handed: 0,
            steady: false,
            issuing_end: None,
        };
        if config.warmup.0.is_zero() {
            phases.start_measuring(start);
        } else {
            shared
                .phase
                .store(phase_code(Phase::Warmup), Ordering::Release);
        }
        phases
    }

    /// One look at the clock and the figures so far (every 50 ms).
    pub(super) fn tick(&mut self, now: Instant) {
        if self.measure_start.is_none() && now.duration_since(self.start) >= self.config.warmup.0 {
            self.start_measuring(now);
            self.cpu = self.cpu.restart();
        }
        if let Some(measure_start) = self.measure_start {
            self.stop_after_duration(now, measure_start);
            self.hand_finished_seconds(now, measure_start);
            self.stop_when_steady();
        }
        if self.issuing_end.is_none() && self.stopped_issuing() {
            self.issuing_end = Some(now);
        }
    }

    /// How long each phase lasted, now that the workers are done.
    pub(super) fn finish(self, prefill: Duration) -> Timing {
        let end = Instant::now();
        let (cpu_seconds, gateway_cpu_seconds) = self.cpu.used();
        let measure_started = self.measure_start.unwrap_or(end);
        Timing {
            prefill,
            warmup: measure_started.duration_since(self.start),
            measure: end.duration_since(measure_started),
            cpu_seconds,
            steady: self.config.steady_state.as_ref().map(|_| self.steady),
            gateway_cpu_seconds,
            measure_start_unix_ns: self.wall(measure_started),
            // An `operations` run stops issuing when its tickets are gone,
            // which the controller does not see: its last completion then.
            issuing_end_unix_ns: self.wall(self.issuing_end.unwrap_or(end)),
        }
    }

    fn start_measuring(&mut self, now: Instant) {
        self.measure_start = Some(now);
        *self
            .shared
            .measure_start
            .lock()
            .expect("measure_start lock") = Some(now);
        self.shared
            .phase
            .store(phase_code(Phase::Measure), Ordering::Release);
    }

    /// A timed run issues nothing new after its `duration`.
    fn stop_after_duration(&self, now: Instant, measure_start: Instant) {
        if self.config.operations.is_none()
            && now.duration_since(measure_start) >= self.config.duration.0
        {
            self.stop_issuing();
        }
    }

    /// Once a second has finished, not every tick: the recorder's lock is
    /// the workers' too.
    fn hand_finished_seconds(&mut self, now: Instant, measure_start: Instant) {
        let finished = now.duration_since(measure_start).as_secs();
        if finished > self.seconds_handed {
            self.seconds_handed = finished;
            self.host.measured_seconds(&self.ops_per_second());
            let last = self
                .shared
                .recorder
                .lock()
                .expect("recorder lock")
                .last_seconds();
            for (series, unit, t_s, value) in last {
                self.host.live_point(&series, unit, t_s, value);
            }
        }
    }

    fn stop_when_steady(&mut self) {
        let Some(ss) = &self.config.steady_state else {
            return;
        };
        if !self.steady && !self.stopped_issuing() && ss.reached(&self.ops_per_second()) {
            self.steady = true;
            self.stop_issuing();
        }
    }

    fn ops_per_second(&self) -> Vec<f64> {
        self.shared
            .recorder
            .lock()
            .expect("recorder lock")
            .ops_per_second()
    }

    fn stop_issuing(&self) {
        self.shared.stop_issuing.store(true, Ordering::Relaxed);
    }

    fn stopped_issuing(&self) -> bool {
        self.shared.stop_issuing.load(Ordering::Relaxed)
    }

    /// An instant of this run in wall-clock time (ns since the epoch).
    fn wall(&self, t: Instant) -> i64 {
        unix_ns(self.wall_start + t.saturating_duration_since(self.start))
    }
}

/// Fails when the share of failed requests passes `max_error_rate`.
pub(super) fn fail_on_errors(
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

#[cfg(test)]
mod tests {
    use super::super::engine::take_ticket;
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn config(with: serde_json::Value) -> LoadConfig {
        serde_json::from_value(with).unwrap()
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
}
