//! What a running stage may use: its work folder in the run folder, the
//! cluster connection, command execution under the stage's deadline, progress
//! messages, and the ledger of things this run created (so cleanup deletes
//! only those).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::cancel::CancelToken;
use crate::ceph::CephConnection;
use crate::client_root::{self, ClientRoot};
use crate::exec::{self, CommandSpec, CpuTime, Exit, TimeLimit};
use crate::hosts::{self, Host};
use crate::safe_fs;
use crate::secrets::Redactor;
use crate::stage::StageError;
use crate::start_barrier::{StartError, StartSeat};
pub use pipeline_model::{Artifact, CommandRecord, Resource};

/// A command started with [`StageContext::spawn_on`].
#[derive(Debug)]
pub struct Background {
    running: exec::Running,
    launched: Launched,
}

impl Background {
    /// The write end of its stdin (started with [`exec::Stdin::Pipe`]).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.running.take_stdin()
    }

    /// Whether it has exited (it is recorded when waited for or stopped).
    pub fn has_exited(&self) -> bool {
        self.running.has_exited()
    }

    /// The file its stdout goes to (read while it runs: a worker's stream).
    pub fn stdout_path(&self) -> &Path {
        self.running.stdout_path()
    }

    /// The host it runs on.
    pub fn host(&self) -> &Host {
        &self.launched.host
    }
}

/// What a started command is: enough to record and judge it when it ends.
#[derive(Debug)]
struct Launched {
    host: Host,
    spec: CommandSpec,
    /// Its command line for logs and results (secrets redacted, host named).
    shown: String,
}

/// The output of a finished command, read back from its files.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// The CPU it used (see `CommandRecord::cpu_user_s`); `None` when unknown.
    pub cpu: Option<CpuTime>,
    /// Started at an instant ([`CommandSpec::start_at`]): when the program
    /// did start, in the clock of the host it ran on; `None` otherwise, or
    /// when the far side did not report it.
    pub started_at: Option<SystemTime>,
    /// Set when stdout was longer than the stage reads back
    /// ([`StageContext::limit_read_back`]): `stdout` holds its start.
    pub stdout_cut: Option<CutOutput>,
}

/// A command's stdout that was longer than what was read of it back.
#[derive(Debug, Clone, PartialEq)]
pub struct CutOutput {
    /// Bytes in the file.
    pub bytes: u64,
    /// Bytes read back.
    pub read: u64,
    /// The file, relative to the run folder (it keeps all of it).
    pub file: String,
}

impl CutOutput {
    /// Why a cut output is not parsed: names the command and the bound.
    pub fn refusal(&self, command: &str) -> String {
        format!(
            "`{command}` printed {} bytes, more than the {} the runner reads back of a command: refused unparsed (all of it is in {})",
            self.bytes,
            if self.read >= 1 << 20 && self.read.is_multiple_of(1 << 20) {
                format!("{} MiB", self.read >> 20)
            } else {
                format!("{} bytes", self.read)
            },
            self.file
        )
    }
}

/// A command's output file read back to be parsed whole, outside a stage
/// (the runner's own `ceph` calls): at most [`DEFAULT_READ_BACK`] bytes,
/// else an error naming `command` and the bound.
pub fn read_output_whole(path: &Path, command: &str) -> Result<String, String> {
    match read_back(path, Some(DEFAULT_READ_BACK), &path.display().to_string()) {
        (text, None) => Ok(text),
        (_, Some(cut)) => Err(cut.refusal(command)),
    }
}

/// The first [`DEFAULT_READ_BACK`] bytes of a command's output file, for a
/// caller that reads it line by line (a probe, a hook's report).
pub fn read_output_start(path: &Path) -> String {
    read_back(path, Some(DEFAULT_READ_BACK), &path.display().to_string()).0
}

/// What a stage reads back of a command's stdout and stderr unless it says
/// otherwise: more than any Ceph CLI answer, tool report or log the native
/// stages parse needs (`ceph pg ls-by-pool -f json` is ~2.5 KB a PG, so
/// 32 MiB is a pool of ~13 000 PGs; a rados bench run prints ~100 B a
/// second). A peer that prints hundreds of MB costs this, not all of it.
pub const DEFAULT_READ_BACK: u64 = 32 << 20;

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.exit.success()
    }

    /// All of stdout, for a caller that parses it whole (a JSON document,
    /// a tool's report): an error naming `command` and the bound when
    /// stdout was longer than the stage reads back, rather than a parse
    /// error on its cut start.
    pub fn whole_stdout(&self, command: &str) -> Result<&str, StageError> {
        match &self.stdout_cut {
            None => Ok(&self.stdout),
            Some(cut) => Err(StageError::failed(cut.refusal(command))),
        }
    }

    /// The last lines of stderr (or stdout when stderr is empty), for errors.
    pub fn tail(&self) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

