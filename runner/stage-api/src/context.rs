//! What a running stage may use: its work folder in the run folder, the
//! cluster connection, command execution under the stage's deadline, progress
//! messages, and the ledger of things this run created (so cleanup deletes
//! only those).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::ceph::CephConnection;
use crate::exec::{self, CommandSpec, Exit};
use crate::hosts::Host;
use crate::secrets::Redactor;
use crate::stage::StageError;
pub use pipeline_model::{Artifact, CommandRecord, Resource};

/// A command started with [`StageContext::spawn_on`].
#[derive(Debug)]
pub struct Background {
    running: exec::Running,
    host: Host,
    spec: CommandSpec,
    shown: String,
}

/// The output of a finished command, read back from its files.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.exit.success()
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
        }
    }

    /// The commands run and the artifacts written, for the stage's record.
    pub fn into_records(self) -> (Vec<CommandRecord>, Vec<Artifact>) {
        (self.commands, self.artifacts)
    }
}

impl StageContext<'_> {
    /// Shows a short status line next to the stage's spinner.
    pub fn progress(&self, message: &str) {
        (self.progress)(message);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// When the stage's time is up (its `timeout`), if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
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
        let running = self.spawn_on(host, label, spec)?;
        let finished = running
            .running
            .wait(&self.cancel)
            .map_err(|e| StageError::failed(e.to_string()))?;
        self.finish(host, spec, &running.shown, finished)
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
        let running = self.spawn_with(host, label, &spec, None)?;
        let finished = running
            .running
            .wait(&CancelToken::default())
            .map_err(|e| StageError::failed(e.to_string()))?;
        self.finish(host, &spec, &running.shown, finished)
    }

    /// Starts a command on a host and returns without waiting (a server the
    /// next commands talk to). Finish it with [`wait`](Self::wait) or [`stop`](Self::stop).
    pub fn spawn_on(
        &mut self,
        host: &Host,
        label: &str,
        spec: &CommandSpec,
    ) -> Result<Background, StageError> {
        self.spawn_with(host, label, spec, self.deadline)
    }

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
        let shown = if host.is_local() {
            shown
        } else {
            format!("[{}] {shown}", host.name)
        };
        self.progress(&shown);
        let remote_limit = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let wrapped = host.wrap(spec, remote_limit.or(spec.timeout));
        let running = exec::spawn_to_files(&wrapped, &stdout_path, &stderr_path, deadline)
            .map_err(|e| StageError::failed(format!("{shown}: {e}")))?;
        self.pending += 1;
        Ok(Background {
            running,
            host: host.clone(),
            spec: spec.clone(),
            shown,
        })
    }

    /// Waits for a background command (up to its own timeout and the stage deadline).
    pub fn wait(&mut self, background: Background) -> Result<CommandOutput, StageError> {
        let finished = background
            .running
            .wait(&self.cancel)
            .map_err(|e| StageError::failed(e.to_string()))?;
        self.finish(
            &background.host,
            &background.spec,
            &background.shown,
            finished,
        )
    }

    /// Stops a background command (if still running) and records it.
    pub fn stop(&mut self, background: Background) -> CommandOutput {
        let finished = background.running.kill();
        self.pending = self.pending.saturating_sub(1);
        let out = self.record(&background.shown, &finished);
        CommandOutput {
            exit: finished.exit.clone(),
            stdout: out.0,
            stderr: out.1,
            elapsed: finished.elapsed,
        }
    }

    fn record(&mut self, shown: &str, finished: &exec::Finished) -> (String, String) {
        self.commands.push(CommandRecord {
            command: shown.to_string(),
            exit: finished.exit.to_string(),
            duration_s: finished.elapsed.as_secs_f64(),
            stdout: self.relative(&finished.stdout_path),
            stderr: self.relative(&finished.stderr_path),
        });
        let read = |p: &Path| {
            std::fs::read(p)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        (read(&finished.stdout_path), read(&finished.stderr_path))
    }

    fn finish(
        &mut self,
        host: &Host,
        spec: &CommandSpec,
        shown: &str,
        finished: exec::Finished,
    ) -> Result<CommandOutput, StageError> {
        self.pending = self.pending.saturating_sub(1);
        let (stdout, stderr) = self.record(shown, &finished);
        match finished.exit {
            Exit::Cancelled => return Err(StageError::Cancelled),
            Exit::TimedOut(elapsed) => {
                // Whichever limit fired: the stage's (its deadline has
                // passed) or this command's own.
                let stage_expired = self.deadline.is_some_and(|d| Instant::now() >= d);
                let limit = match (stage_expired, self.timeout, spec.timeout) {
                    (true, Some(t), _) => t,
                    (_, _, Some(t)) => t,
                    _ => elapsed,
                };
                return Err(StageError::Timeout(format!(
                    "{} (`{shown}` was killed)",
                    exec::format_duration(limit)
                )));
            }
            // ssh itself failed: the host, not the command.
            Exit::Code(255) if !host.is_local() => {
                return Err(StageError::failed(host.explain_ssh_failure(&stderr)));
            }
            // The shell's "command not found".
            Exit::Code(127) => {
                let program = spec.argv.first().cloned().unwrap_or_default();
                let place = if host.is_local() {
                    "this machine".to_string()
                } else {
                    format!("host {}", host.describe())
                };
                return Err(StageError::failed(format!(
                    "`{program}` is not installed on {place} (command not found)"
                )));
            }
            _ => {}
        }
        Ok(CommandOutput {
            exit: finished.exit,
            stdout,
            stderr,
            elapsed: finished.elapsed,
        })
    }

    /// Runs several commands at once (one per client or host) under the same
    /// deadline; returns their outputs in order. Each is recorded like [`run`](Self::run).
    pub fn run_parallel(
        &mut self,
        commands: &[(String, CommandSpec)],
    ) -> Result<Vec<CommandOutput>, StageError> {
        let first = self.commands.len() + self.pending + 1;
        let remote_limit = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        let wrapped: Vec<CommandSpec> = commands
            .iter()
            .map(|(_, spec)| self.host.wrap(spec, remote_limit.or(spec.timeout)))
            .collect();
        let jobs: Vec<(PathBuf, PathBuf, &CommandSpec)> = commands
            .iter()
            .zip(&wrapped)
            .enumerate()
            .map(|(i, ((label, _), spec))| {
                let base = format!("{:02}-{}", first + i, sanitize(label));
                (
                    self.work_dir.join(format!("{base}.stdout")),
                    self.work_dir.join(format!("{base}.stderr")),
                    spec,
                )
            })
            .collect();
        self.progress(&format!(
            "{} commands in parallel: {}",
            jobs.len(),
            self.redactor
                .redact(&commands.first().map(|c| c.1.display()).unwrap_or_default())
        ));
        let (deadline, cancel) = (self.deadline, self.cancel.clone());
        let finished: Vec<std::io::Result<exec::Finished>> = std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(out, err, spec)| {
                    let cancel = cancel.clone();
                    scope.spawn(move || exec::run_to_files(spec, out, err, deadline, &cancel))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("command thread panicked")))
                })
                .collect()
        });
        let mut outputs = Vec::new();
        let mut failure = None;
        for ((stdout_path, stderr_path, spec), result) in jobs.iter().zip(finished) {
            let shown = self.redactor.redact(&spec.display());
            let finished = match result {
                Ok(f) => f,
                Err(e) => {
                    failure.get_or_insert(StageError::failed(e.to_string()));
                    continue;
                }
            };
            self.commands.push(CommandRecord {
                command: shown.clone(),
                exit: finished.exit.to_string(),
                duration_s: finished.elapsed.as_secs_f64(),
                stdout: self.relative(stdout_path),
                stderr: self.relative(stderr_path),
            });
            match finished.exit {
                Exit::Cancelled => {
                    failure.get_or_insert(StageError::Cancelled);
                }
                Exit::TimedOut(elapsed) => {
                    failure.get_or_insert(StageError::Timeout(format!(
                        "{} (`{shown}` was killed)",
                        exec::format_duration(elapsed)
                    )));
                }
                _ => {}
            }
            let read = |p: &Path| {
                std::fs::read(p)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            };
            outputs.push(CommandOutput {
                exit: finished.exit,
                stdout: read(stdout_path),
                stderr: read(stderr_path),
                elapsed: finished.elapsed,
            });
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(outputs),
        }
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
    pub fn write_artifact(&mut self, name: &str, bytes: &[u8]) -> Result<PathBuf, StageError> {
        let path = self.work_dir.join(sanitize(name));
        std::fs::write(&path, bytes)
            .map_err(|e| StageError::io(format!("writing {}", path.display()), e))?;
        self.artifacts.push(Artifact {
            name: name.to_string(),
            path: self.relative(&path),
        });
        Ok(path)
    }

    /// Records that this run created `name`; cleanup will remove it.
    pub fn record_created(&mut self, kind: &str, name: &str) {
        if !self.ledger.iter().any(|r| r.kind == kind && r.name == name) {
            self.ledger.push(Resource {
                kind: kind.into(),
                name: name.into(),
                created_by: self.instance_id.clone(),
                removed: false,
            });
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
        for r in self.ledger.iter_mut() {
            if r.kind == kind && r.name == name {
                r.removed = true;
            }
        }
    }

    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.run_dir)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }
}

/// File-name-safe form of an id or label.
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
