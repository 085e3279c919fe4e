//! How far another host's wall clock is from this machine's, measured the
//! way NTP does it: this machine's time when a question leaves (`sent`),
//! the host's time when it answers (`remote`), this machine's time when the
//! answer is back (`received`). The host's clock read `remote` somewhere in
//! between, so its offset is `remote - (sent + received) / 2`, give or take
//! half the round trip. Of several samples, the one with the shortest round
//! trip is the most exact.
//!
//! Hosts started together (`sync_start`, the object-gateway workers) are
//! given their start instant in their own clock: this machine's instant
//! plus the host's offset.

use std::os::unix::process::CommandExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One question and answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// This machine's clock when the question left, ns since the Unix epoch.
    pub sent_ns: i128,
    /// The host's clock when it answered.
    pub remote_ns: i128,
    /// This machine's clock when the answer came back.
    pub received_ns: i128,
}

/// A host's clock against this machine's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Offset {
    /// The host's clock minus this machine's, in nanoseconds.
    pub offset_ns: i64,
    /// The round trip of the sample it comes from: the offset is exact to
    /// half of it.
    pub round_trip_ns: i64,
    pub samples: usize,
}

impl Offset {
    /// The offset in milliseconds, for reports.
    pub fn offset_ms(&self) -> f64 {
        self.offset_ns as f64 / 1e6
    }

    pub fn round_trip_ms(&self) -> f64 {
        self.round_trip_ns as f64 / 1e6
    }

    /// `instant` (this machine's clock) as the host's clock reads it then.
    pub fn to_remote(&self, instant: SystemTime) -> SystemTime {
        shift(instant, self.offset_ns)
    }

    /// `instant` of the host's clock as this machine's clock reads it then.
    pub fn to_local(&self, instant: SystemTime) -> SystemTime {
        shift(instant, -self.offset_ns)
    }
}

fn shift(t: SystemTime, ns: i64) -> SystemTime {
    let d = Duration::from_nanos(ns.unsigned_abs());
    if ns >= 0 { t + d } else { t - d }
}

/// Nanoseconds since the Unix epoch of `t` (negative before it).
pub fn unix_ns(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The instant `ns` nanoseconds after the Unix epoch.
pub fn from_unix_ns(ns: i128) -> SystemTime {
    let d = Duration::from_nanos(ns.unsigned_abs().min(u64::MAX as u128) as u64);
    if ns >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

/// This machine's clock now, ns since the Unix epoch.
pub fn now_ns() -> i128 {
    unix_ns(SystemTime::now())
}

/// Why no offset could be had.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    #[error("no answer to compare clocks with")]
    NoSamples,
    #[error(
        "every clock sample took longer than {bound_ms} ms there and back (the shortest {shortest_ms:.1} ms), so the host's clock offset is not known well enough"
    )]
    TooSlow { bound_ms: u64, shortest_ms: f64 },
}

/// Why a host's clock offset could not be measured over SSH.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("cannot start ssh to {host}: {source}")]
    Spawn {
        host: String,
        source: std::io::Error,
    },
    /// The session broke or answered nonsense; `ssh` is what ssh said, explained.
    #[error("cannot compare clocks with host {host}: {why}{ssh}")]
    Session {
        host: String,
        why: String,
        ssh: String,
    },
    #[error("clock of host {host}: {source}")]
    Estimate { host: String, source: ClockError },
    /// The thread measuring it panicked.
    #[error("comparing clocks with host {host} crashed")]
    Crashed { host: String },
}

/// The offset from the sample with the shortest round trip; samples whose
/// answer came back before the question left (a clock step here) are
/// ignored. Refused when even the best round trip is over `bound`: the
/// offset would be uncertain by more than half of it.
pub fn estimate(samples: &[Sample], bound: Duration) -> Result<Offset, ClockError> {
    let best = samples
        .iter()
        .filter(|s| s.received_ns >= s.sent_ns)
        .min_by_key(|s| s.received_ns - s.sent_ns)
        .ok_or(ClockError::NoSamples)?;
    let round_trip = best.received_ns - best.sent_ns;
    if round_trip > bound.as_nanos() as i128 {
        return Err(ClockError::TooSlow {
            bound_ms: bound.as_millis() as u64,
            shortest_ms: round_trip as f64 / 1e6,
        });
    }
    let midpoint = best.sent_ns + round_trip / 2;
    Ok(Offset {
        offset_ns: (best.remote_ns - midpoint).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        round_trip_ns: round_trip as i64,
        samples: samples.len(),
    })
}

/// The spread of start instants (this machine's clock, ns): latest minus
/// earliest, in milliseconds.
pub fn spread_ms(starts_ns: &[i128]) -> f64 {
    let (Some(min), Some(max)) = (starts_ns.iter().min(), starts_ns.iter().max()) else {
        return 0.0;
    };
    (max - min) as f64 / 1e6
}

