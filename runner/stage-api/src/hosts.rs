//! A resolved host: where a stage instance runs, and how a command reaches it
//! (the system's OpenSSH client: BatchMode, multiplexed connections, strict
//! host key checking unless the pipeline explicitly relaxes it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exec::{CommandSpec, CpuTime, Environment, MINIMAL_ENV, shell_quote};

/// The reserved name of the machine running the suite.
pub const LOCAL: &str = "local";
/// The group of every inventory host (or just `local` without an inventory).
pub const ALL: &str = "all";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StrictHostKeyChecking {
    Yes,
    AcceptNew,
    No,
}

/// A resolved host: where a stage instance runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub name: String,
    /// `None`: this machine, no SSH.
    pub address: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub key: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    pub strict: StrictHostKeyChecking,
    pub connect_timeout: u32,
    pub options: Vec<String>,
    /// A `pipeline` binary already on the host, for the stages that run a
    /// worker there (`s3-bench`, `swift-bench` on `on:` hosts); `None`: the
    /// runner copies its own into the host's per-user cache.
    pub pipeline: Option<String>,
    /// Interface speeds the inventory declares, bits a second (the host
    /// watch's network verdict takes them over the kernel's).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub link_bits: BTreeMap<String, f64>,
}

impl Host {
    pub fn local() -> Self {
        Host {
            name: LOCAL.into(),
            address: None,
            user: None,
            port: None,
            key: None,
            known_hosts: None,
            strict: StrictHostKeyChecking::Yes,
            connect_timeout: 10,
            options: Vec::new(),
            pipeline: None,
            link_bits: BTreeMap::new(),
        }
    }

    pub fn is_local(&self) -> bool {
        self.address.is_none()
    }

    /// `node1 (root@127.0.0.2:2222)`, for messages.
    pub fn describe(&self) -> String {
        match &self.address {
            None => format!("{} (this machine)", self.name),
            Some(addr) => {
                let user = self
                    .user
                    .as_ref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default();
                let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
                format!("{} ({user}{addr}{port})", self.name)
            }
        }
    }

    /// The `ssh ...` prefix for this host (empty for the local machine).
    pub fn ssh_argv(&self) -> Vec<String> {
        let Some(address) = &self.address else {
            return Vec::new();
        };
        let mut argv: Vec<String> = vec!["ssh".into()];
        let mut opt = |o: String| {
            argv.push("-o".into());
            argv.push(o);
        };
        opt("BatchMode=yes".into());
        opt(format!("ConnectTimeout={}", self.connect_timeout));
        // One TCP/SSH session per host for the whole run: stages start fast.
        opt("ControlMaster=auto".into());
        // The path includes what authenticates the session: a connection
        // opened with one key must never be reused by a run given another.
        opt(format!(
            "ControlPath=/tmp/pipeline-ssh-{:016x}-%C",
            self.auth_fingerprint()
        ));
        opt("ControlPersist=60".into());
        opt(format!(
            "StrictHostKeyChecking={}",
            match self.strict {
                StrictHostKeyChecking::Yes => "yes",
                StrictHostKeyChecking::AcceptNew => "accept-new",
                StrictHostKeyChecking::No => "no",
            }
        ));
        if let Some(kh) = &self.known_hosts {
            opt(format!("UserKnownHostsFile={}", kh.display()));
        }
        if self.key.is_some() {
            opt("IdentitiesOnly=yes".into());
        }
        for o in &self.options {
            opt(o.clone());
        }
        if let Some(key) = &self.key {
            argv.extend(["-i".into(), key.display().to_string()]);
        }
        if let Some(port) = self.port {
            argv.extend(["-p".into(), port.to_string()]);
        }
        if let Some(user) = &self.user {
            argv.extend(["-l".into(), user.clone()]);
        }
        argv.push(address.clone());
        argv.push("--".into());
        argv
    }

