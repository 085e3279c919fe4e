//! `s3-bench` and `swift-bench` from many client hosts at once: the
//! runner's half of the [worker protocol](super::protocol). For each host
//! of the stage's `on:` it puts a `pipeline` binary there (its own, copied
//! over the host's SSH connection into a per-user cache and checked by
//! sha256, unless the inventory names one), starts `pipeline worker` over
//! SSH, hands it the job on stdin, compares clocks over that session, lets
//! every worker prefill, then starts all of them at one instant it picks,
//! and merges what they measured:
//!
//! - latency percentiles of `host=all` from the hosts' merged HDR
//!   histograms (never an average of percentiles);
//! - `ops_per_s` and `bandwidth` of `host=all` summed over the window in
//!   which every host was in its measured phase and still issuing requests
//!   (each host's warm-up and ramp-down left out), from each host's
//!   completions per 100 ms;
//! - counts (`ops`, `bytes`, `errors`) summed over the whole measured phase.
//!
//! A host whose worker dies, whose SSH session breaks, or that says nothing
//! for `worker_silence` is named, the other workers are stopped (their
//! stdin closed: they remove what they wrote and exit), and the stage fails
//! — or, with `lost_hosts: exclude`, reports the other hosts, marked.

use std::io::{Read, Write};
use std::process::ChildStdin;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use pipeline_model::combine::{Parts, combine};
use pipeline_model::{Aggregate, Direction, Metric, unit};
use pipeline_stage_api::clock::{self, Offset, Sample};
use pipeline_stage_api::context::{Background, StageContext};
use pipeline_stage_api::exec::{CommandSpec, Environment, Exit, Stdin};
use pipeline_stage_api::hosts::Host;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::start_report::{HostStart, StartReport, add_start_report, utc};
use serde::Serialize;

use super::load::{LoadConfig, LostHosts, Window};
use super::protocol::{self, FromWorker, Job, PROTOCOL, ToWorker, WorkerOutput};
use super::{S3_BUCKET, S3_OBJECTS, bucket_name, key_prefix};

/// Clock samples per host, and the longest round trip an offset may come from.
const CLOCK_SAMPLES: usize = 8;
const CLOCK_BOUND: Duration = Duration::from_millis(100);
/// The common window is summed from completions per this much time.
const BIN: Duration = Duration::from_millis(100);

/// Whether the stage runs its load in this process (no `on:`, or `on: local`).
pub fn runs_here(ctx: &StageContext) -> bool {
    targets_here(&ctx.targets)
}

fn targets_here(targets: &[Host]) -> bool {
    targets.len() <= 1 && targets.iter().all(Host::is_local)
}

/// What `pipeline plan` shows: on client hosts, where each worker runs and
/// from which binary, before the load's own actions.
pub fn plan(ctx: &PlanContext, load: Vec<Action>) -> Vec<Action> {
    if targets_here(ctx.targets) {
        return load;
    }
    let mut actions = Vec::new();
    for host in ctx.targets {
        let binary = match (&host.pipeline, host.is_local()) {
            (_, true) => "this runner's own binary".to_string(),
            (Some(path), false) => format!("`{path}` (from the inventory)"),
            (None, false) => format!(
                "this runner's binary, copied over SSH to {CACHE_DIR}/pipeline-SHA256 unless a copy with that sha256 is there"
            ),
        };
        actions.push(Action::note(format!(
            "on {}: `pipeline worker` ({binary}); its job, keys included, on stdin",
            host.describe()
        )));
    }
    actions.push(Action::note(format!(
        "compare each host's clock over its worker's SSH session ({CLOCK_SAMPLES} round trips, the shortest at most {} ms); once all are prefilled, start them together",
        CLOCK_BOUND.as_millis()
    )));
    actions.extend(load.into_iter().map(|mut a| {
        // Each host's buckets carry its name: hosts never share keys.
        a.summary = format!(
            "each host: {}",
            a.summary.replace(
                "named after the run id",
                "named after the run id and the host"
            )
        );
        a
    }));
    actions.push(Action::note(
        "host=all: latency percentiles of the merged histograms; ops/s and MiB/s summed over the window all hosts measured in",
    ));
    actions
}

