//! Stages that talk to a Ceph cluster through its CLI tools (`ceph`, `rados`,
//! `rbd`), with the connection from the pipeline's `cluster:` section. Every
//! call has a timeout: a full cluster makes them hang forever.

pub mod cleanup;
pub mod health;
pub mod info;
pub mod pool;
pub mod rados_bench;
pub mod rbd_bench;

use std::time::Duration;

use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::context::{CommandOutput, StageContext};
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::stage::StageError;

/// Ledger kinds: what a run created, so cleanup removes exactly that.
pub const POOL: &str = "pool";
pub const EC_PROFILE: &str = "erasure-code-profile";
pub const IMAGE: &str = "rbd-image";
/// `POOL/benchmark_data_HOST_PID`: the objects one `rados bench` write
/// process stored (`PREFIX_object0`, `PREFIX_object1`, ...). Cleanup removes
/// exactly the objects with that prefix, never `rados cleanup`'s guesses.
pub const BENCH_OBJECTS: &str = "rados-bench-objects";

/// `rados-bench-metadata`, `POOL/RUN_NAME`: the object in which `rados bench`
/// stores a write's parameters under the run's own `--run-name`.
pub const BENCH_METADATA: &str = "rados-bench-metadata";

/// The name `host` gives what it creates (a rados bench run name, an rbd
/// image) among the stage's `targets`: on this machine alone, `name`
/// itself; otherwise `name-HOST`, so that hosts running at once never
/// share an object or an image, and a later stage on the same hosts finds
/// what its own host made.
pub(crate) fn per_host_name(
    name: &str,
    host: &pipeline_stage_api::hosts::Host,
    targets: &[pipeline_stage_api::hosts::Host],
) -> String {
    if host.is_local() && only_here(targets) {
        name.to_string()
    } else {
        format!(
            "{name}-{}",
            pipeline_stage_api::context::sanitize(&host.name)
        )
    }
}

/// Whether the stage's hosts are this machine alone.
pub(crate) fn only_here(targets: &[pipeline_stage_api::hosts::Host]) -> bool {
    targets
        .iter()
        .all(pipeline_stage_api::hosts::Host::is_local)
        && targets.len() <= 1
}

/// A Ceph CLI call (not a benchmark) with the cluster's command timeout, and
/// the same limit, a little shorter, as the client's own operation timeouts
/// (`rados_osd_op_timeout`, `rados_mon_op_timeout`; both default to "wait
/// forever"). An operation on a PG that is not active then fails with
/// ETIMEDOUT and a message, instead of hanging until the process is killed.
pub fn admin(conn: &CephConnection, program: &str, args: &[&str]) -> CommandSpec {
    let limit = Duration::from_secs_f64(conn.command_timeout);
    let op_timeout = client_op_timeout(limit).to_string();
    let mut all: Vec<&str> = vec![
        "--rados-osd-op-timeout",
        &op_timeout,
        "--rados-mon-op-timeout",
        &op_timeout,
    ];
    all.extend_from_slice(args);
    CommandSpec::new(conn.argv(program, &all)).timeout(limit)
}

/// Whole seconds, shorter than the kill limit so the client gives up first.
fn client_op_timeout(limit: Duration) -> u64 {
    let secs = limit.as_secs_f64();
    (secs - (secs * 0.2).clamp(1.0, 10.0)).floor().max(1.0) as u64
}

/// Runs an admin command; a non-zero exit is an error. When it timed out
/// (killed, or the client's own ETIMEDOUT), the cluster's state is saved
/// first (see [`save_diagnostics`]).
pub fn admin_ok(
    ctx: &mut StageContext,
    label: &str,
    program: &str,
    args: &[&str],
) -> Result<CommandOutput, StageError> {
    let spec = admin(&ctx.ceph, program, args);
    let pool = pool_argument(args);
    match run_admin(ctx, label, &spec, pool.as_deref())? {
        out if out.success() => Ok(out),
        out if timed_out_inside(&out) => Err(StageError::failed(format!(
            "`{}`: the cluster did not answer within {} (monitors or OSDs unreachable?); its state is in diagnostics-{label}.txt: {}",
            spec.display(),
            pipeline_stage_api::exec::format_duration(Duration::from_secs_f64(
                ctx.ceph.command_timeout
            )),
            out.tail()
        ))),
        out => Err(StageError::CommandFailed {
            command: spec.display(),
            status: out.exit.to_string(),
            stderr_tail: out.tail(),
        }),
    }
}

