//! Running external commands: no shell unless asked, output streamed straight
//! into files in the run folder (so a killed runner still leaves what the tool
//! printed), a deadline on every call, and cancellation that kills the whole
//! process group (a tool's children too).

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::cancel::CancelToken;

/// A command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    /// Variables set for the command, on top of [`environment`](Self::environment).
    /// Names must be [valid](valid_env_name): a command with any other is not started.
    pub env: Vec<(String, String)>,
    /// What the command inherits before `env` is applied.
    pub environment: Environment,
    pub cwd: Option<PathBuf>,
    /// Limit for this call; the stage's own deadline also applies.
    pub timeout: Option<Duration>,
    /// What the command reads on stdin.
    pub stdin: Stdin,
    /// Start the program at this instant of the wall clock of the host it
    /// runs on (hosts started together: `sync_start`); `None`: at once.
    pub start_at: Option<std::time::SystemTime>,
}

/// A command's standard input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`.
    #[default]
    Null,
    /// This file of this machine (over SSH: sent to the far side).
    File(PathBuf),
    /// A pipe the caller writes to ([`Running::take_stdin`]).
    Pipe,
}

/// The environment a command starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Environment {
    /// The runner's own (native stages are trusted code; tools need what
    /// the operator set, e.g. `CEPH_ARGS`).
    #[default]
    Inherited,
    /// Only [`MINIMAL_ENV`] of the runner's: for commands a sandboxed
    /// plugin asks for, so that no variable the runner happens to have and
    /// no variable the plugin was not granted reaches the program.
    Minimal,
}