/// Where a copied binary goes on a host (per user).
const CACHE_DIR: &str = "${XDG_CACHE_HOME:-$HOME/.cache}/pipeline/bin";
/// Copies a host's cache keeps: the most recently used (a copy found in
/// place is touched); older ones are removed after a new copy, so that
/// every new build of the runner does not leave another binary behind. (A
/// worker still running from a removed copy runs on: it is open.)
const KEEP_COPIES: usize = 3;

/// One client host's worker, as the runner follows it.
struct Worker {
    host: Host,
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
    offset: Option<Offset>,
    /// When its warm-up began, in this machine's clock.
    started_ns: Option<i128>,
    last_second: Option<(u64, f64)>,
    pongs: Vec<(u64, i64, i128)>,
    end: Option<End>,
}

/// How a worker ended.
enum End {
    Done(Box<(WorkerOutput, Window, u64)>),
    /// Its own failure (the stage's error on that host).
    Failed(String),
    /// Stopped by the runner (after another host's loss, Ctrl-C or the deadline).
    Aborted,
    /// Died, lost its SSH session, or went silent.
    Lost(String),
}

/// Runs the load on every host of the stage's `on:` and merges it.
/// `config` is the stage's config with its endpoint and keys resolved.
pub fn run<C: Serialize>(
    stage: &str,
    config: &C,
    load: &LoadConfig,
    ctx: &mut StageContext,
) -> Result<StageOutput, StageError> {
    let hosts = ctx.targets.clone();
    let config = serde_json::to_value(config)
        .map_err(|e| StageError::failed(format!("cannot encode the job: {e}")))?;
    let binaries = place_binaries(ctx, &hosts)?;
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
        None => drive(ctx, load, &mut workers),
    };
    // Whatever happened: no worker is left running, each is recorded.
    let grace = load.request_timeout.0 + Duration::from_secs(30);
    abort_all(&mut workers);
    wait_for_ends(ctx, load, &mut workers, grace);
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
    merge(&workers, start_at)
}