/// Measures `host`'s offset over one SSH session: a shell there answers
/// each line it reads with its clock (`date +%s%N`), `rounds` times; the
/// session's round trips are what bound the error, not SSH's start-up.
/// This machine is its own clock (offset 0). Gives up after `limit`.
pub fn measure_over_ssh(
    host: &crate::hosts::Host,
    rounds: usize,
    bound: Duration,
    limit: Duration,
) -> Result<Offset, MeasureError> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    if host.is_local() {
        return Ok(Offset {
            offset_ns: 0,
            round_trip_ns: 0,
            samples: 0,
        });
    }
    let mut argv = host.ssh_argv();
    argv.push("sh -c 'while read -r _; do date +%s%N || exit 1; done'".into());
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| MeasureError::Spawn {
            host: host.describe(),
            source,
        })?;
    let (Some(mut to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err(MeasureError::Session {
            host: host.describe(),
            why: "ssh has no stdin or stdout".into(),
            ssh: String::new(),
        });
    };
    // The reading side answers on a channel, so a silent host is given up
    // on at `limit` instead of blocking this thread.
    let (tx, rx) = std::sync::mpsc::channel::<(i128, String)>();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if tx.send((now_ns(), line)).is_err() {
                return;
            }
        }
    });
    let until = std::time::Instant::now() + limit;
    let mut samples = Vec::with_capacity(rounds);
    let mut failure = None;
    for _ in 0..rounds.max(1) {
        let sent = now_ns();
        if writeln!(to, "t").and_then(|()| to.flush()).is_err() {
            failure = Some("the SSH session closed".to_string());
            break;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok((received, line)) => match line.trim().parse::<i128>() {
                Ok(remote) => samples.push(Sample {
                    sent_ns: sent,
                    remote_ns: remote,
                    received_ns: received,
                }),
                Err(_) => {
                    failure = Some(format!(
                        "`date +%s%N` there printed `{}`, not nanoseconds (GNU date is needed)",
                        crate::exec::shell_quote(line.trim())
                    ));
                    break;
                }
            },
            Err(_) => {
                failure = Some(format!(
                    "no answer within {}",
                    crate::exec::format_duration(limit)
                ));
                break;
            }
        }
    }
    drop(to);
    // ssh's stderr may stay open in a multiplexing master it forked: read
    // for a moment only.
    let (etx, erx) = std::sync::mpsc::channel::<String>();
    if let Some(mut e) = child.stderr.take() {
        std::thread::spawn(move || {
            use std::io::Read;
            let mut text = String::new();
            let _ = e.read_to_string(&mut text);
            let _ = etx.send(text);
        });
    }
    let _ = child.kill();
    let _ = child.wait();
    let stderr = erx
        .recv_timeout(Duration::from_millis(500))
        .unwrap_or_default();
    if let Some(why) = failure {
        let ssh = if stderr.trim().is_empty() {
            String::new()
        } else {
            format!(" ({})", host.explain_ssh_failure(&stderr))
        };
        return Err(MeasureError::Session {
            host: host.describe(),
            why,
            ssh,
        });
    }
    estimate(&samples, bound).map_err(|source| MeasureError::Estimate {
        host: host.describe(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(sent: i128, remote: i128, received: i128) -> Sample {
        Sample {
            sent_ns: sent,
            remote_ns: remote,
            received_ns: received,
        }
    }

    #[test]
    fn the_shortest_round_trip_gives_the_offset() {
        // The host is 5 ms ahead; one answer was delayed on the way back.
        let samples = [
            s(1_000_000, 6_100_000, 1_200_000),
            s(2_000_000, 7_050_000, 2_100_000),
            s(3_000_000, 8_000_000, 9_000_000),
        ];
        let o = estimate(&samples, Duration::from_millis(50)).unwrap();
        assert_eq!(o.offset_ns, 5_000_000);
        assert_eq!(o.round_trip_ns, 100_000);
        assert_eq!(o.samples, 3);
        let t = UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(o.to_remote(t), t + Duration::from_millis(5));
        assert_eq!(o.to_local(o.to_remote(t)), t);
    }

    #[test]
    fn a_host_behind_has_a_negative_offset() {
        let o = estimate(
            &[s(10_000_000, 2_000_000, 10_000_000)],
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(o.offset_ns, -8_000_000);
        let t = UNIX_EPOCH + Duration::from_secs(100);
        assert_eq!(o.to_remote(t), t - Duration::from_millis(8));
    }

    #[test]
    fn slow_or_no_answers_give_no_offset() {
        assert_eq!(
            estimate(&[], Duration::from_secs(1)),
            Err(ClockError::NoSamples)
        );
        // Received before sent: this machine's clock stepped back.
        assert_eq!(
            estimate(&[s(10, 5, 9)], Duration::from_secs(1)),
            Err(ClockError::NoSamples)
        );
        let err = estimate(&[s(0, 0, 300_000_000)], Duration::from_millis(100)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "every clock sample took longer than 100 ms there and back (the shortest 300.0 ms), so the host's clock offset is not known well enough"
        );
    }

    #[test]
    fn unix_nanoseconds_round_trip_and_spread() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(from_unix_ns(unix_ns(t)), t);
        assert_eq!(spread_ms(&[5_000_000, 1_000_000, 3_000_000]), 4.0);
        assert_eq!(spread_ms(&[]), 0.0);
    }
}
