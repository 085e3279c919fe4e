//! Calling the `ceph` and `radosgw-admin` tools against the sandbox, always bounded in time.

use std::time::Duration;

use crate::error::SandboxError;
use crate::layout::Layout;
use crate::process::{self, Finished};

/// Runs `ceph -c CONF --connect-timeout N -f json ARGS…` and returns its stdout.
///
/// `--connect-timeout` makes `ceph` give up on an absent monitor by itself; the process
/// timeout additionally covers commands that hang after connecting (e.g. a manager command
/// while no manager is active).
pub(crate) fn ceph_json(
    layout: &Layout,
    args: &[&str],
    timeout: Duration,
) -> Result<String, SandboxError> {
    Ok(ceph(layout, args, timeout)?.stdout)
}

/// [`ceph_json`] returning the whole captured result.
pub(crate) fn ceph(
    layout: &Layout,
    args: &[&str],
    timeout: Duration,
) -> Result<Finished, SandboxError> {
    let mut cmd = process::command("ceph");
    cmd.arg("-c")
        .arg(layout.conf())
        .arg("--connect-timeout")
        .arg(timeout.as_secs().max(1).to_string())
        .args(["-f", "json"])
        .args(args);
    process::run_ok(cmd, timeout)
}

/// Runs `radosgw-admin -c CONF ARGS…` as `client.admin`.
pub(crate) fn radosgw_admin(
    layout: &Layout,
    args: &[&str],
    timeout: Duration,
) -> Result<Finished, SandboxError> {
    let mut cmd = process::command("radosgw-admin");
    cmd.arg("-c").arg(layout.conf()).args(args);
    process::run_ok(cmd, timeout)
}
