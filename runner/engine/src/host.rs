//! Facts about the machine running the suite and the suite file's git state,
//! recorded so that a later run knows what it is compared against.

use std::path::Path;
use std::process::Command;

use crate::results::{GitInfo, HostInfo};

pub fn host_info() -> HostInfo {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    HostInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        os,
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The commit of the repository holding `file`, and whether `file` differs from it.
pub fn git_info(file: &Path) -> Option<GitInfo> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let name = file.file_name()?.to_string_lossy().to_string();
    let status = git(&["status", "--porcelain", "--", &name]).unwrap_or_default();
    Some(GitInfo {
        commit,
        dirty: !status.is_empty(),
    })
}
