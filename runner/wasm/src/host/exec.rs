//! `exec`: a plugin runs a program through the runner, the way native stages
//! do, and only a program the pipeline grants.
//!
//! Matching: a grant with a `/` allows exactly that path. A bare name
//! (`ceph`) allows `ceph` looked up on the runner's PATH, or an absolute path
//! whose file name is `ceph`, except one inside the run folder (the only
//! place a plugin can write files). The plugin cannot change PATH or the
//! dynamic loader's variables (`LD_*`): both would change which program runs.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use pipeline_stage_api::context::CommandOutput;
use pipeline_stage_api::exec::{CommandSpec, shell_words};
use pipeline_stage_api::stage::StageError;

use super::{HostError, HostState, Request};

/// What a guest asks to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub label: Option<String>,
}

/// Whether `grants` allows `program` (argv[0]).
pub fn program_granted(program: &str, grants: &[String], run_dir: Option<&Path>) -> bool {
    grants.iter().any(|g| {
        if g.contains('/') {
            return g == program;
        }
        if program == g {
            return true;
        }
        let path = Path::new(program);
        path.is_absolute()
            && path.file_name().and_then(|n| n.to_str()) == Some(g.as_str())
            && !run_dir.is_some_and(|d| path.starts_with(d))
    })
}

fn forbidden_env(name: &str) -> bool {
    name == "PATH" || name.starts_with("LD_") || name.is_empty() || name.contains('=')
}

impl HostState {
    pub fn exec(&mut self, req: ExecRequest) -> Result<CommandOutput, HostError> {
        let Some(program) = req.argv.first().cloned() else {
            return Err(HostError::Failed("empty command".into()));
        };
        let shown = shell_words(&req.argv);
        let granted = self.setup.grants.exec.clone();
        self.require("exec", !granted.is_empty(), &format!("run `{shown}`"))?;
        let run_dir = self
            .setup
            .work_dir
            .as_deref()
            .and_then(|w| w.parent()?.parent());
        if !program_granted(&program, &granted, run_dir) {
            let message = format!(
                "plugin `{}` tried to run `{program}`, which the pipeline does not grant (grants.exec: [{}])",
                self.plugin,
                granted.join(", ")
            );
            return Err(self.refuse(message));
        }
        if let Some((name, _)) = req.env.iter().find(|(k, _)| forbidden_env(k)) {
            let message = format!(
                "plugin `{}` tried to set `{name}` for `{program}`; plugins may not change PATH or LD_* variables",
                self.plugin
            );
            return Err(self.refuse(message));
        }
        let mut spec = CommandSpec::new(req.argv.clone());
        spec.env = req.env;
        spec.timeout = req.timeout;
        let label = req.label.unwrap_or_else(|| {
            Path::new(&program)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("command")
                .to_string()
        });
        let Some(tx) = self.setup.requests.clone() else {
            return Err(HostError::Failed(
                "no stage context to run commands in".into(),
            ));
        };
        self.log("exec", &shown);
        self.timed(|_| {
            let (reply_tx, reply_rx) = mpsc::channel();
            tx.send(Request::Exec {
                label,
                spec,
                reply: reply_tx,
            })
            .map_err(|_| HostError::Failed("the stage is gone".into()))?;
            match reply_rx.recv() {
                Ok(Ok(out)) => Ok(out),
                Ok(Err(StageError::Cancelled)) => Err(HostError::Cancelled),
                Ok(Err(StageError::Timeout(m))) => {
                    Err(HostError::Timeout(format!("timed out after {m}")))
                }
                Ok(Err(e)) => Err(HostError::Failed(e.to_string())),
                Err(_) => Err(HostError::Failed("the stage is gone".into())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_by_name_and_path() {
        let g = vec!["ceph".to_string(), "/opt/bin/fio".to_string()];
        assert!(program_granted("ceph", &g, None));
        assert!(program_granted("/usr/bin/ceph", &g, None));
        assert!(!program_granted("./ceph", &g, None));
        assert!(!program_granted("rados", &g, None));
        assert!(!program_granted("ceph-mon", &g, None));
        assert!(program_granted("/opt/bin/fio", &g, None));
        assert!(!program_granted("fio", &g, None));
        let run = Path::new("/runs/r1");
        assert!(!program_granted("/runs/r1/stages/x/ceph", &g, Some(run)));
    }

    #[test]
    fn env_that_changes_the_program_is_forbidden() {
        assert!(forbidden_env("PATH"));
        assert!(forbidden_env("LD_PRELOAD"));
        assert!(!forbidden_env("CEPH_ARGS"));
    }
}
