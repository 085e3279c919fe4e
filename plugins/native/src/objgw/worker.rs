//! `pipeline worker`: the load generator's half on a client host. It reads
//! its [`Job`] from stdin, runs the same load engine as a local stage
//! ([`super::load`]), and speaks the [protocol](super::protocol) on
//! stdout. The runner's half is [`super::clients`].
//!
//! Whatever happens, the worker removes what it wrote before it exits, and
//! it exits when its stdin ends (the runner closed it, or the SSH session
//! is gone): nothing is left running on the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipeline_stage_api::clock;
use pipeline_stage_api::stage::StageError;

use super::load::{self, LoadConfig, LoadHost};
use super::protocol::{self, FromWorker, Job, PROTOCOL, ToWorker, WorkerOutput};
use super::store::Store;
use super::{s3_bench, swift_bench};

/// Where the worker's messages go; each is written and flushed whole.
#[derive(Clone)]
struct Outbox(Arc<Mutex<Box<dyn Write + Send>>>);

impl Outbox {
    fn send(&self, message: &FromWorker) {
        let mut out = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // A runner that is gone cannot be told; stdin's end stops the load.
        let _ = out.write_all(&protocol::line(message));
        let _ = out.flush();
    }
}

/// What the runner said after the job, shared with the load.
#[derive(Default)]
struct Control {
    /// stdin ended (or carried something that is not the protocol).
    aborted: AtomicBool,
    /// The start instant in this host's clock; 0 until `start` came.
    start_at_unix_ns: AtomicI64,
    /// The load is over: the heartbeat ends.
    finished: AtomicBool,
}

/// Serves one job; returns the process's exit code (0: `done` was sent).
pub fn serve(input: Box<dyn Read + Send>, output: Box<dyn Write + Send>) -> i32 {
    let out = Outbox(Arc::new(Mutex::new(output)));
    let mut input = BufReader::new(input);
    let job = match read_job(&mut input) {
        Ok(job) => job,
        Err(error) => {
            out.send(&FromWorker::Failed {
                error,
                aborted: false,
            });
            return 2;
        }
    };
    out.send(&FromWorker::Hello {
        protocol: PROTOCOL,
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
    });
    if job.protocol != PROTOCOL {
        out.send(&FromWorker::Failed {
            error: format!(
                "this worker speaks protocol {PROTOCOL}, the runner sent a job of protocol {}",
                job.protocol
            ),
            aborted: false,
        });
        return 2;
    }
    let control = Arc::new(Control::default());
    spawn_control_reader(input, out.clone(), Arc::clone(&control));
    spawn_heartbeat(out.clone(), Arc::clone(&control));
    let started = Instant::now();
    let mut host = WorkerHost {
        out: out.clone(),
        control: Arc::clone(&control),
        run_id: job.run_id.clone(),
        load_name: job.load_name.clone(),
        deadline: job
            .deadline_s
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| started + Duration::from_secs_f64(s.min(1e9))),
        seconds_sent: AtomicU64::new(0),
    };
    let result = store_for(&job)
        .and_then(|(config, store)| load::run_with_window(&job.stage, &config, &mut host, store));
    control.finished.store(true, Ordering::Relaxed);
    match result {
        Ok((output, window)) => {
            out.send(&FromWorker::Done {
                output: WorkerOutput {
                    metrics: output.metrics,
                    histograms: output.histograms,
                    series: output.series,
                    notes: output.notes,
                },
                window,
                max_rss_kib: max_rss_kib(),
            });
            0
        }
        Err(e) => {
            let aborted = control.aborted.load(Ordering::Relaxed);
            out.send(&FromWorker::Failed {
                error: if aborted {
                    format!("stopped by the runner ({e})")
                } else {
                    e.to_string()
                },
                aborted,
            });
            1
        }
    }
}

