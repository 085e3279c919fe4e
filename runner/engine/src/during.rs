//! `during:` on a stage: actions on a timeline beside the stage, such as a
//! fault injected in the middle of a benchmark and undone later.
//!
//! ```yaml
//! - id: write-while-node2-is-down
//!   uses: rados-bench
//!   during:
//!     - name: node2's OSDs stop
//!       at: 4s
//!       run: [pipeline, sandbox, fault, stop-osds, --host, node2]
//!       undo_at: 12s
//!       undo: [pipeline, sandbox, fault, start-osds, --host, node2]
//! ```
//!
//! Each action's `run` starts `at` after the stage does (on this machine,
//! argv words, templates rendered like `with:`; a program named `pipeline`
//! is this runner's own binary, so `pipeline sandbox fault` needs no PATH); its `undo` at `undo_at`, or
//! when the stage ends, whatever the stage's outcome, Ctrl-C included: an
//! injected fault never outlives its stage. An action whose time has not
//! come when the stage ends is not run. Every command, with when it ran and
//! how it ended, goes into the stage's `events` (results.json, the report);
//! a command that fails fails the stage, because its figures would not
//! measure what the suite says they do. What a command starts on purpose
//! (the OSDs `start-osds` starts again) and names on its stdout
//! (`spare-pid: N`) is spared when the runner stops the orphans of a stage.

use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cancel::CancelToken;
use crate::config::Sp;
use crate::exec::{CommandSpec, run_to_files, shell_words};

/// Limit of one `run` or `undo` command unless `command_timeout` says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// One entry of `during:`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DuringConfig {
    /// What happens, in the report and the events: `node2's OSDs stop`.
    pub name: Sp<String>,
    /// When `run` starts, after the stage does: `5s`.
    pub at: Sp<String>,
    /// The command, as a list of words (templates allowed), on this machine.
    pub run: Sp<Vec<String>>,
    /// The command that undoes it: at `undo_at`, else when the stage ends.
    #[serde(default)]
    pub undo: Option<Sp<Vec<String>>>,
    /// When `undo` starts, after the stage does (later than `at`).
    #[serde(default)]
    pub undo_at: Option<Sp<String>>,
    /// Limit for each of the two commands (default 2m).
    #[serde(default)]
    pub command_timeout: Option<Sp<String>>,
}

/// A checked `during:` entry; its words still templates.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedAction {
    pub name: String,
    pub at: Duration,
    pub run: Vec<String>,
    pub undo: Option<Vec<String>>,
    pub undo_at: Option<Duration>,
    pub command_timeout: Duration,
}

/// What the timeline did: one command that ran, or one that did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageEvent {
    /// Seconds after the stage started.
    pub at_s: f64,
    /// The action's `name`.
    pub name: String,
    /// `run` or `undo`.
    pub action: String,
    /// The command line, or empty when it did not run.
    pub command: String,
    /// How long the command took.
    #[serde(default)]
    pub duration_s: f64,
    /// `ok`, how it failed, or why it did not run.
    pub outcome: String,
    pub ok: bool,
}

/// Checks of one stage's `during:`; the problems as (message, where, hint).
pub fn check(
    list: &[DuringConfig],
) -> (
    Vec<PlannedAction>,
    Vec<(String, crate::diagnostic::Loc, String)>,
) {
    let mut planned = Vec::new();
    let mut problems = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for entry in list {
        let mut ok = true;
        let mut problem = |message: String, loc, hint: &str| {
            problems.push((message, loc, hint.to_string()));
            ok = false;
        };
        if !names.insert(entry.name.value.clone()) {
            problem(
                format!("two `during` actions are named `{}`", entry.name.value),
                entry.name.loc,
                "give each action its own name",
            );
        }
        let duration =
            |text: &Sp<String>,
             what: &str,
             problem: &mut dyn FnMut(String, crate::diagnostic::Loc, &str)| {
                match crate::params::parse_duration(&text.value) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        problem(
                            format!("invalid `{what}`: {e}"),
                            text.loc,
                            "write a duration such as 5s or 1m30s",
                        );
                        None
                    }
                }
            };
        let at = duration(&entry.at, "at", &mut problem);
        let undo_at = entry
            .undo_at
            .as_ref()
            .and_then(|u| duration(u, "undo_at", &mut problem));
        let command_timeout = entry
            .command_timeout
            .as_ref()
            .and_then(|t| duration(t, "command_timeout", &mut problem))
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT);
        if entry.run.value.is_empty() || entry.run.value[0].trim().is_empty() {
            problem(
                "`run` needs a program".into(),
                entry.run.loc,
                "e.g. `run: [pipeline, sandbox, fault, stop-osds, --host, node2]`",
            );
        }
        if let Some(undo) = &entry.undo
            && (undo.value.is_empty() || undo.value[0].trim().is_empty())
        {
            problem(
                "`undo` needs a program".into(),
                undo.loc,
                "give the command that undoes `run`, or leave `undo` out",
            );
        }
        if let (Some(u), None) = (&entry.undo_at, &entry.undo) {
            problem(
                "`undo_at` without `undo`".into(),
                u.loc,
                "add the `undo` command, or remove `undo_at`",
            );
        }
        if let (Some(at), Some(undo_at), Some(loc)) =
            (at, undo_at, entry.undo_at.as_ref().map(|u| u.loc))
            && undo_at <= at
        {
            problem(
                "`undo_at` must come after `at`".into(),
                loc,
                "both count from the stage's start",
            );
        }
        if ok && let Some(at) = at {
            planned.push(PlannedAction {
                name: entry.name.value.clone(),
                at,
                run: entry.run.value.clone(),
                undo: entry.undo.as_ref().map(|u| u.value.clone()),
                undo_at,
                command_timeout,
            });
        }
    }
    (planned, problems)
}

