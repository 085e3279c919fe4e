//! The runner's half of the [worker protocol](super::protocol): the
//! workers of one run of a stage on its `on:` hosts, followed from start
//! to end. It puts a `pipeline` binary on each host ([`super::binary`]),
//! starts `pipeline worker` over SSH, hands it the job on stdin, compares
//! clocks over that session ([`super::clock_check`]), lets every worker
//! prepare, starts all of them at one instant it picks, and hands back how
//! each ended ([`Ran`]); what the figures of several hosts make together is
//! the stage's to say.
//!
//! A host whose worker dies, whose SSH session breaks, or that says nothing
//! for [`Rules::silence`] is named, the other workers are stopped (their
//! stdin closed: they remove what they wrote and exit), and the run fails
//! — or, with [`LostHosts::Exclude`], ends with the other hosts' results.

use std::io::{Read, Write};
use std::process::ChildStdin;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::{self, Offset};
use crate::context::{Background, StageContext};
use crate::exec::{CommandSpec, Environment, Exit, Stdin};
use crate::hosts::Host;
use crate::stage::StageError;
use crate::start_report::{HostStart, StartReport, utc};

use super::protocol::{self, FromWorker, Job, PROTOCOL, ToWorker, WorkerOutput};
use super::{LostHosts, binary, clock_check, sh, shown};

/// How a run of workers is followed.
pub struct Rules<'a> {
    /// A worker that sends nothing this long (it says `alive` every second)
    /// is lost.
    pub silence: Duration,
    /// What a host lost mid-run does to the run.
    pub lost_hosts: LostHosts,
    /// How long the workers still running get to end once stopped (they
    /// remove what they wrote first).
    pub grace: Duration,
    /// What the workers do before `ready` (`prefill`), for the progress line.
    pub preparing: &'a str,
    /// Whether a ledger entry a worker reports (host, kind, name) is one its
    /// job lets it make: a worker must not put another run's pool or bucket
    /// in this run's ledger, where cleanup would remove it. One it may not
    /// make loses its host; the removal of one is ignored.
    pub owns: &'a dyn Fn(&Host, &str, &str) -> bool,
    /// The metrics the stage declares: a worker's `done` may hold only these
    /// ([`done_check`](super::done_check)).
    pub declared: &'a [crate::metric::MetricDecl],
}

/// How the workers of a run ended, and when they were started.
pub struct Ran<W> {
    /// The instant all were started at (this machine's clock).
    pub start_at: SystemTime,
    /// Each host of the stage's `on:`, in order.
    pub hosts: Vec<HostRun<W>>,
}

/// One host's worker, as it ended.
pub struct HostRun<W> {
    pub host: Host,
    /// `None` only for a worker that never started (the run failed first).
    pub end: Option<End<W>>,
    /// Its clock against this machine's.
    pub offset: Option<Offset>,
    /// When its warm-up began, in this machine's clock (ns since the epoch).
    pub started_ns: Option<i128>,
}

/// A worker's result: `done`.
pub struct Done<W> {
    pub output: WorkerOutput,
    pub window: W,
    pub max_rss_kib: u64,
}

impl<W> Ran<W> {
    /// Each host's clock (this machine's own for a local worker) and the
    /// start it reported, in this machine's clock.
    pub fn start_report(&self) -> StartReport {
        StartReport {
            planned: self.start_at,
            hosts: self
                .hosts
                .iter()
                .map(|w| HostStart {
                    name: w.host.name.clone(),
                    clock: w.offset.unwrap_or(Offset {
                        offset_ns: 0,
                        round_trip_ns: 0,
                        samples: 0,
                    }),
                    started: w.started_ns.map(clock::from_unix_ns),
                })
                .collect(),
        }
    }
}

