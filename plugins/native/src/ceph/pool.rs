//! `ceph-pool`: create a replicated or erasure-coded pool for the benchmark,
//! and record that THIS run created it (cleanup deletes only such pools). An
//! existing pool is refused unless the pipeline says to reuse it; a reused
//! pool is never deleted.

use std::time::{Duration, Instant};

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::params::{ParamSpec, ParamType, Params, ParamsExt};
use pipeline_stage_api::stage::{
    Action, OutputSpec, PlanContext, Stage, StageDescription, StageError, StageOutput,
};
use serde_json::json;

use super::{EC_PROFILE, POOL, admin, admin_ok, pool_names};

pub struct CephPool;

struct PoolConfig {
    name: String,
    erasure: bool,
    size: i64,
    min_size: Option<i64>,
    pg_num: i64,
    k: i64,
    m: i64,
    failure_domain: String,
    application: String,
    reuse_existing: bool,
}

impl PoolConfig {
    fn from(params: &Params) -> Self {
        PoolConfig {
            name: params.str("name").unwrap_or_default().to_string(),
            erasure: params.str("type") == Some("erasure"),
            size: params.i64("size").unwrap_or(3),
            min_size: params.i64("min_size"),
            pg_num: params.i64("pg_num").unwrap_or(32),
            k: params.i64("k").unwrap_or(2),
            m: params.i64("m").unwrap_or(1),
            failure_domain: params.str("failure_domain").unwrap_or("host").to_string(),
            application: params.str("application").unwrap_or("rados").to_string(),
            reuse_existing: params.bool("reuse_existing").unwrap_or(false),
        }
    }

    fn profile(&self) -> String {
        format!("{}-profile", self.name)
    }

    /// The commands that create the pool, in order: (label, args for `ceph`).
    fn create_commands(&self) -> Vec<(&'static str, Vec<String>)> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let pg = self.pg_num.to_string();
        let mut cmds = Vec::new();
        if self.erasure {
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
        if self.erasure && self.application == "rbd" {
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
                &self.application,
            ]),
        ));
        cmds
    }
}

impl Stage for CephPool {
    fn describe(&self) -> StageDescription {
        StageDescription {
            capabilities: Vec::new(),
            per_host: true,
            requires: vec!["ceph".into()],
            name: "ceph-pool".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary: "Create a replicated or erasure-coded pool owned by this run (deleted by ceph-cleanup).".into(),
            params: vec![
                ParamSpec::required("name", ParamType::String, "Pool name."),
                ParamSpec::with_default("type", ParamType::enumeration(&["replicated", "erasure"]), json!("replicated"), "Pool type."),
                ParamSpec::with_default("size", ParamType::Integer, json!(3), "Replicas (replicated pools)."),
                ParamSpec::optional("min_size", ParamType::Integer, "Minimum replicas to serve I/O (replicated pools)."),
                ParamSpec::with_default("pg_num", ParamType::Integer, json!(32), "Placement groups (pgp_num is the same; autoscale off)."),
                ParamSpec::with_default("k", ParamType::Integer, json!(2), "Data chunks (erasure pools)."),
                ParamSpec::with_default("m", ParamType::Integer, json!(1), "Coding chunks (erasure pools)."),
                ParamSpec::with_default("failure_domain", ParamType::String, json!("host"), "CRUSH failure domain of the EC profile (`osd` on a one-host cluster)."),
                ParamSpec::with_default("application", ParamType::enumeration(&["rados", "rbd", "rgw", "cephfs"]), json!("rados"), "Application to enable (`rbd` also runs `rbd pool init`)."),
                ParamSpec::with_default("reuse_existing", ParamType::Bool, json!(false), "Use the pool if it exists (then it is never deleted) instead of failing."),
                ParamSpec::with_default("wait_clean", ParamType::Duration, json!(120), "Wait up to this long for the pool's PGs to be active+clean before the benchmarks (0: do not wait)."),
            ],
            outputs: vec![OutputSpec::new("pool", "The pool name.")],
            metrics: Vec::new(),
        }
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        let c = PoolConfig::from(params);
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
        if c.erasure && (c.k < 1 || c.m < 1) {
            problems.push(("k".into(), "erasure pools need k >= 1 and m >= 1".into()));
        }
        problems
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        let c = PoolConfig::from(params);
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
        if c.application == "rbd" {
            actions.push(Action::command(
                "rbd pool init",
                ctx.ceph.argv("rbd", &["pool", "init", &c.name]),
            ));
        }
        actions
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let c = PoolConfig::from(params);
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
        if c.application == "rbd" {
            let spec = admin(&ctx.ceph, "rbd", &["pool", "init", &c.name]);
            ctx.run_ok("rbd-pool-init", &spec)?;
        }
        if let Some(limit) = params.duration("wait_clean").filter(|d| !d.is_zero()) {
            wait_active_clean(ctx, &c.name, limit)?;
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
