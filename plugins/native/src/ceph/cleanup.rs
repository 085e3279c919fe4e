//! `ceph-cleanup`: remove what THIS run created (benchmark objects, images,
//! pools, EC profiles, and object-gateway buckets a killed `s3-bench` left),
//! read from the run's ledger, and nothing else. Every
//! removal is attempted, each under its own command timeout, even when an
//! earlier one failed or timed out; each outcome is a note, and the stage
//! fails naming every removal that did not happen (a pool the cluster forbids
//! deleting, EPERM, is reported with what is left inside it). This run's pools
//! go first; what a pool that is left still holds is then removed one by one.
//!
//! Benchmark objects are removed by listing the pool and deleting exactly the
//! names `PREFIX_objectN` of the prefixes this run's writes recorded, never
//! with `rados cleanup`, which without its metadata object deletes every
//! `benchmark_data_HOST*` object in the pool, other runs' included.

use std::collections::BTreeMap;

use pipeline_stage_api::context::{CommandOutput, StageContext};
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{BENCH_METADATA, BENCH_OBJECTS, EC_PROFILE, IMAGE, POOL, admin, run_admin};
use crate::objgw::{S3_BUCKET, S3_OBJECTS};

/// Objects per `rados rm` call (one argv; far below ARG_MAX).
const RM_BATCH: usize = 200;

pub struct CephCleanup;

/// `with:` of a `ceph-cleanup` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Keep the pools this run created (still removes benchmark objects and images).
    #[serde(default)]
    pub keep_pools: bool,
}

impl TypedStage for CephCleanup {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "ceph-cleanup",
            summary: "Remove the objects, images, pools and EC profiles this run created; nothing else.",
            per_host: true,
            requires: vec!["ceph", "rados", "rbd"],
            outputs: Vec::new(),
            metrics: Vec::new(),
        }
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let mut actions = vec![
            Action::command(
                "for each pool this run's rados bench writes used: list it",
                ctx.ceph.argv("rados", &["-p", "POOL", "ls"]),
            ),
            Action::command(
                "remove the objects named PREFIX_objectN of each write's prefix, and its metadata object",
                ctx.ceph.argv("rados", &["-p", "POOL", "rm", "OBJECT..."]),
            )
            .destructive(),
            Action::command(
                "for each image this run created",
                ctx.ceph.argv("rbd", &["rm", "POOL/IMAGE"]),
            )
            .destructive(),
        ];
        actions.push(
            Action::command(
                "for each bucket an s3-bench stage of this run created and did not remove (it was killed)",
                ctx.ceph.argv(
                    "radosgw-admin",
                    &["bucket", "rm", "--bucket=BUCKET", "--purge-objects"],
                ),
            )
            .destructive(),
        );
        if !config.keep_pools {
            actions.push(
                Action::command(
                    "for each pool this run created",
                    ctx.ceph.argv(
                        "ceph",
                        &[
                            "osd",
                            "pool",
                            "delete",
                            "POOL",
                            "POOL",
                            "--yes-i-really-really-mean-it",
                        ],
                    ),
                )
                .destructive(),
            );
            actions.push(
                Action::command(
                    "for each EC profile this run created",
                    ctx.ceph
                        .argv("ceph", &["osd", "erasure-code-profile", "rm", "PROFILE"]),
                )
                .destructive(),
            );
        }
        actions.push(Action::note(
            "pools, images and objects the run did not create are never touched",
        ));
        actions
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let mut outcomes = Outcomes::default();
        // This run's pools first: deleting one removes what is inside at
        // once (a killed write can leave 10^4 objects). What a pool that
        // could not be deleted still holds is then removed one by one.
        let mut kept_pools = Vec::new();
        if !config.keep_pools {
            for pool in ctx.created(POOL) {
                if let Err(failure) = delete_pool(ctx, &pool.name, &mut outcomes)? {
                    kept_pools.push((pool.name, failure));
                }
            }
        }
        remove_bench_objects(ctx, &mut outcomes)?;
        remove_bench_metadata(ctx, &mut outcomes)?;
        remove_images(ctx, &mut outcomes)?;
        remove_buckets(ctx, &mut outcomes)?;
        for (pool, failure) in kept_pools {
            report_kept_pool(ctx, &pool, &failure, &mut outcomes);
        }
        if !config.keep_pools {
            remove_ec_profiles(ctx, &mut outcomes)?;
        }
        outcomes.into_result()
    }
}