/// One client host's worker, as the runner follows it.
pub(super) struct Worker<W> {
    pub(super) host: Host,
    background: Option<Background>,
    stdin: Option<ChildStdin>,
    stream: Stream,
    heard: Instant,
    hello: bool,
    /// Its process id on its host, from `hello`.
    pid: Option<u32>,
    /// Names the process on its host (`worker --for TAG`).
    tag: String,
    /// The `pipeline` binary it runs.
    binary: String,
    ready: bool,
    pub(super) offset: Option<Offset>,
    /// When its warm-up began, in this machine's clock.
    started_ns: Option<i128>,
    last_second: Option<(u64, f64)>,
    pub(super) pongs: Vec<(u64, i64, i128)>,
    end: Option<End<W>>,
    /// It sent what the protocol does not allow: it is killed, not asked to stop.
    broke_protocol: bool,
}

/// How a worker ended.
pub enum End<W> {
    Done(Box<Done<W>>),
    /// Its own failure (the stage's error on that host).
    Failed(String),
    /// Stopped by the runner (after another host's loss, Ctrl-C or the deadline).
    Aborted,
    /// Died, lost its SSH session, or went silent.
    Lost(String),
}

/// Runs `stage`'s load in a worker on every host of its `on:`, until every
/// worker ended; no worker is left running when it returns. `config` is
/// the stage's config with whatever the runner resolved for the workers
/// (endpoint, keys): the job carries it.
pub fn run<C: Serialize, W: DeserializeOwned>(
    stage: &str,
    config: &C,
    rules: &Rules,
    ctx: &mut StageContext,
) -> Result<Ran<W>, StageError> {
    // The session reads each worker's output itself, line by line under its
    // bounds: a stopped worker's output is not read back whole as well (a
    // hostile one's can be gigabytes), only as much as its error can show.
    let read_back = ctx.read_back.replace(WORKER_READ_BACK);
    let ran = run_workers(stage, config, rules, ctx);
    ctx.read_back = read_back;
    ran
}

/// What of a stopped worker's stdout and stderr is read back (for its error).
const WORKER_READ_BACK: u64 = 1 << 20;

