//! `exec`: a plugin runs a program through the runner, the way native stages
//! do, and only a program the pipeline grants.
//!
//! Matching: a grant with a `/` allows exactly that path. A bare name
//! (`ceph`) allows `ceph` looked up on the runner's PATH, or an absolute path
//! whose file name is `ceph`, except one inside the run folder (where a
//! plugin and its commands write files), however the path names it (see
//! [`super::program`]).
//!
//! Environment: an allowlist. A granted program starts from a minimal
//! environment (see [`MINIMAL_ENV`]), plus the variables the plugin sets,
//! each of which the pipeline must grant by name (`grants.env`). A denylist
//! would always miss one: `BASH_ENV`, `PYTHONPATH`, `PERL5OPT`, `GCONV_PATH`
//! ... each turn a grant of one program into arbitrary code.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use pipeline_stage_api::context::CommandOutput;
#[cfg(doc)]
use pipeline_stage_api::exec::MINIMAL_ENV;
use pipeline_stage_api::exec::{CommandSpec, Environment, shell_words};
use pipeline_stage_api::grants::env_grant_problem;
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

/// Whether `grants` names `program` (argv[0]); where it really is is
/// checked apart ([`super::program::outside_run_dir`]).
pub fn name_granted(program: &str, grants: &[String]) -> bool {
    grants.iter().any(|g| {
        if g.contains('/') {
            return g == program;
        }
        if program == g {
            return true;
        }
        let path = Path::new(program);
        path.is_absolute() && path.file_name().and_then(|n| n.to_str()) == Some(g.as_str())
    })
}

/// Whether `grants` allows `program`: named, and not inside the run folder.
pub fn program_granted(program: &str, grants: &[String], run_dir: Option<&Path>) -> bool {
    name_granted(program, grants)
        && run_dir.is_none_or(|d| super::program::outside_run_dir(program, d).is_ok())
}

/// Why the plugin may not set `name` (`None`: it may).
fn env_refusal(name: &str, granted: &[String]) -> Option<String> {
    if let Some(problem) = env_grant_problem(name) {
        return Some(problem);
    }
    (!granted.iter().any(|g| g == name)).then(|| {
        format!(
            "the pipeline does not grant it (grants.env: [{}])",
            granted.join(", ")
        )
    })
}

impl HostState {
    pub fn exec(&mut self, req: ExecRequest) -> Result<CommandOutput, HostError> {
        let Some(program) = req.argv.first().cloned() else {
            return Err(HostError::Failed("empty command".into()));
        };
        let shown = shell_words(&req.argv);
        let granted = self.setup.grants.exec.clone();
        self.require("exec", !granted.is_empty(), &format!("run `{shown}`"))?;
        if !name_granted(&program, &granted) {
            let message = format!(
                "plugin `{}` tried to run `{program}`, which the pipeline does not grant (grants.exec: [{}])",
                self.plugin,
                granted.join(", ")
            );
            return Err(self.refuse(message));
        }
        if let Some(run_dir) = self.setup.run_dir.clone()
            && let Err(why) = super::program::outside_run_dir(&program, &run_dir)
        {
            let message = format!(
                "plugin `{}` tried to run `{program}`: {why}; a program there could have been written by the plugin, so it never runs",
                self.plugin
            );
            return Err(self.refuse(message));
        }
        let env_granted = &self.setup.grants.env;
        if let Some((name, why)) = req
            .env
            .iter()
            .find_map(|(k, _)| env_refusal(k, env_granted).map(|why| (k, why)))
        {
            let message = format!(
                "plugin `{}` tried to set the environment variable `{}` for `{program}`: {why}",
                self.plugin,
                name.escape_debug()
            );
            return Err(self.refuse(message));
        }
        let mut spec = CommandSpec::new(req.argv.clone());
        spec.env = req.env;
        spec.environment = Environment::Minimal;
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
        assert!(!program_granted(
            "/tmp/../runs/r1/stages/x/ceph",
            &g,
            Some(run)
        ));
    }

    #[test]
    fn only_granted_valid_names_may_be_set() {
        let granted = vec!["CEPH_ARGS".to_string(), "PATH".to_string()];
        assert_eq!(env_refusal("CEPH_ARGS", &granted), None);
        // Granted or not, these decide which program runs.
        assert!(env_refusal("PATH", &granted).is_some());
        assert!(env_refusal("LD_PRELOAD", &granted).is_some());
        for name in [
            "BASH_ENV",
            "PYTHONPATH",
            "BASH_FUNC_x%%",
            "-S",
            "",
            "A=B",
            "1X",
            "IFS",
        ] {
            assert!(env_refusal(name, &granted).is_some(), "{name}");
        }
    }
}