/// One step of the timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Run(usize),
    Undo(usize),
}

/// Runs `body` (the stage) with `actions` (rendered) on a timeline beside
/// it; returns its result and what the timeline did. Work files go to `dir`.
pub fn beside<R>(
    actions: &[PlannedAction],
    dir: &Path,
    show: &(dyn Fn(&str) + Sync),
    body: impl FnOnce() -> R,
) -> (R, Vec<StageEvent>) {
    if actions.is_empty() {
        return (body(), Vec::new());
    }
    let start = Instant::now();
    let ended = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let timeline = scope.spawn(|| run_timeline(actions, dir, show, start, &ended));
        let result = body();
        *ended.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        ended.1.notify_all();
        let events = timeline.join().unwrap_or_else(|_| {
            vec![StageEvent {
                at_s: start.elapsed().as_secs_f64(),
                name: "during".into(),
                action: "run".into(),
                command: String::new(),
                duration_s: 0.0,
                outcome: "the timeline's thread panicked".into(),
                ok: false,
            }]
        });
        (result, events)
    })
}

fn run_timeline(
    actions: &[PlannedAction],
    dir: &Path,
    show: &(dyn Fn(&str) + Sync),
    start: Instant,
    ended: &(Mutex<bool>, Condvar),
) -> Vec<StageEvent> {
    let mut steps: Vec<(Duration, Step)> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        steps.push((a.at, Step::Run(i)));
        if let (Some(_), Some(at)) = (&a.undo, a.undo_at) {
            steps.push((at, Step::Undo(i)));
        }
    }
    steps.sort_by_key(|(at, _)| *at);
    let mut ran = vec![false; actions.len()];
    let mut undone = vec![false; actions.len()];
    let mut events = Vec::new();
    let mut stage_ended = false;
    for (at, step) in steps {
        if !stage_ended {
            stage_ended = wait_until(ended, start + at);
        }
        match step {
            Step::Run(i) if stage_ended => events.push(StageEvent {
                at_s: start.elapsed().as_secs_f64(),
                name: actions[i].name.clone(),
                action: "run".into(),
                command: String::new(),
                duration_s: 0.0,
                outcome: format!(
                    "not run: the stage ended before {}",
                    crate::exec::format_duration(actions[i].at)
                ),
                ok: true,
            }),
            Step::Run(i) => {
                show(&format!("during: {}", actions[i].name));
                events.push(command(&actions[i], "run", &actions[i].run, dir, start));
                ran[i] = true;
            }
            // A stage that ended early undoes below, right away.
            Step::Undo(_) if stage_ended => {}
            Step::Undo(i) if ran[i] => {
                if let Some(undo) = &actions[i].undo {
                    show(&format!("during: undo {}", actions[i].name));
                    events.push(command(&actions[i], "undo", undo, dir, start));
                    undone[i] = true;
                }
            }
            Step::Undo(_) => {}
        }
    }
    // Whatever ran and is not undone yet is undone when the stage ends.
    wait_until(ended, start + Duration::from_secs(u64::MAX / 4));
    for (i, a) in actions.iter().enumerate() {
        if ran[i]
            && !undone[i]
            && let Some(undo) = &a.undo
        {
            show(&format!("during: undo {}", a.name));
            events.push(command(a, "undo", undo, dir, start));
        }
    }
    events
}

