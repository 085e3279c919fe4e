//! The clock check: how far each client host's clock is from this
//! machine's, measured over its worker's own session (`ping`/`pong`), so
//! that one start instant can be given to every host in its own clock.

use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::clock::{self, Sample};
use crate::context::StageContext;
use crate::stage::StageError;

use super::protocol::ToWorker;
use super::session::{Rules, Worker, poll};

/// Clock samples per host, and the longest round trip an offset may come from.
pub const CLOCK_SAMPLES: usize = 8;
pub const CLOCK_BOUND: Duration = Duration::from_millis(100);

/// What `pipeline plan` says of it; `ready` is what the workers are once
/// they may start (`prefilled`).
pub fn plan_note(ready: &str) -> String {
    format!(
        "compare each host's clock over its worker's SSH session ({CLOCK_SAMPLES} round trips, the shortest at most {} ms); once all are {ready}, start them together",
        CLOCK_BOUND.as_millis()
    )
}

/// Compares clocks with one worker over its session: `ping`s one at a
/// time, each answered at once.
pub(super) fn measure_clock<W: DeserializeOwned>(
    ctx: &mut StageContext,
    rules: &Rules,
    workers: &mut [Worker<W>],
    i: usize,
) -> Result<(), StageError> {
    let mut samples = Vec::new();
    for id in 0..CLOCK_SAMPLES as u64 {
        let sent = clock::now_ns();
        workers[i].send(&ToWorker::Ping { id });
        let by = Instant::now() + Duration::from_secs(2);
        while Instant::now() < by && workers[i].running() {
            poll(ctx, rules, &mut workers[i..=i]);
            if let Some(&(_, remote, received)) = workers[i].pongs.iter().find(|p| p.0 == id) {
                samples.push(Sample {
                    sent_ns: sent,
                    remote_ns: remote.into(),
                    received_ns: received,
                });
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let w = &mut workers[i];
    if !w.running() {
        return Ok(());
    }
    match clock::estimate(&samples, CLOCK_BOUND) {
        Ok(offset) => {
            w.offset = Some(offset);
            Ok(())
        }
        Err(e) => Err(StageError::failed(format!(
            "host {}: cannot compare clocks: {e}",
            w.host.describe()
        ))),
    }
}
