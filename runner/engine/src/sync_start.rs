//! `sync_start: true`: before a per-host stage's hosts start, each host's
//! clock is compared with this machine's over SSH, and the hosts' runs are
//! given seats at one start barrier
//! ([`pipeline_stage_api::start_barrier`]). Afterwards their actual starts,
//! each in its host's clock, are brought into this machine's clock for the
//! report ([`pipeline_stage_api::start_report::add_start_report`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use pipeline_stage_api::clock::{self, Offset};
use pipeline_stage_api::start_barrier::{BarrierHost, StartBarrier, StartSeat};

use crate::hosts::Host;
use crate::stage::StageError;
use pipeline_stage_api::start_report::{HostStart, StartReport};

/// From the last host's arrival at the barrier to the start, besides the
/// longest round trip: time for every host's command to get on its way
/// (an SSH session over the open connection, the remote shell).
const START_MARGIN: Duration = Duration::from_millis(500);

/// Clock samples per host; the one with the shortest round trip counts.
const CLOCK_ROUNDS: usize = 8;
/// A host whose shortest round trip is longer has no usable offset.
const CLOCK_BOUND: Duration = Duration::from_millis(100);
/// Longest a host may take to answer all its samples.
const CLOCK_LIMIT: Duration = Duration::from_secs(10);

/// The barrier of one run of a stage on `hosts` and a seat per host, in
/// their order. Fails naming every host whose clock could not be compared.
pub fn prepare(hosts: &[Host]) -> Result<(Arc<StartBarrier>, Vec<StartSeat>), StageError> {
    let offsets = measure_clocks(hosts);
    let failures: Vec<String> = offsets
        .iter()
        .filter_map(|o| o.as_ref().err().map(ToString::to_string))
        .collect();
    if !failures.is_empty() {
        return Err(StageError::failed(format!(
            "cannot start the hosts together: {}",
            failures.join("; ")
        )));
    }
    let at_barrier = hosts
        .iter()
        .zip(offsets)
        .filter_map(|(host, offset)| {
            Some(BarrierHost {
                name: host.name.clone(),
                offset: offset.ok()?,
            })
        })
        .collect();
    Ok(StartBarrier::new(at_barrier, START_MARGIN))
}

/// Every host's offset, measured at the same time (this machine's is 0).
fn measure_clocks(hosts: &[Host]) -> Vec<Result<Offset, clock::MeasureError>> {
    std::thread::scope(|scope| {
        let measuring: Vec<_> = hosts
            .iter()
            .map(|host| {
                scope.spawn(move || {
                    clock::measure_over_ssh(host, CLOCK_ROUNDS, CLOCK_BOUND, CLOCK_LIMIT)
                })
            })
            .collect();
        measuring
            .into_iter()
            .zip(hosts)
            .map(|(m, host)| {
                m.join().unwrap_or_else(|_| {
                    Err(clock::MeasureError::Crashed {
                        host: host.describe(),
                    })
                })
            })
            .collect()
    })
}

/// What the report says about the start: `started[i]` is when seat `i`'s
/// host did start, in that host's clock. `None` when the hosts never got
/// their start instant (a host failed first).
pub fn report(barrier: &StartBarrier, started: &[Option<SystemTime>]) -> Option<StartReport> {
    let planned = barrier.planned_start()?;
    let hosts = barrier
        .hosts()
        .iter()
        .zip(started)
        .map(|(host, started)| HostStart {
            name: host.name.clone(),
            clock: host.offset,
            started: started.map(|at| host.offset.to_local(at)),
        })
        .collect();
    Some(StartReport { planned, hosts })
}