/// What happened to each removal: notes for the report, failures for the
/// error (removals inside a pool first, then the pool's own).
#[derive(Default)]
struct Outcomes {
    notes: Vec<String>,
    failures: Vec<String>,
    /// (pool, failure) for removals inside a pool.
    in_pool: Vec<(String, String)>,
}

impl Outcomes {
    fn failed_in(&mut self, pool: &str, failure: String) {
        self.in_pool.push((pool.to_string(), failure));
    }

    fn into_result(mut self) -> Result<StageOutput, StageError> {
        let pending: Vec<String> = self.in_pool.drain(..).map(|(_, f)| f).collect();
        self.failures.splice(0..0, pending);
        if self.failures.is_empty() {
            Ok(StageOutput {
                notes: self.notes,
                ..Default::default()
            })
        } else {
            let mut text = self.failures.join("; ");
            if !self.notes.is_empty() {
                text.push_str(&format!(" (done: {})", self.notes.join("; ")));
            }
            Err(StageError::failed(text))
        }
    }
}

/// Runs one removal under its own command timeout. A timeout or a failure to
/// start is that removal's outcome, not the end of the cleanup; only Ctrl-C
/// (a second one, during cleanup) stops it.
fn attempt(
    ctx: &mut StageContext,
    label: &str,
    program: &str,
    args: &[&str],
    pool: Option<&str>,
) -> Result<Result<CommandOutput, String>, StageError> {
    let spec = admin(&ctx.ceph, program, args);
    let shown = format!("`{} {}`", program, args.join(" "));
    match run_admin(ctx, label, &spec, pool) {
        Ok(out) if out.success() => Ok(Ok(out)),
        Ok(out) => Ok(Err(format!(
            "{shown} failed ({}): {}",
            out.exit,
            out.tail()
        ))),
        Err(StageError::Cancelled) => Err(StageError::Cancelled),
        Err(e) => Ok(Err(format!("{shown}: {e}"))),
    }
}

fn missing(text: &str) -> bool {
    text.contains("(2) No such file or directory")
}

/// The pool's object names, or why they could not be listed. `Ok(None)`: the
/// pool does not exist (nothing of it is left).
fn list_objects(
    ctx: &mut StageContext,
    pool: &str,
) -> Result<Result<Option<Vec<String>>, String>, StageError> {
    Ok(
        match attempt(ctx, "rados-ls", "rados", &["-p", pool, "ls"], Some(pool))? {
            Ok(out) => match out.whole_stdout(&format!("rados -p {pool} ls")) {
                Ok(names) => Ok(Some(names.lines().map(str::to_string).collect())),
                Err(e) => Err(e.to_string()),
            },
            Err(e) if missing(&e) => Ok(None),
            Err(e) => Err(e),
        },
    )
}

