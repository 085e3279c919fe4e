//! `drop-caches`: `sync`, then drop the page cache, dentries and inodes
//! (`echo 3 > /proc/sys/vm/drop_caches`) on each target host, so the next
//! measurement starts cold.
//!
//! Needs root and a writable `/proc/sys` (not so in most containers). Where it
//! is refused the stage fails and says why, or — with `if_not_permitted: skip`
//! — is recorded as skipped with the reason. It never reports a drop that did
//! not happen.

use pipeline_model::unit;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{command_error, shell};

pub struct DropCaches;

/// `with:` of a `drop-caches` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where dropping caches is refused (not root, read-only /proc/sys): fail the stage, or record it as skipped with the reason.
    #[serde(default)]
    pub if_not_permitted: IfNotPermitted,
    /// Kill sync after this long (a host writing back gigabytes takes a while).
    #[serde(default = "ten_minutes")]
    pub command_timeout: Seconds,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IfNotPermitted {
    #[default]
    Fail,
    Skip,
}

fn ten_minutes() -> Seconds {
    Seconds::secs(600)
}

/// Each host's own duration: does not combine across hosts.
pub const DURATION: MetricDecl = MetricDecl::info(
    "duration",
    unit::SECONDS,
    "Time sync and the drop took on the host (for SSH hosts, with the connection's overhead).",
);

const LINE: &str = "sync && echo 3 > /proc/sys/vm/drop_caches";

fn spec(config: &Config) -> CommandSpec {
    shell(LINE, &[]).timeout(config.command_timeout.0)
}

/// The shell's message when the kernel refused the write (not root, or a
/// read-only /proc/sys as in containers), e.g.
/// `sh: 1: cannot create /proc/sys/vm/drop_caches: Permission denied`.
fn refusal(stderr: &str) -> Option<&str> {
    stderr.lines().map(str::trim).find(|l| {
        l.contains("drop_caches")
            && (l.contains("Permission denied")
                || l.contains("Read-only file system")
                || l.contains("Operation not permitted"))
    })
}

impl TypedStage for DropCaches {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "drop-caches",
            summary: "sync, then drop the page cache on each host (echo 3 > /proc/sys/vm/drop_caches); needs root.",
            per_host: true,
            requires: vec!["sync"],
            outputs: Vec::new(),
            metrics: vec![DURATION],
        }
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        vec![Action::command(
            "flush dirty pages, then drop the page cache, dentries and inodes",
            spec(config).argv,
        )]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let host = ctx.host.clone();
        let spec = spec(config);
        let out = ctx.run("drop-caches", &spec)?;
        if out.success() {
            return Ok(StageOutput {
                metrics: vec![DURATION.value(out.elapsed.as_secs_f64())],
                ..Default::default()
            });
        }
        // (An SSH failure, which also says "Permission denied (publickey)",
        // is an error of `ctx.run` and never gets here.)
        let Some(line) = refusal(&out.stderr) else {
            return Err(command_error(&host, &spec, &out));
        };
        // Per-host runs: the engine prefixes the host's name.
        let reason = format!(
            "dropping caches is not permitted ({line}); it needs root and a writable /proc/sys"
        );
        if config.if_not_permitted == IfNotPermitted::Skip {
            Ok(StageOutput {
                skipped: Some(reason),
                ..Default::default()
            })
        } else {
            Err(StageError::failed(format!(
                "{reason}; set `if_not_permitted: skip` to go on without it"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_the_kernel_refusing() {
        // dash as non-root, and with /proc/sys/vm bind-mounted read-only (measured here).
        for stderr in [
            "sh: 1: cannot create /proc/sys/vm/drop_caches: Permission denied\n",
            "sh: 1: cannot create /proc/sys/vm/drop_caches: Read-only file system\n",
            "bash: line 1: /proc/sys/vm/drop_caches: Permission denied\n",
        ] {
            assert!(refusal(stderr).is_some(), "{stderr}");
        }
        assert_eq!(
            refusal("root@127.0.0.2: Permission denied (publickey).\n"),
            None
        );
        assert_eq!(refusal("sync: error syncing '/': Input/output error"), None);
    }

    #[test]
    fn describes_itself_as_per_host() {
        use pipeline_stage_api::stage::Stage;
        use pipeline_stage_api::typed::Typed;
        use std::time::Duration;

        let d = Typed(DropCaches).describe();
        assert!(d.per_host);
        assert_eq!(d.requires, ["sync"]);
        let config: Config =
            serde_json::from_value(serde_json::json!({"command_timeout": 60})).unwrap();
        assert_eq!(config.if_not_permitted, IfNotPermitted::Fail);
        assert_eq!(spec(&config).argv, ["sh", "-c", LINE]);
        assert_eq!(spec(&config).timeout, Some(Duration::from_secs(60)));
    }
}