/// Runs an admin command (a non-zero exit is returned, not an error) and
/// saves the cluster's state when it timed out, so the cause is on record.
pub fn run_admin(
    ctx: &mut StageContext,
    label: &str,
    spec: &CommandSpec,
    pool: Option<&str>,
) -> Result<CommandOutput, StageError> {
    match ctx.run(label, spec) {
        Err(StageError::Timeout(what)) => {
            save_diagnostics(ctx, label, pool);
            Err(StageError::Timeout(what))
        }
        Ok(out) if timed_out_inside(&out) => {
            save_diagnostics(ctx, label, pool);
            Ok(out)
        }
        other => other,
    }
}

/// The client gave up on an operation (`rados_osd_op_timeout`): Ceph's tools
/// print the errno as "(110) Connection timed out".
pub fn timed_out_inside(out: &CommandOutput) -> bool {
    !out.success() && (out.stderr.contains("(110)") || out.stderr.contains("ETIMEDOUT"))
}

/// Saves `ceph -s` and, for a pool, `ceph pg ls-by-pool POOL` and the pool's
/// line of `ceph osd pool ls detail` as an artifact `diagnostics-LABEL.txt`:
/// why a command timed out (inactive PGs, a full OSD, a lost monitor) must be
/// on record, not guessed afterwards. Best effort: each call has its own
/// short limit, and a failure to collect is written into the file.
pub fn save_diagnostics(ctx: &mut StageContext, label: &str, pool: Option<&str>) {
    let mut calls: Vec<Vec<&str>> = vec![vec!["-s"], vec!["health", "detail"]];
    if let Some(pool) = pool {
        calls.push(vec!["pg", "ls-by-pool", pool]);
        calls.push(vec!["osd", "pool", "ls", "detail"]);
    }
    let mut text = String::new();
    // Each call under the client's own operation timeouts and at most 20 s;
    // when the first gets no answer (a lost monitor), the rest would not
    // either: they are skipped rather than waited for.
    let mut conn = ctx.ceph.clone();
    conn.command_timeout = conn.command_timeout.min(20.0);
    for (i, args) in calls.iter().enumerate() {
        let spec = admin(&conn, "ceph", args);
        text.push_str(&format!("$ {}\n", spec.display()));
        match ctx.run_tidy_on(&ctx.host.clone(), &format!("diagnose-{}", args[0]), &spec) {
            Ok(out) => {
                text.push_str(&out.stdout);
                text.push_str(&out.stderr);
                text.push_str(&format!("[{}]\n\n", out.exit));
                if i == 0 && !out.success() {
                    text.push_str("[no answer: the other diagnostics were skipped]\n");
                    break;
                }
            }
            Err(e) => {
                text.push_str(&format!("[could not run: {e}]\n\n"));
                if i == 0 {
                    break;
                }
            }
        }
    }
    let _ = ctx.write_artifact(&format!("diagnostics-{label}.txt"), text.as_bytes());
}

/// The pool a command works on, for diagnostics: `-p POOL`, `--pool POOL`,
/// or the word after `pool create|delete|set|get`.
fn pool_argument(args: &[&str]) -> Option<String> {
    let after = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .and_then(|i| args.get(i + 1))
            .map(|p| p.to_string())
    };
    after("-p").or_else(|| after("--pool")).or_else(|| {
        let i = args.iter().position(|a| *a == "pool")?;
        matches!(
            args.get(i + 1).copied(),
            Some("create" | "delete" | "set" | "get" | "application")
        )
        .then(|| {
            let skip = usize::from(args.get(i + 1) == Some(&"application"));
            args.get(i + 2 + skip).map(|p| p.to_string())
        })
        .flatten()
    })
}

/// Names of the cluster's pools.
pub fn pool_names(ctx: &mut StageContext) -> Result<Vec<String>, StageError> {
    let out = admin_ok(
        ctx,
        "pool-ls",
        "ceph",
        &["osd", "pool", "ls", "--format", "json"],
    )?;
    serde_json::from_str::<Vec<String>>(out.whole_stdout("ceph osd pool ls --format json")?.trim())
        .map_err(|e| StageError::failed(format!("unexpected `ceph osd pool ls` output: {e}")))
}

/// The unique `rados bench --run-name` of this run in this pool: reads
/// (seq/rand) find the objects a write of the same run left (rados keeps the
/// write's parameters in an object of that name).
pub fn bench_run_name(run_id: &str) -> String {
    format!("pipeline-{run_id}")
}
