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
/// `POOL/RUN_NAME`: objects written by `rados bench --run-name RUN_NAME`.
pub const BENCH_OBJECTS: &str = "rados-bench-objects";

/// A Ceph CLI call (not a benchmark) with the cluster's command timeout.
pub fn admin(conn: &CephConnection, program: &str, args: &[&str]) -> CommandSpec {
    CommandSpec::new(conn.argv(program, args))
        .timeout(Duration::from_secs_f64(conn.command_timeout))
}

/// Runs an admin command; a non-zero exit is an error.
pub fn admin_ok(
    ctx: &mut StageContext,
    label: &str,
    program: &str,
    args: &[&str],
) -> Result<CommandOutput, StageError> {
    let spec = admin(&ctx.ceph, program, args);
    ctx.run_ok(label, &spec)
}

/// Names of the cluster's pools.
pub fn pool_names(ctx: &mut StageContext) -> Result<Vec<String>, StageError> {
    let out = admin_ok(
        ctx,
        "pool-ls",
        "ceph",
        &["osd", "pool", "ls", "--format", "json"],
    )?;
    serde_json::from_str::<Vec<String>>(out.stdout.trim())
        .map_err(|e| StageError::failed(format!("unexpected `ceph osd pool ls` output: {e}")))
}

/// The unique `rados bench --run-name` of this run in this pool: reads
/// (seq/rand) find the objects a write of the same run left, and cleanup
/// removes exactly those (`rados cleanup --run-name`), not another run's.
pub fn bench_run_name(run_id: &str) -> String {
    format!("pipeline-{run_id}")
}