    /// The command as it runs on this host: unchanged locally; over SSH the
    /// remote shell gets one quoted command line. `remote_limit` makes the
    /// remote side kill the command too (`timeout`): killing the local ssh
    /// client alone would leave it running there. The far side appends the
    /// CPU its command used to stderr; [`take_cpu_report`] removes it again.
    /// With [`start_at`](CommandSpec::start_at) (an instant of the host's
    /// clock) the far side sleeps until then and writes its actual start to
    /// stderr before it starts the program; [`take_start_report`] removes it.
    pub fn wrap(&self, spec: &CommandSpec, remote_limit: Option<Duration>) -> CommandSpec {
        if self.is_local() {
            return spec.clone();
        }
        let mut remote: Vec<String> = Vec::new();
        if let Some(limit) = remote_limit {
            // Rounded up, plus a grace: the local deadline fires first and
            // reports the timeout; this only makes sure nothing lingers.
            let secs = limit.as_secs() + u64::from(limit.subsec_nanos() > 0) + 2;
            remote.extend(["timeout".into(), "-k".into(), "5".into(), secs.to_string()]);
        }
        // `--` ends env's options: nothing after it is read as one.
        let minimal = spec.environment == Environment::Minimal;
        if minimal {
            remote.extend(["env".into(), "-i".into(), "--".into()]);
        } else if !spec.env.is_empty() {
            remote.extend(["env".into(), "--".into()]);
        }
        // Words of the remote command line, each quoted for the far side's shell.
        let mut words: Vec<String> = remote.iter().map(|w| shell_quote(w)).collect();
        if minimal {
            // The far side's own values of the kept variables, expanded there
            // by its shell (`${X+"X=$X"}`: nothing when X is unset).
            words.extend(MINIMAL_ENV.iter().map(|n| format!("${{{n}+\"{n}=${n}\"}}")));
        }
        words.extend(
            spec.env
                .iter()
                .map(|(k, v)| shell_quote(&format!("{k}={v}"))),
        );
        words.extend(spec.argv.iter().map(|a| shell_quote(a)));
        let mut line = format!("exec {}", words.join(" "));
        if spec.start_at.is_some() {
            line = format!("{} && {line}", report_start());
        }
        if let Some(cwd) = &spec.cwd {
            line = format!(
                "cd {} && {line}",
                crate::exec::shell_quote(&cwd.display().to_string())
            );
        }
        if let Some(at) = spec.start_at {
            line = format!("{}; {line}", sleep_until(at));
        }
        let mut argv = self.ssh_argv();
        argv.push(with_cpu_report(&line));
        CommandSpec {
            argv,
            env: Vec::new(),
            environment: Environment::Inherited,
            cwd: None,
            timeout: spec.timeout,
            // ssh hands its stdin to the remote command.
            stdin: spec.stdin.clone(),
            // The far side waits for it (this machine starts ssh at once).
            start_at: None,
        }
    }

    /// A hash of everything that decides how the session authenticates.
    fn auth_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            &self.key,
            &self.known_hosts,
            &self.user,
            self.strict as u8,
            &self.options,
        )
            .hash(&mut h);
        h.finish()
    }

    /// Turns an SSH failure (ssh exits 255) into a message naming the host and
    /// the cause, with what to do about it.
    pub fn explain_ssh_failure(&self, stderr: &str) -> String {
        let who = self.describe();
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        if stderr.contains("Host key verification failed")
            || stderr.contains("No ED25519 host key is known")
            || stderr.contains("host key for")
        {
            format!(
                "host {who}: its SSH host key is unknown or changed (strict host key checking). \
                 Add it to known_hosts (`ssh-keyscan -p PORT ADDRESS >> ~/.ssh/known_hosts`, after checking it), \
                 or set `inventory.ssh.strict_host_key_checking: accept-new` explicitly"
            )
        } else if stderr.contains("Permission denied") {
            format!(
                "host {who}: the SSH key was refused ({last}); check `key` and `user` in the inventory"
            )
        } else if stderr.contains("Connection refused") {
            format!("host {who} is unreachable: connection refused (is sshd running on that port?)")
        } else if stderr.contains("timed out")
            || stderr.contains("No route to host")
            || stderr.contains("Could not resolve")
            || stderr.contains("Network is unreachable")
        {
            format!("host {who} is unreachable: {last}")
        } else if last.is_empty() || stderr.contains("closed by remote host") {
            format!(
                "host {who}: the SSH connection was lost mid-command (the host went away, rebooted, or its sshd was killed){}",
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                }
            )
        } else {
            format!("host {who}: ssh failed: {last}")
        }
    }
}

/// The line before a remote command's CPU report on its stderr.
const CPU_REPORT_MARKER: &str = "@@pipeline-remote-cpu@@";

/// The start of the line a remote command started at an instant writes to
/// its stderr right before the program starts, followed by the host's
/// clock then (ns since the Unix epoch).
const START_MARKER: &str = "@@pipeline-remote-start@@";

