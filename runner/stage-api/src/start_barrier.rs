//! The hosts of a `sync_start` stage start their measured command at one
//! instant. Each host's run of the stage holds a [`StartSeat`]; right before
//! its measured command it waits at the barrier ([`StartSeat::wait`]). When
//! the last host arrives, the instant is picked: now plus a margin long
//! enough for every host to get its command on its way (SSH included), and
//! each host is given it in its own clock (this machine's instant plus the
//! host's [`Offset`]).
//!
//! A host that fails, or ends without reaching the barrier, must not leave
//! the others waiting for it: its seat is dropped with its stage context,
//! and the others are told which host failed. Cancellation and the stage's
//! deadline release every waiter too.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::cancel::CancelToken;
use crate::clock::Offset;

/// Why a host does not start with the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    #[error("host {0} failed before the synchronized start")]
    HostFailed(String),
    #[error("cancelled before the synchronized start")]
    Cancelled,
    #[error(
        "the stage's time ran out before every host was ready for the synchronized start (waiting for {})",
        .waiting_for.join(", ")
    )]
    Deadline { waiting_for: Vec<String> },
}

/// One host at the barrier: its name and its clock against this machine's.
#[derive(Debug, Clone)]
pub struct BarrierHost {
    pub name: String,
    pub offset: Offset,
}

/// Where the hosts of one run of a stage meet.
#[derive(Debug)]
pub struct StartBarrier {
    hosts: Vec<BarrierHost>,
    /// From the last arrival to the start.
    margin: Duration,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    arrived: Vec<bool>,
    /// `None` while hosts are still arriving; then the start instant (this
    /// machine's clock) or why there is none, the same for every host.
    outcome: Option<Result<SystemTime, StartError>>,
}

/// How often a waiter looks at cancellation and the deadline (the barrier
/// itself wakes it at once).
const POLL: Duration = Duration::from_millis(20);

impl StartBarrier {
    /// A barrier for `hosts` and a seat for each, in the same order. The
    /// margin is `base_margin` plus the longest round trip to a host.
    pub fn new(hosts: Vec<BarrierHost>, base_margin: Duration) -> (Arc<Self>, Vec<StartSeat>) {
        let longest_round_trip = hosts
            .iter()
            .map(|h| Duration::from_nanos(h.offset.round_trip_ns.max(0) as u64))
            .max()
            .unwrap_or_default();
        let barrier = Arc::new(StartBarrier {
            state: Mutex::new(State {
                arrived: vec![false; hosts.len()],
                outcome: None,
            }),
            hosts,
            margin: base_margin + longest_round_trip,
            changed: Condvar::new(),
        });
        let seats = (0..barrier.hosts.len())
            .map(|index| StartSeat {
                barrier: barrier.clone(),
                index,
            })
            .collect();
        (barrier, seats)
    }

    /// The instant picked for the start, in this machine's clock, once
    /// every host arrived.
    pub fn planned_start(&self) -> Option<SystemTime> {
        match &self.lock().outcome {
            Some(Ok(at)) => Some(*at),
            _ => None,
        }
    }

    /// The hosts, in seat order.
    pub fn hosts(&self) -> &[BarrierHost] {
        &self.hosts
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A waiter never panics while holding the lock; a poisoned state is
        // still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles the outcome for everyone (the first one counts) and wakes the waiters.
    fn settle(&self, state: &mut State, outcome: Result<SystemTime, StartError>) {
        if state.outcome.is_none() {
            state.outcome = Some(outcome);
        }
        self.changed.notify_all();
    }

    fn waiting_for(&self, state: &State) -> Vec<String> {
        self.hosts
            .iter()
            .zip(&state.arrived)
            .filter(|(_, arrived)| !**arrived)
            .map(|(h, _)| h.name.clone())
            .collect()
    }
}

/// One host's place at a [`StartBarrier`]. Dropped before reaching it (the
/// host's run failed or ended), it tells the others.
#[derive(Debug)]
pub struct StartSeat {
    barrier: Arc<StartBarrier>,
    index: usize,
}

impl StartSeat {
    /// The host this seat is for.
    pub fn host(&self) -> &BarrierHost {
        &self.barrier.hosts[self.index]
    }