/// The `pipeline` binary to run on each host: this one locally, the
/// inventory's, or this one copied into the host's cache when no copy with
/// its sha256 is there.
fn place_binaries(ctx: &mut StageContext, hosts: &[Host]) -> Result<Vec<String>, StageError> {
    let me = std::env::current_exe()
        .map_err(|e| StageError::failed(format!("cannot find the runner's own binary: {e}")))?;
    let mut paths: Vec<Option<String>> = hosts
        .iter()
        .map(|h| {
            if h.is_local() {
                Some(me.display().to_string())
            } else {
                h.pipeline.clone()
            }
        })
        .collect();
    let needs: Vec<usize> = (0..hosts.len()).filter(|&i| paths[i].is_none()).collect();
    if needs.is_empty() {
        return Ok(paths.into_iter().flatten().collect());
    }
    ctx.progress("sha256 of the runner's binary");
    let sha = own_sha256(&me)?;
    let check = format!(
        "d=\"{CACHE_DIR}\"; f=\"$d/pipeline-{sha}\"; \
         if [ -x \"$f\" ] && [ \"$(sha256sum < \"$f\" | cut -d' ' -f1)\" = {sha} ]; \
         then touch \"$f\"; echo \"present $f\"; else echo \"absent $f\"; fi"
    );
    let checks: Vec<(Host, String, CommandSpec)> = needs
        .iter()
        .map(|&i| (hosts[i].clone(), "pipeline-check".into(), sh(&check, 60)))
        .collect();
    let outputs = ctx.run_parallel_on(&checks)?;
    let mut copies = Vec::new();
    for (&i, out) in needs.iter().zip(&outputs) {
        let line = out.stdout.lines().next().unwrap_or_default();
        match line.split_once(' ') {
            Some(("present", path)) => paths[i] = Some(path.to_string()),
            Some(("absent", path)) => {
                paths[i] = Some(path.to_string());
                copies.push(i);
            }
            _ => {
                return Err(StageError::failed(format!(
                    "host {}: cannot look for a pipeline binary in {CACHE_DIR} (`sh`, `sha256sum` and `cut` are needed there): {}",
                    hosts[i].describe(),
                    out.tail()
                )));
            }
        }
    }
    if !copies.is_empty() {
        let size = std::fs::metadata(&me).map_or(0, |m| m.len());
        ctx.progress(&format!(
            "copying the pipeline binary ({:.0} MiB) to {} host(s)",
            size as f64 / 1048576.0,
            copies.len()
        ));
        let copy = format!(
            "set -e; d=\"{CACHE_DIR}\"; mkdir -p \"$d\"; f=\"$d/pipeline-{sha}\"; t=\"$f.tmp.$$\"; \
             trap 'rm -f \"$t\"' EXIT; cat > \"$t\"; s=$(sha256sum < \"$t\" | cut -d' ' -f1); \
             if [ \"$s\" != {sha} ]; then echo \"the copy has sha256 $s, not {sha}\" >&2; exit 3; fi; \
             chmod 755 \"$t\"; mv -f \"$t\" \"$f\"; trap - EXIT; echo \"$f\"; \
             cd \"$d\" && ls -t | grep -E '^pipeline-[0-9a-f]{{64}}$' | tail -n +{keep} | while read -r old; do rm -f -- \"$old\"; done",
            keep = KEEP_COPIES + 1
        );
        let specs: Vec<(Host, String, CommandSpec)> = copies
            .iter()
            .map(|&i| {
                let spec = sh(&copy, 600).stdin(Stdin::File(me.clone()));
                (hosts[i].clone(), "pipeline-copy".into(), spec)
            })
            .collect();
        let outputs = ctx.run_parallel_on(&specs)?;
        for (&i, out) in copies.iter().zip(&outputs) {
            if !out.success() {
                return Err(StageError::failed(format!(
                    "host {}: copying the pipeline binary failed ({}): {}",
                    hosts[i].describe(),
                    out.exit,
                    out.tail()
                )));
            }
        }
    }
    Ok(paths.into_iter().flatten().collect())
}

fn sh(script: &str, timeout_s: u64) -> CommandSpec {
    crate::host::shell(script, &[]).timeout(Duration::from_secs(timeout_s))
}