/// The far side's shell writes its clock to stderr, after [`START_MARKER`].
fn report_start() -> String {
    format!("printf '%s %s\\n' {START_MARKER} \"$(date +%s%N)\" >&2")
}

/// A POSIX shell line that sleeps until the host's clock reads `at`: the
/// nanoseconds left by `date +%s%N` (GNU; the clock offset was measured
/// with it already) and shell arithmetic (64-bit in dash and bash), then
/// one fractional `sleep` (GNU coreutils). Past `at`, no sleep at all.
fn sleep_until(at: std::time::SystemTime) -> String {
    let at_ns = crate::clock::unix_ns(at);
    format!(
        "wait_ns=$(({at_ns} - $(date +%s%N))); [ \"$wait_ns\" -le 0 ] || \
         sleep \"$((wait_ns / 1000000000)).$(printf %09d \"$((wait_ns % 1000000000))\")\""
    )
}

/// Runs `line` (which ends in `exec`) in a subshell of `sh`, which waits
/// for it, then appends the CPU its children used (the tool, `timeout` and
/// whatever they waited for: the second line of the POSIX `times` builtin)
/// to stderr, and exits with the command's status.
///
/// - The measuring shell is itself a subshell, a fresh process: the login
///   shell usually `exec`s `sh`, and a process keeps the CPU of the children
///   it reaped before `exec` (say, what `.bashrc` ran); a fresh one has none.
///   (`; exit $?` keeps it a real fork: a last command is not forked.)
/// - The tool's stderr is the session's; `sh`'s own is /dev/null, so its job
///   messages ("Killed") do not end up among the tool's.
/// - `sh` is the parent of `timeout`, so the report follows a remote timeout
///   too; a shell killed first reports nothing.
fn with_cpu_report(line: &str) -> String {
    let script = format!(
        "exec 3>&2 2>/dev/null; (({line}) 2>&3 3>&-; rc=$?; \
         printf '\\n%s\\n' {CPU_REPORT_MARKER} >&3; times >&3; exit $rc); exit $?"
    );
    format!("sh -c {}", shell_quote(&script))
}

/// Removes the CPU report [`Host::wrap`] added from a remote command's
/// stderr file, so the file holds exactly what the tool printed, and
/// returns the CPU it reported (`None`: no complete report, e.g. the
/// session was killed).
pub fn take_cpu_report(stderr_path: &Path) -> Option<CpuTime> {
    // Never through a link the command left in the file's place.
    let text = crate::safe_fs::read(stderr_path, u64::MAX).ok()?;
    let (tool_stderr, cpu) = split_cpu_report(&text)?;
    crate::safe_fs::write(stderr_path, &tool_stderr, crate::safe_fs::Existing::Replace).ok()?;
    cpu
}

/// Removes the start report [`Host::wrap`] added to a remote command's
/// stderr (with `start_at`), so the file holds exactly what the tool
/// printed, and returns the instant the far side started the program, in
/// its clock (`None`: no report, e.g. its working folder was missing).
pub fn take_start_report(stderr_path: &Path) -> Option<std::time::SystemTime> {
    // Never through a link the command left in the file's place.
    let text = crate::safe_fs::read(stderr_path, u64::MAX).ok()?;
    let (tool_stderr, started) = split_start_report(&text)?;
    crate::safe_fs::write(stderr_path, &tool_stderr, crate::safe_fs::Existing::Replace).ok()?;
    Some(started)
}

