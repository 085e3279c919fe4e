//! The phases of a run: prefill (when the workload reads), the host's
//! start (hosts that start together wait for each other), warm-up and the
//! measured phase, supervised every 50 ms until the workers are done.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline_stage_api::stage::StageError;
use tokio::sync::watch;

use super::super::recorder::{Phase, Recorder};
use super::config::LoadConfig;
use super::cpu::{local_gateway_cpu, process_cpu_seconds};
use super::engine::{
    ABSENT, BUSY, Schedule, Shared, Slots, Target, load_worker, phase_code, prefill_worker,
};
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
    /// Wall-clock bounds of the measured phase at full load (see [`Window`]).
    pub(super) measure_start_unix_ns: i64,
    pub(super) issuing_end_unix_ns: i64,
}

pub(super) fn unix_ns(t: std::time::SystemTime) -> i64 {
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
    mut tick: impl FnMut(),
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
        tick();
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

pub(super) fn measure(
    config: &LoadConfig,
    ctx: &dyn LoadHost,
    runtime: &tokio::runtime::Runtime,
    target: &Arc<Target>,
) -> Result<(Recorder, Timing), StageError> {
    let prefill = config.needs_prefill();
    let shared = Arc::new(Shared {
        target: Arc::clone(target),
        config: config.clone(),
        slots: Slots::new(config.slots(), if prefill { BUSY } else { ABSENT }),
        recorder: Mutex::new(Recorder::default()),
        phase: AtomicU8::new(phase_code(Phase::Prefill)),
        measure_start: Mutex::new(None),
        stop_issuing: AtomicBool::new(false),
        tickets: AtomicU64::new(config.operations.unwrap_or(u64::MAX)),
        next_prefill: AtomicU64::new(0),
        schedule: std::sync::OnceLock::new(),
    });
    let (abort_tx, abort_rx) = watch::channel(false);

    let prefill_time = if prefill {
        ctx.progress(&format!("prefill: {} objects", config.slots()));
        let started = Instant::now();
        let handles: Vec<_> = (0..config.concurrency)
            .map(|_| runtime.spawn(prefill_worker(Arc::clone(&shared), abort_rx.clone())))
            .collect();
        runtime
            .block_on(supervise(ctx, &abort_tx, &handles, || {}))
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
        started.elapsed()
    } else {
        Duration::ZERO
    };

    // Hosts that start together wait for each other here, prefilled.
    ctx.wait_for_start()?;
    let warmup = config.warmup.0;
    let start = Instant::now();
    let wall_start = std::time::SystemTime::now();
    let wall = |t: Instant| unix_ns(wall_start + t.saturating_duration_since(start));
    let mut issuing_end: Option<Instant> = None;
    // Finished seconds of the measured phase handed to the host so far.
    let mut seconds_handed = 0;
    let mut cpu_start = process_cpu_seconds();
    // A gateway on this machine: its CPU over the measured phase too.
    let local_gateway = target.client.is_loopback();
    let mut gateway_start = local_gateway.then(local_gateway_cpu).flatten();
    if warmup.is_zero() {
        *shared.measure_start.lock().expect("measure_start lock") = Some(start);
        shared
            .phase
            .store(phase_code(Phase::Measure), Ordering::Release);
    } else {
        shared
            .phase
            .store(phase_code(Phase::Warmup), Ordering::Release);
    }
    ctx.progress(&config.describe_workload());
    if let Some(rate) = config.rate {
        let _ = shared.schedule.set(Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate),
            next: AtomicU64::new(0),
        });
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
    let by_count = config.operations.is_some();
    let mut steady = false;
    let tick = || {
        let now = Instant::now();
        let mut measure_start = shared.measure_start.lock().expect("measure_start lock");
        if measure_start.is_none() && now.duration_since(start) >= warmup {
            *measure_start = Some(now);
            shared
                .phase
                .store(phase_code(Phase::Measure), Ordering::Release);
            cpu_start = process_cpu_seconds();
            gateway_start = local_gateway.then(local_gateway_cpu).flatten();
        }
        if !by_count
            && let Some(s) = *measure_start
            && now.duration_since(s) >= config.duration.0
        {
            shared.stop_issuing.store(true, Ordering::Relaxed);
        }
        // Once a second has finished, not every tick: the recorder's lock
        // is the workers' too.
        let finished_seconds = measure_start.map(|s| now.duration_since(s).as_secs());
        if finished_seconds.is_some_and(|n| n > seconds_handed) {
            seconds_handed = finished_seconds.unwrap_or(0);
            ctx.measured_seconds(
                &shared
                    .recorder
                    .lock()
                    .expect("recorder lock")
                    .ops_per_second(),
            );
        }
        if let Some(ss) = &config.steady_state
            && measure_start.is_some()
            && !steady
            && !shared.stop_issuing.load(Ordering::Relaxed)
            && ss.reached(
                &shared
                    .recorder
                    .lock()
                    .expect("recorder lock")
                    .ops_per_second(),
            )
        {
            steady = true;
            shared.stop_issuing.store(true, Ordering::Relaxed);
        }
        if issuing_end.is_none() && shared.stop_issuing.load(Ordering::Relaxed) {
            issuing_end = Some(now);
        }
    };
    runtime
        .block_on(supervise(ctx, &abort_tx, &handles, tick))
        .map_err(|why| interrupted_error(why, "measured phase"))?;
    let end = Instant::now();
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    let gateway_cpu_seconds = gateway_start
        .zip(local_gateway.then(local_gateway_cpu).flatten())
        .map(|(start, end)| (end - start).max(0.0));
    let measure_started = shared
        .measure_start
        .lock()
        .expect("measure_start lock")
        .unwrap_or(end);
    let timing = Timing {
        prefill: prefill_time,
        warmup: measure_started.duration_since(start),
        measure: end.duration_since(measure_started),
        cpu_seconds,
        steady: config.steady_state.as_ref().map(|_| steady),
        gateway_cpu_seconds,
        measure_start_unix_ns: wall(measure_started),
        // An `operations` run stops issuing when its tickets are gone,
        // which the controller does not see: its last completion then.
        issuing_end_unix_ns: wall(issuing_end.unwrap_or(end)),
    };
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