/// `PREFIX_objectN`: exactly the names rados bench gives one write's objects.
fn written_by(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("_object"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn remove_bench_objects(ctx: &mut StageContext, outcomes: &mut Outcomes) -> Result<(), StageError> {
    let mut by_pool: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in ctx.created(BENCH_OBJECTS) {
        if let Some((pool, prefix)) = r.name.split_once('/') {
            by_pool.entry(pool.into()).or_default().push(prefix.into());
        }
    }
    for (pool, prefixes) in by_pool {
        let listing = match list_objects(ctx, &pool)? {
            Ok(Some(names)) => names,
            Ok(None) => {
                for prefix in &prefixes {
                    ctx.mark_removed(BENCH_OBJECTS, &format!("{pool}/{prefix}"));
                }
                outcomes.notes.push(format!(
                    "pool `{pool}` is gone: no benchmark objects left in it"
                ));
                continue;
            }
            Err(e) => {
                outcomes.failed_in(&pool, format!(
                    "benchmark objects {} in pool `{pool}` were not removed: listing the pool failed: {e}",
                    prefixes.iter().map(|p| format!("{p}_object*")).collect::<Vec<_>>().join(", ")
                ));
                continue;
            }
        };
        for prefix in prefixes {
            let ours: Vec<&str> = listing
                .iter()
                .map(String::as_str)
                .filter(|n| written_by(n, &prefix))
                .collect();
            let mut failed = None;
            for batch in ours.chunks(RM_BATCH) {
                let mut args = vec!["-p", pool.as_str(), "rm"];
                args.extend_from_slice(batch);
                if let Err(e) = attempt(ctx, "rados-rm", "rados", &args, Some(&pool))? {
                    failed.get_or_insert(e);
                }
            }
            let outcome = format!("{} objects {prefix}_object* in pool `{pool}`", ours.len());
            match failed {
                None => {
                    ctx.mark_removed(BENCH_OBJECTS, &format!("{pool}/{prefix}"));
                    outcomes.notes.push(format!("removed {outcome}"));
                }
                Some(e) => outcomes.failed_in(&pool, format!("removing {outcome} failed: {e}")),
            }
        }
    }
    Ok(())
}

/// The object `rados bench --run-name RUN_NAME` keeps the write's parameters in.
fn remove_bench_metadata(
    ctx: &mut StageContext,
    outcomes: &mut Outcomes,
) -> Result<(), StageError> {
    for r in ctx.created(BENCH_METADATA) {
        let Some((pool, object)) = r.name.split_once('/') else {
            continue;
        };
        match attempt(
            ctx,
            "rados-rm-metadata",
            "rados",
            &["-p", pool, "rm", object],
            Some(pool),
        )? {
            Ok(_) => {
                ctx.mark_removed(BENCH_METADATA, &r.name);
                outcomes.notes.push(format!(
                    "removed object `{object}` (rados bench metadata) from pool `{pool}`"
                ));
            }
            // Never stored (the write was killed first), or the pool is gone.
            Err(e) if missing(&e) => ctx.mark_removed(BENCH_METADATA, &r.name),
            Err(e) => outcomes.failed_in(pool, e),
        }
    }
    Ok(())
}

fn remove_images(ctx: &mut StageContext, outcomes: &mut Outcomes) -> Result<(), StageError> {
    for r in ctx.created(IMAGE) {
        let pool = r.name.split('/').next().map(str::to_string);
        match attempt(
            ctx,
            "rbd-rm",
            "rbd",
            &["rm", "--no-progress", &r.name],
            pool.as_deref(),
        )? {
            Ok(_) => {
                ctx.mark_removed(IMAGE, &r.name);
                outcomes.notes.push(format!("removed image `{}`", r.name));
            }
            // Its pool was deleted (with the image), or it is gone already.
            Err(e) if missing(&e) => ctx.mark_removed(IMAGE, &r.name),
            Err(e) => outcomes.failures.push(e),
        }
    }
    Ok(())
}

/// Buckets an `s3-bench` stage created and could not remove itself (the
/// runner was killed mid-stage; `pipeline cleanup` then runs this stage):
/// removed with `radosgw-admin`, which needs no S3 credentials. Keys this
/// run wrote into a bucket it did not create are named, not removed.
fn remove_buckets(ctx: &mut StageContext, outcomes: &mut Outcomes) -> Result<(), StageError> {
    for r in ctx.created(S3_BUCKET) {
        let bucket = format!("--bucket={}", r.name);
        match attempt(
            ctx,
            "bucket-rm",
            "radosgw-admin",
            &["bucket", "rm", &bucket, "--purge-objects"],
            None,
        )? {
            Ok(_) => {
                ctx.mark_removed(S3_BUCKET, &r.name);
                outcomes
                    .notes
                    .push(format!("removed bucket `{}` and its objects", r.name));
            }
            Err(e) if missing(&e) => ctx.mark_removed(S3_BUCKET, &r.name),
            Err(e) => outcomes.failures.push(e),
        }
    }
    for r in ctx.created(S3_OBJECTS) {
        let (bucket, prefix) = r.name.split_once('/').unwrap_or((&r.name, ""));
        outcomes.failures.push(format!(
            "objects `{prefix}*` this run wrote into bucket `{bucket}` (which it did not create) are left: remove them with an S3 client, e.g. `aws s3 rm s3://{bucket}/{prefix} --recursive`"
        ));
    }
    Ok(())
}

/// Deletes one of this run's pools; `Ok(Err(why))` when it is left.
fn delete_pool(
    ctx: &mut StageContext,
    pool: &str,
    outcomes: &mut Outcomes,
) -> Result<Result<(), String>, StageError> {
    let args = [
        "osd",
        "pool",
        "delete",
        pool,
        pool,
        "--yes-i-really-really-mean-it",
    ];
    match attempt(ctx, "pool-delete", "ceph", &args, Some(pool))? {
        Ok(_) => {
            ctx.mark_removed(POOL, pool);
            // Whatever of this run's was inside went with it.
            for kind in [BENCH_OBJECTS, BENCH_METADATA, IMAGE] {
                for r in ctx.created(kind) {
                    if r.name.split('/').next() == Some(pool) {
                        ctx.mark_removed(kind, &r.name);
                    }
                }
            }
            outcomes.notes.push(format!("deleted pool `{pool}`"));
            Ok(Ok(()))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// A pool of this run that is left: why, and what of this run is still in
/// it after the removals inside it were tried.
fn report_kept_pool(ctx: &StageContext, pool: &str, failure: &str, outcomes: &mut Outcomes) {
    let left = leftovers_in(ctx, pool);
    let left = if left.is_empty() {
        String::new()
    } else {
        format!("; still in it from this run: {}", left.join(", "))
    };
    if failure.contains("EPERM") || failure.contains("pool deletion is disabled") {
        outcomes.failures.push(format!(
            "pool `{pool}` was left in place: the cluster forbids pool deletion (mon_allow_pool_delete is false){left}. \
             Delete it yourself with `ceph tell mon.\\* injectargs --mon-allow-pool-delete=true` then \
             `ceph osd pool delete {pool} {pool} --yes-i-really-really-mean-it`"
        ));
    } else {
        outcomes
            .failures
            .push(format!("deleting pool `{pool}` failed: {failure}{left}"));
    }
}

/// What this run created inside `pool` and did not remove.
fn leftovers_in(ctx: &StageContext, pool: &str) -> Vec<String> {
    [BENCH_OBJECTS, BENCH_METADATA, IMAGE]
        .iter()
        .flat_map(|kind| ctx.created(kind))
        .filter(|r| r.name.split('/').next() == Some(pool))
        .map(|r| match r.kind.as_str() {
            BENCH_OBJECTS => format!("objects {}_object*", r.name),
            _ => format!("{} {}", r.kind, r.name),
        })
        .collect()
}

fn remove_ec_profiles(ctx: &mut StageContext, outcomes: &mut Outcomes) -> Result<(), StageError> {
    for r in ctx.created(EC_PROFILE) {
        // A profile is kept while a pool of this run that uses it is left.
        let still_used = ctx
            .created(POOL)
            .iter()
            .any(|p| format!("{}-profile", p.name) == r.name);
        if still_used {
            outcomes.failures.push(format!(
                "EC profile `{}` was left: its pool is still there",
                r.name
            ));
            continue;
        }
        match attempt(
            ctx,
            "ec-profile-rm",
            "ceph",
            &["osd", "erasure-code-profile", "rm", &r.name],
            None,
        )? {
            Ok(_) => {
                ctx.mark_removed(EC_PROFILE, &r.name);
                outcomes
                    .notes
                    .push(format!("removed EC profile `{}`", r.name));
            }
            Err(e) => outcomes.failures.push(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::written_by;

    #[test]
    fn only_the_writes_own_object_names() {
        let prefix = "benchmark_data_vm_12940";
        assert!(written_by("benchmark_data_vm_12940_object0", prefix));
        assert!(written_by("benchmark_data_vm_12940_object15", prefix));
        // Another process on the same host (pid 129401), and rados' own metadata.
        assert!(!written_by("benchmark_data_vm_129401_object0", prefix));
        assert!(!written_by("benchmark_data_vm_12940_object", prefix));
        assert!(!written_by("benchmark_data_vm_12940_object1x", prefix));
        assert!(!written_by("benchmark_last_metadata", prefix));
    }
}
