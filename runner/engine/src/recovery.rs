//! After a run that could not clean up (SIGKILL, OOM kill, a reboot, a
//! cleanup stage that failed): find such runs, and finish their cleanup.
//!
//! A run's ledger (`created` in results.json) is on disk after every stage,
//! so what the run made and has not removed is known even when the runner
//! died mid-stage. `pipeline cleanup RUN_DIR` compiles the suite the run
//! saved (`pipeline.yaml` in the run folder), loads that ledger, and runs
//! the suite's own cleanup stages under the run's id: the same order and the
//! same ownership rules as the run's own cleanup, so nothing the run did not
//! create is touched.

use std::path::{Path, PathBuf};

use crate::cancel::Signals;
use crate::compile::{CompileOptions, compile_source};
use crate::context::{Resource, SCRATCH_FILE};
use crate::diagnostic::{Diagnostics, Source};
use crate::progress::Progress;
use crate::registry::Registry;
use crate::results::{ResultsError, RunResults, RunStatus, StageStatus};
use crate::run_lock::{LockError, RunLock};

/// How many of the newest run folders `pipeline run` looks at for leftovers.
const SCAN_LIMIT: usize = 200;
/// Larger results.json files are not read by that look (it must stay quick).
const SCAN_MAX_BYTES: u64 = 32 << 20;

/// What the run created and has not removed.
pub fn leftovers(results: &RunResults) -> Vec<Resource> {
    results
        .created
        .iter()
        .filter(|r| !r.removed)
        .cloned()
        .collect()
}

