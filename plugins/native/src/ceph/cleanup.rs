//! `ceph-cleanup`: remove what THIS run created (benchmark objects, images,
//! pools, EC profiles), read from the run's ledger, and nothing else. Every
//! removal is attempted even when one fails; a pool that cannot be deleted
//! because the cluster forbids it (EPERM) is reported and left in place.

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{BENCH_OBJECTS, EC_PROFILE, IMAGE, POOL, admin};

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
                "for each rados bench write of this run",
                ctx.ceph.argv(
                    "rados",
                    &["-p", "POOL", "cleanup", "--run-name", "RUN_NAME"],
                ),
            )
            .destructive(),
            Action::command(
                "for each image this run created",
                ctx.ceph.argv("rbd", &["rm", "POOL/IMAGE"]),
            )
            .destructive(),
        ];
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
        let mut problems: Vec<String> = Vec::new();
        let keep_pools = config.keep_pools;
        let pools_to_delete: Vec<String> = if keep_pools {
            Vec::new()
        } else {
            ctx.created(POOL).into_iter().map(|r| r.name).collect()
        };

        for r in ctx.created(BENCH_OBJECTS) {
            let Some((pool, run_name)) = r.name.split_once('/') else {
                continue;
            };
            let spec = admin(
                &ctx.ceph,
                "rados",
                &["-p", pool, "cleanup", "--run-name", run_name],
            );
            let out = ctx.run("rados-cleanup", &spec)?;
            if out.success() {
                ctx.mark_removed(BENCH_OBJECTS, &r.name);
            } else if pools_to_delete.iter().any(|p| p == pool) {
                // The pool goes next; its deletion removes the objects too.
            } else {
                problems.push(format!(
                    "`rados -p {pool} cleanup --run-name {run_name}` failed: {}",
                    out.tail()
                ));
            }
        }
        for r in ctx.created(IMAGE) {
            let spec = admin(&ctx.ceph, "rbd", &["rm", "--no-progress", &r.name]);
            let out = ctx.run("rbd-rm", &spec)?;
            if out.success() {
                ctx.mark_removed(IMAGE, &r.name);
            } else {
                problems.push(format!("`rbd rm {}` failed: {}", r.name, out.tail()));
            }
        }
        for pool in &pools_to_delete {
            let spec = admin(
                &ctx.ceph,
                "ceph",
                &[
                    "osd",
                    "pool",
                    "delete",
                    pool,
                    pool,
                    "--yes-i-really-really-mean-it",
                ],
            );
            let out = ctx.run("pool-delete", &spec)?;
            if out.success() {
                ctx.mark_removed(POOL, pool);
                // Objects and images inside went with it.
                for r in ctx
                    .created(BENCH_OBJECTS)
                    .into_iter()
                    .chain(ctx.created(IMAGE))
                {
                    if r.name.split('/').next() == Some(pool.as_str()) {
                        ctx.mark_removed(&r.kind, &r.name);
                    }
                }
            } else if out.stderr.contains("EPERM")
                || out.stderr.contains("pool deletion is disabled")
            {
                problems.push(format!(
                    "pool `{pool}` was left in place: the cluster forbids pool deletion (mon_allow_pool_delete is false). \
                     Delete it yourself with `ceph tell mon.\\* injectargs --mon-allow-pool-delete=true` then \
                     `ceph osd pool delete {pool} {pool} --yes-i-really-really-mean-it`"
                ));
            } else {
                problems.push(format!("deleting pool `{pool}` failed: {}", out.tail()));
            }
        }
        if !keep_pools {
            for r in ctx.created(EC_PROFILE) {
                let still_used = ctx
                    .created(POOL)
                    .iter()
                    .any(|p| format!("{}-profile", p.name) == r.name);
                if still_used {
                    continue;
                }
                let spec = admin(
                    &ctx.ceph,
                    "ceph",
                    &["osd", "erasure-code-profile", "rm", &r.name],
                );
                let out = ctx.run("ec-profile-rm", &spec)?;
                if out.success() {
                    ctx.mark_removed(EC_PROFILE, &r.name);
                } else {
                    problems.push(format!(
                        "removing EC profile `{}` failed: {}",
                        r.name,
                        out.tail()
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(StageOutput::default())
        } else {
            Err(StageError::failed(problems.join("; ")))
        }
    }
}