fn read_job(input: &mut impl BufRead) -> Result<Job, String> {
    let mut line = Vec::new();
    input
        .by_ref()
        .take(protocol::MAX_LINE as u64)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read the job from stdin: {e}"))?;
    if line.is_empty() {
        return Err("no job on stdin (`pipeline worker` is started by the runner)".into());
    }
    match serde_json::from_slice::<ToWorker>(&line) {
        Ok(ToWorker::Job(job)) => Ok(job),
        Ok(_) => Err("the first message on stdin must be the job".into()),
        Err(e) => Err(format!("the job on stdin is not protocol {PROTOCOL}: {e}")),
    }
}

/// The stage's load parameters and its client, from the job's config.
fn store_for(job: &Job) -> Result<(LoadConfig, Store), StageError> {
    let bad = |e: serde_json::Error| {
        StageError::failed(format!("the job's {} config is not valid: {e}", job.stage))
    };
    match job.stage.as_str() {
        "s3-bench" => {
            let config: s3_bench::Config =
                serde_json::from_value(job.config.clone()).map_err(bad)?;
            let store = s3_bench::store(&config)?;
            Ok((config.load, store))
        }
        "swift-bench" => {
            let config: swift_bench::Config =
                serde_json::from_value(job.config.clone()).map_err(bad)?;
            let store = swift_bench::store(&config)?;
            Ok((config.load, store))
        }
        other => Err(StageError::failed(format!(
            "this worker runs s3-bench and swift-bench, not `{other}`"
        ))),
    }
}

/// Reads the runner's messages after the job until stdin ends; the end
/// (or anything that is not the protocol) aborts the load.
fn spawn_control_reader(mut input: BufReader<Box<dyn Read + Send>>, out: Outbox, c: Arc<Control>) {
    std::thread::spawn(move || {
        loop {
            let mut line = Vec::new();
            match input
                .by_ref()
                .take(protocol::MAX_LINE as u64)
                .read_until(b'\n', &mut line)
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            match serde_json::from_slice::<ToWorker>(&line) {
                Ok(ToWorker::Ping { id }) => out.send(&FromWorker::Pong {
                    id,
                    clock_unix_ns: now_ns(),
                }),
                Ok(ToWorker::Start { at_unix_ns }) => c
                    .start_at_unix_ns
                    .store(at_unix_ns.max(1), Ordering::Release),
                Ok(ToWorker::Job(_)) | Err(_) => break,
            }
        }
        c.aborted.store(true, Ordering::Release);
    });
}