fn run_workers<C: Serialize, W: DeserializeOwned>(
    stage: &str,
    config: &C,
    rules: &Rules,
    ctx: &mut StageContext,
) -> Result<Ran<W>, StageError> {
    let hosts = ctx.targets.clone();
    let config = serde_json::to_value(config)
        .map_err(|e| StageError::failed(format!("cannot encode the job: {e}")))?;
    let binaries = binary::place_binaries(ctx, &hosts)?;
    let mut workers = Vec::new();
    let mut failure = None;
    for (host, binary) in hosts.iter().zip(&binaries) {
        match start_worker(stage, ctx, host, binary, &config) {
            Ok(w) => workers.push(w),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let outcome = match failure {
        Some(e) => Err(e),
        None => drive(ctx, rules, &mut workers),
    };
    // Whatever happened: no worker is left running, each is recorded.
    abort_all(&mut workers);
    wait_for_ends(ctx, rules, &mut workers, rules.grace);
    // A worker exits right after its last message: give it the moment, so
    // its command is recorded with its own exit and CPU, not as stopped.
    let exit_by = Instant::now() + Duration::from_secs(5);
    while Instant::now() < exit_by
        && workers
            .iter()
            .any(|w| w.background.as_ref().is_some_and(|b| !b.has_exited()))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    for w in &mut workers {
        if let Some(b) = w.background.take() {
            ctx.stop(b);
        }
    }
    let start_at = outcome?;
    Ok(Ran {
        start_at,
        hosts: workers
            .into_iter()
            .map(|w| HostRun {
                host: w.host,
                end: w.end,
                offset: w.offset,
                started_ns: w.started_ns,
            })
            .collect(),
    })
}

/// Starts `pipeline worker` on `host` and sends it the job.
fn start_worker<W: DeserializeOwned>(
    stage: &str,
    ctx: &mut StageContext,
    host: &Host,
    binary: &str,
    config: &serde_json::Value,
) -> Result<Worker<W>, StageError> {
    let load_name = format!("{}@{}", ctx.instance_id, host.name);
    // Names the process in `ps` on the host; no secret.
    let tag = format!("{}/{load_name}", ctx.run_id);
    let mut spec = CommandSpec::new(vec![
        binary.to_string(),
        "worker".into(),
        "--for".into(),
        tag.clone(),
    ])
    .stdin(Stdin::Pipe);
    // The worker needs nothing of the runner's environment: keys come in the job.
    spec.environment = Environment::Minimal;
    let mut background = ctx.spawn_on(host, "worker", &spec)?;
    let mut stdin = background.take_stdin();
    let stream = Stream::open(background.stdout_path())?;
    let job = ToWorker::Job(Job {
        protocol: PROTOCOL,
        stage: stage.to_string(),
        run_id: ctx.run_id.clone(),
        load_name,
        host: host.name.clone(),
        config: config.clone(),
        deadline_s: ctx
            .deadline()
            .map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64()),
    });
    if let Some(pipe) = stdin.as_mut() {
        // A worker that is already gone is noticed by the loop.
        let _ = pipe.write_all(&protocol::line(&job));
        let _ = pipe.flush();
    }
    Ok(Worker {
        host: host.clone(),
        background: Some(background),
        stdin,
        stream,
        heard: Instant::now(),
        hello: false,
        pid: None,
        tag,
        binary: binary.to_string(),
        ready: false,
        offset: None,
        started_ns: None,
        last_second: None,
        pongs: Vec::new(),
        end: None,
        broke_protocol: false,
    })
}

impl<W> Worker<W> {
    pub(super) fn send(&mut self, message: &ToWorker) {
        if let Some(pipe) = self.stdin.as_mut()
            && (pipe.write_all(&protocol::line(message)).is_err() || pipe.flush().is_err())
        {
            // Its side is gone; the loop finds out how.
            self.stdin = None;
        }
    }

    pub(super) fn running(&self) -> bool {
        self.end.is_none()
    }

    fn lost(&self) -> bool {
        matches!(self.end, Some(End::Lost(_)) | Some(End::Failed(_)))
    }
}

/// A worker's stdout file, read as it grows: whole lines only, at most
/// [`READ_PER_POLL`] of them a call, and no faster than the protocol sends
/// them ([`Flood`]).
pub(super) struct Stream {
    file: std::fs::File,
    partial: Vec<u8>,
    flood: Flood,
}

/// What one call reads once it holds whole lines: a worker writing faster
/// than the runner reads is read in steps, not into memory at once.
const READ_PER_POLL: usize = 1 << 20;

/// Lines a worker may send at once, and after that a second: the protocol
/// sends about two a second (`alive`, `second`), a ledger entry per bucket
/// and a `pong` per ping; far more is a worker gone wrong, which would
/// keep the runner parsing instead of minding the stage's deadline.
pub const FLOOD_BURST: f64 = 10_000.0;
pub const FLOOD_RATE: f64 = 200.0;

/// A token bucket over a worker's lines.
struct Flood {
    tokens: f64,
    at: Instant,
}

impl Flood {
    fn new() -> Flood {
        Flood {
            tokens: FLOOD_BURST,
            at: Instant::now(),
        }
    }

    /// Takes `lines` arrived by `now`; whether they fit.
    fn take(&mut self, lines: usize, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * FLOOD_RATE;
        self.tokens = (self.tokens + refill).min(FLOOD_BURST) - lines as f64;
        self.at = now;
        self.tokens >= 0.0
    }
}

impl Stream {
    pub(super) fn open(path: &std::path::Path) -> Result<Stream, StageError> {
        let file = crate::safe_fs::open_read(path).map_err(|e| {
            StageError::failed(format!(
                "cannot read the worker's output {}: {e}",
                path.display()
            ))
        })?;
        Ok(Stream {
            file,
            partial: Vec::new(),
            flood: Flood::new(),
        })
    }

    /// The messages that arrived since the last call; `Err` names a line
    /// that is not the protocol.
    pub(super) fn messages<W: DeserializeOwned>(&mut self) -> Result<Vec<FromWorker<W>>, String> {
        let mut buf = vec![0u8; 64 << 10];
        let (mut read, mut whole_lines) = (0, false);
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    // Grown by doubling up to the line limit, never past it:
                    // a line that is too long costs MAX_LINE, not twice that.
                    let needed = self.partial.len() + n;
                    if needed > self.partial.capacity() {
                        let grown = (self.partial.capacity() * 2)
                            .clamp(needed, protocol::MAX_LINE + buf.len());
                        self.partial.reserve_exact(grown - self.partial.len());
                    }
                    self.partial.extend_from_slice(&buf[..n]);
                    read += n;
                    whole_lines |= buf[..n].contains(&b'\n');
                }
                Err(e) => return Err(format!("cannot read its output: {e}")),
            }
            if self.partial.len() > protocol::MAX_LINE || (read >= READ_PER_POLL && whole_lines) {
                break;
            }
        }
        let lines = self.partial.iter().filter(|b| **b == b'\n').count();
        if !self.flood.take(lines, Instant::now()) {
            return Err(format!(
                "its worker flooded its session: more lines than the protocol sends ({} at once, {} a second): refused",
                FLOOD_BURST, FLOOD_RATE
            ));
        }
        let mut out = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            out.push(protocol::decode::<W>(&line)?);
        }
        if self.partial.len() > protocol::MAX_LINE {
            return Err(format!(
                "its worker sent a line longer than {} MiB",
                protocol::MAX_LINE >> 20
            ));
        }
        Ok(out)
    }
}

