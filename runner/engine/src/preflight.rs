//! Checks made before anything runs: every host a stage will use answers over
//! SSH, and the programs the stages need are installed there. A benchmark
//! that fails after 20 minutes because iperf3 is missing on one node is
//! a wasted maintenance window.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::cancel::CancelToken;
use crate::exec::{self, CommandSpec, Exit};
use crate::hosts::Host;
use crate::plan::Plan;

/// Hosts the plan will use, with the programs needed on each.
pub fn requirements(plan: &Plan) -> Vec<(Host, Vec<String>)> {
    let mut needs: BTreeMap<String, (Host, Vec<String>)> = BTreeMap::new();
    for stage in plan.stages.iter().chain(&plan.cleanup) {
        let d = &stage.plugin.description;
        let hosts: Vec<Host> = if stage.fans_out() || !d.per_host {
            stage.targets.clone()
        } else {
            vec![Host::local()]
        };
        for host in hosts {
            let entry = needs
                .entry(host.name.clone())
                .or_insert_with(|| (host.clone(), Vec::new()));
            // A client root's tools were checked when the suite was compiled.
            let in_root = stage.client.as_ref().is_some_and(|c| c.root.is_some());
            for tool in d.requires.iter().filter(|_| !in_root) {
                if !entry.1.contains(tool) {
                    entry.1.push(tool.clone());
                }
            }
        }
    }
    needs.into_values().collect()
}

/// Problems found; empty when every host answers and has its programs.
pub fn check(plan: &Plan) -> Vec<String> {
    let needs = requirements(plan);
    let dir = match private_dir() {
        Ok(dir) => dir,
        Err(e) => {
            return vec![format!(
                "cannot create a folder in {}: {e}",
                std::env::temp_dir().display()
            )];
        }
    };
    let problems: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = needs
            .iter()
            .enumerate()
            .map(|(i, (host, tools))| {
                let dir = &dir;
                scope.spawn(move || check_host(host, tools, &dir.join(format!("{i}"))))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec!["preflight check crashed".into()])
            })
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
    problems
}

/// A folder of this check's own in the temporary folder. The process id
/// alone is not enough: runs in one process (as tests are) check at the
/// same time, and one's clean-up removed the folder the other was making.
/// Made with mkdir, never reused: a name someone else made first (a link
/// included) is passed over.
fn private_dir() -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut taken = None;
    for _ in 0..16 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "pipeline-preflight-{}-{n}-{nanos:x}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => taken = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(taken.unwrap_or_else(|| std::io::Error::other("no free name")))
}

fn check_host(host: &Host, tools: &[String], base: &std::path::Path) -> Vec<String> {
    if host.is_local() && tools.is_empty() {
        return Vec::new();
    }
    // One round trip: the names of missing programs, one per line.
    let script = format!(
        "for t in {}; do command -v \"$t\" >/dev/null 2>&1 || echo \"$t\"; done; true",
        tools
            .iter()
            .map(|t| exec::shell_quote(t))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let spec =
        CommandSpec::new(vec!["sh".into(), "-c".into(), script]).timeout(Duration::from_secs(30));
    let wrapped = host.wrap(&spec, None);
    let (out, err) = (base.with_extension("out"), base.with_extension("err"));
    let finished = match exec::run_to_files(&wrapped, &out, &err, None, &CancelToken::default()) {
        Ok(f) => f,
        Err(e) => return vec![format!("host {}: {e}", host.describe())],
    };
    if !host.is_local() {
        // Only the check's own stderr belongs in a message.
        pipeline_stage_api::hosts::take_cpu_report(&err);
    }
    let stdout = pipeline_stage_api::context::read_output_start(&out);
    let stderr = pipeline_stage_api::context::read_output_start(&err);
    match finished.exit {
        Exit::Code(0) => stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|tool| {
                let place = if host.is_local() {
                    "this machine".to_string()
                } else {
                    format!("host {}", host.describe())
                };
                format!(
                    "`{}` is not installed on {place}, and a stage needs it",
                    tool.trim()
                )
            })
            .collect(),
        Exit::Code(255) if !host.is_local() => vec![host.explain_ssh_failure(&stderr)],
        Exit::TimedOut(_) => vec![format!("host {}: no answer within 30s", host.describe())],
        other => vec![format!(
            "host {}: the check failed ({other}): {}",
            host.describe(),
            stderr.trim()
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn checks_at_the_same_time_in_one_process_each_get_a_folder_of_their_own() {
        let dirs: Vec<PathBuf> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|_| scope.spawn(private_dir)).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        let mut names = dirs.clone();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), dirs.len(), "{dirs:?}");
        for dir in &dirs {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{dir:?}");
            std::fs::remove_dir(dir).unwrap();
        }
    }
}