pub struct StageContext<'a> {
    pub instance_id: String,
    /// The run's id (`<UTC timestamp>-<name>`): unique names for what a run creates.
    pub run_id: String,
    /// `stages/<instance>/` inside the run folder; created before `run`.
    pub work_dir: PathBuf,
    pub run_dir: PathBuf,
    pub ceph: CephConnection,
    /// What the pipeline grants this stage (enforced for WASM plugins).
    pub grants: crate::grants::Grants,
    pub(crate) deadline: Option<Instant>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: CancelToken,
    pub(crate) progress: &'a (dyn Fn(&str) + Sync),
    /// The host this instance runs on (this machine unless `on:` says otherwise).
    pub host: Host,
    /// Every host named by the stage's `on:`; stages that orchestrate several
    /// hosts (per_host = false) use these.
    pub targets: Vec<Host>,
    /// Background commands started and not yet recorded (for file numbering).
    pub(crate) pending: usize,
    pub(crate) ledger: &'a mut Vec<Resource>,
    pub(crate) commands: Vec<CommandRecord>,
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) redactor: &'a Redactor,
    /// Bytes of each output file read back into [`CommandOutput`]; `None`:
    /// all of it (see [`limit_read_back`](StageContext::limit_read_back));
    /// [`DEFAULT_READ_BACK`] unless the stage says otherwise.
    pub(crate) read_back: Option<u64>,
    /// This host's place at the stage's start barrier (`sync_start`).
    pub(crate) start_seat: Option<StartSeat>,
    /// The earliest actual start of the commands started at the
    /// synchronized instant, in this host's clock.
    pub(crate) synchronized_start: Option<SystemTime>,
    /// The client root the stage's commands run in (`client:`); `None`:
    /// the host's own tools.
    pub client: Option<ClientRoot>,
    /// The client tools its commands ran (see [`client_root::tool_of`]):
    /// whose versions the run records for this stage.
    pub(crate) tools_used: Vec<&'static str>,
    /// Where per-second figures go while the stage runs (`--metrics-listen`).
    pub(crate) live: Option<std::sync::Arc<dyn crate::live::LiveSink>>,
}

/// What the engine hands a stage instance when it starts it.
pub struct ContextParts<'a> {
    pub instance_id: String,
    pub run_id: String,
    pub work_dir: PathBuf,
    pub run_dir: PathBuf,
    pub ceph: CephConnection,
    pub grants: crate::grants::Grants,
    /// When the stage's `timeout:` runs out.
    pub deadline: Option<Instant>,
    pub timeout: Option<Duration>,
    pub cancel: CancelToken,
    pub progress: &'a (dyn Fn(&str) + Sync),
    pub host: Host,
    pub targets: Vec<Host>,
    pub ledger: &'a mut Vec<Resource>,
    pub redactor: &'a Redactor,
    /// `client:` of the stage (this machine only).
    pub client: Option<ClientRoot>,
}

impl<'a> StageContext<'a> {
    pub fn new(parts: ContextParts<'a>) -> Self {
        StageContext {
            instance_id: parts.instance_id,
            run_id: parts.run_id,
            work_dir: parts.work_dir,
            run_dir: parts.run_dir,
            ceph: parts.ceph,
            grants: parts.grants,
            deadline: parts.deadline,
            timeout: parts.timeout,
            cancel: parts.cancel,
            progress: parts.progress,
            host: parts.host,
            targets: parts.targets,
            pending: 0,
            ledger: parts.ledger,
            commands: Vec::new(),
            artifacts: Vec::new(),
            redactor: parts.redactor,
            read_back: Some(DEFAULT_READ_BACK),
            start_seat: None,
            synchronized_start: None,
            client: parts.client,
            tools_used: Vec::new(),
            live: None,
        }
    }

    /// Sends this stage's per-second figures to `sink` as they are measured.
    pub fn set_live(&mut self, sink: std::sync::Arc<dyn crate::live::LiveSink>) {
        self.live = Some(sink);
    }

    /// One finished second of the series `series` (see
    /// [`LiveSink::point`](crate::live::LiveSink::point)); nothing when no
    /// one listens.
    pub fn live_point(&self, series: &str, unit: &str, t_s: f64, value: f64) {
        if let Some(sink) = &self.live {
            sink.point(&self.instance_id, &self.host.name, series, unit, t_s, value);
        }
    }

    /// Makes this host's run one of the hosts that start together
    /// (`sync_start`): see [`start_together`](StageContext::start_together).
    /// Dropped with the context, the seat tells the other hosts that this
    /// one will not come.
    pub fn join_start_barrier(&mut self, seat: StartSeat) {
        self.start_seat = Some(seat);
    }

    /// The commands run and the artifacts written, for the stage's record.
    pub fn into_records(self) -> (Vec<CommandRecord>, Vec<Artifact>) {
        (self.commands, self.artifacts)
    }