/// The sha256 of this binary, hex, computed once per process.
fn own_sha256(path: &std::path::Path) -> Result<String, StageError> {
    static SHA: OnceLock<String> = OnceLock::new();
    if let Some(s) = SHA.get() {
        return Ok(s.clone());
    }
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)
        .map_err(|e| StageError::io(format!("reading {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| StageError::io(format!("reading {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(SHA.get_or_init(|| hex).clone())
}

/// Starts `pipeline worker` on `host` and sends it the job.
fn start_worker(
    stage: &str,
    ctx: &mut StageContext,
    host: &Host,
    binary: &str,
    config: &serde_json::Value,
) -> Result<Worker, StageError> {
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
    })
}

impl Worker {
    fn send(&mut self, message: &ToWorker) {
        if let Some(pipe) = self.stdin.as_mut()
            && (pipe.write_all(&protocol::line(message)).is_err() || pipe.flush().is_err())
        {
            // Its side is gone; the loop finds out how.
            self.stdin = None;
        }
    }

    fn running(&self) -> bool {
        self.end.is_none()
    }

    fn lost(&self) -> bool {
        matches!(self.end, Some(End::Lost(_)) | Some(End::Failed(_)))
    }
}

/// A worker's stdout file, read as it grows: whole lines only.
struct Stream {
    file: std::fs::File,
    partial: Vec<u8>,
}

impl Stream {
    fn open(path: &std::path::Path) -> Result<Stream, StageError> {
        let file = pipeline_stage_api::safe_fs::open_read(path).map_err(|e| {
            StageError::failed(format!(
                "cannot read the worker's output {}: {e}",
                path.display()
            ))
        })?;
        Ok(Stream {
            file,
            partial: Vec::new(),
        })
    }

    /// The messages that arrived since the last call; `Err` names a line
    /// that is not the protocol.
    fn messages(&mut self) -> Result<Vec<FromWorker>, String> {
        let mut buf = [0u8; 64 << 10];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) => return Err(format!("cannot read its output: {e}")),
            }
            if self.partial.len() > protocol::MAX_LINE {
                break;
            }
        }
        let mut out = Vec::new();
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            match serde_json::from_slice::<FromWorker>(&line) {
                Ok(m) => out.push(m),
                Err(e) => {
                    let shown: String = String::from_utf8_lossy(&line)
                        .chars()
                        .take(120)
                        .filter(|c| !c.is_control())
                        .collect();
                    return Err(format!(
                        "its worker sent a line that is not protocol {PROTOCOL} ({e}): `{shown}`"
                    ));
                }
            }
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
fn drive(
    ctx: &mut StageContext,
    load: &LoadConfig,
    workers: &mut [Worker],
) -> Result<SystemTime, StageError> {
    let silence = load.worker_silence.0;
    // Hello: SSH's own connection time comes first.
    let connect = workers
        .iter()
        .map(|w| Duration::from_secs(u64::from(w.host.connect_timeout)))
        .max()
        .unwrap_or_default();
    let hello_by = Instant::now() + connect + silence;
    until(ctx, load, workers, Some(hello_by), |ws| {
        ws.iter().all(|w| w.hello || w.end.is_some())
    })?;
    // A host lost while the others were starting is the cause to name.
    fail_on_lost(load, workers)?;
    if let Some(w) = workers.iter().find(|w| !w.hello && w.end.is_none()) {
        return Err(StageError::failed(format!(
            "host {}: its worker did not answer within {}",
            w.host.describe(),
            pipeline_stage_api::exec::format_duration(connect + silence)
        )));
    }
    for i in 0..workers.len() {
        if workers[i].running() {
            measure_clock(ctx, load, workers, i)?;
        }
    }
    ctx.progress(&format!("prefill on {} host(s)", workers.len()));
    until(ctx, load, workers, None, |ws| {
        ws.iter().all(|w| w.ready || w.end.is_some())
    })?;
    fail_on_lost(load, workers)?;
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
    until(ctx, load, workers, None, |ws| {
        ws.iter().all(|w| w.end.is_some())
    })?;
    fail_on_lost(load, workers)?;
    Ok(start_at)
}

