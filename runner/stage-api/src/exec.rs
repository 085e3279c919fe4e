//! Running external commands: no shell unless asked, output streamed straight
//! into files in the run folder (so a killed runner still leaves what the tool
//! printed), a deadline on every call, and cancellation that kills the whole
//! process group (a tool's children too).

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;

/// A command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Limit for this call; the stage's own deadline also applies.
    pub timeout: Option<Duration>,
}

impl CommandSpec {
    pub fn new(argv: Vec<String>) -> Self {
        CommandSpec {
            argv,
            env: Vec::new(),
            cwd: None,
            timeout: None,
        }
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command line as a user would type it (for logs and errors).
    pub fn display(&self) -> String {
        shell_words(&self.argv)
    }
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut(Duration),
    Cancelled,
}

impl Exit {
    pub fn success(&self) -> bool {
        *self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
            Exit::TimedOut(d) => write!(f, "timeout after {}", format_duration(*d)),
            Exit::Cancelled => write!(f, "cancellation"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub elapsed: Duration,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
}

/// Runs `spec`, writing stdout and stderr to the given files. Returns when the
/// command exits, the deadline passes, or `cancel` fires.
pub fn run_to_files(
    spec: &CommandSpec,
    stdout_path: &Path,
    stderr_path: &Path,
    deadline: Option<Instant>,
    cancel: &CancelToken,
) -> std::io::Result<Finished> {
    spawn_to_files(spec, stdout_path, stderr_path, deadline)?.wait(cancel)
}

/// A started command (e.g. a server another command will talk to).
#[derive(Debug)]
pub struct Running {
    child: std::process::Child,
    started: Instant,
    deadline: Option<Instant>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
}

/// Starts `spec` in its own process group with output going to the files.
pub fn spawn_to_files(
    spec: &CommandSpec,
    stdout_path: &Path,
    stderr_path: &Path,
    deadline: Option<Instant>,
) -> std::io::Result<Running> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        ));
    };
    let stdout = File::create(stdout_path)?;
    let stderr = File::create(stderr_path)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // Own process group: a timeout or Ctrl-C kills the tool and its children,
        // and the terminal's Ctrl-C reaches only the runner, which decides.
        .process_group(0);
    for (k, v) in &spec.env {
        command.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start `{program}`: {e}")))?;
    let call_deadline = spec.timeout.map(|t| started + t);
    let deadline = match (deadline, call_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(Running {
        child,
        started,
        deadline,
        stdout_path: stdout_path.to_path_buf(),
        stderr_path: stderr_path.to_path_buf(),
    })
}

impl Running {
    /// Waits for the command to exit, its deadline, or cancellation.
    pub fn wait(mut self, cancel: &CancelToken) -> std::io::Result<Finished> {
        let pgid = self.child.id() as i32;
        // Poll quickly at first (most commands are short), then every 20 ms.
        let mut pause = Duration::from_millis(1);
        let exit = loop {
            if let Some(status) = self.child.try_wait()? {
                break exit_of(status);
            }
            if cancel.is_cancelled() {
                terminate_group(pgid, &mut self.child);
                break Exit::Cancelled;
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                terminate_group(pgid, &mut self.child);
                break Exit::TimedOut(self.started.elapsed());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        Ok(self.finished(exit))
    }

    /// Stops the command (SIGTERM, then SIGKILL) unless it already exited.
    pub fn kill(mut self) -> Finished {
        let exit = match self.child.try_wait() {
            Ok(Some(status)) => exit_of(status),
            _ => {
                terminate_group(self.child.id() as i32, &mut self.child);
                Exit::Cancelled
            }
        };
        self.finished(exit)
    }

    fn finished(self, exit: Exit) -> Finished {
        Finished {
            exit,
            elapsed: self.started.elapsed(),
            stdout_path: self.stdout_path,
            stderr_path: self.stderr_path,
        }
    }
}

fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(-1),
    }
}

/// SIGTERM the group, give it 3 s, then SIGKILL; always reap the child.
fn terminate_group(pgid: i32, child: &mut std::process::Child) {
    // SAFETY: kill(2) on a process group we created; no memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let grace = Instant::now() + Duration::from_secs(3);
    while Instant::now() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            // The leader is gone; make sure stragglers in the group are too.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Quotes argv for display so it can be pasted into a shell.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{:.0}ms", secs * 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let total = secs.round() as u64;
        let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
        if h > 0 {
            format!("{h}h{m:02}m{s:02}s")
        } else {
            format!("{m}m{s:02}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pipeline-exec-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn captures_output_and_exit_code() {
        let spec = CommandSpec::new(vec![
            "sh".into(),
            "-c".into(),
            "echo out; echo err >&2; exit 3".into(),
        ]);
        let (o, e) = (tmp("a.out"), tmp("a.err"));
        let f = run_to_files(&spec, &o, &e, None, &CancelToken::default()).unwrap();
        assert_eq!(f.exit, Exit::Code(3));
        assert_eq!(std::fs::read_to_string(o).unwrap(), "out\n");
        assert_eq!(std::fs::read_to_string(e).unwrap(), "err\n");
    }

    #[test]
    fn timeout_kills_the_process_group() {
        // The child shell starts a grandchild sleep; both must die.
        let spec = CommandSpec::new(vec!["sh".into(), "-c".into(), "sleep 30 & sleep 30".into()])
            .timeout(Duration::from_millis(300));
        let (o, e) = (tmp("b.out"), tmp("b.err"));
        let f = run_to_files(&spec, &o, &e, None, &CancelToken::default()).unwrap();
        assert!(matches!(f.exit, Exit::TimedOut(_)), "{:?}", f.exit);
        assert!(f.elapsed < Duration::from_secs(10));
    }

    #[test]
    fn missing_program_is_an_error() {
        let spec = CommandSpec::new(vec!["/nonexistent/tool".into()]);
        let err = run_to_files(
            &spec,
            &tmp("c.out"),
            &tmp("c.err"),
            None,
            &CancelToken::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("cannot start `/nonexistent/tool`"));
    }

    #[test]
    fn quoting() {
        assert_eq!(
            shell_words(&["rados".into(), "-p".into(), "a b".into()]),
            "rados -p 'a b'"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