    /// The client tools the stage's commands ran, in the order first run.
    pub fn tools_used(&self) -> Vec<String> {
        self.tools_used.iter().map(|t| t.to_string()).collect()
    }
}

impl StageContext<'_> {
    /// Reads at most `bytes` of each command's stdout and stderr back into
    /// its [`CommandOutput`] (a note at the end says where the rest is);
    /// the files keep everything. For callers that must not hold a
    /// command's whole output in memory (a WASM plugin's `exec`).
    pub fn limit_read_back(&mut self, bytes: Option<u64>) {
        self.read_back = bytes;
    }

    /// Shows a short status line next to the stage's spinner.
    pub fn progress(&self, message: &str) {
        (self.progress)(message);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Call right before the measured command. With `sync_start`: waits
    /// until every host of the stage is here too, then gives the instant
    /// to start it at, in this host's clock: set it as the command's
    /// [`start_at`](CommandSpec::start_at). Otherwise `None`, at once.
    /// Fails when another host failed first, the stage's time ran out, or
    /// the run was interrupted.
    pub fn start_together(&mut self) -> Result<Option<SystemTime>, StageError> {
        let (cancel, deadline, progress) = (self.cancel.clone(), self.deadline, self.progress);
        let Some(seat) = self.start_seat.as_mut() else {
            return Ok(None);
        };
        progress("waiting for the other hosts, to start together");
        match seat.wait(&cancel, deadline) {
            Ok(at) => Ok(Some(at)),
            Err(StartError::Cancelled) => Err(StageError::Cancelled),
            Err(e) => Err(StageError::failed(e.to_string())),
        }
    }

    /// When this host's measured command started at the synchronized
    /// instant did start (the earliest, when there were several), in this
    /// host's clock.
    pub fn synchronized_start(&self) -> Option<SystemTime> {
        self.synchronized_start
    }

    /// When the stage's time is up (its `timeout`), if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Waits `duration`, as a stage that polls (a cluster settling) must:
    /// `Err(Cancelled)` at once on Ctrl-C, and a timeout when the stage's
    /// `timeout:` ends first (then it waits only until then). No shelling
    /// out to `sleep` for either.
    pub fn sleep(&self, duration: Duration) -> Result<(), StageError> {
        let (wait, times_out) = match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                (duration.min(left), left < duration)
            }
            None => (duration, false),
        };
        if !self.cancel.sleep(wait) {
            return Err(StageError::Cancelled);
        }
        if times_out {
            return Err(StageError::Timeout(
                "the stage's timeout, while waiting".to_string(),
            ));
        }
        Ok(())
    }

    /// The token a stage's own async code can wait on
    /// ([`CancelToken::cancelled`]), e.g. in a `select!` with its load, next
    /// to [`deadline`](Self::deadline) for the stage's time limit.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Runs a command on this instance's host; stdout/stderr go to
    /// `NN-<label>.stdout|.stderr` in the work folder and are listed in the
    /// results. A non-zero exit is NOT an error here (some tools report
    /// failures in their output); a timeout, cancellation, an SSH failure or a
    /// missing program is.
    pub fn run(&mut self, label: &str, spec: &CommandSpec) -> Result<CommandOutput, StageError> {
        let host = self.host.clone();
        self.run_on(&host, label, spec)
    }

    /// Like [`run`](Self::run), on any host of the inventory.
    pub fn run_on(
        &mut self,
        host: &Host,
        label: &str,
        spec: &CommandSpec,
    ) -> Result<CommandOutput, StageError> {
        let background = self.spawn_on(host, label, spec)?;
        self.wait(background)
    }

    /// Runs a command that undoes what the stage made (removes its scratch
    /// file, stops its server). It runs even after Ctrl-C or past the stage's
    /// deadline, under its own timeout only (default 30 s): an interrupted
    /// stage must not leave files or processes behind on a host.
    pub fn run_tidy_on(
        &mut self,
        host: &Host,
        label: &str,
        spec: &CommandSpec,
    ) -> Result<CommandOutput, StageError> {
        let spec = match spec.timeout {
            Some(_) => spec.clone(),
            None => spec.clone().timeout(Duration::from_secs(30)),
        };
        let Background { running, launched } = self.spawn_with(host, label, &spec, None)?;
        self.progress(&launched.shown);
        let finished = running.wait(&CancelToken::default());
        self.finish(&launched, finished)
    }

    /// Starts a command on a host and returns without waiting (a server the
    /// next commands talk to). Finish it with [`wait`](Self::wait) or [`stop`](Self::stop).
    pub fn spawn_on(
        &mut self,
        host: &Host,
        label: &str,
        spec: &CommandSpec,
    ) -> Result<Background, StageError> {
        let background = self.spawn_with(host, label, spec, self.deadline)?;
        self.progress(&background.launched.shown);
        Ok(background)
    }

    /// The one way a command starts: its output files are numbered in the
    /// order commands start, and on another host it runs over SSH under the
    /// time left (so the far side stops it too) and reports its CPU.
    fn spawn_with(
        &mut self,
        host: &Host,
        label: &str,
        spec: &CommandSpec,
        deadline: Option<Instant>,
    ) -> Result<Background, StageError> {
        let n = self.commands.len() + self.pending + 1;
        let host_part = if host.is_local() {
            String::new()
        } else {
            format!("{}-", sanitize(&host.name))
        };
        let base = format!("{n:02}-{host_part}{}", sanitize(label));
        let stdout_path = self.work_dir.join(format!("{base}.stdout"));
        let stderr_path = self.work_dir.join(format!("{base}.stderr"));
        let shown = self.redactor.redact(&spec.display());
        let shown = match (&self.client, host.is_local()) {
            (Some(client), _) => format!(
                "[client {}] {shown}",
                client
                    .name
                    .clone()
                    .unwrap_or_else(|| client.root.display().to_string())
            ),
            (None, true) => shown,
            (None, false) => format!("[{}] {shown}", host.name),
        };
        // Checked before the SSH wrap, which would hide the names from the spawn's own check.
        exec::check_env_names(spec).map_err(|e| StageError::failed(format!("{shown}: {e}")))?;
        if let Some(tool) = client_root::tool_of(&spec.argv)
            && !self.tools_used.contains(&tool)
        {
            self.tools_used.push(tool);
        }
        let in_root = self.in_client_root(host, spec)?;
        let runs = in_root.as_ref().unwrap_or(spec);
        let remote_limit = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let wrapped = host.wrap(runs, remote_limit.or(spec.timeout));
        let running =
            exec::spawn_to_files(&wrapped, &stdout_path, &stderr_path, deadline, &self.cancel)
                .map_err(|e| match e.kind() {
                    // Ctrl-C while it waited for its start instant.
                    std::io::ErrorKind::Interrupted => StageError::Cancelled,
                    _ => StageError::failed(format!("{shown}: {e}")),
                })?;
        self.pending += 1;
        Ok(Background {
            running,
            launched: Launched {
                host: host.clone(),
                spec: spec.clone(),
                shown,
            },
        })
    }

    /// `spec` as it runs in the stage's client root, when it has one
    /// (`None`: as it is). Client roots are this machine's folders: the
    /// suite is refused before the run when a stage with one has other hosts.
    fn in_client_root(
        &self,
        host: &Host,
        spec: &CommandSpec,
    ) -> Result<Option<CommandSpec>, StageError> {
        let Some(client) = &self.client else {
            return Ok(None);
        };
        if !host.is_local() {
            return Err(StageError::failed(format!(
                "client root {} is a folder of this machine; host {} cannot run from it",
                client.describe(),
                host.name
            )));
        }
        let binds = client_root::binds(&self.ceph, &self.run_dir);
        Ok(Some(client.wrap(
            spec,
            Path::new(client_root::LAUNCHER),
            &binds,
        )))
    }

    /// Waits for a background command (up to its own timeout and the stage deadline).
    pub fn wait(&mut self, background: Background) -> Result<CommandOutput, StageError> {
        let Background { running, launched } = background;
        let finished = running.wait(&self.cancel);
        self.finish(&launched, finished)
    }

    /// Stops a background command (if still running) and records it. Being
    /// stopped is how it is meant to end, so nothing here is an error.
    pub fn stop(&mut self, background: Background) -> CommandOutput {
        let Background { running, launched } = background;
        self.pending = self.pending.saturating_sub(1);
        self.record(&launched, running.kill())
    }

    /// Runs several commands at once (one per client) on this instance's
    /// host under the same deadline; returns their outputs in order. Each is
    /// recorded and judged like [`run`](Self::run).
    pub fn run_parallel(
        &mut self,
        commands: &[(String, CommandSpec)],
    ) -> Result<Vec<CommandOutput>, StageError> {
        let on_host: Vec<(Host, String, CommandSpec)> = commands
            .iter()
            .map(|(label, spec)| (self.host.clone(), label.clone(), spec.clone()))
            .collect();
        self.run_parallel_on(&on_host)
    }

    /// Like [`run_parallel`](Self::run_parallel), each command on its own
    /// host (`(host, label, spec)`). All are started before any is waited
    /// for; every one is recorded, and the first failure (in the given
    /// order) is the error.
    pub fn run_parallel_on(
        &mut self,
        commands: &[(Host, String, CommandSpec)],
    ) -> Result<Vec<CommandOutput>, StageError> {
        let mut started = Vec::with_capacity(commands.len());
        let mut failure = None;
        for (host, label, spec) in commands {
            match self.spawn_with(host, label, spec, self.deadline) {
                Ok(background) => started.push(background),
                Err(e) => {
                    // Those already started are stopped, not left running.
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failure {
            for background in started {
                self.stop(background);
            }
            return Err(e);
        }
        self.progress(&format!(
            "{} commands in parallel: {}",
            started.len(),
            started
                .first()
                .map(|b| b.launched.shown.as_str())
                .unwrap_or_default()
        ));
        let cancel = self.cancel.clone();
        let finished: Vec<(Launched, std::io::Result<exec::Finished>)> =
            std::thread::scope(|scope| {
                let waits: Vec<_> = started
                    .into_iter()
                    .map(|Background { running, launched }| {
                        let cancel = &cancel;
                        (launched, scope.spawn(move || running.wait(cancel)))
                    })
                    .collect();
                waits
                    .into_iter()
                    .map(|(launched, wait)| {
                        let result = wait.join().unwrap_or_else(|_| {
                            Err(std::io::Error::other("command thread panicked"))
                        });
                        (launched, result)
                    })
                    .collect()
            });
        let mut outputs = Vec::with_capacity(finished.len());
        for (launched, result) in finished {
            match self.finish(&launched, result) {
                Ok(output) => outputs.push(output),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(outputs),
        }
    }

    /// Where every waited-for command ends: recorded, then judged the same
    /// way wherever it ran. A timeout names the limit that fired; ssh's own
    /// failure (exit 255 on another host) and the shell's "not found" (127)
    /// say what is wrong with the host.
    fn finish(
        &mut self,
        launched: &Launched,
        finished: std::io::Result<exec::Finished>,
    ) -> Result<CommandOutput, StageError> {
        self.pending = self.pending.saturating_sub(1);
        let finished =
            finished.map_err(|e| StageError::failed(format!("{}: {e}", launched.shown)))?;
        let timed_out_by = finished.timed_out_by;
        let output = self.record(launched, finished);
        let Launched { host, spec, shown } = launched;
        match output.exit {
            Exit::Cancelled => Err(StageError::Cancelled),
            Exit::TimedOut(elapsed) => {
                let limit = match timed_out_by {
                    Some(TimeLimit::Command(t)) => t,
                    Some(TimeLimit::Deadline) => self.timeout.unwrap_or(elapsed),
                    None => elapsed,
                };
                Err(StageError::Timeout(format!(
                    "{} (`{shown}` was killed)",
                    exec::format_duration(limit)
                )))
            }
            // ssh itself failed: the host, not the command.
            Exit::Code(255) if !host.is_local() => {
                Err(StageError::failed(host.explain_ssh_failure(&output.stderr)))
            }
            // The shell's "command not found".
            Exit::Code(127) => {
                let program = spec.argv.first().cloned().unwrap_or_default();
                let place = match &self.client {
                    Some(client) => format!("the client root {}", client.describe()),
                    None if host.is_local() => "this machine".to_string(),
                    None => format!("host {}", host.describe()),
                };
                Err(StageError::failed(format!(
                    "`{program}` is not installed on {place} (command not found)"
                )))
            }
            _ => Ok(output),
        }
    }

    /// Lists a finished command in the stage's record and reads its output
    /// back. A remote command's CPU comes from the report its shell appended
    /// to stderr, which is removed first so the file holds only the tool's
    /// stderr; a local command's from this machine's kernel.
    fn record(&mut self, launched: &Launched, finished: exec::Finished) -> CommandOutput {
        let cpu = if launched.host.is_local() {
            finished.cpu
        } else {
            hosts::take_cpu_report(&finished.stderr_path)
        };
        let started_at = self.actual_start(launched, &finished);
        self.commands.push(CommandRecord {
            command: launched.shown.clone(),
            exit: finished.exit.to_string(),
            duration_s: finished.elapsed.as_secs_f64(),
            stdout: self.relative(&finished.stdout_path),
            stderr: self.relative(&finished.stderr_path),
            host: (!launched.host.is_local()).then(|| launched.host.name.clone()),
            cpu_user_s: cpu.map(|c| c.user.as_secs_f64()),
            cpu_sys_s: cpu.map(|c| c.system.as_secs_f64()),
            env: launched
                .spec
                .env
                .iter()
                .map(|(k, v)| format!("{k}={}", self.redactor.redact(v)))
                .collect(),
        });
        // Read back safely (the command may have put a link in its output
        // file's place: the output goes to a plugin, which must not see
        // elsewhere), and at most `read_back` bytes of it.
        // A secret a command printed stays out of the run folder: its raw
        // output is redacted in place (or, if that fails, not kept).
        for p in [&finished.stdout_path, &finished.stderr_path] {
            if let Err(e) = self.redactor.redact_file(p) {
                let _ = std::fs::remove_file(p);
                (self.progress)(&format!(
                    "warning: {} removed: it could not be checked for secrets ({e})",
                    self.relative(p)
                ));
            }
        }
        let read = |p: &Path| read_back(p, self.read_back, &self.relative(p));
        let (stdout, stdout_cut) = read(&finished.stdout_path);
        CommandOutput {
            exit: finished.exit,
            stdout,
            stderr: read(&finished.stderr_path).0,
            elapsed: finished.elapsed,
            cpu,
            started_at,
            stdout_cut,
        }
    }

    /// When a command started at an instant did start: this machine's
    /// spawn, or what the far side reported (removed from its stderr file).
    /// The earliest is the host's synchronized start.
    fn actual_start(
        &mut self,
        launched: &Launched,
        finished: &exec::Finished,
    ) -> Option<SystemTime> {
        launched.spec.start_at?;
        let started = if launched.host.is_local() {
            Some(finished.started_at)
        } else {
            hosts::take_start_report(&finished.stderr_path)
        }?;
        let earliest = self.synchronized_start.map_or(started, |s| s.min(started));
        self.synchronized_start = Some(earliest);
        Some(started)
    }

    /// Like [`run`](Self::run), but a non-zero exit is a `CommandFailed` error.
    pub fn run_ok(&mut self, label: &str, spec: &CommandSpec) -> Result<CommandOutput, StageError> {
        let out = self.run(label, spec)?;
        if out.success() {
            Ok(out)
        } else {
            Err(StageError::CommandFailed {
                command: self.redactor.redact(&spec.display()),
                status: out.exit.to_string(),
                stderr_tail: out.tail(),
            })
        }
    }

    /// Writes a file into the work folder and lists it as an artifact.
    ///
    /// The folder also holds the stage's evidence (command outputs,
    /// `plugin.log`) and whatever its commands left there, so an artifact is
    /// always a NEW file (`O_CREAT|O_EXCL`, which follows no link): it can
    /// neither replace evidence nor write through a link planted in its
    /// place. Only an artifact this stage wrote itself may be replaced.
    pub fn write_artifact(&mut self, name: &str, bytes: &[u8]) -> Result<PathBuf, StageError> {
        let file_name = sanitize(name);
        if file_name.is_empty() || file_name == "." || file_name == ".." {
            return Err(StageError::failed(format!(
                "artifact name `{name}` is not a file name"
            )));
        }
        let path = self.work_dir.join(&file_name);
        let relative = self.relative(&path);
        let existing = if self.artifacts.iter().any(|a| a.path == relative) {
            safe_fs::Existing::Replace
        } else {
            safe_fs::Existing::Refuse
        };
        safe_fs::write(&path, bytes, existing).map_err(|e| {
            StageError::failed(format!(
                "cannot write artifact `{name}`: {e} (an artifact is a new file in the stage folder; it never replaces the stage's command outputs or log)"
            ))
        })?;
        if existing == safe_fs::Existing::Replace {
            return Ok(path);
        }
        self.artifacts.push(Artifact {
            name: name.to_string(),
            path: self.relative(&path),
        });
        Ok(path)
    }

    /// Records that this run created `name`; cleanup will remove it.
    pub fn record_created(&mut self, kind: &str, name: &str) {
        match self
            .ledger
            .iter_mut()
            .find(|r| r.kind == kind && r.name == name)
        {
            // Created again after this run removed it (the suite runs
            // again with `repeat:`): due for removal again.
            Some(r) if r.removed => {
                r.removed = false;
                r.created_by = self.instance_id.clone();
            }
            Some(_) => return,
            None => self.ledger.push(Resource {
                kind: kind.into(),
                name: name.into(),
                created_by: self.instance_id.clone(),
                removed: false,
            }),
        }
        self.journal(kind, name, false);
    }

    /// On disk at once, for `pipeline cleanup` after a killed run.
    fn journal(&self, kind: &str, name: &str, removed: bool) {
        let entry = Resource {
            kind: kind.into(),
            name: name.into(),
            created_by: self.instance_id.clone(),
            removed,
        };
        if let Err(e) = crate::ledger_journal::append(&self.run_dir, &entry) {
            (self.progress)(&format!(
                "warning: cannot write {} in the run folder: {e}",
                crate::ledger_journal::JOURNAL_FILE
            ));
        }
    }

    /// Resources of `kind` this run created and has not removed yet.
    pub fn created(&self, kind: &str) -> Vec<Resource> {
        self.ledger
            .iter()
            .filter(|r| r.kind == kind && !r.removed)
            .cloned()
            .collect()
    }

    pub fn was_created(&self, kind: &str, name: &str) -> bool {
        self.ledger
            .iter()
            .any(|r| r.kind == kind && r.name == name && !r.removed)
    }

    pub fn mark_removed(&mut self, kind: &str, name: &str) {
        let mut known = false;
        for r in self.ledger.iter_mut() {
            if r.kind == kind && r.name == name && !r.removed {
                r.removed = true;
                known = true;
            }
        }
        if known {
            self.journal(kind, name, true);
        }
    }

    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.run_dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }
}

/// A command's output file as text: all of it, or its first `limit` bytes
/// and a line saying how much more `shown` (its path in the run folder)
/// holds, with what was cut.
fn read_back(path: &Path, limit: Option<u64>, shown: &str) -> (String, Option<CutOutput>) {
    use std::io::Read;
    let Ok(file) = safe_fs::open_read(path) else {
        return (String::new(), None);
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let limit = limit.unwrap_or(u64::MAX);
    let mut bytes = Vec::with_capacity(size.min(limit) as usize);
    let _ = file.take(limit).read_to_end(&mut bytes);
    // Valid UTF-8 (the usual case) becomes the String without a copy.
    let mut text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if size > limit {
        text.push_str(&format!(
            "\n[... output cut: the first {limit} of {size} bytes are shown; all of it is in {shown}]\n"
        ));
        let cut = CutOutput {
            bytes: size,
            read: limit,
            file: shown.to_string(),
        };
        return (text, Some(cut));
    }
    (text, None)
}

/// File-name-safe form of an id or label.
/// Ledger kind of a file a stage created on a host for its measurement
/// (disk-baseline's scratch file); the runner itself removes one a killed
/// run left (`pipeline cleanup`).
pub const SCRATCH_FILE: &str = "scratch-file";

/// The ledger name of a scratch file: `HOST:PATH`.
pub fn scratch_file_name(host: &str, path: &str) -> String {
    format!("{host}:{path}")
}

pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_created_again_after_its_removal_is_due_for_removal_again() {
        with_context("ledger", None, |ctx| {
            ctx.record_created("pool", "bench");
            ctx.mark_removed("pool", "bench");
            assert!(ctx.created("pool").is_empty());
            // The suite runs again (`repeat:`) and creates it again.
            ctx.record_created("pool", "bench");
            let due = ctx.created("pool");
            assert_eq!(due.len(), 1);
            assert!(!due[0].removed);
            // Recorded twice while it exists: still one entry.
            ctx.record_created("pool", "bench");
            assert_eq!(ctx.created("pool").len(), 1);
        });
    }

    #[test]
    fn a_sleep_past_the_stage_timeout_ends_at_it_as_a_timeout() {
        with_context("sleep-timeout", Some(Duration::from_millis(100)), |ctx| {
            // Asked for an hour: the stage has 100 ms left, so it ends then.
            let err = ctx.sleep(Duration::from_secs(3600)).unwrap_err();
            assert!(matches!(err, StageError::Timeout(_)), "{err}");
        });
        with_context("sleep-ok", Some(Duration::from_secs(3600)), |ctx| {
            ctx.sleep(Duration::from_millis(10)).unwrap();
        });
    }

    /// A context for this machine with its work folder under the temp dir.
    fn with_context<T>(
        name: &str,
        deadline: Option<Duration>,
        test: impl FnOnce(&mut StageContext) -> T,
    ) -> T {
        let run_dir = std::env::temp_dir().join(format!(
            "pipeline-context-test-{}-{name}",
            std::process::id()
        ));
        let work_dir = run_dir.join("stages").join(name);
        std::fs::create_dir_all(&work_dir).unwrap();
        let (progress, redactor, mut ledger) = (|_: &str| {}, Redactor::default(), Vec::new());
        let mut ctx = StageContext::new(ContextParts {
            instance_id: name.into(),
            run_id: "test".into(),
            work_dir,
            run_dir: run_dir.clone(),
            ceph: CephConnection::default(),
            grants: Default::default(),
            deadline: deadline.map(|d| Instant::now() + d),
            timeout: deadline,
            cancel: CancelToken::default(),
            progress: &progress,
            host: Host::local(),
            targets: vec![Host::local()],
            ledger: &mut ledger,
            redactor: &redactor,
            client: None,
        });
        let out = test(&mut ctx);
        drop(ctx);
        let _ = std::fs::remove_dir_all(run_dir);
        out
    }

    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new(vec!["sh".into(), "-c".into(), script.into()])
    }

    fn parallel(specs: &[CommandSpec]) -> Vec<(String, CommandSpec)> {
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("client-{i}"), s.clone()))
            .collect()
    }

    #[test]
    fn parallel_commands_fail_the_way_a_single_one_does() {
        for failing in [
            sh("exit 127"),
            CommandSpec::new(vec!["sleep".into(), "5".into()]).timeout(Duration::from_millis(200)),
        ] {
            let single = with_context("single", None, |ctx| {
                ctx.run("one", &failing).unwrap_err().to_string()
            });
            let together = with_context("parallel", None, |ctx| {
                let err = ctx
                    .run_parallel(&parallel(&[sh("true"), failing.clone()]))
                    .unwrap_err()
                    .to_string();
                // Both are recorded, numbered in the order they started.
                let commands: Vec<&str> = ctx.commands.iter().map(|c| c.stdout.as_str()).collect();
                assert_eq!(
                    commands,
                    [
                        "stages/parallel/01-client-0.stdout",
                        "stages/parallel/02-client-1.stdout"
                    ]
                );
                err
            });
            assert_eq!(single, together);
        }
    }

    #[test]
    fn a_timeout_names_the_limit_that_fired() {
        let sleep = || CommandSpec::new(vec!["sleep".into(), "5".into()]);
        let own = with_context("own-limit", Some(Duration::from_secs(60)), |ctx| {
            ctx.run("sleep", &sleep().timeout(Duration::from_millis(200)))
                .unwrap_err()
                .to_string()
        });
        assert_eq!(own, "timed out after 200ms (`sleep 5` was killed)");
        let stage = with_context("stage-limit", Some(Duration::from_millis(300)), |ctx| {
            ctx.run_parallel(&parallel(&[sleep().timeout(Duration::from_secs(60))]))
                .unwrap_err()
                .to_string()
        });
        assert_eq!(stage, "timed out after 300ms (`sleep 5` was killed)");
    }

    #[test]
    fn read_back_can_be_limited_while_the_file_keeps_everything() {
        let (out, file) = with_context("read-back", None, |ctx| {
            ctx.limit_read_back(Some(1000));
            let out = ctx
                .run("big", &sh("head -c 100000 /dev/zero | tr '\\0' x"))
                .unwrap();
            let file = std::fs::metadata(ctx.work_dir.join("01-big.stdout"))
                .unwrap()
                .len();
            (out, file)
        });
        assert_eq!(file, 100_000);
        assert!(out.stdout.starts_with(&"x".repeat(1000)));
        assert!(
            out.stdout.ends_with(
                "[... output cut: the first 1000 of 100000 bytes are shown; all of it is in stages/read-back/01-big.stdout]\n"
            ),
            "{}",
            &out.stdout[1000..]
        );
        assert!(out.stdout.len() < 1200);
        let e = out.whole_stdout("big").unwrap_err().to_string();
        assert!(
            e.contains("`big` printed 100000 bytes")
                && e.contains("stages/read-back/01-big.stdout"),
            "{e}"
        );
    }

    fn seats(names: &[&str]) -> Vec<StartSeat> {
        let hosts = names
            .iter()
            .map(|name| crate::start_barrier::BarrierHost {
                name: name.to_string(),
                offset: crate::clock::Offset {
                    offset_ns: 0,
                    round_trip_ns: 0,
                    samples: 0,
                },
            })
            .collect();
        crate::start_barrier::StartBarrier::new(hosts, Duration::from_millis(100)).1
    }

    #[test]
    fn a_command_started_together_records_when_it_started() {
        let seat = seats(&["local"]).pop().unwrap();
        with_context("together", None, |ctx| {
            // Not one of several hosts: at once.
            assert_eq!(ctx.start_together().unwrap(), None);
            ctx.join_start_barrier(seat);
            let at = ctx.start_together().unwrap().expect("a start instant");
            let mut spec = sh("echo tool >&2");
            spec.start_at = Some(at);
            let out = ctx.run("tool", &spec).unwrap();
            let started = out.started_at.expect("the actual start");
            assert!(started >= at, "{started:?} before {at:?}");
            assert_eq!(out.stderr, "tool\n");
            assert_eq!(ctx.synchronized_start(), Some(started));
            // Commands without a start instant leave it alone.
            let out = ctx.run("other", &sh("true")).unwrap();
            assert_eq!(out.started_at, None);
            assert_eq!(ctx.synchronized_start(), Some(started));
        });
    }

    #[test]
    fn a_host_whose_partner_ended_first_is_told_which_one() {
        let mut seats = seats(&["node1", "node2"]);
        drop(seats.pop());
        let seat = seats.pop().unwrap();
        let err = with_context("partner-failed", None, |ctx| {
            ctx.join_start_barrier(seat);
            ctx.start_together().unwrap_err().to_string()
        });
        assert_eq!(err, "host node2 failed before the synchronized start");
    }

    #[test]
    fn commands_record_their_cpu() {
        let busy = sh("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done");
        let records = with_context("cpu", None, |ctx| {
            let outputs = ctx
                .run_parallel(&parallel(&[busy.clone(), sh("sleep 0.2")]))
                .unwrap();
            assert!(outputs[0].cpu.unwrap().user > Duration::from_millis(50));
            ctx.run("busy", &busy).unwrap();
            std::mem::take(&mut ctx.commands)
        });
        let cpu: Vec<f64> = records.iter().map(|c| c.cpu_s().unwrap()).collect();
        assert!(cpu[0] > 0.05 && cpu[2] > 0.05, "{cpu:?}");
        assert!(cpu[1] < 0.1, "a sleep: {cpu:?}");
        assert!(records.iter().all(|c| c.host.is_none()));
    }
}
