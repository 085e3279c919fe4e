//! The requests: which key each one works on ([`Slots`], [`Rng`]), which
//! operation ([`pick_op`]), when (a target rate's [`Schedule`]), and the
//! workers that issue them and record what came back.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::super::client::{OpError, Payload};
use super::super::recorder::{Op, Phase, Recorder};
use super::super::store::Store;
use super::config::{LoadConfig, Workload};

/// The gateway, the buckets and keys a run works on, and the one payload.
pub(super) struct Target {
    pub(super) client: Store,
    pub(super) payload: Payload,
    pub(super) buckets: Vec<String>,
    pub(super) prefix: String,
    pub(super) objects_per_bucket: usize,
}

impl Target {
    pub(super) fn slot(&self, index: usize) -> (&str, String) {
        let bucket = &self.buckets[index / self.objects_per_bucket];
        (
            bucket,
            format!("{}{:08}", self.prefix, index % self.objects_per_bucket),
        )
    }
}

pub(super) const ABSENT: u8 = 0;
pub(super) const PRESENT: u8 = 1;
pub(super) const BUSY: u8 = 2;

/// The state of every key, so that a GET reads an object that exists and
/// no two requests work on one key at once.
pub(super) struct Slots(pub(super) Vec<AtomicU8>);

impl Slots {
    pub(super) fn new(count: usize, state: u8) -> Self {
        Slots((0..count).map(|_| AtomicU8::new(state)).collect())
    }

    /// Takes a random key fit for `op`; `None` when none was found quickly.
    pub(super) fn claim(&self, op: Op, rng: &mut Rng) -> Option<(usize, u8)> {
        for _ in 0..64 {
            let i = rng.below(self.0.len() as u64) as usize;
            let now = self.0[i].load(Ordering::Relaxed);
            let fits = match op {
                Op::Put | Op::PutPart => now != BUSY,
                Op::Get | Op::Delete | Op::Head | Op::List => now == PRESENT,
            };
            if fits
                && self.0[i]
                    .compare_exchange(now, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                return Some((i, now));
            }
        }
        None
    }

    pub(super) fn release(&self, index: usize, state: u8) {
        self.0[index].store(state, Ordering::Release);
    }
}

/// xorshift64*: cheap per-worker randomness for key and operation choice.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub(super) fn pick_op(config: &LoadConfig, rng: &mut Rng) -> Op {
    match config.workload {
        Workload::Put => Op::Put,
        Workload::Get => Op::Get,
        Workload::Head => Op::Head,
        Workload::List => Op::List,
        Workload::Mixed => {
            let m = &config.mix;
            let weights = [
                (Op::Get, m.get),
                (Op::Put, m.put),
                (Op::Delete, m.delete),
                (Op::Head, m.head),
                (Op::List, m.list),
            ];
            let total: u32 = weights.iter().map(|(_, w)| w).sum();
            let mut r = rng.below(u64::from(total)) as u32;
            for (op, w) in weights {
                if r < w {
                    return op;
                }
                r -= w;
            }
            Op::Get
        }
    }
}

/// What the workers share with the controller.
pub(super) struct Shared {
    pub(super) target: Arc<Target>,
    pub(super) config: LoadConfig,
    pub(super) slots: Slots,
    pub(super) recorder: Mutex<Recorder>,
    /// The phase new requests count in (a [`Phase`] as u8).
    pub(super) phase: AtomicU8,
    pub(super) measure_start: Mutex<Option<Instant>>,
    /// No new requests (the ones in flight finish and are counted).
    pub(super) stop_issuing: AtomicBool,
    /// Measured operations left to issue (`operations`), or `u64::MAX`.
    pub(super) tickets: AtomicU64,
    /// Prefill: the next key to write.
    pub(super) next_prefill: AtomicU64,
    /// With a target `rate`: when each request is due (set as the load starts).
    pub(super) schedule: std::sync::OnceLock<Schedule>,
}

impl Shared {
    /// Nothing issued yet: with a prefill to come every key is busy until
    /// written, else absent; `operations` tickets, if any.
    pub(super) fn new(target: &Arc<Target>, config: &LoadConfig, prefill: bool) -> Self {
        Shared {
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
        }
    }
}

/// The fixed request schedule of a target rate: request k is due at
/// `start + k / rate`, whether or not the gateway kept up with the ones before.
pub(super) struct Schedule {
    pub(super) start: Instant,
    pub(super) interval: Duration,
    pub(super) next: AtomicU64,
}

impl Schedule {
    /// Request k due at `start + k / rate`.
    pub(super) fn new(start: Instant, rate: f64) -> Self {
        Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / rate),
            next: AtomicU64::new(0),
        }
    }

    pub(super) fn next_due(&self) -> Instant {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        self.start + self.interval.mul_f64(k as f64)
    }
}

