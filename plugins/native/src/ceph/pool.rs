//! `ceph-pool`: create a replicated or erasure-coded pool for the benchmark,
//! and record that THIS run created it (cleanup deletes only such pools). An
//! existing pool is refused unless the pipeline says to reuse it; a reused
//! pool is never deleted.

use std::time::{Duration, Instant};

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, OutputSpec, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{EC_PROFILE, POOL, admin, admin_ok, pool_names};

pub struct CephPool;

/// `with:` of a `ceph-pool` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Pool name.
    pub name: String,
    /// Pool type.
    #[serde(default, rename = "type")]
    pub kind: PoolType,
    /// Replicas (replicated pools).
    #[serde(default = "three")]
    pub size: i64,
    /// Minimum replicas to serve I/O (replicated pools).
    #[serde(default)]
    pub min_size: Option<i64>,
    /// Placement groups (pgp_num is the same; autoscale off).
    #[serde(default = "thirty_two")]
    pub pg_num: i64,
    /// Data chunks (erasure pools).
    #[serde(default = "two")]
    pub k: i64,
    /// Coding chunks (erasure pools).
    #[serde(default = "one")]
    pub m: i64,
    /// CRUSH failure domain of the EC profile (`osd` on a one-host cluster).
    #[serde(default = "host")]
    pub failure_domain: String,
    /// Application to enable (`rbd` also runs `rbd pool init`).
    #[serde(default)]
    pub application: Application,
    /// Use the pool if it exists (then it is never deleted) instead of failing.
    #[serde(default)]
    pub reuse_existing: bool,
    /// Wait up to this long for the pool's PGs to be active+clean before the benchmarks (0: do not wait).
    #[serde(default = "two_minutes")]
    pub wait_clean: Seconds,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PoolType {
    #[default]
    Replicated,
    Erasure,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Application {
    #[default]
    Rados,
    Rbd,
    Rgw,
    Cephfs,
}

impl Application {
    fn as_str(self) -> &'static str {
        match self {
            Application::Rados => "rados",
            Application::Rbd => "rbd",
            Application::Rgw => "rgw",
            Application::Cephfs => "cephfs",
        }
    }
}

fn three() -> i64 {
    3
}

fn thirty_two() -> i64 {
    32
}

fn two() -> i64 {
    2
}

fn one() -> i64 {
    1
}

fn host() -> String {
    "host".into()
}

fn two_minutes() -> Seconds {
    Seconds::secs(120)
}

impl Config {
    fn erasure(&self) -> bool {
        self.kind == PoolType::Erasure
    }

    fn profile(&self) -> String {
        format!("{}-profile", self.name)
    }

    /// The commands that create the pool, in order: (label, args for `ceph`).
    fn create_commands(&self) -> Vec<(&'static str, Vec<String>)> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let pg = self.pg_num.to_string();
        let mut cmds = Vec::new();
        if self.erasure() {
            cmds.push((
                "ec-profile",
                s(&[
                    "osd",
                    "erasure-code-profile",
                    "set",
                    &self.profile(),
                    &format!("k={}", self.k),
                    &format!("m={}", self.m),
                    &format!("crush-failure-domain={}", self.failure_domain),
                ]),
            ));
            cmds.push((
                "pool-create",
                s(&[
                    "osd",
                    "pool",
                    "create",
                    &self.name,
                    &pg,
                    &pg,
                    "erasure",
                    &self.profile(),
                    "--autoscale-mode=off",
                ]),
            ));
        } else {
            cmds.push((
                "pool-create",
                s(&[
                    "osd",
                    "pool",
                    "create",
                    &self.name,
                    &pg,
                    &pg,
                    "replicated",
                    "--autoscale-mode=off",
                ]),
            ));
            let mut size = s(&[
                "osd",
                "pool",
                "set",
                &self.name,
                "size",
                &self.size.to_string(),
            ]);
            if self.size == 1 {
                size.push("--yes-i-really-mean-it".into());
            }
            cmds.push(("pool-size", size));
            if let Some(min) = self.min_size {
                cmds.push((
                    "pool-min-size",
                    s(&[
                        "osd",
                        "pool",
                        "set",
                        &self.name,
                        "min_size",
                        &min.to_string(),
                    ]),
                ));
            }
        }
        if self.erasure() && self.application == Application::Rbd {
            // RBD on EC needs overwrites enabled.
            cmds.push((
                "ec-overwrites",
                s(&[
                    "osd",
                    "pool",
                    "set",
                    &self.name,
                    "allow_ec_overwrites",
                    "true",
                ]),
            ));
        }
        cmds.push((
            "application",
            s(&[
                "osd",
                "pool",
                "application",
                "enable",
                &self.name,
                self.application.as_str(),
            ]),
        ));
        cmds
    }
}

