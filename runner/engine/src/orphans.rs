//! Processes that escaped their command's process group.
//!
//! A command's process group ends with the command (see `exec`), but a
//! process that called `setsid`, or was double-forked into its own group,
//! is not in it. The runner makes itself a child subreaper, so such
//! processes become the runner's children when their parent exits instead
//! of init's; between stages, when the runner has no command running, any
//! child it has is one of them, and is stopped and named in the stage's
//! record.

use std::sync::atomic::{AtomicBool, Ordering};

static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Makes this process the subreaper of everything it starts. Only the CLI
/// calls this: in a test process other tests' children are not orphans.
pub fn adopt() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    ADOPTING.store(true, Ordering::SeqCst);
    Ok(())
}

/// How a `during:` command names a process it started on purpose (a daemon
/// it restarted), one line per process on its stdout: `spare-pid: 1234`.
/// Such a process outlives the stage; nothing else can ask for that (a
/// plugin's commands' output is never read for it).
pub const SPARE_PID_PREFIX: &str = "spare-pid:";

static SPARED: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// Spares the processes a `during:` command named in `stdout`; returns how many.
pub fn spare_named_in(stdout: &str) -> usize {
    let pids: Vec<i32> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(SPARE_PID_PREFIX)?.trim().parse().ok())
        .filter(|&pid| pid > 1)
        .collect();
    let mut spared = SPARED.lock().unwrap_or_else(|e| e.into_inner());
    spared.extend(&pids);
    pids.len()
}

/// Spares a child the runner itself keeps across stages (the cluster
/// watch's sampler) until [`unspare`].
pub fn spare(pid: i32) {
    SPARED.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
}

/// Ends [`spare`] for a child that has been stopped and reaped, so its pid
/// is not spared when the kernel hands it to another process.
pub fn unspare(pid: i32) {
    SPARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| *p != pid);
}

fn is_spared(pid: i32) -> bool {
    SPARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
}

/// Which children to spare.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Spare {
    /// The OpenSSH connection masters the runner's host connections share
    /// (ControlPersist): reused by the next stage.
    SshMasters,
    Nothing,
}

/// Stops every child of this process (call it only when no command runs)
/// and reaps it; returns `name (pid N)` of each that was still running.
pub fn end_orphans(spare: Spare) -> Vec<String> {
    if !ADOPTING.load(Ordering::SeqCst) {
        return Vec::new();
    }
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Some((name, state, ppid)) = stat(pid) else {
            continue;
        };
        if ppid != me {
            continue;
        }
        if spare == Spare::SshMasters && name == "ssh" && is_ssh_master(pid) {
            continue;
        }
        if is_spared(pid) {
            if !alive(&state) {
                // SAFETY: reaping our own exited child; the status is discarded.
                unsafe {
                    libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
                }
            }
            continue;
        }
        children.push((pid, state));
    }
    if children.iter().any(|(_, state)| alive(state)) {
        // A command's leftovers in its own process group were sent SIGKILL
        // as it ended, and may still be on their way out: only what is
        // alive a moment later escaped.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut ended = Vec::new();
    for (pid, _) in children {
        if let Some((name, _, _)) = stat(pid).filter(|(_, state, _)| alive(state)) {
            // SAFETY: kill(2) on our own child; no memory is involved.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            ended.push(format!("{} (pid {pid})", crate::terminal::line(&name)));
        }
        // SAFETY: reaping our own child; the status is discarded.
        unsafe {
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    ended
}

fn alive(state: &str) -> bool {
    !matches!(state, "Z" | "X")
}

/// (comm, state, ppid) from /proc/PID/stat.
fn stat(pid: i32) -> Option<(String, String, String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text[open + 1..close].to_string();
    let mut rest = text[close + 1..].split_whitespace();
    let state = rest.next()?.to_string();
    let ppid = rest.next()?.to_string();
    Some((name, state, ppid))
}

fn is_ssh_master(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("pipeline-ssh-"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_marked_lines_of_a_during_command_spare_a_process() {
        let stdout = "started osd.2 (pid 41) on node2\nspare-pid: 4242\nspare-pid: x\nspare-pid: 1\n  spare-pid: 77\n";
        assert_eq!(spare_named_in(stdout), 1);
        assert!(is_spared(4242));
        assert!(!is_spared(41) && !is_spared(1) && !is_spared(77));
    }
}
