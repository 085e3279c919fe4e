//! Running external commands with a hard time limit.
//!
//! A `ceph` command can hang forever (a mgr command with no mgr, a full cluster, a monitor
//! that never forms quorum); `--connect-timeout` only covers the first connection. So every
//! command here is polled with `try_wait` and killed when its time is up, and its output is
//! read on helper threads that are abandoned, not joined, if a daemonized grandchild keeps
//! the pipe open.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::error::SandboxError;

/// Environment variables that would change what the Ceph tools connect to or as whom;
/// the sandbox always passes `-c` explicitly and must not be redirected by the caller's shell.
const SCRUBBED_ENV: [&str; 3] = ["CEPH_ARGS", "CEPH_CONF", "CEPH_KEYRING"];

/// A point in time by which a whole operation (`up`) must be done.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    start: Instant,
    end: Instant,
}

impl Deadline {
    pub fn after(timeout: Duration) -> Deadline {
        let start = Instant::now();
        Deadline {
            start,
            end: start + timeout,
        }
    }
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
    pub fn remaining(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }
    pub fn expired(&self) -> bool {
        Instant::now() >= self.end
    }
    /// Time limit for one command: `cap`, but never past the deadline (at least 1 s, so a
    /// nearly expired deadline still lets a fast command report its real error).
    pub fn limit(&self, cap: Duration) -> Duration {
        cap.min(self.remaining()).max(Duration::from_secs(1))
    }
}

/// Captured result of a finished command.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Last `lines` lines of stderr, or of stdout if stderr is empty: what explains a failure.
    pub fn tail(&self, lines: usize) -> String {
        let text = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        crate::logs::last_lines(text, lines)
    }
}

/// Human-readable form of a command line for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| crate::env::shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A command with the sandbox's standard environment scrubbing applied,
/// and none of the caller's other open files: a daemon started from a
/// shell that holds a lock (scripts/test.sh holds /tmp/pipeline-tests.lock
/// on fd 9) must not keep that lock for as long as the daemon lives.
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    // SAFETY: close_range is async-signal-safe. It only marks descriptors 3
    // and up close-on-exec, so std's own exec-error pipe still works until
    // the exec; failure (an old kernel) leaves them as they were.
    unsafe {
        cmd.pre_exec(|| {
            const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
    cmd
}

fn spawn(cmd: &mut Command) -> Result<Child, SandboxError> {
    cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            SandboxError::MissingProgram {
                program: cmd.get_program().to_string_lossy().into_owned(),
            }
        } else {
            SandboxError::Io {
                action: "start",
                path: PathBuf::from(cmd.get_program()),
                source: e,
            }
        }
    })
}

/// Waits for `child` for at most `timeout`; kills it (SIGKILL) and reaps it when time is up.
fn wait_bounded(
    child: &mut Child,
    cmd: &Command,
    timeout: Duration,
) -> Result<ExitStatus, SandboxError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(SandboxError::CommandTimeout {
                    command: describe(cmd),
                    timeout,
                });
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => {
                let _ = child.kill();
                return Err(SandboxError::Io {
                    action: "wait for",
                    path: PathBuf::from(cmd.get_program()),
                    source: e,
                });
            }
        }
    }
}

/// Output of one pipe, read on a helper thread so a full pipe never blocks the child.
struct Collector {
    data: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
}

impl Collector {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Collector {
        let data = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        if let Some(mut pipe) = pipe {
            let sink = Arc::clone(&data);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    if let Ok(mut buf) = sink.lock() {
                        buf.extend_from_slice(&chunk[..n]);
                    }
                }
                let _ = tx.send(());
            });
        }
        Collector { data, done }
    }

    /// What was read, after waiting at most `grace` for the end of the pipe.
    fn finish(self, grace: Duration) -> String {
        let _ = self.done.recv_timeout(grace);
        let buf = self.data.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// Runs `cmd` with stdout/stderr captured, killing it after `timeout`. Does not look at
/// the exit status; see [`run_ok`].
pub(crate) fn run(mut cmd: Command, timeout: Duration) -> Result<Finished, SandboxError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn(&mut cmd)?;
    let stdout = Collector::start(child.stdout.take());
    let stderr = Collector::start(child.stderr.take());
    let status = wait_bounded(&mut child, &cmd, timeout)?;
    // A grandchild that daemonized may hold the pipes open: take what is there and leave the
    // reader threads behind (they end when the grandchild closes the pipe).
    let grace = Duration::from_millis(500);
    Ok(Finished {
        status,
        stdout: stdout.finish(grace),
        stderr: stderr.finish(grace),
    })
}

/// [`run`], turning a non-zero exit into [`SandboxError::CommandFailed`].
pub(crate) fn run_ok(cmd: Command, timeout: Duration) -> Result<Finished, SandboxError> {
    let description = describe(&cmd);
    let finished = run(cmd, timeout)?;
    if finished.status.success() {
        Ok(finished)
    } else {
        Err(SandboxError::CommandFailed {
            command: description,
            status: finished.status.to_string(),
            output: finished.tail(20),
        })
    }
}

/// Runs a command that daemonizes, sending its stdout/stderr to `output` (a file, because
/// the daemon keeps writing there after the command returns). Fails on a non-zero exit.
pub(crate) fn run_daemon_start(
    mut cmd: Command,
    output: &Path,
    timeout: Duration,
) -> Result<(), SandboxError> {
    let file = std::fs::File::create(output).map_err(SandboxError::io("create", output))?;
    let err_file = file
        .try_clone()
        .map_err(SandboxError::io("duplicate handle of", output))?;
    cmd.stdout(file).stderr(err_file);
    let mut child = spawn(&mut cmd)?;
    let status = wait_bounded(&mut child, &cmd, timeout)?;
    if status.success() {
        Ok(())
    } else {
        Err(SandboxError::CommandFailed {
            command: describe(&cmd),
            status: status.to_string(),
            output: crate::logs::tail_file(output, 20),
        })
    }
}

/// Looks `program` up on `PATH` like a shell would.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let mut cmd = command("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let done = run(cmd, Duration::from_secs(5)).unwrap();
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.stderr, "err\n");
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.tail(5), "err");
    }

    #[test]
    fn kills_a_hung_command() {
        let mut cmd = command("sleep");
        cmd.arg("30");
        let start = Instant::now();
        let err = run(cmd, Duration::from_millis(200)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(matches!(err, SandboxError::CommandTimeout { .. }), "{err}");
        assert!(err.to_string().contains("sleep 30"), "{err}");
    }

    #[test]
    fn does_not_wait_for_a_grandchild_holding_the_pipe() {
        let mut cmd = command("sh");
        cmd.args(["-c", "sleep 20 & echo started"]);
        let start = Instant::now();
        let done = run(cmd, Duration::from_secs(10)).unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout, "started\n");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn failure_names_the_command() {
        let mut cmd = command("sh");
        cmd.args(["-c", "echo boom >&2; exit 1"]);
        let err = run_ok(cmd, Duration::from_secs(5)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sh -c") && text.contains("boom"), "{text}");
    }

    #[test]
    fn missing_program_is_reported_as_such() {
        let err = run(
            command("pipeline-sandbox-no-such-program"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, SandboxError::MissingProgram { .. }), "{err}");
        assert!(find_program("pipeline-sandbox-no-such-program").is_none());
        assert!(find_program("sh").is_some());
    }

    #[test]
    fn scrubs_ceph_environment() {
        let cmd = command("env");
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(removed.contains(&"CEPH_ARGS".to_string()));
    }
}
