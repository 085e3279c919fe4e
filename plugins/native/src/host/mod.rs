//! Host baselines: stages that measure the machines under a cluster rather
//! than the cluster (page cache dropped, raw disk throughput with dd and fio,
//! network throughput with iperf3). They run on the hosts named by the
//! stage's `on:` (over SSH for inventory hosts, directly for `local`).

pub mod disk_baseline;
pub mod drop_caches;
pub mod iperf3;

use pipeline_stage_api::context::CommandOutput;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::hosts::Host;
use pipeline_stage_api::stage::StageError;

/// `sh -c LINE` (extra words become `$0`, `$1`, ...: pass paths that way,
/// never spliced into LINE).
pub(crate) fn shell(line: &str, args: &[&str]) -> CommandSpec {
    let mut argv = vec!["sh".to_string(), "-c".to_string(), line.to_string()];
    if !args.is_empty() {
        argv.push("sh".into());
        argv.extend(args.iter().map(|a| a.to_string()));
    }
    CommandSpec::new(argv)
}

/// The error for a command on `host` that ran and did not succeed. (SSH
/// failures and programs missing on the host are errors of `ctx.run` itself,
/// explained by the engine.)
pub(crate) fn command_error(host: &Host, spec: &CommandSpec, out: &CommandOutput) -> StageError {
    StageError::CommandFailed {
        command: format!("{} (on {})", spec.display(), host.name),
        status: out.exit.to_string(),
        stderr_tail: out.tail(),
    }
}

/// Fails unless the command succeeded.
pub(crate) fn ensure_ok(
    host: &Host,
    spec: &CommandSpec,
    out: CommandOutput,
) -> Result<CommandOutput, StageError> {
    if out.success() {
        Ok(out)
    } else {
        Err(command_error(host, spec, &out))
    }
}

/// `a.b-c/d` -> `a.b-c_d`: a host name or path as part of a label or file name.
pub(crate) fn slug(text: &str) -> String {
    text.trim_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_passes_arguments_as_words() {
        let spec = shell("rm -f -- \"$1\"", &["/tmp/a b"]);
        assert_eq!(spec.argv, ["sh", "-c", "rm -f -- \"$1\"", "sh", "/tmp/a b"]);
        assert_eq!(shell("sync", &[]).argv, ["sh", "-c", "sync"]);
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("/dev/sdb"), "dev_sdb");
        assert_eq!(slug("node-1.lab"), "node-1.lab");
    }
}
