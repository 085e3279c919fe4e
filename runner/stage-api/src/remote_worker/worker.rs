//! `pipeline worker`: a load's half on a client host. It reads its
//! [`Job`] from stdin, runs it by the [`WorkerKind`] the job names, and
//! speaks the [protocol](super::protocol) on stdout. The runner's half is
//! [`super::session`].
//!
//! Whatever happens, the kind removes what it wrote before the worker
//! exits, and the worker exits when its stdin ends (the runner closed it,
//! or the SSH session is gone): nothing is left running on the host.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock;
use crate::stage::{StageError, StageOutput};

use super::protocol::{self, FromWorker, Job, PROTOCOL, ToWorker, WorkerOutput};

/// A load a worker can run: one per stage that runs on client hosts. The
/// native stages' list is `pipeline_native::worker_kinds()`.
pub trait WorkerKind: Send + Sync {
    /// The stage whose jobs it runs ([`Job::stage`]).
    fn stage(&self) -> &'static str;
    /// Runs the job's load through `link`; returns its figures and its
    /// measured window (sent as a `done`'s `window`, which the runner's side
    /// of the stage reads). Removes what it wrote before it returns.
    fn run(
        &self,
        job: &Job,
        link: &mut WorkerLink,
    ) -> Result<(StageOutput, serde_json::Value), StageError>;
}

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

/// Serves one job with the kind it names; returns the process's exit code
/// (0: `done` was sent).
pub fn serve(
    kinds: &[Box<dyn WorkerKind>],
    input: Box<dyn Read + Send>,
    output: Box<dyn Write + Send>,
) -> i32 {
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
    let mut link = WorkerLink {
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
    let result = kind_for(kinds, &job.stage).and_then(|kind| kind.run(&job, &mut link));
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

/// The kind that runs `stage`'s jobs.
fn kind_for<'k>(
    kinds: &'k [Box<dyn WorkerKind>],
    stage: &str,
) -> Result<&'k dyn WorkerKind, StageError> {
    if let Some(kind) = kinds.iter().find(|k| k.stage() == stage) {
        return Ok(kind.as_ref());
    }
    let names: Vec<&str> = kinds.iter().map(|k| k.stage()).collect();
    let runs = match names.split_last() {
        None => "nothing".to_string(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    };
    Err(StageError::failed(format!(
        "this worker runs {runs}, not `{stage}`"
    )))
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
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage the pointer points to.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: rc == 0: getrusage initialized it (and it was zeroed before).
    let usage = unsafe { usage.assume_init() };
    usage.ru_maxrss.max(0) as u64
}

/// A running kind's link to the runner: its ledger and progress go to the
/// runner as messages; cancellation is the end of stdin.
pub struct WorkerLink {
    out: Outbox,
    control: Arc<Control>,
    run_id: String,
    load_name: String,
    deadline: Option<Instant>,
    /// Finished seconds of the measured phase already sent.
    seconds_sent: AtomicU64,
}

impl WorkerLink {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
    /// What names this load within the run: the stage instance and the host.
    pub fn load_name(&self) -> &str {
        &self.load_name
    }
    pub fn progress(&self, message: &str) {
        self.out.send(&FromWorker::Progress {
            message: message.to_string(),
        });
    }
    /// The runner closed stdin (or its session is gone).
    pub fn is_cancelled(&self) -> bool {
        self.control.aborted.load(Ordering::Acquire)
    }
    /// When the stage's time is up.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    /// In the run's ledger before it exists (the runner accepts only what
    /// the stage's job lets this worker make).
    pub fn record_created(&self, kind: &str, name: &str) {
        self.out.send(&FromWorker::Created {
            kind: kind.into(),
            name: name.into(),
        });
    }
    pub fn mark_removed(&self, kind: &str, name: &str) {
        self.out.send(&FromWorker::Removed {
            kind: kind.into(),
            name: name.into(),
        });
    }

    /// `ready`, then the runner's `start`, then the start instant itself.
    pub fn wait_for_start(&self) -> Result<(), StageError> {
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

    /// The operations completed in each finished second of the measured
    /// phase so far: a `second` for each one not sent yet.
    pub fn measured_seconds(&self, ops_per_second: &[f64]) {
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
            config: serde_json::json!({}),
            deadline_s: Some(5.0),
        }))
    }

    /// A kind that fails at once, or measures nothing.
    struct Fake(&'static str);

    impl WorkerKind for Fake {
        fn stage(&self) -> &'static str {
            self.0
        }
        fn run(
            &self,
            _job: &Job,
            link: &mut WorkerLink,
        ) -> Result<(StageOutput, serde_json::Value), StageError> {
            if self.0 == "fails" {
                return Err(StageError::failed("cannot reach the gateway"));
            }
            link.record_created("s3-bucket", "b");
            Ok((
                StageOutput::default(),
                serde_json::json!({"a": 1, "b": [2]}),
            ))
        }
    }

    fn kinds() -> Vec<Box<dyn WorkerKind>> {
        vec![Box::new(Fake("fails")), Box::new(Fake("works"))]
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
            let code = serve(
                &kinds(),
                Box::new(std::io::Cursor::new(input)),
                Box::new(out.clone()),
            );
            assert_eq!(code, 2);
            match &messages(&out)[..] {
                [FromWorker::Failed { error, .. }] => assert!(error.contains(expected), "{error}"),
                other => panic!("{other:?}"),
            }
        }
        let out = Captured::default();
        let code = serve(
            &kinds(),
            Box::new(std::io::Cursor::new(job("works", 99))),
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
    fn the_job_runs_by_the_kind_it_names() {
        let out = Captured::default();
        let code = serve(
            &kinds(),
            Box::new(std::io::Cursor::new(job("fails", PROTOCOL))),
            Box::new(out.clone()),
        );
        assert_eq!(code, 1);
        assert!(messages(&out).iter().any(
            |m| matches!(m, FromWorker::Failed { error, .. } if error.contains("cannot reach"))
        ));
        let out = Captured::default();
        let code = serve(
            &kinds(),
            Box::new(std::io::Cursor::new(job("works", PROTOCOL))),
            Box::new(out.clone()),
        );
        assert_eq!(code, 0);
        let m = messages(&out);
        assert!(
            m.iter()
                .any(|m| matches!(m, FromWorker::Created { name, .. } if name == "b"))
        );
        let done = m.iter().find_map(|m| match m {
            FromWorker::Done { window, .. } => Some(window.clone()),
            _ => None,
        });
        assert_eq!(done, Some(serde_json::json!({"a": 1, "b": [2]})));
        let out = Captured::default();
        serve(
            &kinds(),
            Box::new(std::io::Cursor::new(job("rados-bench", PROTOCOL))),
            Box::new(out.clone()),
        );
        assert!(messages(&out).iter().any(|m| matches!(m,
            FromWorker::Failed { error, .. }
                if error.contains("runs fails and works, not `rados-bench`"))));
    }
}
