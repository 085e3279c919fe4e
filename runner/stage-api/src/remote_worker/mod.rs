//! Remote workers: a stage's load run by `pipeline worker` processes on its
//! `on:` client hosts, driven by the runner over SSH and started together.
//! Any stage whose load must come from several hosts at once can use it;
//! today `s3-bench` and `swift-bench` do.
//!
//! - [`protocol`]: the messages each way (version [`protocol::PROTOCOL`],
//!   written down in docs/worker-protocol.md);
//! - [`binary`]: the `pipeline` binary on each host (copied there, checked
//!   by sha256, unless the inventory names one);
//! - [`session`]: the runner's half, which follows every worker from its
//!   start to its end (handshake, clocks, the synchronized start, lost hosts);
//! - [`clock_check`]: each host's clock against this machine's, over its
//!   worker's session;
//! - [`done_check`]: a worker's figures checked like a plugin's;
//! - [`worker`]: the worker's half, which runs the job by the
//!   [`WorkerKind`] it names.
//!
//! Why here, in the stage API, and not in the engine or beside the stages:
//! a stage uses it from its `run`, and stages are written against this
//! crate, not the engine (which they cannot reach); everything it needs is
//! already here (the [`StageContext`](crate::context::StageContext)'s
//! commands on hosts, the clock estimate, the start report). What is
//! particular to a stage stays with it: the kinds of load a worker runs are
//! native stages, so their list is `pipeline_native::worker_kinds()`, handed
//! to [`serve`] by `pipeline worker`, and what the figures of several hosts
//! make together is the stage's (for S3 and Swift,
//! `plugins/native/src/objgw/clients.rs`).

pub mod binary;
pub mod clock_check;
pub mod done_check;
pub mod protocol;
pub mod session;
pub mod worker;

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::exec::CommandSpec;
use crate::hosts::Host;
use crate::stage::Action;

pub use session::{Done, End, HostRun, Ran, Rules};
pub use worker::{WorkerKind, WorkerLink, serve};

/// What a client host lost mid-run does to the stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LostHosts {
    /// The stage fails, naming the host; the other workers are stopped.
    #[default]
    Fail,
    /// The stage reports the other hosts, marked as without the lost one.
    Exclude,
}

/// Whether a stage with these `on:` targets runs its load in this process
/// (no `on:`, or `on: local`) rather than in workers.
pub fn runs_here(targets: &[Host]) -> bool {
    targets.len() <= 1 && targets.iter().all(Host::is_local)
}

/// What `pipeline plan` shows before the load's own actions: where each
/// worker runs and from which binary, and the clock check. `ready` is what
/// the workers are once they may start (`prefilled`).
pub fn plan_notes(targets: &[Host], ready: &str) -> Vec<Action> {
    let mut actions: Vec<Action> = targets
        .iter()
        .map(|host| {
            Action::note(format!(
                "on {}: `pipeline worker` ({}); its job, keys included, on stdin",
                host.describe(),
                binary::describe(host)
            ))
        })
        .collect();
    actions.push(Action::note(clock_check::plan_note(ready)));
    actions
}

/// A worker's text as it may be shown: one line, no control characters, bounded.
pub fn shown(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(2000)
        .collect();
    if text.chars().count() > 2000 {
        s.push('…');
    }
    s
}

/// `sh -c SCRIPT`, bounded.
fn sh(script: &str, timeout_s: u64) -> CommandSpec {
    CommandSpec::new(vec!["sh".into(), "-c".into(), script.to_string()])
        .timeout(Duration::from_secs(timeout_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_text_is_one_bounded_line() {
        assert_eq!(shown("a\nb\x1b[31m"), "a b [31m");
        assert_eq!(shown(&"x".repeat(3000)).chars().count(), 2001);
    }
}