/// The runner's variables a [`Environment::Minimal`] command keeps: what a
/// program needs to find its tools, home and locale, and nothing that makes
/// an interpreter load code (`BASH_ENV`, `PYTHONPATH`, `PERL5OPT`, ...).
pub const MINIMAL_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// Refuses a spec that sets a variable with an [invalid](valid_env_name) name.
pub fn check_env_names(spec: &CommandSpec) -> std::io::Result<()> {
    match spec.env.iter().find(|(k, _)| !valid_env_name(k)) {
        Some((name, _)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{name}` is not a valid environment variable name"),
        )),
        None => Ok(()),
    }
}

/// A variable name as POSIX shells and GNU `env` read it:
/// `[A-Za-z_][A-Za-z0-9_]*`. Anything else (`-S…`, `A=B`, an empty name)
/// would be read by `env` on a remote host as an option or an assignment.
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl CommandSpec {
    pub fn new(argv: Vec<String>) -> Self {
        CommandSpec {
            argv,
            env: Vec::new(),
            environment: Environment::Inherited,
            cwd: None,
            timeout: None,
            stdin: Stdin::Null,
            start_at: None,
        }
    }

    pub fn stdin(mut self, stdin: Stdin) -> Self {
        self.stdin = stdin;
        self
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

/// The CPU time a command used: its own and that of the descendants it
/// waited for (a shell's children, a benchmark's worker processes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuTime {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTime {
    pub fn total(&self) -> Duration {
        self.user + self.system
    }
}

/// Which limit ended a command that timed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeLimit {
    /// The command's own `timeout`.
    Command(Duration),
    /// The deadline it was started under (the stage's).
    Deadline,
}

#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub elapsed: Duration,
    /// Measured by the kernel for this machine's process (`wait4`); `None`
    /// only if the process could not be reaped.
    pub cpu: Option<CpuTime>,
    /// Set when `exit` is a timeout.
    pub timed_out_by: Option<TimeLimit>,
    pub stdout_path: PathBuf,
    pub stderr_path: PathBuf,
    /// When this machine started the program (over SSH: the ssh client;
    /// the far side reports its own start, see `hosts::take_start_report`).
    pub started_at: SystemTime,
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
    spawn_to_files(spec, stdout_path, stderr_path, deadline, cancel)?.wait(cancel)
}

/// A started command (e.g. a server another command will talk to).
///
/// The child is reaped with `wait4(2)`, not std's `Child::try_wait`, for
/// the CPU time it used; so only its pid is kept.
#[derive(Debug)]
pub struct Running {
    pid: i32,
    started: Instant,
    /// `started` in the wall clock.
    started_at: SystemTime,
    /// The earlier of the call's own limit and the deadline it runs under.
    deadline: Option<Instant>,
    /// Which of the two `deadline` is.
    limit: Option<TimeLimit>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    /// The write end of its stdin, with [`Stdin::Pipe`], until taken.
    stdin: Option<std::process::ChildStdin>,
}

/// Starts `spec` in its own process group with output going to the files;
/// with [`start_at`](CommandSpec::start_at), not before that instant (an
/// `Interrupted` error when `cancel` fires first, `TimedOut` when the
/// deadline comes first).
pub fn spawn_to_files(
    spec: &CommandSpec,
    stdout_path: &Path,
    stderr_path: &Path,
    deadline: Option<Instant>,
    cancel: &CancelToken,
) -> std::io::Result<Running> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty command",
        ));
    };
    check_env_names(spec)?;
    // Never through a link a command left where the output file goes.
    let stdout = crate::safe_fs::create(stdout_path, crate::safe_fs::Existing::Replace)?;
    let stderr = crate::safe_fs::create(stderr_path, crate::safe_fs::Existing::Replace)?;
    let mut command = Command::new(program);
    if spec.environment == Environment::Minimal {
        command.env_clear();
        for name in MINIMAL_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
    }
    let stdin = match &spec.stdin {
        Stdin::Null => Stdio::null(),
        Stdin::Pipe => Stdio::piped(),
        // A file the stage itself names (the runner's own binary, sent to
        // a host): not one from a command's output, so links are followed.
        Stdin::File(path) => Stdio::from(
            std::fs::File::open(path)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        ),
    };
    command
        .args(args)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        // Own process group: a timeout or Ctrl-C kills the tool and its children,
        // and the terminal's Ctrl-C reaches only the runner, which decides.
        .process_group(0);
    die_with_the_runner(&mut command);
    for (k, v) in &spec.env {
        command.env(k, v);
    }
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    if let Some(at) = spec.start_at {
        wait_until(at, deadline, cancel)?;
    }
    let started = Instant::now();
    let started_at = SystemTime::now();
    let mut child = command
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start `{program}`: {e}")))?;
    let call_deadline = spec.timeout.map(|t| (started + t, TimeLimit::Command(t)));
    let outer_deadline = deadline.map(|d| (d, TimeLimit::Deadline));
    let first = match (outer_deadline, call_deadline) {
        (Some(a), Some(b)) => Some(if b.0 <= a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    Ok(Running {
        pid: child.id() as i32,
        started,
        started_at,
        deadline: first.map(|(at, _)| at),
        limit: first.map(|(_, limit)| limit),
        stdout_path: stdout_path.to_path_buf(),
        stderr_path: stderr_path.to_path_buf(),
        stdin: child.stdin.take(),
    })
}

/// Sleeps until the wall clock reads `at`, unless cancelled or past the
/// deadline first. The last stretch is one sleep, so the start is as close
/// to `at` as the scheduler allows.
fn wait_until(
    at: SystemTime,
    deadline: Option<Instant>,
    cancel: &CancelToken,
) -> std::io::Result<()> {
    const POLL: Duration = Duration::from_millis(20);
    loop {
        let Ok(left) = at.duration_since(SystemTime::now()) else {
            return Ok(());
        };
        if cancel.is_cancelled() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "cancelled before its synchronized start",
            ));
        }
        if deadline.is_some_and(|d| Instant::now() + left >= d) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the stage's deadline comes before its synchronized start",
            ));
        }
        std::thread::sleep(left.min(POLL));
    }
}

/// The command gets SIGKILL when the thread that started it ends, which
/// for the runner means when it dies: a SIGKILLed or OOM-killed runner
/// leaves no `rados bench` writing on into a pool that `pipeline cleanup`
/// is about to remove. (Commands are waited for by the thread that started
/// them, so this never fires early.)
fn die_with_the_runner(command: &mut Command) {
    // SAFETY: getpid is async-signal-safe; taken before the fork.
    let runner = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (prctl, getppid), touching no memory
    // of the parent's but the copied `runner` pid.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The runner died before prctl took effect: do not run orphaned.
            if libc::getppid() != runner {
                return Err(std::io::Error::other("the runner is gone"));
            }
            Ok(())
        });
    }
}

impl Running {
    /// The write end of the command's stdin (started with [`Stdin::Pipe`]);
    /// dropping it closes the command's stdin.
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.stdin.take()
    }

    /// Whether the command has exited (it is reaped later by `wait` or `kill`).
    pub fn has_exited(&self) -> bool {
        exited(self.pid).unwrap_or(true)
    }

    /// Where its stdout goes.
    pub fn stdout_path(&self) -> &Path {
        &self.stdout_path
    }

    /// Waits for the command to exit, its deadline, or cancellation.
    pub fn wait(self, cancel: &CancelToken) -> std::io::Result<Finished> {
        // Poll quickly at first (most commands are short), then every 20 ms.
        let mut pause = Duration::from_millis(1);
        loop {
            if exited(self.pid)? {
                end_leftovers_of(self.pid);
                if let Some((status, cpu)) = reap(self.pid, Reap::Block)? {
                    return Ok(self.finished(exit_of(status), Some(cpu)));
                }
            }
            if cancel.is_cancelled() {
                let cpu = terminate_group(self.pid);
                return Ok(self.finished(Exit::Cancelled, cpu));
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                let cpu = terminate_group(self.pid);
                let mut finished = self.finished(Exit::TimedOut(self.started.elapsed()), cpu);
                finished.timed_out_by = self.limit;
                return Ok(finished);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// Stops the command (SIGTERM, then SIGKILL) unless it already exited.
    pub fn kill(self) -> Finished {
        if exited(self.pid).unwrap_or(false) {
            end_leftovers_of(self.pid);
        }
        match reap(self.pid, Reap::IfExited) {
            Ok(Some((status, cpu))) => self.finished(exit_of(status), Some(cpu)),
            _ => {
                let cpu = terminate_group(self.pid);
                self.finished(Exit::Cancelled, cpu)
            }
        }
    }

    fn finished(&self, exit: Exit, cpu: Option<CpuTime>) -> Finished {
        Finished {
            exit,
            elapsed: self.started.elapsed(),
            cpu,
            timed_out_by: None,
            stdout_path: self.stdout_path.clone(),
            stderr_path: self.stderr_path.clone(),
            started_at: self.started_at,
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

#[derive(Clone, Copy, PartialEq)]
enum Reap {
    IfExited,
    Block,
}

/// Reaps the child `pid` once it has exited: its status, and the CPU time
/// it and the descendants it waited for used (wait4's rusage).
fn reap(pid: i32, how: Reap) -> std::io::Result<Option<(ExitStatus, CpuTime)>> {
    let flags = match how {
        Reap::IfExited => libc::WNOHANG,
        Reap::Block => 0,
    };
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child, writing into the two locals above.
        let reaped = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if reaped == pid {
            let cpu = CpuTime {
                user: duration_of(usage.ru_utime),
                system: duration_of(usage.ru_stime),
            };
            return Ok(Some((ExitStatus::from_raw(status), cpu)));
        }
        if reaped == 0 {
            return Ok(None);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn duration_of(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// SIGTERM the group, give it 3 s, then SIGKILL; always reap the child.
/// Returns the CPU the child used up to its end, when it could be reaped.
/// Whether the child `pid` has exited, without reaping it: while it is an
/// unreaped zombie its pid, which is also its process group's id, cannot be
/// given to another process.
fn exited(pid: i32) -> std::io::Result<bool> {
    // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waitid on our own child, writing only into `info`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid filled `info` (si_pid stays 0 while it runs).
            return Ok(unsafe { info.si_pid() } != 0);
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

/// The command is done: whatever it left running in its process group
/// (`sleep 300 &`, a server it forgot) ends with it. Called while the
/// leader is an unreaped zombie, so the group id is still ours.
fn end_leftovers_of(pgid: i32) {
    // SAFETY: kill(2) on the process group we created; no memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

fn terminate_group(pgid: i32) -> Option<CpuTime> {
    // SAFETY: kill(2) on a process group we created; no memory is involved.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let grace = Instant::now() + Duration::from_secs(3);
    while Instant::now() < grace {
        match reap(pgid, Reap::IfExited) {
            Ok(Some((_, cpu))) => {
                // The leader is gone; make sure stragglers in the group are too.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                return Some(cpu);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break,
        }
    }
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    reap(pgid, Reap::Block).ok().flatten().map(|(_, cpu)| cpu)
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

    /// Whether `pid` has ended: gone, or a zombie waiting for init.
    fn ended(pid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()));
            match state {
                None => return true,
                Some(s) if s.starts_with('Z') || s.starts_with('X') => return true,
                Some(_) if Instant::now() > deadline => return false,
                Some(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn pid_in(file: &Path) -> i32 {
        std::fs::read_to_string(file)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn timeout_kills_the_process_group() {
        // The child shell starts a grandchild sleep; both must die.
        let pid_file = tmp("b.pid");
        let script = format!("sleep 30 & echo $! > {}; sleep 30", pid_file.display());
        let spec = CommandSpec::new(vec!["sh".into(), "-c".into(), script])
            .timeout(Duration::from_millis(300));
        let (o, e) = (tmp("b.out"), tmp("b.err"));
        let f = run_to_files(&spec, &o, &e, None, &CancelToken::default()).unwrap();
        assert!(matches!(f.exit, Exit::TimedOut(_)), "{:?}", f.exit);
        assert!(f.elapsed < Duration::from_secs(10));
        assert!(
            ended(pid_in(&pid_file)),
            "the grandchild outlived the timeout"
        );
    }

    #[test]
    fn what_a_command_leaves_running_in_its_group_ends_with_it() {
        // `sleep 300 &` and exit at once: the command succeeds, and its
        // background child does not live on.
        let pid_file = tmp("left.pid");
        let script = format!("sleep 300 & echo $! > {}", pid_file.display());
        let spec = CommandSpec::new(vec!["sh".into(), "-c".into(), script]);
        let (o, e) = (tmp("left.out"), tmp("left.err"));
        let f = run_to_files(&spec, &o, &e, None, &CancelToken::default()).unwrap();
        assert_eq!(f.exit, Exit::Code(0));
        assert!(f.elapsed < Duration::from_secs(10), "{:?}", f.elapsed);
        assert!(
            ended(pid_in(&pid_file)),
            "`sleep 300 &` outlived its command"
        );
    }

    #[test]
    fn a_busy_loop_uses_cpu_and_a_sleep_does_not() {
        // The loop runs in a grandchild: the CPU of waited-for descendants counts.
        let busy = CommandSpec::new(vec![
            "sh".into(),
            "-c".into(),
            "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; true".into(),
        ]);
        let f = run_to_files(
            &busy,
            &tmp("cpu1.out"),
            &tmp("cpu1.err"),
            None,
            &CancelToken::default(),
        )
        .unwrap();
        assert_eq!(f.exit, Exit::Code(0));
        let cpu = f.cpu.expect("cpu of a reaped child");
        assert!(cpu.user > Duration::from_millis(50), "{cpu:?}");

        let sleep = CommandSpec::new(vec!["sleep".into(), "0.3".into()]);
        let f = run_to_files(
            &sleep,
            &tmp("cpu2.out"),
            &tmp("cpu2.err"),
            None,
            &CancelToken::default(),
        )
        .unwrap();
        let cpu = f.cpu.expect("cpu of a reaped child");
        assert!(cpu.total() < Duration::from_millis(100), "{cpu:?}");
    }

    #[test]
    fn a_command_killed_at_its_timeout_still_reports_its_cpu() {
        let spec = CommandSpec::new(vec!["sh".into(), "-c".into(), "while :; do :; done".into()])
            .timeout(Duration::from_millis(300));
        let f = run_to_files(
            &spec,
            &tmp("cpu3.out"),
            &tmp("cpu3.err"),
            None,
            &CancelToken::default(),
        )
        .unwrap();
        assert!(matches!(f.exit, Exit::TimedOut(_)), "{:?}", f.exit);
        assert_eq!(
            f.timed_out_by,
            Some(TimeLimit::Command(Duration::from_millis(300)))
        );
        assert!(f.cpu.expect("reaped after the kill").total() > Duration::ZERO);
    }

    #[test]
    fn the_earlier_deadline_is_the_one_named() {
        let spec =
            CommandSpec::new(vec!["sleep".into(), "30".into()]).timeout(Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_millis(200);
        let f = run_to_files(
            &spec,
            &tmp("d.out"),
            &tmp("d.err"),
            Some(deadline),
            &CancelToken::default(),
        )
        .unwrap();
        assert_eq!(f.timed_out_by, Some(TimeLimit::Deadline));
    }

    #[test]
    fn cancellation_kills_the_command() {
        let source = std::sync::Arc::new(crate::cancel::CancelSource::default());
        let token = source.token();
        let running = spawn_to_files(
            &CommandSpec::new(vec!["sleep".into(), "30".into()]),
            &tmp("e.out"),
            &tmp("e.err"),
            None,
            &token,
        )
        .unwrap();
        source.request();
        let f = running.wait(&token).unwrap();
        assert_eq!(f.exit, Exit::Cancelled);
        assert!(f.cpu.is_some());
    }

    #[test]
    fn a_command_with_a_start_instant_starts_then_not_before() {
        let at = SystemTime::now() + Duration::from_millis(300);
        let mut spec = CommandSpec::new(vec!["true".into()]);
        spec.start_at = Some(at);
        let f = run_to_files(
            &spec,
            &tmp("at.out"),
            &tmp("at.err"),
            None,
            &CancelToken::default(),
        )
        .unwrap();
        assert_eq!(f.exit, Exit::Code(0));
        assert!(f.started_at >= at, "{:?} before {at:?}", f.started_at);
        // A generous bound: only that it did not wait for something else.
        assert!(
            f.started_at.duration_since(at).unwrap() < Duration::from_secs(5),
            "{:?}",
            f.started_at
        );
    }

    #[test]
    fn waiting_for_the_start_ends_with_cancellation_or_the_deadline() {
        let mut spec = CommandSpec::new(vec!["true".into()]);
        spec.start_at = Some(SystemTime::now() + Duration::from_secs(60));
        let source = std::sync::Arc::new(crate::cancel::CancelSource::default());
        let token = source.token();
        let waiting = std::thread::scope(|scope| {
            let spawn = scope.spawn(|| {
                spawn_to_files(&spec, &tmp("w.out"), &tmp("w.err"), None, &token).map(|_| ())
            });
            std::thread::sleep(Duration::from_millis(50));
            source.request();
            spawn.join().unwrap()
        });
        assert_eq!(waiting.unwrap_err().kind(), std::io::ErrorKind::Interrupted);
        let deadline = Instant::now() + Duration::from_secs(1);
        let err = spawn_to_files(
            &spec,
            &tmp("w.out"),
            &tmp("w.err"),
            Some(deadline),
            &CancelToken::default(),
        )
        .map(|_| ())
        .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("deadline"), "{err}");
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
