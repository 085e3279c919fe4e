//! The OSD disks of a lab, made slow on purpose (`pipeline sandbox fault
//! slow-disk --host node1 --iops 40`).
//!
//! A lab OSD's bluestore file sits behind a loop device of its own (direct
//! I/O, so nothing is cached in between), and the OSD runs in a blkio
//! cgroup of its own. `slow-disk` caps that cgroup's reads and writes per
//! second on the disk that holds the file. The loop device forwards each
//! request in the cgroup of the OSD that issued it, so the cap holds the
//! loop device's requests in flight: from the OSD's host it looks like a
//! slow disk does (utilisation 100%, await up), and it takes effect at
//! once, with no restart and no PG left degraded. `restore-disk` lifts the
//! cap; `down` detaches the loop devices and removes the cgroups.
//!
//! cgroup v1's blkio controller is used where it is mounted
//! (`/sys/fs/cgroup/blkio`); a machine with only cgroup v2 gets a clear
//! refusal from `slow-disk`, and its OSDs run without a cgroup.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::SandboxError;
use crate::layout::Layout;
use crate::process;

/// Where cgroup v1 mounts its blkio hierarchy.
const BLKIO: &str = "/sys/fs/cgroup/blkio";
/// Every cgroup a lab makes starts with this, as its namespaces do.
const CGROUP_PREFIX: &str = "pl-lab-osd.";
const LOSETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The bluestore file of OSD `id`: what its loop device is backed by.
fn block_file(layout: &Layout, id: u32) -> PathBuf {
    layout.data_root("osd").join(format!("ceph-{id}.block"))
}

/// The `block` symlink in OSD `id`'s data folder: what bluestore opens.
fn block_link(layout: &Layout, id: u32) -> PathBuf {
    layout.data_dir("osd", &id.to_string()).join("block")
}

fn cgroup(id: u32) -> PathBuf {
    Path::new(BLKIO).join(format!("{CGROUP_PREFIX}{id}"))
}

/// Puts OSD `id`'s bluestore file (made by its mkfs) behind a loop device and
/// points the OSD at it. A memstore OSD has no file and is left alone.
/// Returns the loop device, if one was attached.
pub(crate) fn attach(layout: &Layout, id: u32) -> Result<Option<PathBuf>, SandboxError> {
    let file = block_file(layout, id);
    if !file.is_file() {
        return Ok(None);
    }
    let mut losetup = process::command("losetup");
    losetup
        .args(["--find", "--show", "--direct-io=on"])
        .arg(&file);
    let loop_dev = PathBuf::from(
        process::run_ok(losetup, LOSETUP_TIMEOUT)?
            .stdout
            .trim()
            .to_string(),
    );
    let link = block_link(layout, id);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&loop_dev, &link).map_err(SandboxError::io("symlink", &link))?;
    Ok(Some(loop_dev))
}

/// Moves OSD `id` (every thread of `pid`) into its own blkio cgroup, when its
/// store is on a loop device and the machine has cgroup v1's blkio.
pub(crate) fn join(layout: &Layout, id: u32, pid: u32) -> Result<(), SandboxError> {
    if loop_of(layout, id).is_none() || !Path::new(BLKIO).is_dir() {
        return Ok(());
    }
    let dir = cgroup(id);
    if !dir.is_dir() {
        std::fs::create_dir(&dir).map_err(SandboxError::io("create cgroup", &dir))?;
    }
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, pid.to_string()).map_err(SandboxError::io("write", procs))
}

/// The loop device OSD `id`'s `block` link points at, if it is one.
fn loop_of(layout: &Layout, id: u32) -> Option<PathBuf> {
    let target = std::fs::read_link(block_link(layout, id)).ok()?;
    target.to_str()?.starts_with("/dev/loop").then_some(target)
}

