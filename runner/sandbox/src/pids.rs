//! Pid files and the checks that make signalling them safe.
//!
//! A pid file can outlive its daemon (Ceph leaves it behind on SIGTERM here) and the
//! pid can be reused by an unrelated process, so a pid is only "ours" when
//! `/proc/PID/cmdline` shows the expected binary started with this sandbox's `ceph.conf`
//! and the daemon's identity. Nothing is ever looked up or killed by process name.
//! Zombies count as gone: PID 1 on these machines reaps them late.

use std::path::{Path, PathBuf};

use crate::daemons::Daemon;
use crate::layout::Layout;

/// What `/proc` says about a pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcState {
    Gone,
    Zombie,
    Alive { argv: Vec<String> },
}

/// Reads `/proc/PID/stat` and `/proc/PID/cmdline`.
pub(crate) fn proc_state(pid: u32) -> ProcState {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ProcState::Gone;
    };
    // "PID (comm) S …": comm may contain spaces and parentheses, the state follows the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next());
    if matches!(state, Some('Z' | 'X' | 'x') | None) {
        return ProcState::Zombie;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(raw) if !raw.is_empty() => ProcState::Alive {
            argv: parse_cmdline(&raw),
        },
        Ok(_) => ProcState::Zombie, // kernel threads and exiting processes have no cmdline
        Err(_) => ProcState::Gone,
    }
}

/// Splits the NUL-separated `/proc/PID/cmdline`.
pub(crate) fn parse_cmdline(raw: &[u8]) -> Vec<String> {
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    raw.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Whether `argv` is `daemon`'s binary started with `conf` and `daemon`'s identity,
/// i.e. a process this sandbox started.
pub(crate) fn cmdline_matches(argv: &[String], daemon: &Daemon, conf: &Path) -> bool {
    let Some(argv0) = argv.first() else {
        return false;
    };
    let binary = Path::new(argv0).file_name().and_then(|n| n.to_str());
    if binary != Some(daemon.kind.binary()) {
        return false;
    }
    if daemon.kind == crate::daemons::DaemonKind::Registry {
        // `docker-registry serve DIR/registry.yml`: the sandbox's own config.
        let config = conf.with_file_name(crate::layout::REGISTRY_CONFIG);
        return argv.get(1).map(String::as_str) == Some("serve")
            && argv.get(2).map(String::as_str) == config.to_str();
    }
    let conf = conf.to_string_lossy();
    let uses_conf = argv
        .windows(2)
        .any(|w| (w[0] == "-c" || w[0] == "--conf") && w[1] == conf.as_ref())
        || argv
            .iter()
            .any(|a| a.strip_prefix("--conf=") == Some(conf.as_ref()));
    let identity = daemon.identity_args();
    let has_identity = argv
        .windows(identity.len())
        .any(|w| w == identity.as_slice());
    uses_conf && has_identity
}

/// A pid file found in the run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PidFile {
    pub daemon: Daemon,
    pub path: PathBuf,
    /// `None` when the file is unreadable or holds no number.
    pub pid: Option<u32>,
}

impl PidFile {
    /// The pid, if it is alive and really this sandbox's daemon.
    pub fn live_pid(&self, layout: &Layout) -> Option<u32> {
        let pid = self.pid?;
        match proc_state(pid) {
            ProcState::Alive { argv } if cmdline_matches(&argv, &self.daemon, &layout.conf()) => {
                Some(pid)
            }
            _ => None,
        }
    }
}

/// All `run/*.pid` files that name a sandbox daemon.
pub(crate) fn pid_files(layout: &Layout) -> Vec<PidFile> {
    let Ok(entries) = std::fs::read_dir(layout.run_dir()) else {
        return Vec::new();
    };
    let mut files: Vec<PidFile> = entries
        .flatten()
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let name = file_name.to_str()?.strip_suffix(".pid")?;
            let daemon = Daemon::from_name(name)?;
            let path = entry.path();
            let pid = read_pid(&path);
            Some(PidFile { daemon, path, pid })
        })
        .collect();
    files.sort_by_key(|f| f.daemon.name());
    files
}

/// The number in a pid file.
pub(crate) fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&pid| pid > 1)
}

/// Sends `signal` to `pid`. Callers check [`PidFile::live_pid`] first.
pub(crate) fn send_signal(pid: u32, signal: libc::c_int) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn cmdline_check_needs_binary_conf_and_identity() {
        let conf = Path::new("/tmp/sbx/ceph.conf");
        let osd1 = Daemon::osd(1);
        assert!(cmdline_matches(
            &argv("ceph-osd -c /tmp/sbx/ceph.conf -i 1"),
            &osd1,
            conf
        ));
        assert!(cmdline_matches(
            &argv("/usr/bin/ceph-osd --conf=/tmp/sbx/ceph.conf -i 1"),
            &osd1,
            conf
        ));
        // another sandbox's OSD, another OSD, another binary, an unrelated process
        for other in [
            "ceph-osd -c /tmp/other/ceph.conf -i 1",
            "ceph-osd -c /tmp/sbx/ceph.conf -i 2",
            "ceph-mon -c /tmp/sbx/ceph.conf -i 1",
            "vim /tmp/sbx/ceph.conf -i 1",
            "",
        ] {
            assert!(!cmdline_matches(&argv(other), &osd1, conf), "{other}");
        }
        assert!(!cmdline_matches(&[], &osd1, conf));
        let rgw = Daemon::rgw();
        assert!(cmdline_matches(
            &argv("radosgw -c /tmp/sbx/ceph.conf -n client.rgw.sandbox"),
            &rgw,
            conf
        ));
    }

    #[test]
    fn cmdline_parsing_drops_trailing_nul() {
        assert_eq!(
            parse_cmdline(b"ceph-mon\0-c\0/x/ceph.conf\0-i\0a\0"),
            argv("ceph-mon -c /x/ceph.conf -i a")
        );
    }

    #[test]
    fn own_process_is_alive_and_missing_one_is_gone() {
        assert!(matches!(
            proc_state(std::process::id()),
            ProcState::Alive { .. }
        ));
        assert_eq!(proc_state(u32::MAX - 1), ProcState::Gone);
    }
}