/// Why the loop ended early.
enum Stop {
    Cancelled,
    Deadline,
}

/// Handshake, clocks, prefill, the synchronized start and the load, until
/// every worker ended; returns the start instant (this machine's clock).
fn drive<W: DeserializeOwned>(
    ctx: &mut StageContext,
    rules: &Rules,
    workers: &mut [Worker<W>],
) -> Result<SystemTime, StageError> {
    let silence = rules.silence;
    // Hello: SSH's own connection time comes first.
    let connect = workers
        .iter()
        .map(|w| Duration::from_secs(u64::from(w.host.connect_timeout)))
        .max()
        .unwrap_or_default();
    let hello_by = Instant::now() + connect + silence;
    until(ctx, rules, workers, Some(hello_by), |ws| {
        ws.iter().all(|w| w.hello || w.end.is_some())
    })?;
    // A host lost while the others were starting is the cause to name.
    fail_on_lost(rules, workers)?;
    if let Some(w) = workers.iter().find(|w| !w.hello && w.end.is_none()) {
        return Err(StageError::failed(format!(
            "host {}: its worker did not answer within {}",
            w.host.describe(),
            crate::exec::format_duration(connect + silence)
        )));
    }
    for i in 0..workers.len() {
        if workers[i].running() {
            clock_check::measure_clock(ctx, rules, workers, i)?;
        }
    }
    ctx.progress(&format!("{} on {} host(s)", rules.preparing, workers.len()));
    until(ctx, rules, workers, None, |ws| {
        ws.iter().all(|w| w.ready || w.end.is_some())
    })?;
    fail_on_lost(rules, workers)?;
    // The start: far enough ahead for the slowest session to carry it.
    let slowest = workers
        .iter()
        .filter_map(|w| w.offset)
        .map(|o| o.round_trip_ns)
        .max()
        .unwrap_or(0);
    let start_at = SystemTime::now()
        + Duration::from_millis(300)
        + Duration::from_nanos(slowest.max(0) as u64 * 4);
    for w in workers.iter_mut().filter(|w| w.running()) {
        let at = w.offset.map_or(start_at, |o| o.to_remote(start_at));
        let at_unix_ns = clock::unix_ns(at).clamp(0, i64::MAX as i128) as i64;
        w.send(&ToWorker::Start { at_unix_ns });
    }
    ctx.progress(&format!(
        "{} host(s) start together at {}",
        workers.len(),
        utc(start_at)
    ));
    until(ctx, rules, workers, None, |ws| {
        ws.iter().all(|w| w.end.is_some())
    })?;
    fail_on_lost(rules, workers)?;
    Ok(start_at)
}

