//! Polling until a condition holds, failing fast when a watched daemon dies.

use std::path::PathBuf;
use std::time::Duration;

use crate::daemons::Daemon;
use crate::error::SandboxError;
use crate::layout::Layout;
use crate::logs::tail_file;
use crate::pids::PidFile;
use crate::process::Deadline;

/// Lines of a daemon log quoted in errors.
pub(crate) const TAIL_LINES: usize = 20;

/// One look at the condition.
pub(crate) enum Poll<T> {
    Ready(T),
    /// Not yet; the text says what is missing and which log would explain it.
    NotYet {
        detail: String,
        log: PathBuf,
    },
}

/// Calls `check` every `interval` until it is ready or `deadline` passes. Before each call,
/// every daemon in `watch` must still be alive: waiting a minute for a daemon that already
/// crashed would only hide its log.
pub(crate) fn wait_until<T>(
    layout: &Layout,
    what: &str,
    deadline: &Deadline,
    watch: &[Daemon],
    interval: Duration,
    mut check: impl FnMut() -> Poll<T>,
) -> Result<T, SandboxError> {
    loop {
        ensure_alive(layout, watch)?;
        match check() {
            Poll::Ready(value) => return Ok(value),
            Poll::NotYet { detail, log } if deadline.expired() => {
                return Err(SandboxError::NotReady {
                    what: what.into(),
                    waited: deadline.elapsed(),
                    detail,
                    tail: tail_file(&log, TAIL_LINES),
                    log,
                });
            }
            Poll::NotYet { .. } => std::thread::sleep(interval.min(deadline.remaining())),
        }
    }
}

/// Fails with the daemon's log tail if one of `daemons` has no live process.
pub(crate) fn ensure_alive(layout: &Layout, daemons: &[Daemon]) -> Result<(), SandboxError> {
    for daemon in daemons {
        let name = daemon.name();
        let pid_file = PidFile {
            daemon: daemon.clone(),
            path: layout.pid_file(&name),
            pid: crate::pids::read_pid(&layout.pid_file(&name)),
        };
        if pid_file.live_pid(layout).is_none() {
            let log = layout.log_file(&name);
            return Err(SandboxError::DaemonStart {
                daemon: name.clone(),
                detail: match pid_file.pid {
                    Some(pid) => format!("process {pid} exited"),
                    None => format!("no pid in {:?}", pid_file.path),
                },
                tail: tail_file(&log, TAIL_LINES),
                log,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_out_with_the_log_tail() {
        let dir = std::env::temp_dir().join(format!("sbx-wait-{}", std::process::id()));
        let layout = Layout::new(&dir).unwrap();
        std::fs::create_dir_all(layout.log_dir()).unwrap();
        let log = layout.log_file("mon.a");
        std::fs::write(&log, "line 1\nmon.a failed to bind\n").unwrap();
        let deadline = Deadline::after(Duration::from_millis(100));
        let mut calls = 0;
        let err = wait_until::<()>(
            &layout,
            "quorum",
            &deadline,
            &[],
            Duration::from_millis(10),
            || {
                calls += 1;
                Poll::NotYet {
                    detail: "no quorum".into(),
                    log: log.clone(),
                }
            },
        )
        .unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(calls > 1);
        let text = err.to_string();
        assert!(
            text.contains("quorum not ready") && text.contains("no quorum"),
            "{text}"
        );
        assert!(text.ends_with("mon.a failed to bind"), "{text}");
    }

    #[test]
    fn dead_watched_daemon_fails_fast() {
        let dir = std::env::temp_dir().join(format!("sbx-wait-dead-{}", std::process::id()));
        let layout = Layout::new(&dir).unwrap();
        let deadline = Deadline::after(Duration::from_secs(60));
        let err = wait_until(
            &layout,
            "x",
            &deadline,
            &[Daemon::mon()],
            Duration::from_secs(1),
            || Poll::Ready(()),
        )
        .unwrap_err();
        assert!(matches!(err, SandboxError::DaemonStart { .. }), "{err}");
    }
}