pub(super) fn phase_of(v: u8) -> Phase {
    match v {
        0 => Phase::Prefill,
        1 => Phase::Warmup,
        _ => Phase::Measure,
    }
}

pub(super) fn phase_code(p: Phase) -> u8 {
    match p {
        Phase::Prefill => 0,
        Phase::Warmup => 1,
        Phase::Measure => 2,
    }
}

pub(super) type Answer = Result<(u64, Option<Duration>), OpError>;

/// One request; its latency (and a GET's time to first byte) counts from
/// `started`: now, or when a target rate's schedule wanted it sent.
pub(super) async fn one_request(
    shared: &Shared,
    phase: Phase,
    op: Op,
    index: usize,
    started: Instant,
) -> (Answer, Instant) {
    let t = &shared.target;
    let (bucket, key) = t.slot(index);
    let size = shared.config.size_of(index);
    let multipart = shared
        .config
        .multipart_threshold
        .is_some_and(|threshold| size as u64 >= threshold.0);
    let result = match op {
        // (A part is never drawn as an operation of its own.)
        Op::Put | Op::PutPart if multipart => {
            let body = t.payload.bytes.slice(..size);
            let part_size = shared.config.part_size.0 as usize;
            match t.client.put_multipart(bucket, &key, body, part_size).await {
                Ok((bytes, parts)) => {
                    let mut rec = shared.recorder.lock().expect("recorder lock");
                    let since = into_measure(shared);
                    for (part_bytes, took) in parts {
                        rec.success(phase, Op::PutPart, part_bytes, took, None, since);
                    }
                    Ok((bytes, None))
                }
                Err(e) => Err(e),
            }
        }
        Op::Put | Op::PutPart => t
            .client
            .put_object(bucket, &key, t.payload.body(size))
            .await
            .map(|b| (b, None)),
        Op::Get => t
            .client
            .get_object(bucket, &key, &t.payload.bytes[..size], started)
            .await
            .map(|g| (g.bytes, Some(g.ttfb))),
        Op::Delete => t
            .client
            .delete_object(bucket, &key)
            .await
            .map(|()| (0, None)),
        Op::Head => t
            .client
            .head_object(bucket, &key, size as u64)
            .await
            .map(|()| (0, None)),
        Op::List => t
            .client
            .list_page(bucket, &t.prefix)
            .await
            .map(|_| (0, None)),
    };
    (result, started)
}

/// How far into the measured phase a request finishing now is.
pub(super) fn into_measure(shared: &Shared) -> Duration {
    shared
        .measure_start
        .lock()
        .expect("measure_start lock")
        .map_or(Duration::ZERO, |s| {
            Instant::now().saturating_duration_since(s)
        })
}

pub(super) fn record(shared: &Shared, phase: Phase, op: Op, result: &Answer, started: Instant) {
    let latency = started.elapsed();
    let since = into_measure(shared);
    let mut rec = shared.recorder.lock().expect("recorder lock");
    match result {
        Ok((bytes, ttfb)) => rec.success(phase, op, *bytes, latency, *ttfb, since),
        Err(e) => rec.error(phase, op, e.kind()),
    }
}

/// A worker of the prefill: writes keys in order until all are written.
pub(super) async fn prefill_worker(shared: Arc<Shared>, mut abort: watch::Receiver<bool>) {
    let total = shared.slots.0.len() as u64;
    loop {
        let index = shared.next_prefill.fetch_add(1, Ordering::Relaxed);
        if index >= total {
            return;
        }
        let (result, started) = tokio::select! {
            r = one_request(&shared, Phase::Prefill, Op::Put, index as usize, Instant::now()) => r,
            _ = abort.wait_for(|a| *a) => return,
        };
        let state = if result.is_ok() { PRESENT } else { ABSENT };
        shared.slots.release(index as usize, state);
        record(&shared, Phase::Prefill, Op::Put, &result, started);
    }
}