/// Caps OSD `id`'s reads and writes at `iops` each per second (`None` lifts
/// the cap). Returns what it did, for the fault's log line.
pub(crate) fn limit(layout: &Layout, id: u32, iops: Option<u64>) -> Result<String, SandboxError> {
    let refuse = |reason: String| SandboxError::InvalidOption { reason };
    let Some(loop_dev) = loop_of(layout, id) else {
        return Err(refuse(format!(
            "osd.{id} is not on a loop device (a lab's bluestore OSDs are; memstore ones are not)"
        )));
    };
    if !Path::new(BLKIO).is_dir() {
        return Err(refuse(format!(
            "slowing a disk needs cgroup v1's blkio controller at {BLKIO}, which this machine does not mount"
        )));
    }
    let dir = cgroup(id);
    if !dir.join("cgroup.procs").is_file() {
        return Err(refuse(format!(
            "osd.{id} runs outside its cgroup {}; restart it with `sandbox fault start-osds`",
            dir.display()
        )));
    }
    let disk = whole_disk_of(&block_file(layout, id))?;
    let value = iops.unwrap_or(0);
    for knob in [
        "blkio.throttle.read_iops_device",
        "blkio.throttle.write_iops_device",
    ] {
        let path = dir.join(knob);
        std::fs::write(&path, format!("{disk} {value}"))
            .map_err(SandboxError::io("write", path))?;
    }
    let name = loop_dev.file_name().unwrap_or_default().to_string_lossy();
    Ok(match iops {
        Some(n) => format!("osd.{id} ({name}) held to {n} reads and {n} writes a second"),
        None => format!("osd.{id} ({name}) at full speed again"),
    })
}

/// `MAJ:MIN` of the whole disk holding `file`: blkio caps whole disks, not
/// partitions.
fn whole_disk_of(file: &Path) -> Result<String, SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(file)
        .map_err(SandboxError::io("stat", file))?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists() {
        let parent = sys.join("../dev");
        return std::fs::read_to_string(&parent)
            .map(|s| s.trim().to_string())
            .map_err(SandboxError::io("read", parent));
    }
    Ok(format!("{major}:{minor}"))
}

/// Loop devices backed by this sandbox's OSD files: `(device, backing file)`.
fn loops_of(root: Option<&Path>) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            let backing = backing.trim().to_string();
            let ours = match root {
                Some(root) => Path::new(&backing).starts_with(root),
                None => is_osd_block_file(&backing),
            };
            (name.starts_with("loop") && ours).then_some((name, backing))
        })
        .collect();
    found.sort();
    found
}

/// `…/osd/ceph-N.block`, as a lab names an OSD's file (` (deleted)` once removed).
fn is_osd_block_file(path: &str) -> bool {
    let path = path.trim_end_matches(" (deleted)");
    let Some(name) = Path::new(path).file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let parent_is_osd = Path::new(path)
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == "osd");
    parent_is_osd
        && name
            .strip_prefix("ceph-")
            .and_then(|n| n.strip_suffix(".block"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn cgroups() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(BLKIO) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(CGROUP_PREFIX))
        .collect();
    found.sort();
    found
}

/// Detaches the loop devices of this sandbox's OSDs and removes the OSD
/// cgroups. Run after the OSDs have stopped. Returns what it removed.
/// One that cannot go does not keep the others: the first error is returned
/// after all were tried.
pub(crate) fn teardown(layout: &Layout) -> Result<Vec<String>, SandboxError> {
    let mut removed = Vec::new();
    let mut first_error = None;
    for (dev, _) in loops_of(Some(&layout.data_root("osd"))) {
        let mut losetup = process::command("losetup");
        losetup.args(["--detach", &format!("/dev/{dev}")]);
        match process::run_ok(losetup, LOSETUP_TIMEOUT) {
            Ok(_) => removed.push(dev),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    for name in cgroups() {
        let dir = Path::new(BLKIO).join(&name);
        match std::fs::remove_dir(&dir) {
            Ok(()) => removed.push(format!("cgroup {name}")),
            Err(e) => {
                first_error.get_or_insert(SandboxError::io("remove cgroup", &dir)(e));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Loop devices and cgroups of a lab's OSDs still on this machine.
pub(crate) fn leftovers() -> Vec<String> {
    let mut found: Vec<String> = loops_of(None)
        .into_iter()
        .map(|(dev, file)| format!("loop device {dev} ({file})"))
        .collect();
    found.extend(cgroups().into_iter().map(|c| format!("cgroup {BLKIO}/{c}")));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_osds_block_file_is_taken_for_a_labs() {
        assert!(is_osd_block_file("/tmp/lab/sandbox/osd/ceph-0.block"));
        assert!(is_osd_block_file("/tmp/x/osd/ceph-12.block (deleted)"));
        assert!(!is_osd_block_file("/tmp/x/osd/ceph-.block"));
        assert!(!is_osd_block_file("/tmp/x/osd/ceph-1a.block"));
        assert!(!is_osd_block_file("/tmp/x/img/ceph-1.block"));
        assert!(!is_osd_block_file("/var/lib/machines/disk.img"));
    }
}