/// Follows the workers until `done` says so, a deadline `by` passes
/// (returns then), a host is lost and the stage is to fail, or Ctrl-C or
/// the stage's deadline.
fn until(
    ctx: &mut StageContext,
    load: &LoadConfig,
    workers: &mut [Worker],
    by: Option<Instant>,
    mut done: impl FnMut(&[Worker]) -> bool,
) -> Result<(), StageError> {
    let mut last_progress = Instant::now();
    loop {
        poll(ctx, load, workers);
        if load.lost_hosts == LostHosts::Fail && workers.iter().any(Worker::lost) {
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
fn fail_on_lost(load: &LoadConfig, workers: &[Worker]) -> Result<(), StageError> {
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
    if load.lost_hosts == LostHosts::Fail || all_lost {
        return Err(StageError::failed(lost.join("; ")));
    }
    Ok(())
}

/// Reads what every running worker sent, and notices the ones that died
/// or went silent.
fn poll(ctx: &mut StageContext, load: &LoadConfig, workers: &mut [Worker]) {
    for w in workers.iter_mut().filter(|w| w.running()) {
        match w.stream.messages() {
            Ok(messages) => {
                if !messages.is_empty() {
                    w.heard = Instant::now();
                }
                for m in messages {
                    handle(ctx, load, w, m);
                }
            }
            Err(why) => {
                w.end = Some(End::Lost(why));
                w.stdin = None;
            }
        }
        if !w.running() {
            continue;
        }
        let exited = w.background.as_ref().is_some_and(Background::has_exited);
        if exited {
            // What it wrote before it ended may still be unread.
            if let Ok(messages) = w.stream.messages() {
                for m in messages {
                    handle(ctx, load, w, m);
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
        } else if w.heard.elapsed() >= load.worker_silence.0 && w.hello {
            w.end = Some(End::Lost(format!(
                "it stopped answering: nothing from its worker for {} (it says `alive` every second)",
                pipeline_stage_api::exec::format_duration(load.worker_silence.0)
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
fn handle(ctx: &mut StageContext, load: &LoadConfig, w: &mut Worker, m: FromWorker) {
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
            if owned_by(ctx, load, &w.host, &kind, &name) {
                ctx.record_created(&kind, &name);
            } else {
                w.end = Some(End::Lost(format!(
                    "its worker claimed to create {kind} `{}`, which is not one of its own: refused",
                    shown(&name)
                )));
                w.stdin = None;
            }
        }
        FromWorker::Removed { kind, name } => {
            if owned_by(ctx, load, &w.host, &kind, &name) {
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
        } => w.end = Some(End::Done(Box::new((output, window, max_rss_kib)))),
        FromWorker::Failed { error, aborted } => {
            w.end = Some(if aborted {
                End::Aborted
            } else {
                End::Failed(shown(&error))
            })
        }
    }
}

/// Whether a ledger entry a worker reports is one its job lets it make: its
/// own buckets, or its key prefix in the suite's pre-existing bucket. A
/// worker must not put another run's pool or bucket in this run's ledger,
/// where cleanup would remove it.
fn owned_by(ctx: &StageContext, load: &LoadConfig, host: &Host, kind: &str, name: &str) -> bool {
    owned(&ctx.run_id, &ctx.instance_id, load, &host.name, kind, name)
}

fn owned(
    run_id: &str,
    instance: &str,
    load: &LoadConfig,
    host: &str,
    kind: &str,
    name: &str,
) -> bool {
    let load_name = format!("{instance}@{host}");
    match kind {
        S3_BUCKET => {
            load.bucket.is_none()
                && (0..load.buckets).any(|i| bucket_name(run_id, &load_name, i) == name)
        }
        S3_OBJECTS => load
            .bucket
            .as_ref()
            .is_some_and(|b| name == format!("{b}/{}", key_prefix(run_id, &load_name))),
        _ => false,
    }
}

/// A worker's text as it may be shown: one line, no control characters, bounded.
fn shown(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(2000)
        .collect();
    if text.chars().count() > 2000 {
        s.push('…');
    }
    s
}

/// Compares clocks with one worker over its session: `ping`s one at a
/// time, each answered at once.
fn measure_clock(
    ctx: &mut StageContext,
    load: &LoadConfig,
    workers: &mut [Worker],
    i: usize,
) -> Result<(), StageError> {
    let mut samples = Vec::new();
    for id in 0..CLOCK_SAMPLES as u64 {
        let sent = clock::now_ns();
        workers[i].send(&ToWorker::Ping { id });
        let by = Instant::now() + Duration::from_secs(2);
        while Instant::now() < by && workers[i].running() {
            poll(ctx, load, &mut workers[i..=i]);
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

/// Kills a silent worker on its host by the pid it gave, if that process
/// is still this worker (its command line names its tag).
fn kill_stalled(ctx: &mut StageContext, w: &Worker) {
    let Some(pid) = w.pid else { return };
    let script = format!(
        "p={pid}; [ -r /proc/$p/cmdline ] && tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- {} && kill -KILL $p; true",
        pipeline_stage_api::exec::shell_quote(&format!("--for {} ", w.tag))
    );
    let _ = ctx.run_tidy_on(&w.host, "worker-kill", &sh(&script, 30));
}

/// Closes every running worker's stdin: it stops its requests, removes
/// what it wrote and exits.
fn abort_all(workers: &mut [Worker]) {
    for w in workers.iter_mut() {
        w.stdin = None;
    }
}

/// Waits (at most `grace`) for the workers still running to end.
fn wait_for_ends(
    ctx: &mut StageContext,
    load: &LoadConfig,
    workers: &mut [Worker],
    grace: Duration,
) {
    let by = Instant::now() + grace;
    while Instant::now() < by && workers.iter().any(Worker::running) {
        poll(ctx, load, workers);
        std::thread::sleep(Duration::from_millis(20));
    }
    for w in workers.iter_mut().filter(|w| w.running()) {
        w.end = Some(End::Lost(format!(
            "its worker did not end within {} of being stopped",
            pipeline_stage_api::exec::format_duration(grace)
        )));
    }
}

/// One host's measured phase at full load, in this machine's clock, and
/// what it completed per [`BIN`].
pub struct HostWindow<'a> {
    pub start_ns: i128,
    pub end_ns: i128,
    pub tenths: &'a std::collections::BTreeMap<String, Vec<[u64; 2]>>,
}

/// The window all hosts measured in, and per operation the sum of the
/// hosts' rates over it: `(ops/s, bytes/s)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommonWindow {
    pub start_ns: i128,
    pub end_ns: i128,
    pub rates: std::collections::BTreeMap<String, (f64, f64)>,
}

impl CommonWindow {
    pub fn seconds(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }
}

/// The common window of `hosts`: from the latest start to the earliest end
/// of issuing. Each host's rate is what it completed in its bins that lie
/// wholly inside the window, per second of those bins; the rates are
/// summed. `None` when the window holds no whole bin of some host.
pub fn common_window(hosts: &[HostWindow]) -> Option<CommonWindow> {
    let start = hosts.iter().map(|h| h.start_ns).max()?;
    let end = hosts.iter().map(|h| h.end_ns).min()?;
    let bin = BIN.as_nanos() as i128;
    let mut rates: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for h in hosts {
        // Bins k with h.start + k*bin >= start and h.start + (k+1)*bin <= end.
        let first = (start - h.start_ns + bin - 1).div_euclid(bin).max(0);
        let last = (end - h.start_ns).div_euclid(bin); // exclusive
        if last <= first {
            return None;
        }
        let seconds = ((last - first) * bin) as f64 / 1e9;
        for (op, bins) in h.tenths {
            let (ops, bytes) = (first as usize..last as usize)
                .filter_map(|k| bins.get(k))
                .fold((0u64, 0u64), |(o, b), x| (o + x[0], b + x[1]));
            let r = rates.entry(op.clone()).or_default();
            r.0 += ops as f64 / seconds;
            r.1 += bytes as f64 / seconds;
        }
    }
    Some(CommonWindow {
        start_ns: start,
        end_ns: end,
        rates,
    })
}

/// The stage's output: each host's figures labelled `host=NAME`, and
/// `host=all` by each metric's rule, rates over the common window.
fn merge(workers: &[Worker], start_at: SystemTime) -> Result<StageOutput, StageError> {
    let mut out = StageOutput::default();
    let mut windows = Vec::new();
    let mut measured = 0;
    for w in workers {
        let name = &w.host.name;
        let Some(End::Done(done)) = &w.end else {
            out.notes.push(format!(
                "host {name} was lost{}: its figures are NOT in host=all",
                match &w.end {
                    Some(End::Lost(why)) | Some(End::Failed(why)) => format!(" ({why})"),
                    _ => String::new(),
                }
            ));
            // A headline: the summary says the figures lack a host.
            out.metrics.push(
                Metric::new("host_lost", 1.0, unit::COUNT, Direction::Lower)
                    .aggregate(Aggregate::Sum)
                    .label("host", name.clone())
                    .headline(),
            );
            continue;
        };
        let (output, window, max_rss_kib) = &**done;
        measured += 1;
        let part = StageOutput {
            metrics: output.metrics.clone(),
            histograms: output.histograms.clone(),
            series: output.series.clone(),
            notes: output.notes.iter().map(|n| shown(n)).collect(),
            ..Default::default()
        }
        .for_host(name);
        out.merge_from(part);
        let offset = w.offset.map_or(0, |o| o.offset_ns) as i128;
        windows.push((name.clone(), window, offset));
        let host_metric = |metric: &str, value: f64, unit: &str| {
            Metric::new(metric, value, unit, Direction::None)
                .aggregate(Aggregate::None)
                .label("host", name.clone())
        };
        let measure_s = (window.issuing_end_unix_ns - window.measure_start_unix_ns) as f64 / 1e9;
        if measure_s > 0.0 {
            out.metrics.push(
                host_metric("client_cores_busy", window.cpu_seconds / measure_s, "cores")
                    .aggregate(Aggregate::Sum),
            );
        }
        out.metrics
            .push(host_metric("client_cores", window.cores, "cores").aggregate(Aggregate::Sum));
        out.metrics.push(host_metric(
            "worker_max_rss",
            *max_rss_kib as f64 / 1024.0,
            "MiB",
        ));
    }
    // Each host's clock (this machine's own for a local worker) and the
    // start it reported, in this machine's clock.
    let report = StartReport {
        planned: start_at,
        hosts: workers
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
    };
    add_start_report(&mut out, &report);
    if measured >= 2 {
        add_host_all(&mut out, measured, &windows);
    }
    Ok(out)
}

/// `host=all` figures: every rule but the rates, which are summed over
/// the common window.
fn add_host_all(out: &mut StageOutput, hosts: usize, windows: &[(String, &Window, i128)]) {
    let parts = Parts {
        over: "host",
        concurrent: true,
        at_least: 2,
    };
    let mut all = combine(&out.metrics, &out.histograms, parts);
    let host_windows: Vec<HostWindow> = windows
        .iter()
        .map(|(_, w, offset)| HostWindow {
            start_ns: i128::from(w.measure_start_unix_ns) - offset,
            end_ns: i128::from(w.issuing_end_unix_ns) - offset,
            tenths: &w.tenths,
        })
        .collect();
    let common = common_window(&host_windows);
    let is_rate = |m: &Metric| {
        (m.name == "ops_per_s" || m.name == "bandwidth")
            && m.labels.get("phase").map(String::as_str) == Some("measure")
    };
    all.metrics.retain_mut(|m| {
        if !is_rate(m) {
            return true;
        }
        let Some(c) = &common else { return false };
        let op = m.labels.get("op").cloned().unwrap_or_default();
        let Some((ops, bytes)) = c.rates.get(&op) else {
            return false;
        };
        m.value = if m.name == "ops_per_s" {
            *ops
        } else {
            bytes / super::recorder::MIB
        };
        if let Some(combined) = m.combined.as_mut() {
            combined.window_s = Some(c.seconds());
        }
        true
    });
    match &common {
        Some(c) => {
            out.notes.push(format!(
                "host=all ops_per_s and bandwidth: each host's rate over the {:.2} s in which all {hosts} hosts were measuring (warm-up and ramp-down of each excluded), summed; counts are over each host's whole measured phase",
                c.seconds()
            ));
            all.metrics.push(
                Metric::new("common_window_seconds", c.seconds(), unit::SECONDS, Direction::None)
                    .aggregate(Aggregate::None)
                    .label("host", "all"),
            );
        }
        None => out.notes.push(format!(
            "no host=all ops_per_s or bandwidth: the {hosts} hosts' measured phases overlapped by less than {} ms",
            BIN.as_millis()
        )),
    }
    out.absorb_host_all(all);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn tenths(per_bin: &[u64]) -> BTreeMap<String, Vec<[u64; 2]>> {
        let mut m = BTreeMap::new();
        m.insert(
            "put".to_string(),
            per_bin.iter().map(|&o| [o, o * 10]).collect(),
        );
        m
    }

    #[test]
    fn rates_are_summed_over_the_window_all_hosts_measured_in() {
        // Host a: 1 s from t=0, 10 ops per 100 ms. Host b: started 250 ms
        // later, ran to t=1.5 s, 20 ops per 100 ms after a slow first bin
        // of 2 (its ramp-up, inside the window).
        let a = tenths(&[10; 10]);
        let mut b_bins = vec![20u64; 12];
        b_bins[0] = 2;
        let b = tenths(&b_bins);
        let ms = 1_000_000i128;
        let hosts = [
            HostWindow {
                start_ns: 0,
                end_ns: 1000 * ms,
                tenths: &a,
            },
            HostWindow {
                start_ns: 250 * ms,
                end_ns: 1500 * ms,
                tenths: &b,
            },
        ];
        let c = common_window(&hosts).unwrap();
        assert_eq!((c.start_ns, c.end_ns), (250 * ms, 1000 * ms));
        assert!((c.seconds() - 0.75).abs() < 1e-9);
        // a: bins 3..10 (300..1000 ms: 70 ops in 0.7 s = 100/s); b: bins
        // 0..7 (250..950 ms; the next would end past 1000 ms): 2 + 6*20 =
        // 122 ops in 0.7 s.
        let (ops, bytes) = c.rates["put"];
        let expected = 100.0 + 122.0 / 0.7;
        assert!((ops - expected).abs() < 1e-9, "{ops} vs {expected}");
        assert!((bytes - expected * 10.0).abs() < 1e-6);
        // No overlap of a whole bin: no common window.
        let late = [
            HostWindow {
                start_ns: 0,
                end_ns: 100 * ms,
                tenths: &a,
            },
            HostWindow {
                start_ns: 50 * ms,
                end_ns: 900 * ms,
                tenths: &b,
            },
        ];
        assert!(common_window(&late).is_none());
    }

    #[test]
    fn a_worker_may_only_claim_its_own_buckets() {
        let load: LoadConfig = serde_json::from_value(serde_json::json!({"buckets": 2})).unwrap();
        let mine = bucket_name("run", "s3@node1", 1);
        assert!(mine.starts_with("pl-run-s3-node1"), "{mine}");
        assert!(owned("run", "s3", &load, "node1", S3_BUCKET, &mine));
        // Another host's, another run's, one past its count, another kind.
        assert!(!owned("run", "s3", &load, "node2", S3_BUCKET, &mine));
        assert!(!owned("other", "s3", &load, "node1", S3_BUCKET, &mine));
        assert!(!owned(
            "run",
            "s3",
            &load,
            "node1",
            S3_BUCKET,
            &bucket_name("run", "s3@node1", 2)
        ));
        assert!(!owned("run", "s3", &load, "node1", "pool", "rbd"));
        // In the suite's own bucket: only its key prefix.
        let shared: LoadConfig =
            serde_json::from_value(serde_json::json!({"bucket": "b"})).unwrap();
        let prefix = format!("b/{}", key_prefix("run", "s3@node1"));
        assert!(owned("run", "s3", &shared, "node1", S3_OBJECTS, &prefix));
        assert!(!owned("run", "s3", &shared, "node1", S3_OBJECTS, "b/"));
        assert!(!owned("run", "s3", &shared, "node1", S3_BUCKET, "b"));
    }

    #[test]
    fn a_worker_stream_is_read_in_whole_lines_and_garbage_is_refused() {
        let path =
            std::env::temp_dir().join(format!("pipeline-stream-test-{}", std::process::id()));
        std::fs::write(&path, b"{\"type\":\"alive\"}\n{\"type\":\"rea").unwrap();
        let mut stream = Stream::open(&path).unwrap();
        assert_eq!(stream.messages().unwrap(), vec![FromWorker::Alive]);
        // The rest of the line arrives later.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"dy\"}\n").unwrap();
        assert_eq!(stream.messages().unwrap(), vec![FromWorker::Ready]);
        // A line that is not the protocol names itself, cut and without escapes.
        f.write_all(b"\x1b[31mrm -rf / \xff\n").unwrap();
        let err = stream.messages().unwrap_err();
        assert!(
            err.contains("not protocol 1") && err.contains("[31mrm -rf /"),
            "{err}"
        );
        assert!(!err.contains('\x1b'), "{err}");
        // A ledger entry of another kind is a message like any other: the
        // runner's `owned_by` refuses it (a pool is never a worker's).
        f.write_all(b"{\"type\":\"created\",\"kind\":\"pool\",\"name\":\"rbd\"}\n")
            .unwrap();
        assert!(
            matches!(&stream.messages().unwrap()[..], [FromWorker::Created { kind, .. }] if kind == "pool")
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn worker_text_is_one_bounded_line() {
        assert_eq!(shown("a\nb\x1b[31m"), "a b [31m");
        assert_eq!(shown(&"x".repeat(3000)).chars().count(), 2001);
    }
}