/// Follows the workers until `done` says so, a deadline `by` passes
/// (returns then), a host is lost and the stage is to fail, or Ctrl-C or
/// the stage's deadline.
fn until<W: DeserializeOwned>(
    ctx: &mut StageContext,
    rules: &Rules,
    workers: &mut [Worker<W>],
    by: Option<Instant>,
    mut done: impl FnMut(&[Worker<W>]) -> bool,
) -> Result<(), StageError> {
    let mut last_progress = Instant::now();
    loop {
        poll(ctx, rules, workers);
        if rules.lost_hosts == LostHosts::Fail && workers.iter().any(Worker::lost) {
            return Ok(());
        }
        if workers.iter().all(|w| w.end.is_some()) || done(workers) {
            return Ok(());
        }
        if let Some(stop) = interrupted(ctx) {
            return Err(match stop {
                Stop::Cancelled => StageError::Cancelled,
                Stop::Deadline => StageError::Timeout(format!(
                    "the stage's timeout (workers on {} host(s) still running)",
                    workers.iter().filter(|w| w.running()).count()
                )),
            });
        }
        if by.is_some_and(|b| Instant::now() >= b) {
            return Ok(());
        }
        if last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            let rates: Vec<String> = workers
                .iter()
                .filter_map(|w| {
                    w.last_second
                        .map(|(s, ops)| format!("{} {ops:.0} ops/s (s{s})", w.host.name))
                })
                .collect();
            if !rates.is_empty() {
                ctx.progress(&rates.join(", "));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn interrupted(ctx: &StageContext) -> Option<Stop> {
    if ctx.is_cancelled() {
        Some(Stop::Cancelled)
    } else if ctx.deadline().is_some_and(|d| Instant::now() >= d) {
        Some(Stop::Deadline)
    } else {
        None
    }
}

/// With `lost_hosts: fail`, a lost host fails the stage, named; with
/// `exclude`, only losing every host does.
fn fail_on_lost<W>(rules: &Rules, workers: &[Worker<W>]) -> Result<(), StageError> {
    let lost: Vec<String> = workers
        .iter()
        .filter_map(|w| match &w.end {
            Some(End::Lost(why)) | Some(End::Failed(why)) => {
                Some(format!("{}: {why}", w.host.name))
            }
            _ => None,
        })
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    let all_lost = workers.iter().all(|w| w.lost());
    if rules.lost_hosts == LostHosts::Fail || all_lost {
        return Err(StageError::failed(lost.join("; ")));
    }
    Ok(())
}

/// Reads what every running worker sent, and notices the ones that died
/// or went silent.
pub(super) fn poll<W: DeserializeOwned>(
    ctx: &mut StageContext,
    rules: &Rules,
    workers: &mut [Worker<W>],
) {
    for w in workers.iter_mut().filter(|w| w.running()) {
        match w.stream.messages() {
            Ok(messages) => {
                if !messages.is_empty() {
                    w.heard = Instant::now();
                }
                for m in messages {
                    handle(ctx, rules, w, m);
                }
            }
            Err(why) => {
                w.end = Some(End::Lost(why));
                w.stdin = None;
                w.broke_protocol = true;
            }
        }
        if w.broke_protocol {
            // It is not to be trusted to exit when told: its session is
            // closed and the process killed by its pid, as a silent one's.
            w.broke_protocol = false;
            if let Some(b) = w.background.take() {
                ctx.stop(b);
            }
            kill_stalled(ctx, w);
        }
        if !w.running() {
            continue;
        }
        let exited = w.background.as_ref().is_some_and(Background::has_exited);
        if exited {
            // What it wrote before it ended may still be unread.
            if let Ok(messages) = w.stream.messages() {
                for m in messages {
                    handle(ctx, rules, w, m);
                }
            }
            if w.running() {
                let b = w
                    .background
                    .take()
                    .expect("a running worker has its command");
                let out = ctx.stop(b);
                let tail = if out.tail().is_empty() {
                    String::new()
                } else {
                    format!(": {}", shown(&out.tail()))
                };
                let why = match &out.exit {
                    Exit::Code(255) if !w.host.is_local() => {
                        w.host.explain_ssh_failure(&out.stderr)
                    }
                    // It never spoke the protocol: not a worker of ours.
                    exit if !w.hello => format!(
                        "`{} worker` ended without answering ({exit}){tail}; {}",
                        w.binary,
                        match &w.host.pipeline {
                            Some(_) => format!(
                                "the inventory's `pipeline:` must name a pipeline binary of this runner's version ({})",
                                env!("CARGO_PKG_VERSION")
                            ),
                            None => "the copied binary did not start there".to_string(),
                        }
                    ),
                    exit => format!("its worker ended without a result ({exit}){tail}"),
                };
                w.end = Some(End::Lost(why));
                w.stdin = None;
            }
        } else if w.heard.elapsed() >= rules.silence && w.hello {
            w.end = Some(End::Lost(format!(
                "it stopped answering: nothing from its worker for {} (it says `alive` every second)",
                crate::exec::format_duration(rules.silence)
            )));
            // Its SSH session is closed: the worker, should it wake, finds
            // its stdin gone. A stopped process never reads it: killed by pid.
            w.stdin = None;
            if let Some(b) = w.background.take() {
                ctx.stop(b);
            }
            kill_stalled(ctx, w);
        }
    }
}

/// One message of a worker.
fn handle<W>(ctx: &mut StageContext, rules: &Rules, w: &mut Worker<W>, m: FromWorker<W>) {
    match m {
        FromWorker::Hello {
            protocol,
            version,
            pid,
        } => {
            w.pid = Some(pid);
            let ours = env!("CARGO_PKG_VERSION");
            if protocol != PROTOCOL || version != ours {
                w.end = Some(End::Lost(format!(
                    "its pipeline is version {} (worker protocol {protocol}); this runner is {ours} (protocol {PROTOCOL}): name a matching binary in the inventory (`pipeline:`) or remove it to have the runner copy its own",
                    shown(&version)
                )));
                w.stdin = None;
            }
            w.hello = true;
        }
        FromWorker::Pong { id, clock_unix_ns } => {
            w.pongs.push((id, clock_unix_ns, clock::now_ns()));
        }
        FromWorker::Progress { message } => {
            ctx.progress(&format!("{}: {}", w.host.name, shown(&message)));
        }
        FromWorker::Created { kind, name } => {
            if (rules.owns)(&w.host, &kind, &name) {
                ctx.record_created(&kind, &name);
            } else {
                w.end = Some(End::Lost(format!(
                    "its worker claimed to create {kind} `{}`, which is not one of its own: refused",
                    shown(&name)
                )));
                w.stdin = None;
                w.broke_protocol = true;
            }
        }
        FromWorker::Removed { kind, name } => {
            if (rules.owns)(&w.host, &kind, &name) {
                ctx.mark_removed(&kind, &name);
            }
        }
        FromWorker::Ready => w.ready = true,
        FromWorker::Started { at_unix_ns } => {
            let local = w
                .offset
                .map_or(clock::from_unix_ns(at_unix_ns.into()), |o| {
                    o.to_local(clock::from_unix_ns(at_unix_ns.into()))
                });
            w.started_ns = Some(clock::unix_ns(local));
        }
        FromWorker::Second { second, ops } => w.last_second = Some((second, ops)),
        FromWorker::Alive => {}
        FromWorker::Done {
            output,
            window,
            max_rss_kib,
        } => {
            w.end = Some(
                match super::done_check::problem(
                    &ctx.instance_id,
                    rules.declared,
                    &output,
                    max_rss_kib,
                ) {
                    None => End::Done(Box::new(Done {
                        output,
                        window,
                        max_rss_kib,
                    })),
                    Some(problem) => {
                        w.stdin = None;
                        w.broke_protocol = true;
                        End::Lost(format!("its worker's `done` was refused: {problem}"))
                    }
                },
            )
        }
        FromWorker::Failed { error, aborted } => {
            w.end = Some(if aborted {
                End::Aborted
            } else {
                End::Failed(shown(&error))
            })
        }
    }
}

/// Kills a silent worker on its host by the pid it gave, if that process
/// is still this worker (its command line names its tag).
fn kill_stalled<W>(ctx: &mut StageContext, w: &Worker<W>) {
    let Some(pid) = w.pid else { return };
    let script = format!(
        "p={pid}; [ -r /proc/$p/cmdline ] && tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- {} && kill -KILL $p; true",
        crate::exec::shell_quote(&format!("--for {} ", w.tag))
    );
    let _ = ctx.run_tidy_on(&w.host, "worker-kill", &sh(&script, 30));
}

/// Closes every running worker's stdin: it stops its requests, removes
/// what it wrote and exits.
fn abort_all<W>(workers: &mut [Worker<W>]) {
    for w in workers.iter_mut() {
        w.stdin = None;
    }
}

/// Waits (at most `grace`) for the workers still running to end.
fn wait_for_ends<W: DeserializeOwned>(
    ctx: &mut StageContext,
    rules: &Rules,
    workers: &mut [Worker<W>],
    grace: Duration,
) {
    let by = Instant::now() + grace;
    while Instant::now() < by && workers.iter().any(Worker::running) {
        poll(ctx, rules, workers);
        std::thread::sleep(Duration::from_millis(20));
    }
    for w in workers.iter_mut().filter(|w| w.running()) {
        w.end = Some(End::Lost(format!(
            "its worker did not end within {} of being stopped",
            crate::exec::format_duration(grace)
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_stream_is_read_in_whole_lines_and_garbage_is_refused() {
        type Any = serde_json::Value;
        let path =
            std::env::temp_dir().join(format!("pipeline-stream-test-{}", std::process::id()));
        std::fs::write(&path, b"{\"type\":\"alive\"}\n{\"type\":\"rea").unwrap();
        let mut stream = Stream::open(&path).unwrap();
        assert_eq!(stream.messages::<Any>().unwrap(), vec![FromWorker::Alive]);
        // The rest of the line arrives later.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"dy\"}\n").unwrap();
        assert_eq!(stream.messages::<Any>().unwrap(), vec![FromWorker::Ready]);
        // A line that is not the protocol names itself, cut and without escapes.
        f.write_all(b"\x1b[31mrm -rf / \xff\n").unwrap();
        let err = stream.messages::<Any>().unwrap_err();
        assert!(
            err.contains("not protocol 1") && err.contains("[31mrm -rf /"),
            "{err}"
        );
        assert!(!err.contains('\x1b'), "{err}");
        // A ledger entry of another kind is a message like any other: the
        // stage's `owns` refuses it (a pool is never a worker's).
        f.write_all(b"{\"type\":\"created\",\"kind\":\"pool\",\"name\":\"rbd\"}\n")
            .unwrap();
        assert!(
            matches!(&stream.messages::<Any>().unwrap()[..], [FromWorker::Created { kind, .. }] if kind == "pool")
        );
        // A `done` whose window is not the stage's is not the protocol either.
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Window {
            #[allow(dead_code)]
            cores: f64,
        }
        f.write_all(b"{\"type\":\"done\",\"output\":{\"metrics\":[],\"histograms\":[],\"series\":[],\"notes\":[]},\"window\":{\"x\":1},\"max_rss_kib\":1}\n")
            .unwrap();
        let err = stream.messages::<Window>().unwrap_err();
        assert!(err.contains("unknown field `x`"), "{err}");
        let _ = std::fs::remove_file(&path);
    }
}