    /// Arrives and waits for the other hosts; returns the start instant in
    /// this seat's host's clock. Called again, it returns the same answer.
    pub fn wait(
        &mut self,
        cancel: &CancelToken,
        deadline: Option<Instant>,
    ) -> Result<SystemTime, StartError> {
        let barrier = &*self.barrier;
        let mut state = barrier.lock();
        state.arrived[self.index] = true;
        if state.outcome.is_none() && state.arrived.iter().all(|a| *a) {
            let at = SystemTime::now() + barrier.margin;
            barrier.settle(&mut state, Ok(at));
        }
        loop {
            if let Some(outcome) = &state.outcome {
                return outcome.clone().map(|at| self.host().offset.to_remote(at));
            }
            if cancel.is_cancelled() {
                barrier.settle(&mut state, Err(StartError::Cancelled));
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let waiting_for = barrier.waiting_for(&state);
                barrier.settle(&mut state, Err(StartError::Deadline { waiting_for }));
                continue;
            }
            let pause = deadline.map_or(POLL, |d| {
                d.saturating_duration_since(Instant::now()).min(POLL)
            });
            state = barrier
                .changed
                .wait_timeout(state, pause)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for StartSeat {
    fn drop(&mut self) {
        let barrier = &*self.barrier;
        let mut state = barrier.lock();
        if state.outcome.is_none() {
            let name = self.host().name.clone();
            barrier.settle(&mut state, Err(StartError::HostFailed(name)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::CancelSource;

    fn host(name: &str, offset_ms: i64, round_trip_ms: i64) -> BarrierHost {
        BarrierHost {
            name: name.into(),
            offset: Offset {
                offset_ns: offset_ms * 1_000_000,
                round_trip_ns: round_trip_ms * 1_000_000,
                samples: 8,
            },
        }
    }

    /// Runs each seat's `wait` on a thread of its own after `delays[i]`;
    /// a seat without a delay is dropped at once instead.
    fn gather(
        seats: Vec<StartSeat>,
        delays: &[Option<Duration>],
        cancel: &CancelToken,
        deadline: Option<Instant>,
    ) -> Vec<Option<Result<SystemTime, StartError>>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = seats
                .into_iter()
                .zip(delays)
                .map(|(mut seat, delay)| {
                    let delay = *delay;
                    scope.spawn(move || {
                        let delay = delay?;
                        std::thread::sleep(delay);
                        Some(seat.wait(cancel, deadline))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn every_host_gets_the_same_instant_in_its_own_clock() {
        let (barrier, seats) = StartBarrier::new(
            vec![
                host("node1", 0, 2),
                host("node2", 250, 8),
                host("node3", -40, 1),
            ],
            Duration::from_millis(500),
        );
        let before = SystemTime::now();
        let got = gather(
            seats,
            &[
                Some(Duration::ZERO),
                Some(Duration::from_millis(50)),
                Some(Duration::from_millis(100)),
            ],
            &CancelToken::default(),
            None,
        );
        let at = barrier.planned_start().expect("every host arrived");
        let margin = at.duration_since(before).unwrap();
        // Picked when the last host arrived (100 ms in), 500 ms + the
        // longest round trip (8 ms) later.
        assert!(margin >= Duration::from_millis(608), "{margin:?}");
        let got: Vec<SystemTime> = got.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert_eq!(got[0], at);
        assert_eq!(got[1], at + Duration::from_millis(250));
        assert_eq!(got[2], at - Duration::from_millis(40));
    }

    #[test]
    fn a_host_that_ends_before_the_barrier_releases_the_others() {
        let (barrier, seats) = StartBarrier::new(
            vec![
                host("node1", 0, 1),
                host("node2", 0, 1),
                host("node3", 0, 1),
            ],
            Duration::from_millis(500),
        );
        let started = Instant::now();
        // node2 fails 100 ms in, before it reaches the barrier.
        let got = gather(
            seats,
            &[Some(Duration::ZERO), None, Some(Duration::from_millis(10))],
            &CancelToken::default(),
            None,
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let failed = Some(Err(StartError::HostFailed("node2".into())));
        assert_eq!(got, [failed.clone(), None, failed]);
        assert_eq!(barrier.planned_start(), None);
        assert_eq!(
            StartError::HostFailed("node2".into()).to_string(),
            "host node2 failed before the synchronized start"
        );
    }

    #[test]
    fn cancellation_releases_the_waiters() {
        let (_, mut seats) = StartBarrier::new(
            vec![host("node1", 0, 1), host("node2", 0, 1)],
            Duration::from_millis(500),
        );
        let source = Arc::new(CancelSource::default());
        let token = source.token();
        // node2 never arrives; node1 waits until Ctrl-C.
        let _node2 = seats.pop().unwrap();
        let mut node1 = seats.pop().unwrap();
        let got = std::thread::scope(|scope| {
            let waiter = scope.spawn(|| node1.wait(&token, None));
            std::thread::sleep(Duration::from_millis(50));
            source.request();
            waiter.join().unwrap()
        });
        assert_eq!(got, Err(StartError::Cancelled));
    }

    #[test]
    fn the_deadline_releases_the_waiters_naming_who_was_missing() {
        let (_, mut seats) = StartBarrier::new(
            vec![host("node1", 0, 1), host("node2", 0, 1)],
            Duration::from_millis(500),
        );
        let _node2 = seats.pop().unwrap();
        let mut node1 = seats.pop().unwrap();
        let deadline = Instant::now() + Duration::from_millis(100);
        let got = node1.wait(&CancelToken::default(), Some(deadline));
        let err = got.unwrap_err();
        assert_eq!(
            err,
            StartError::Deadline {
                waiting_for: vec!["node2".into()]
            }
        );
        assert_eq!(
            err.to_string(),
            "the stage's time ran out before every host was ready for the synchronized start (waiting for node2)"
        );
    }

    #[test]
    fn asking_again_gives_the_same_answer() {
        let (_, mut seats) = StartBarrier::new(vec![host("node1", 5, 1)], Duration::ZERO);
        let cancel = CancelToken::default();
        let first = seats[0].wait(&cancel, None).unwrap();
        assert_eq!(seats[0].wait(&cancel, None), Ok(first));
        // Dropping a seat after the start changes nothing for anyone.
        drop(seats);
    }
}