/// Waits until `when` or the stage's end; `true` when the stage ended.
fn wait_until(ended: &(Mutex<bool>, Condvar), when: Instant) -> bool {
    let mut done = ended.0.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if *done {
            return true;
        }
        let left = when.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        done = ended
            .1
            .wait_timeout(done, left.min(Duration::from_secs(3600)))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Runs one command of an action. Never cancelled by Ctrl-C: an undo must
/// finish so the fault does not outlive the stage; each has its own limit.
fn command(
    action: &PlannedAction,
    which: &str,
    argv: &[String],
    dir: &Path,
    start: Instant,
) -> StageEvent {
    let at_s = start.elapsed().as_secs_f64();
    let slug: String = action
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let out = dir.join(format!("{slug}.{which}.stdout"));
    let err = dir.join(format!("{slug}.{which}.stderr"));
    let shown = shell_words(argv);
    let mut argv = argv.to_vec();
    if argv[0] == "pipeline"
        && let Ok(own) = std::env::current_exe()
    {
        argv[0] = own.to_string_lossy().into_owned();
    }
    let spec = CommandSpec::new(argv).timeout(action.command_timeout);
    let started = Instant::now();
    let finished = std::fs::create_dir_all(dir)
        .and_then(|()| run_to_files(&spec, &out, &err, None, &CancelToken::default()));
    let (ok, outcome) = match finished {
        Ok(f) if f.exit.success() => {
            // What it started on purpose (a daemon it restarted) is not an orphan to stop.
            let stdout = pipeline_stage_api::context::read_output_start(&out);
            crate::orphans::spare_named_in(&stdout);
            (true, "ok".to_string())
        }
        Ok(f) => {
            let tail = crate::terminal::last_line_of_file(&err);
            (false, format!("failed ({}): {tail}", f.exit))
        }
        Err(e) => (false, format!("could not start: {e}")),
    };
    StageEvent {
        at_s,
        name: action.name.clone(),
        action: which.into(),
        command: shown,
        duration_s: started.elapsed().as_secs_f64(),
        outcome,
        ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(
        name: &str,
        at_ms: u64,
        run: &[&str],
        undo: Option<(&[&str], Option<u64>)>,
    ) -> PlannedAction {
        PlannedAction {
            name: name.into(),
            at: Duration::from_millis(at_ms),
            run: run.iter().map(|s| s.to_string()).collect(),
            undo: undo.map(|(u, _)| u.iter().map(|s| s.to_string()).collect()),
            undo_at: undo.and_then(|(_, at)| at.map(Duration::from_millis)),
            command_timeout: Duration::from_secs(10),
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("pipeline-during-{name}-{}", std::process::id()))
    }

    #[test]
    fn run_then_undo_in_order_and_undo_when_the_stage_ends() {
        let dir = scratch("order");
        let flag = dir.join("flag");
        let flag_text = flag.to_str().unwrap().to_string();
        let actions = vec![
            action(
                "touch",
                50,
                &["touch", &flag_text],
                Some((&["rm", &flag_text], Some(300))),
            ),
            action("late undo", 100, &["true"], Some((&["true"], None))),
        ];
        let (seen, events) = beside(&actions, &dir, &|_| {}, || {
            std::thread::sleep(Duration::from_millis(200));
            let during = flag.exists();
            std::thread::sleep(Duration::from_millis(250));
            (during, flag.exists())
        });
        assert_eq!(seen, (true, false));
        let steps: Vec<(&str, &str, bool)> = events
            .iter()
            .map(|e| (e.name.as_str(), e.action.as_str(), e.ok))
            .collect();
        assert_eq!(
            steps,
            [
                ("touch", "run", true),
                ("late undo", "run", true),
                ("touch", "undo", true),
                ("late undo", "undo", true)
            ]
        );
        assert!(
            events[0].at_s >= 0.05 && events[2].at_s >= 0.3,
            "{events:?}"
        );
        // The undo without a time came at the stage's end (~0.45 s).
        assert!(events[3].at_s >= 0.4, "{events:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stage_that_ends_early_undoes_at_once_and_skips_what_did_not_come() {
        let dir = scratch("early");
        let actions = vec![
            action("first", 10, &["true"], Some((&["true"], Some(5_000)))),
            action("never", 5_000, &["false"], None),
        ];
        let started = Instant::now();
        let ((), events) = beside(&actions, &dir, &|_| {}, || {
            std::thread::sleep(Duration::from_millis(100))
        });
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "waited for undo_at"
        );
        let steps: Vec<(&str, &str, &str)> = events
            .iter()
            .map(|e| (e.name.as_str(), e.action.as_str(), e.outcome.as_str()))
            .collect();
        assert_eq!(steps[0], ("first", "run", "ok"));
        assert_eq!(steps[1].0, "never");
        assert!(steps[1].2.starts_with("not run"), "{steps:?}");
        assert_eq!(steps[2], ("first", "undo", "ok"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failing_command_is_an_event_that_is_not_ok() {
        let dir = scratch("fail");
        let actions = vec![action(
            "broken",
            0,
            &["sh", "-c", "echo nope >&2; exit 3"],
            None,
        )];
        let ((), events) = beside(&actions, &dir, &|_| {}, || {
            std::thread::sleep(Duration::from_millis(300))
        });
        assert_eq!(events.len(), 1);
        assert!(!events[0].ok);
        assert_eq!(events[0].outcome, "failed (exit code 3): nope");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