/// A worker of the warm-up and measured phases.
pub(super) async fn load_worker(shared: Arc<Shared>, seed: u64, mut abort: watch::Receiver<bool>) {
    let mut rng = Rng::new(seed);
    loop {
        if shared.stop_issuing.load(Ordering::Relaxed) {
            return;
        }
        let op = pick_op(&shared.config, &mut rng);
        let Some((index, before)) = shared.slots.claim(op, &mut rng) else {
            tokio::task::yield_now().await;
            continue;
        };
        // With a target rate, wait for this request's slot in the schedule;
        // its latency counts from then, even when it is issued late.
        let due = match shared.schedule.get() {
            Some(schedule) => {
                let due = schedule.next_due();
                // A timed run issues only what is due before its end. Known
                // before sleeping, a slot past the end ends the worker now:
                // idle workers hold slots up to `concurrency` intervals
                // ahead, and sleeping to them would stretch the measured
                // phase (and cut its ops/s) by as much.
                let end = || {
                    (shared.config.operations.is_none())
                        .then(|| *shared.measure_start.lock().expect("measure_start lock"))
                        .flatten()
                        .map(|s| s + shared.config.duration.0)
                };
                if end().is_some_and(|e| due >= e) {
                    shared.slots.release(index, before);
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(due.into()) => {}
                    _ = abort.wait_for(|a| *a) => return,
                }
                if shared.stop_issuing.load(Ordering::Relaxed) || end().is_some_and(|e| due >= e) {
                    shared.slots.release(index, before);
                    return;
                }
                Some(due)
            }
            None => None,
        };
        let phase = phase_of(shared.phase.load(Ordering::Acquire));
        if phase == Phase::Measure && !take_ticket(&shared.tickets) {
            shared.slots.release(index, before);
            return;
        }
        let started = due.unwrap_or_else(Instant::now);
        let (result, started) = tokio::select! {
            r = one_request(&shared, phase, op, index, started) => r,
            _ = abort.wait_for(|a| *a) => return,
        };
        let after = match (op, &result) {
            (Op::Put | Op::PutPart, Ok(_))
            | (Op::Get | Op::Head | Op::List, _)
            | (Op::Delete, Err(_)) => PRESENT,
            (Op::Delete, Ok(_)) => ABSENT,
            (Op::Put | Op::PutPart, Err(_)) => before,
        };
        shared.slots.release(index, after);
        record(&shared, phase, op, &result, started);
        // A refused connection (the gateway restarting) is retried after a
        // pause, as SDK clients back off: the outage then counts as about
        // its length in errors per worker, not as thousands of instant ones.
        if matches!(result, Err(OpError::Connect(_))) {
            tokio::select! {
                _ = tokio::time::sleep(CONNECT_BACKOFF) => {}
                _ = abort.wait_for(|a| *a) => return,
            }
        }
    }
}

/// Pause of a worker after a refused connection.
pub(super) const CONNECT_BACKOFF: Duration = Duration::from_millis(100);

pub(super) fn take_ticket(tickets: &AtomicU64) -> bool {
    tickets
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
            left.checked_sub(1)
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(with: serde_json::Value) -> LoadConfig {
        serde_json::from_value(with).unwrap()
    }

    #[test]
    fn the_mix_picks_operations_by_weight() {
        let c = config(
            serde_json::json!({"workload": "mixed", "mix": {"get": 60, "put": 30, "delete": 10}}),
        );
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            let i = match pick_op(&c, &mut rng) {
                Op::Get => 0,
                Op::Put => 1,
                Op::Delete => 2,
                Op::Head | Op::List | Op::PutPart => unreachable!("no weight"),
            };
            counts[i] += 1;
        }
        assert!((5500..6500).contains(&counts[0]), "{counts:?}");
        assert!((2500..3500).contains(&counts[1]), "{counts:?}");
        assert!((700..1300).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn a_schedule_spaces_requests_by_the_rate_whatever_came_before() {
        let start = Instant::now();
        let s = Schedule {
            start,
            interval: Duration::from_secs_f64(1.0 / 50.0),
            next: AtomicU64::new(0),
        };
        assert_eq!(s.next_due(), start);
        assert_eq!(s.next_due(), start + Duration::from_millis(20));
        for _ in 0..98 {
            s.next_due();
        }
        assert_eq!(s.next_due(), start + Duration::from_secs(2));
        let bad = config(serde_json::json!({"rate": 0}));
        assert_eq!(bad.check()[0].0, "rate");
        let good = config(serde_json::json!({"rate": 50}));
        assert!(good.check().is_empty());
        assert!(
            good.describe_workload()
                .contains("at a target rate of 50 ops/s")
        );
    }

    #[test]
    fn a_key_is_claimed_by_one_request_at_a_time() {
        let slots = Slots::new(1, PRESENT);
        let mut rng = Rng::new(1);
        assert_eq!(slots.claim(Op::Get, &mut rng), Some((0, PRESENT)));
        assert_eq!(slots.claim(Op::Put, &mut rng), None);
        slots.release(0, ABSENT);
        assert_eq!(slots.claim(Op::Get, &mut rng), None);
        assert_eq!(slots.claim(Op::Put, &mut rng), Some((0, ABSENT)));
    }
}