/// The stderr without the start report's line, and the start it gave. The
/// first such line is the report: it is written before the program runs
/// (ssh's own warnings may come before it).
fn split_start_report(stderr: &[u8]) -> Option<(Vec<u8>, std::time::SystemTime)> {
    let marker = format!("{START_MARKER} ");
    let mut at = 0;
    while at < stderr.len() {
        let end = stderr[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(stderr.len(), |i| at + i + 1);
        let line = &stderr[at..end];
        if let Some(rest) = line.strip_prefix(marker.as_bytes()) {
            let ns: i128 = std::str::from_utf8(rest).ok()?.trim().parse().ok()?;
            let mut kept = stderr[..at].to_vec();
            kept.extend_from_slice(&stderr[end..]);
            return Some((kept, crate::clock::from_unix_ns(ns)));
        }
        at = end;
    }
    None
}

/// The stderr without the report and the CPU it gave; `None` when there is
/// no report at all.
fn split_cpu_report(stderr: &[u8]) -> Option<(Vec<u8>, Option<CpuTime>)> {
    let marker = format!("\n{CPU_REPORT_MARKER}\n");
    let at = stderr
        .windows(marker.len())
        .rposition(|w| w == marker.as_bytes())?;
    let report = &stderr[at + marker.len()..];
    // `times`: the shell's own user and system time, then its children's.
    let mut lines = report.splitn(3, |&b| b == b'\n');
    let (own, children, after) = (lines.next(), lines.next(), lines.next());
    let parsed = match (
        own.and_then(parse_times),
        children.and_then(parse_times),
        after,
    ) {
        (Some(_), Some(cpu), Some(after)) => Some((cpu, after)),
        _ => None,
    };
    let mut kept = stderr[..at].to_vec();
    match parsed {
        Some((cpu, after)) => {
            // Output of a straggler that wrote after the report stays.
            kept.extend_from_slice(after);
            Some((kept, Some(cpu)))
        }
        None => {
            // Cut short (killed while reporting): what follows the marker
            // goes too if it is the start of the report, not tool output.
            if !report.iter().all(|b| b"0123456789ms. \n".contains(b)) {
                kept.extend_from_slice(report);
            }
            Some((kept, None))
        }
    }
}

/// One line of `times`: `0m0.250000s 0m0.010000s` (dash, bash; busybox may
/// put a space after `m`): user, then system.
fn parse_times(line: &[u8]) -> Option<CpuTime> {
    let line = std::str::from_utf8(line).ok()?.replace("m ", "m");
    let mut fields = line.split_whitespace().map(|field| {
        let (minutes, seconds) = field.strip_suffix('s')?.split_once('m')?;
        let seconds = minutes.parse::<u64>().ok()? as f64 * 60.0 + seconds.parse::<f64>().ok()?;
        Duration::try_from_secs_f64(seconds).ok()
    });
    let (user, system) = (fields.next()??, fields.next()??);
    fields.next().is_none().then_some(CpuTime { user, system })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::shell_words;

    #[test]
    fn wraps_commands_for_ssh() {
        let host = Host {
            name: "node1".into(),
            address: Some("127.0.0.2".into()),
            user: Some("root".into()),
            port: Some(2222),
            key: Some("/k".into()),
            known_hosts: Some("/kh".into()),
            ..Host::local()
        };
        let spec = CommandSpec::new(vec!["echo".into(), "a b".into()]).env("LC_ALL", "C");
        let wrapped = host.wrap(&spec, Some(Duration::from_secs(30)));
        let remote = shell_words(&[
            "sh".into(),
            "-c".into(),
            "exec 3>&2 2>/dev/null; ((exec timeout -k 5 32 env -- LC_ALL=C echo 'a b') 2>&3 3>&-; \
             rc=$?; printf '\\n%s\\n' @@pipeline-remote-cpu@@ >&3; times >&3; exit $rc); exit $?"
                .into(),
        ]);
        assert_eq!(wrapped.argv.last().unwrap(), &remote);
        let argv = wrapped.argv.join(" ");
        assert!(argv.starts_with("ssh -o BatchMode=yes"), "{argv}");
        assert!(argv.contains("StrictHostKeyChecking=yes"));
        assert!(
            argv.contains("-i /k -p 2222 -l root 127.0.0.2 --"),
            "{argv}"
        );
        assert_eq!(Host::local().wrap(&spec, None).argv, spec.argv);
    }

    fn node1() -> Host {
        Host {
            name: "node1".into(),
            address: Some("127.0.0.2".into()),
            ..Host::local()
        }
    }

    /// Runs what `wrap` sends to a host the way sshd does (`$SHELL -c LINE`),
    /// here: returns the exit code, the stderr as the tool printed it, and
    /// the CPU reported.
    fn run_remote_line(
        spec: &CommandSpec,
        limit: Option<Duration>,
    ) -> (i32, String, Option<CpuTime>) {
        let line = node1().wrap(spec, limit).argv.last().unwrap().clone();
        let out = std::process::Command::new("bash")
            .args(["-c", &line])
            .output()
            .unwrap();
        let (stderr, cpu) = split_cpu_report(&out.stderr).expect("a report");
        (
            out.status.code().unwrap(),
            String::from_utf8(stderr).unwrap(),
            cpu,
        )
    }

    fn sh(script: &str) -> CommandSpec {
        CommandSpec::new(vec!["sh".into(), "-c".into(), script.into()])
    }

    #[test]
    fn the_remote_shell_reports_cpu_and_keeps_stderr_and_exit_code() {
        let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; printf 'tool: no newline' >&2; exit 3";
        let (code, stderr, cpu) = run_remote_line(&sh(busy), Some(Duration::from_secs(60)));
        assert_eq!(code, 3);
        assert_eq!(stderr, "tool: no newline");
        assert!(cpu.unwrap().user > Duration::from_millis(50), "{cpu:?}");

        let (code, stderr, cpu) = run_remote_line(&sh("echo a >&2; echo b >&2; sleep 0.2"), None);
        assert_eq!((code, stderr.as_str()), (0, "a\nb\n"));
        assert!(cpu.unwrap().total() < Duration::from_millis(100), "{cpu:?}");
    }

    #[test]
    fn cpu_the_login_shell_used_before_is_not_counted() {
        // As when .bashrc runs programs, then bash execs the command.
        let line = node1()
            .wrap(&sh("sleep 0.2"), None)
            .argv
            .last()
            .unwrap()
            .clone();
        let session = format!(
            "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; exec bash -c {}",
            shell_quote(&line)
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &session])
            .output()
            .unwrap();
        let (_, cpu) = split_cpu_report(&out.stderr).expect("a report");
        assert!(cpu.unwrap().total() < Duration::from_millis(50), "{cpu:?}");
    }

    #[test]
    fn odd_exits_keep_their_codes() {
        // A tool killed by a signal: the shell's 128 + n.
        let (code, stderr, cpu) = run_remote_line(&sh("kill -9 $$"), None);
        assert_eq!((code, stderr.as_str()), (137, ""));
        assert!(cpu.is_some());
        // Not installed: the shell's 127, and its message stays.
        let missing = CommandSpec::new(vec!["definitely-not-installed-tool".into()]);
        let (code, stderr, _) = run_remote_line(&missing, None);
        assert_eq!(code, 127);
        assert!(
            stderr.contains("definitely-not-installed-tool: not found"),
            "{stderr}"
        );
        // A working folder that is not there: cd's status and message.
        let mut in_missing_dir = sh("pwd");
        in_missing_dir.cwd = Some("/nonexistent-dir".into());
        let (code, stderr, cpu) = run_remote_line(&in_missing_dir, None);
        assert_eq!(code, 2);
        assert!(
            stderr.contains("cd") && stderr.contains("/nonexistent-dir"),
            "{stderr}"
        );
        assert!(cpu.is_some());
        // Under `timeout`, too (it exits 127 itself).
        let (code, _, cpu) = run_remote_line(&missing, Some(Duration::from_secs(5)));
        assert_eq!(code, 127);
        assert!(cpu.is_some());
    }

    #[test]
    fn the_report_follows_a_remote_timeout() {
        // The remote limit is the given one plus a 2 s grace: 3 s here.
        let spec = sh("echo started >&2; while :; do :; done");
        let (code, stderr, cpu) = run_remote_line(&spec, Some(Duration::from_millis(1)));
        assert_eq!(code, 124, "timeout's status");
        assert_eq!(stderr, "started\n");
        assert!(cpu.unwrap().user > Duration::ZERO);
    }

    #[test]
    fn missing_or_cut_reports_mean_unknown_cpu() {
        assert_eq!(split_cpu_report(b"plain stderr\n"), None);
        // Killed while reporting: the report's start goes, the CPU is unknown.
        let cut = b"tool\n\n@@pipeline-remote-cpu@@\n0m0.01s 0m";
        let (kept, cpu) = split_cpu_report(cut).unwrap();
        assert_eq!((kept.as_slice(), cpu), (b"tool\n".as_slice(), None));
        // A straggler's output after the report stays; only the last report counts.
        let late = b"x\n@@pipeline-remote-cpu@@\n\n@@pipeline-remote-cpu@@\n0m0.000s 0m0.000s\n1m1.500s 0m0.250s\nlate\n";
        let (kept, cpu) = split_cpu_report(late).unwrap();
        assert_eq!(kept, b"x\n@@pipeline-remote-cpu@@\nlate\n");
        assert_eq!(
            cpu,
            Some(CpuTime {
                user: Duration::from_millis(61_500),
                system: Duration::from_millis(250)
            })
        );
        assert!(parse_times(b"0m 0.10s 0m 0.02s").is_some());
        assert!(parse_times(b"garbage").is_none());
    }

    fn starting_at(mut spec: CommandSpec, at: std::time::SystemTime) -> CommandSpec {
        spec.start_at = Some(at);
        spec
    }

    #[test]
    fn a_remote_start_waits_for_its_instant_and_reports_it() {
        let at = std::time::SystemTime::now() + Duration::from_millis(300);
        let spec = starting_at(sh("echo tool >&2; exit 4"), at);
        let (code, stderr, cpu) = run_remote_line(&spec, Some(Duration::from_secs(60)));
        assert_eq!(code, 4);
        assert!(cpu.is_some());
        let (tool_stderr, started) = split_start_report(stderr.as_bytes()).expect("a start");
        assert_eq!(String::from_utf8(tool_stderr).unwrap(), "tool\n");
        assert!(started >= at, "started {started:?} before {at:?}");
        // A generous bound: it waited for the instant, not for something else.
        assert!(
            started.duration_since(at).unwrap() < Duration::from_secs(5),
            "{started:?}"
        );
    }

    #[test]
    fn a_remote_start_already_past_starts_at_once_and_a_missing_folder_starts_nothing() {
        let past = std::time::SystemTime::now() - Duration::from_secs(10);
        let (code, stderr, _) = run_remote_line(&starting_at(sh("true"), past), None);
        assert_eq!(code, 0);
        let (tool_stderr, started) = split_start_report(stderr.as_bytes()).expect("a start");
        assert!(tool_stderr.is_empty(), "{stderr}");
        assert!(started > past + Duration::from_secs(5), "it did not wait");
        // The folder is missing: no tool, no start report; cd's status stays.
        let mut in_missing_dir = starting_at(sh("pwd"), past);
        in_missing_dir.cwd = Some("/nonexistent-dir".into());
        let (code, stderr, _) = run_remote_line(&in_missing_dir, None);
        assert_eq!(code, 2);
        assert!(split_start_report(stderr.as_bytes()).is_none(), "{stderr}");
    }

    #[test]
    fn the_start_report_is_the_first_marked_line_and_only_it_is_removed() {
        // ssh's own warning comes first; the tool's output after stays as it was.
        let stderr = b"Warning: Permanently added '127.0.0.2'\n\
            @@pipeline-remote-start@@ 1700000000123456789\n\
            tool: @@pipeline-remote-start@@ 5\nlast, no newline";
        let (kept, started) = split_start_report(stderr).unwrap();
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            "Warning: Permanently added '127.0.0.2'\ntool: @@pipeline-remote-start@@ 5\nlast, no newline"
        );
        assert_eq!(
            started,
            std::time::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
        );
        assert!(split_start_report(b"plain stderr\n").is_none());
        assert!(split_start_report(b"@@pipeline-remote-start@@ garbage\n").is_none());
    }

    #[test]
    fn take_start_report_rewrites_the_file() {
        let path =
            std::env::temp_dir().join(format!("pipeline-start-report-{}", std::process::id()));
        std::fs::write(
            &path,
            b"@@pipeline-remote-start@@ 2000000000000000000\nwarn\n",
        )
        .unwrap();
        let started = take_start_report(&path).unwrap();
        assert_eq!(
            started,
            std::time::UNIX_EPOCH + Duration::from_secs(2_000_000_000)
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"warn\n");
        assert_eq!(take_start_report(&path), None);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn take_cpu_report_rewrites_the_file() {
        let path = std::env::temp_dir().join(format!("pipeline-cpu-report-{}", std::process::id()));
        std::fs::write(
            &path,
            b"warn\n\n@@pipeline-remote-cpu@@\n0m0.000s 0m0.000s\n0m0.500s 0m0.100s\n",
        )
        .unwrap();
        let cpu = take_cpu_report(&path).unwrap();
        assert_eq!(cpu.user, Duration::from_millis(500));
        assert_eq!(std::fs::read(&path).unwrap(), b"warn\n");
        // No report (a local command's file, or read twice): untouched.
        assert_eq!(take_cpu_report(&path), None);
        assert_eq!(std::fs::read(&path).unwrap(), b"warn\n");
        let _ = std::fs::remove_file(path);
    }
}