impl TypedStage for CephPool {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "ceph-pool",
            summary: "Create a replicated or erasure-coded pool owned by this run (deleted by ceph-cleanup).",
            per_host: true,
            requires: vec!["ceph"],
            outputs: vec![OutputSpec::new("pool", "The pool name.")],
            metrics: Vec::new(),
        }
    }

    fn check(&self, c: &Config) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if c.name.is_empty() || c.name.starts_with('.') || c.name.contains(char::is_whitespace) {
            problems.push((
                "name".into(),
                format!("`{}` is not a usable pool name", c.name),
            ));
        }
        if !(1..=10).contains(&c.size) {
            problems.push((
                "size".into(),
                format!("size {} is out of range 1..10", c.size),
            ));
        }
        if c.min_size.is_some_and(|m| m < 1 || m > c.size) {
            problems.push((
                "min_size".into(),
                "min_size must be between 1 and size".into(),
            ));
        }
        if c.pg_num < 1 || c.pg_num > 32768 {
            problems.push(("pg_num".into(), "pg_num must be between 1 and 32768".into()));
        }
        if c.erasure() && (c.k < 1 || c.m < 1) {
            problems.push(("k".into(), "erasure pools need k >= 1 and m >= 1".into()));
        }
        problems
    }

    fn plan(&self, c: &Config, ctx: &PlanContext) -> Vec<Action> {
        let mut actions = vec![Action::note(format!(
            "refuse if pool `{}` exists{}",
            c.name,
            if c.reuse_existing {
                " (reuse_existing: use it, never delete it)"
            } else {
                ""
            }
        ))];
        for (label, args) in c.create_commands() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            actions.push(Action::command(label, ctx.ceph.argv("ceph", &args)));
        }
        if c.application == Application::Rbd {
            actions.push(Action::command(
                "rbd pool init",
                ctx.ceph.argv("rbd", &["pool", "init", &c.name]),
            ));
        }
        actions
    }

    fn run(&self, c: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let mut output = StageOutput::default();
        output.outputs.insert("pool".into(), json!(c.name));
        if pool_names(ctx)?.contains(&c.name) {
            if ctx.was_created(POOL, &c.name) {
                return Ok(output); // created by an earlier stage of this run
            }
            if c.reuse_existing {
                ctx.progress(&format!(
                    "using existing pool {} (it will not be deleted)",
                    c.name
                ));
                return Ok(output);
            }
            return Err(StageError::failed(format!(
                "pool `{}` already exists and this run did not create it; it is left untouched. \
                 Choose another name, or set `reuse_existing: true` to benchmark in it (it will never be deleted)",
                c.name
            )));
        }
        for (label, args) in c.create_commands() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            admin_ok(ctx, label, "ceph", &args)?;
            // Record as soon as each thing exists, so a later failure still cleans it.
            if label == "ec-profile" {
                ctx.record_created(EC_PROFILE, &c.profile());
            }
            if label == "pool-create" {
                ctx.record_created(POOL, &c.name);
            }
        }
        if c.application == Application::Rbd {
            let spec = admin(&ctx.ceph, "rbd", &["pool", "init", &c.name]);
            ctx.run_ok("rbd-pool-init", &spec)?;
        }
        if !c.wait_clean.0.is_zero() {
            wait_active_clean(ctx, &c.name, c.wait_clean.0)?;
        }
        Ok(output)
    }
}

/// Waits until every PG of the pool is active+clean: a benchmark on PGs still
/// peering or backfilling measures recovery, not the cluster.
fn wait_active_clean(
    ctx: &mut StageContext,
    pool: &str,
    limit: Duration,
) -> Result<(), StageError> {
    let started = Instant::now();
    loop {
        let spec = admin(
            &ctx.ceph,
            "ceph",
            &["pg", "ls-by-pool", pool, "--format", "json"],
        );
        let out = ctx.run_ok("pg-states", &spec)?;
        let (clean, total, states) = pg_states(&out.stdout);
        if total > 0 && clean == total {
            ctx.progress(&format!("{total}/{total} PGs active+clean"));
            return Ok(());
        }
        let last = format!("{clean} of {total} PGs active+clean ({states})");
        ctx.progress(&last);
        if started.elapsed() >= limit {
            return Err(StageError::failed(format!(
                "pool `{pool}`: {last} after {}s; the cluster is not healthy enough to benchmark (see `ceph -s`), or raise `wait_clean`",
                limit.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// (active+clean PGs, all PGs, a summary of the states) from
/// `ceph pg ls-by-pool -f json`: `{"pg_stats": [...]}` (Nautilus and later)
/// or a bare list (older releases).
fn pg_states(json_text: &str) -> (usize, usize, String) {
    let value: serde_json::Value = serde_json::from_str(json_text.trim()).unwrap_or_default();
    let pgs = value
        .get("pg_stats")
        .unwrap_or(&value)
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let mut clean = 0;
    for pg in &pgs {
        let state = pg
            .get("state")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        let parts: Vec<&str> = state.split('+').collect();
        if parts.contains(&"active") && parts.contains(&"clean") {
            clean += 1;
        }
        *counts.entry(state.to_string()).or_default() += 1;
    }
    let summary = counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    (clean, pgs.len(), summary)
}

#[cfg(test)]
mod tests {
    use super::pg_states;

    #[test]
    fn counts_active_clean_pgs() {
        // The shape `ceph pg ls-by-pool -f json` prints on Ceph 16.2.15, trimmed to
        // the fields read (`unknown` is what the sandbox showed right after creation).
        let creating = r#"{"pg_ready":true,"pg_stats":[{"pgid":"6.0","state":"unknown"},{"pgid":"6.1","state":"creating+peering"}]}"#;
        assert_eq!(
            pg_states(creating),
            (0, 2, "1 creating+peering, 1 unknown".into())
        );
        let ready = r#"{"pg_ready":true,"pg_stats":[{"state":"active+clean"},{"state":"active+clean+scrubbing"}]}"#;
        assert_eq!(pg_states(ready).0, 2);
        assert_eq!(pg_states("[]"), (0, 0, String::new()));
        assert_eq!(pg_states("not json").1, 0);
    }
}
