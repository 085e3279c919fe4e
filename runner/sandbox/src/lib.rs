//! A throw-away single-node Ceph cluster on 127.0.0.1, started from the system packages.
//!
//! One monitor (`mon.a`), one manager (`mgr.x`), three OSDs on memstore (or bluestore on
//! sparse files) and a radosgw with an S3 user and a Swift subuser, all under one
//! directory (default `/tmp/pipeline-sandbox`): config, keys, pid files, logs, data. No
//! systemd: each daemon daemonizes and writes its pid file; `down` signals exactly those
//! pids after checking their command lines. Benchmarks and parser tests get a real cluster
//! in ~6 s (memstore; ~9 s bluestore). Settings and pitfalls come from
//! `/work/shared/ceph-notes.md`.
//!
//! ```no_run
//! let env = pipeline_sandbox::up(&Default::default(), &mut |line| eprintln!("{line}"))?;
//! print!("{}", env.to_shell());
//! pipeline_sandbox::down(&env.dir, false)?;
//! # Ok::<(), pipeline_sandbox::SandboxError>(())
//! ```

mod bootstrap;
mod ceph_cli;
mod conf;
mod daemons;
mod down;
mod env;
mod error;
mod http_probe;
mod keyring;
mod keys;
mod known_warnings;
pub mod lab;
mod layout;
mod logs;
mod options;
mod pids;
mod ports;
mod process;
mod readiness;
pub mod registry;
mod release;
mod status;
mod topology;
mod up;
mod wait;

use std::path::Path;

pub use daemons::DaemonKind;
pub use down::{DownReport, GRACE as DOWN_GRACE, StoppedDaemon};
pub use env::{LabEnv, SandboxEnv, shell_quote};
pub use error::SandboxError;
pub use options::{
    DEFAULT_BLUESTORE_BYTES, DEFAULT_DIR, DEFAULT_MEMSTORE_BYTES, DEFAULT_RGW_PORT, DIR_ENV,
    ObjectStore, SandboxOptions, default_dir,
};
pub use release::CephRelease;
pub use status::{DaemonStatus, Status};
pub use up::{REQUIRED_PROGRAMS, missing_programs};

/// Creates and starts a sandbox in `opts.dir` and waits until it is really ready: monitor in
/// quorum, 3 OSDs up and in, every PG active+clean, gateway answering S3 and Swift auth.
///
/// Refuses when the directory's daemons are alive, when a port (3300, 6789, the gateway
/// port) is busy, or when the directory exists with foreign content. A stale sandbox
/// directory is wiped. Reports steps through `progress`. On failure the daemons started so
/// far are stopped again and the directory is left for inspection; the error quotes the
/// relevant log.
pub fn up(
    opts: &SandboxOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<SandboxEnv, SandboxError> {
    up::up(opts, progress)
}

/// Stops the daemons recorded in `dir`'s pid files (SIGTERM, SIGKILL after
/// [`DOWN_GRACE`]), only after checking each pid's command line, then deletes the directory
/// unless `keep_data`. A directory with nothing running is fine.
pub fn down(dir: &Path, keep_data: bool) -> Result<DownReport, SandboxError> {
    down::down(dir, keep_data)
}

/// Which daemons of the sandbox in `dir` run, and the cluster's health if the monitor does.
pub fn status(dir: &Path) -> Result<Status, SandboxError> {
    status::status(dir)
}

/// Reads back the connection settings `up` saved in `dir/env.json`.
pub fn env(dir: &Path) -> Result<SandboxEnv, SandboxError> {
    let layout = layout::Layout::new(dir)?;
    let path = layout.env_json();
    if !path.exists() {
        return Err(SandboxError::NoSandbox {
            dir: layout.dir().to_path_buf(),
            file: path,
        });
    }
    SandboxEnv::read(&path)
}