/// `alive` every second until the load is over: a runner that hears
/// nothing for a while knows the host stalled.
fn spawn_heartbeat(out: Outbox, c: Arc<Control>) {
    std::thread::spawn(move || {
        while !c.finished.load(Ordering::Relaxed) {
            out.send(&FromWorker::Alive);
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

fn now_ns() -> i64 {
    clock::now_ns().clamp(0, i64::MAX as i128) as i64
}

/// The peak resident memory of this process, in KiB (Linux reports
/// `ru_maxrss` in KiB).
fn max_rss_kib() -> u64 {
    load::own_usage().map_or(0, |u| u.ru_maxrss.max(0) as u64)
}

/// The load engine's view of a worker: its ledger and progress go to the
/// runner as messages; cancellation is the end of stdin.
struct WorkerHost {
    out: Outbox,
    control: Arc<Control>,
    run_id: String,
    load_name: String,
    deadline: Option<Instant>,
    /// Finished seconds of the measured phase already sent.
    seconds_sent: AtomicU64,
}

impl LoadHost for WorkerHost {
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn load_name(&self) -> &str {
        &self.load_name
    }
    fn progress(&self, message: &str) {
        self.out.send(&FromWorker::Progress {
            message: message.to_string(),
        });
    }
    fn is_cancelled(&self) -> bool {
        self.control.aborted.load(Ordering::Acquire)
    }
    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    fn record_created(&mut self, kind: &str, name: &str) {
        self.out.send(&FromWorker::Created {
            kind: kind.into(),
            name: name.into(),
        });
    }
    fn mark_removed(&mut self, kind: &str, name: &str) {
        self.out.send(&FromWorker::Removed {
            kind: kind.into(),
            name: name.into(),
        });
    }

    /// `ready`, then the runner's `start`, then the start instant itself.
    fn wait_for_start(&self) -> Result<(), StageError> {
        self.out.send(&FromWorker::Ready);
        let at = loop {
            let at = self.control.start_at_unix_ns.load(Ordering::Acquire);
            if at != 0 {
                break at;
            }
            self.interrupted()?;
            std::thread::sleep(Duration::from_millis(1));
        };
        // Sleep most of the way, then wait out the last millisecond.
        loop {
            self.interrupted()?;
            let left = at - now_ns();
            if left <= 0 {
                break;
            }
            if left > 2_000_000 {
                std::thread::sleep(
                    Duration::from_nanos((left - 1_000_000) as u64).min(Duration::from_millis(50)),
                );
            } else {
                std::hint::spin_loop();
            }
        }
        self.out.send(&FromWorker::Started {
            at_unix_ns: now_ns(),
        });
        Ok(())
    }

    fn measured_seconds(&self, ops_per_second: &[f64]) {
        let sent = self.seconds_sent.load(Ordering::Relaxed) as usize;
        for (i, ops) in ops_per_second.iter().enumerate().skip(sent) {
            self.out.send(&FromWorker::Second {
                second: i as u64 + 1,
                ops: *ops,
            });
        }
        self.seconds_sent
            .store(ops_per_second.len().max(sent) as u64, Ordering::Relaxed);
    }
}

impl WorkerHost {
    fn interrupted(&self) -> Result<(), StageError> {
        if self.is_cancelled() {
            return Err(StageError::Cancelled);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(StageError::Timeout(
                "the stage's timeout (waiting for the synchronized start)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn messages(c: &Captured) -> Vec<FromWorker> {
        let bytes = c.0.lock().unwrap().clone();
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    fn job(stage: &str, protocol: u32) -> Vec<u8> {
        protocol::line(&ToWorker::Job(Job {
            protocol,
            stage: stage.into(),
            run_id: "r".into(),
            load_name: "s@h".into(),
            host: "h".into(),
            config: serde_json::json!({"endpoint": "ftp://x", "access_key": "a", "secret_key": "b"}),
            deadline_s: Some(5.0),
        }))
    }

    #[test]
    fn a_missing_or_foreign_job_is_refused_with_a_message() {
        for (input, expected) in [
            (Vec::new(), "no job on stdin"),
            (
                b"{\"type\":\"ping\",\"id\":1}\n".to_vec(),
                "must be the job",
            ),
            (b"hello\n".to_vec(), "not protocol 1"),
        ] {
            let out = Captured::default();
            let code = serve(Box::new(std::io::Cursor::new(input)), Box::new(out.clone()));
            assert_eq!(code, 2);
            match &messages(&out)[..] {
                [FromWorker::Failed { error, .. }] => assert!(error.contains(expected), "{error}"),
                other => panic!("{other:?}"),
            }
        }
        let out = Captured::default();
        let code = serve(
            Box::new(std::io::Cursor::new(job("s3-bench", 99))),
            Box::new(out.clone()),
        );
        assert_eq!(code, 2);
        let m = messages(&out);
        assert!(
            matches!(m[0], FromWorker::Hello { protocol: 1, .. }),
            "{m:?}"
        );
        assert!(matches!(&m[1], FromWorker::Failed { error, .. } if error.contains("protocol 99")));
    }

    #[test]
    fn a_job_that_cannot_start_fails_with_the_stage_error() {
        let out = Captured::default();
        let code = serve(
            Box::new(std::io::Cursor::new(job("s3-bench", PROTOCOL))),
            Box::new(out.clone()),
        );
        assert_eq!(code, 1);
        let m = messages(&out);
        let failed = m.iter().find_map(|m| match m {
            FromWorker::Failed { error, .. } => Some(error.clone()),
            _ => None,
        });
        assert!(failed.unwrap().contains("plain HTTP only"), "{m:?}");
        let out = Captured::default();
        serve(
            Box::new(std::io::Cursor::new(job("rados-bench", PROTOCOL))),
            Box::new(out.clone()),
        );
        assert!(messages(&out).iter().any(
            |m| matches!(m, FromWorker::Failed { error, .. } if error.contains("not `rados-bench`"))
        ));
    }
}
