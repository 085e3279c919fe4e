//! The one error type of the crate.
//!
//! Every variant carries what a person needs to act on it without re-running
//! with more logging: the port that is busy, the command that hung, the last
//! lines of the daemon log that explains a failed start.

use std::path::PathBuf;
use std::time::Duration;

/// Why a sandbox operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The directory cannot be used in `ceph.conf` (or is not absolute).
    #[error("unusable sandbox directory {dir:?}: {reason}")]
    InvalidDir { dir: PathBuf, reason: String },

    /// An option value that cannot work (store too small, port clash).
    #[error("invalid sandbox option: {reason}")]
    InvalidOption { reason: String },

    /// The directory exists, holds files, and was not created by us: wiping it could destroy
    /// someone's data.
    #[error(
        "{dir:?} is not empty and is not a sandbox directory (no {marker} file); refusing to wipe it"
    )]
    NotASandboxDir { dir: PathBuf, marker: &'static str },

    /// Daemons recorded in the directory's pid files are still alive.
    #[error(
        "a sandbox is already running in {dir:?} ({daemons}); run `pipeline sandbox down` first"
    )]
    AlreadyRunning { dir: PathBuf, daemons: String },

    /// Something already listens on a port the sandbox needs.
    #[error(
        "port {port} on 127.0.0.1 ({purpose}) is busy: {reason}; stop whatever listens there (another sandbox?) before `up`"
    )]
    PortBusy {
        port: u16,
        purpose: &'static str,
        reason: String,
    },

    /// A program the sandbox needs is not installed.
    #[error(
        "program `{program}` not found on PATH (install the Ceph packages: ceph ceph-mon ceph-osd ceph-mgr radosgw ceph-common)"
    )]
    MissingProgram { program: String },

    /// The installed Ceph is a release the sandbox does not know how to start.
    #[error(
        "the installed Ceph is `{found}`; the sandbox starts releases 16 to 20 (tested: {tested}); install one of those (docs/ceph-releases.md)"
    )]
    UnsupportedRelease { found: String, tested: String },

    /// An external command exited unsuccessfully.
    #[error("`{command}` failed ({status}): {output}")]
    CommandFailed {
        command: String,
        status: String,
        output: String,
    },

    /// An external command did not finish in time and was killed.
    #[error("`{command}` did not finish within {timeout:?} and was killed")]
    CommandTimeout { command: String, timeout: Duration },

    /// A daemon or the cluster did not reach the wanted state in time.
    #[error("{what} not ready after {waited:.1?}: {detail}\n--- last lines of {log:?} ---\n{tail}")]
    NotReady {
        what: String,
        waited: Duration,
        detail: String,
        log: PathBuf,
        tail: String,
    },

    /// A daemon was started but did not come up (no live pid).
    #[error("{daemon} did not start: {detail}\n--- last lines of {log:?} ---\n{tail}")]
    DaemonStart {
        daemon: String,
        detail: String,
        log: PathBuf,
        tail: String,
    },

    /// A bootstrap step (mkfs, OSD registration, user creation) failed; the log of the
    /// daemon it concerns usually says why.
    #[error("{step} failed: {cause}\n--- last lines of {log:?} ---\n{tail}")]
    StepFailed {
        step: String,
        #[source]
        cause: Box<SandboxError>,
        log: PathBuf,
        tail: String,
    },

    /// A lab needs root (network namespaces, a bridge, tc, sshd).
    #[error("{what} needs root; run it as root (e.g. `sudo pipeline sandbox up --hosts 3`)")]
    NeedsRoot { what: String },

    /// Namespaces or interfaces of another lab are on the machine.
    #[error(
        "another lab's network is still on this machine ({found}); run `pipeline sandbox down --dir DIR` with that lab's folder, or remove them with `ip netns del` / `ip link del`"
    )]
    LabExists { found: String },

    /// `DIR/lab/lab.json` is not a record `up` wrote: unreadable, or naming hosts, namespaces,
    /// addresses or files its own spec would not make. Nothing of the lab is touched on its word.
    #[error(
        "the lab record {path:?} is not one `pipeline sandbox up` wrote: {reason}; nothing of the lab was removed on its word. The lab's namespaces and interfaces on this machine: {found}; remove them with `ip netns del` / `ip link del`, then the folder"
    )]
    BadLabRecord {
        path: PathBuf,
        reason: String,
        found: String,
    },

    /// Nothing to read back: the directory holds no (ready) sandbox.
    #[error("no sandbox in {dir:?}: {file:?} is missing (run `pipeline sandbox up`)")]
    NoSandbox { dir: PathBuf, file: PathBuf },

    /// Output of a Ceph tool, or a file of ours, did not have the expected shape.
    #[error("cannot parse {what}: {detail}")]
    Parse { what: String, detail: String },

    /// A file system or socket operation failed.
    #[error("{action} {path:?}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    /// Wraps a failed command of bootstrap step `step` with the tail of `log`. Errors that
    /// already quote a log are passed through unchanged.
    pub(crate) fn in_step(self, step: impl Into<String>, log: PathBuf) -> Self {
        match self {
            SandboxError::CommandFailed { .. } | SandboxError::CommandTimeout { .. } => {
                SandboxError::StepFailed {
                    step: step.into(),
                    cause: Box::new(self),
                    tail: crate::logs::tail_file(&log, crate::wait::TAIL_LINES),
                    log,
                }
            }
            other => other,
        }
    }

    /// Shorthand for [`SandboxError::Io`].
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| SandboxError::Io {
            action,
            path,
            source,
        }
    }
}