/// `kind name` of each resource, for messages.
pub fn describe(resources: &[Resource]) -> String {
    resources
        .iter()
        .map(|r| format!("{} `{}`", r.kind, r.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An earlier run, no longer running, that left resources behind.
#[derive(Debug)]
pub struct DeadRun {
    pub dir: PathBuf,
    /// `running` when the runner died without finishing.
    pub status: RunStatus,
    pub leftovers: Vec<Resource>,
}

impl DeadRun {
    pub fn warning(&self) -> String {
        let how = if self.status == RunStatus::Running {
            "stopped without finishing (killed?)"
        } else {
            "ended"
        };
        format!(
            "the earlier run {} {how} and did not remove {}; remove them with `pipeline cleanup {}`",
            self.dir.display(),
            describe(&self.leftovers),
            self.dir.display()
        )
    }
}

/// The runs in `runs_root` (newest first, at most [`SCAN_LIMIT`]) that no
/// process holds and that left resources behind; `except` is the run that
/// is starting.
pub fn dead_runs(runs_root: &Path, except: &Path) -> Vec<DeadRun> {
    let Ok(entries) = std::fs::read_dir(runs_root) else {
        return Vec::new();
    };
    let except = except
        .canonicalize()
        .unwrap_or_else(|_| except.to_path_buf());
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(crate::results::RESULTS_FILE).is_file())
        .collect();
    // Run folder names start with their UTC start time.
    dirs.sort();
    dirs.reverse();
    dirs.truncate(SCAN_LIMIT);
    dirs.into_iter()
        .filter(|d| d.canonicalize().map_or(true, |c| c != except))
        .filter_map(|dir| {
            let size = std::fs::metadata(dir.join(crate::results::RESULTS_FILE))
                .ok()?
                .len();
            if size > SCAN_MAX_BYTES || crate::run_lock::holder(&dir).is_some() {
                return None;
            }
            let mut results = RunResults::load(&dir).ok()?;
            crate::ledger_journal::replay(&dir, &mut results.created);
            let leftovers = leftovers(&results);
            (!leftovers.is_empty()).then_some(DeadRun {
                dir,
                status: results.status,
                leftovers,
            })
        })
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    #[error("cannot read the suite the run saved, {path}: {source}")]
    SuiteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the suite the run saved no longer compiles, so its cleanup stages cannot run")]
    Suite(Diagnostics),
    #[error("cannot write {path}: {source}")]
    Save {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What `pipeline cleanup` did.
#[derive(Debug)]
pub struct Recovered {
    pub results: RunResults,
    /// The run had died: its status was still `running` with its lock free.
    pub was_running: bool,
    pub removed: Vec<Resource>,
    /// Still there, each with why.
    pub left: Vec<(Resource, String)>,
}

/// Finishes the cleanup of the run in `run_dir` (see the module comment).
/// Idempotent: with nothing left it changes nothing but a dead run's status.
pub fn clean_up(
    run_dir: &Path,
    registry: &Registry,
    signals: &Signals,
    progress: Progress,
) -> Result<Recovered, RecoveryError> {
    let _lock = RunLock::acquire(run_dir, "pipeline cleanup")?;
    let mut results = RunResults::load(run_dir)?;
    crate::ledger_journal::replay(run_dir, &mut results.created);
    let was_running = results.status == RunStatus::Running;
    if was_running {
        // Its lock was free: the process that wrote it is gone.
        results.status = RunStatus::Failed;
    }
    let before = leftovers(&results);
    if before.is_empty() {
        if was_running {
            save(&results, run_dir)?;
        }
        return Ok(Recovered {
            results,
            was_running,
            removed: Vec::new(),
            left: Vec::new(),
        });
    }
    let plan = compile_saved_suite(run_dir, &results, registry)?;
    // One more than the last recovery's number (a recovery adds a record
    // per cleanup stage, all with its number).
    let last = results
        .cleanup
        .iter()
        .filter_map(|r| r.id.rsplit_once(".recovery-")?.1.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    let suffix = format!(".recovery-{}", last + 1);
    let first_new = results.cleanup.len();
    let mut results =
        crate::runner::clean_up_again(&plan, run_dir, results, &suffix, signals, progress);
    let scratch_failures = remove_scratch_files(&plan, run_dir, &mut results);
    let after = leftovers(&results);
    let removed = before
        .into_iter()
        .filter(|b| !after.iter().any(|a| a.kind == b.kind && a.name == b.name))
        .collect();
    let failures: Vec<String> = results.cleanup[first_new..]
        .iter()
        .filter(|r| r.status != StageStatus::Succeeded)
        .map(|r| {
            format!(
                "cleanup stage `{}` {}: {}",
                r.id,
                r.status.as_str(),
                r.error
                    .as_deref()
                    .or(r.skip_reason.as_deref())
                    .unwrap_or("no reason given")
            )
        })
        .collect();
    let why = if plan.cleanup.is_empty() {
        "the suite has no cleanup stage".to_string()
    } else if failures.is_empty() {
        "none of the suite's cleanup stages removes this kind of resource".to_string()
    } else {
        failures.join("; ")
    };
    let left = after
        .into_iter()
        .map(|r| {
            let why = scratch_failures
                .iter()
                .find(|(name, _)| *name == r.name && r.kind == SCRATCH_FILE)
                .map_or_else(|| why.clone(), |(_, e)| e.clone());
            (r, why)
        })
        .collect();
    save(&results, run_dir)?;
    Ok(Recovered {
        results,
        was_running,
        removed,
        left,
    })
}

/// Files a stage created on a host for its measurement (disk-baseline's
/// scratch file) and a killed run left: removed by the runner itself, on
/// the host the ledger names (`HOST:PATH`), found among the suite's hosts.
/// Returns (ledger name, why) for each that is still there.
fn remove_scratch_files(
    plan: &crate::plan::Plan,
    run_dir: &Path,
    results: &mut RunResults,
) -> Vec<(String, String)> {
    let mut failures = Vec::new();
    let hosts: Vec<&crate::hosts::Host> = plan
        .stages
        .iter()
        .chain(&plan.cleanup)
        .flat_map(|s| &s.targets)
        .collect();
    let dir = run_dir.join("stages").join("scratch-files.recovery");
    let _ = std::fs::create_dir_all(&dir);
    for (n, r) in results
        .created
        .iter_mut()
        .filter(|r| r.kind == SCRATCH_FILE && !r.removed)
        .enumerate()
    {
        let Some((host_name, path)) = r.name.split_once(':') else {
            continue;
        };
        let host = if host_name == crate::hosts::LOCAL {
            Some(crate::hosts::Host::local())
        } else {
            hosts
                .iter()
                .find(|h| h.name == host_name)
                .map(|h| (*h).clone())
        };
        let Some(host) = host else {
            failures.push((
                r.name.clone(),
                format!("host `{host_name}` is not in the suite's inventory any more; remove {path} there by hand"),
            ));
            continue;
        };
        let spec = crate::exec::CommandSpec::new(vec![
            "rm".into(),
            "-f".into(),
            "--".into(),
            path.to_string(),
        ])
        .timeout(std::time::Duration::from_secs(60));
        let spec = host.wrap(&spec, Some(std::time::Duration::from_secs(60)));
        let (out, err) = (
            dir.join(format!("{:02}-rm.stdout", n + 1)),
            dir.join(format!("{:02}-rm.stderr", n + 1)),
        );
        match crate::exec::run_to_files(&spec, &out, &err, None, &Default::default()) {
            Ok(done) if done.exit == crate::exec::Exit::Code(0) => {
                r.removed = true;
                let _ = crate::ledger_journal::append(run_dir, r);
            }
            Ok(done) => failures.push((
                r.name.clone(),
                format!(
                    "`rm -f -- {path}` on {host_name} failed ({}): {}",
                    done.exit,
                    std::fs::read_to_string(&err).unwrap_or_default().trim()
                ),
            )),
            Err(e) => failures.push((r.name.clone(), format!("cannot run rm on {host_name}: {e}"))),
        }
    }
    failures
}

/// The suite as the run saved it, compiled with the run's variables. It is
/// given the path the run was started from when that still exists, so
/// relative paths (inventory, plugins) resolve as they did.
fn compile_saved_suite(
    run_dir: &Path,
    results: &RunResults,
    registry: &Registry,
) -> Result<crate::plan::Plan, RecoveryError> {
    let saved = run_dir.join("pipeline.yaml");
    let text = std::fs::read_to_string(&saved).map_err(|source| RecoveryError::SuiteFile {
        path: saved.clone(),
        source,
    })?;
    let recorded = PathBuf::from(&results.pipeline.file);
    let path = if recorded.is_file() { recorded } else { saved };
    let overrides = results
        .vars
        .iter()
        .filter_map(|(name, value)| {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            // A secret's value was never stored: its own default applies.
            (!text.contains("***")).then(|| (name.clone(), text))
        })
        .collect();
    let options = CompileOptions {
        overrides,
        ..Default::default()
    };
    compile_source(&Source::new(path, text), registry, &options).map_err(RecoveryError::Suite)
}

fn save(results: &RunResults, run_dir: &Path) -> Result<(), RecoveryError> {
    results
        .save(run_dir)
        .map_err(|source| RecoveryError::Save {
            path: run_dir.join(crate::results::RESULTS_FILE),
            source,
        })?;
    // The report shows the new state; a failure to render is not a failure
    // of the cleanup (results.json holds everything).
    let _ = crate::report::write_report(results, run_dir);
    Ok(())
}
