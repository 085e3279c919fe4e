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

use super::{EC_PROFILE, POOL, admin, admin_ok, pool_names, save_diagnostics};

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
            // The final size in the create call itself: a pool created at the
            // default size and then resized re-peers every PG right away.
            // Size 1 needs `mon_allow_pool_size_one`; `osd pool create` takes no
            // --yes-i-really-mean-it (Ceph 16.2 reads it as a CRUSH rule name).
            let create = s(&[
                "osd",
                "pool",
                "create",
                &self.name,
                &pg,
                &pg,
                "replicated",
                "--size",
                &self.size.to_string(),
                "--autoscale-mode=off",
            ]);
            cmds.push(("pool-create", create));
            // `osd pool create` takes no min_size (Ceph 16.2); set only when asked.
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
            let out = admin_ok(ctx, label, "ceph", &args)?;
            // Record as soon as each thing exists, so a later failure still cleans it.
            if label == "ec-profile" {
                ctx.record_created(EC_PROFILE, &c.profile());
            }
            if label == "pool-create" {
                match creation_outcome(&out.stderr, &c.name) {
                    Creation::Created => ctx.record_created(POOL, &c.name),
                    Creation::AlreadyExisted if c.reuse_existing => {
                        ctx.progress(&format!(
                            "pool {} appeared meanwhile; using it (it will not be deleted)",
                            c.name
                        ));
                        return Ok(output);
                    }
                    Creation::AlreadyExisted => {
                        return Err(StageError::failed(format!(
                            "pool `{}` was created by someone else between this stage's existence check and its \
                             `osd pool create` (which then succeeds without creating anything); it is not this \
                             run's and is left untouched",
                            c.name
                        )));
                    }
                    Creation::Unknown => {
                        return Err(StageError::failed(format!(
                            "`osd pool create {}` succeeded without saying `pool '{}' created` (it said: {:?}); \
                             the pool is not recorded as this run's, so it will not be deleted",
                            c.name,
                            c.name,
                            out.tail()
                        )));
                    }
                }
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

/// What `ceph osd pool create` said it did. It exits 0 both when it created
/// the pool and when the pool already existed; only the message tells.
#[derive(Debug, PartialEq)]
enum Creation {
    Created,
    AlreadyExisted,
    Unknown,
}

fn creation_outcome(stderr: &str, pool: &str) -> Creation {
    let quoted = format!("pool '{pool}'");
    for line in stderr.lines().map(str::trim) {
        if line == format!("{quoted} created") {
            return Creation::Created;
        }
        if line == format!("{quoted} already exists") {
            return Creation::AlreadyExisted;
        }
    }
    Creation::Unknown
}

/// The OSD map's view of a pool (`ceph osd dump -f json`): what its PGs must
/// have caught up with.
#[derive(Debug, PartialEq)]
struct PoolMap {
    pg_num: usize,
    size: usize,
}

fn pool_map(osd_dump: &str, pool: &str) -> Option<PoolMap> {
    let value: serde_json::Value = serde_json::from_str(osd_dump.trim()).ok()?;
    let entry = value
        .get("pools")?
        .as_array()?
        .iter()
        .find(|p| p.get("pool_name").and_then(serde_json::Value::as_str) == Some(pool))?;
    let number = |key: &str| {
        let v = entry.get(key)?;
        v.as_u64().or_else(|| v.as_str()?.parse().ok())
    };
    Some(PoolMap {
        pg_num: number("pg_num")? as usize,
        size: number("size")? as usize,
    })
}

fn read_pool_map(ctx: &mut StageContext, pool: &str) -> Result<PoolMap, StageError> {
    let dump = admin_ok(
        ctx,
        "osd-dump",
        "ceph",
        &["osd", "dump", "--format", "json"],
    )?;
    pool_map(dump.whole_stdout("ceph osd dump --format json")?, pool).ok_or_else(|| {
        StageError::failed(format!(
            "pool `{pool}` is not in the OSD map (`ceph osd dump`)"
        ))
    })
}

/// Waits until every PG of the pool is active+clean as the OSD map defines
/// the pool: a benchmark on PGs still peering measures recovery, not the
/// cluster. The manager's `pg ls-by-pool` lags the OSD map: it lists a new
/// pool's PGs only after a while, and right after a size change it still
/// lists them active+clean with their old acting sets (seen here: 8/8
/// active+clean, 3 OSDs acting, 0.7 s after `osd pool set P size 1`). So the
/// PG count comes from the OSD map's `pg_num`, and a PG counts only when its
/// acting set has the pool's size. (A `min_size` change re-peers without
/// changing the acting set; pools are created at their final size, and only
/// an explicit `min_size` is set afterwards.)
fn wait_active_clean(
    ctx: &mut StageContext,
    pool: &str,
    limit: Duration,
) -> Result<(), StageError> {
    let started = Instant::now();
    loop {
        let map = read_pool_map(ctx, pool)?;
        let out = admin_ok(
            ctx,
            "pg-states",
            "ceph",
            &["pg", "ls-by-pool", pool, "--format", "json"],
        )?;
        let pgs = pg_states(
            out.whole_stdout(&format!("ceph pg ls-by-pool {pool} --format json"))?,
            &map,
        );
        if pgs.is_ready(&map) {
            ctx.progress(&format!("{0}/{0} PGs active+clean", map.pg_num));
            return Ok(());
        }
        let last = pgs.describe(&map);
        ctx.progress(&last);
        if started.elapsed() >= limit {
            save_diagnostics(ctx, "wait-clean", Some(pool));
            return Err(StageError::failed(format!(
                "pool `{pool}`: {last} after {}s; the cluster is not healthy enough to benchmark \
                 (`ceph -s` and the PG list are saved in diagnostics-wait-clean.txt), or raise `wait_clean`",
                limit.as_secs()
            )));
        }
        // Ctrl-C and the stage's timeout end the wait at once.
        ctx.sleep(Duration::from_millis(500))?;
    }
}

/// The manager's PG list of one pool, judged against the OSD map.
#[derive(Debug, PartialEq)]
struct PgStates {
    listed: usize,
    /// active+clean with an acting set of the pool's size.
    clean: usize,
    /// Listed with an acting set of another size (stats from before a resize).
    resized: usize,
    /// `N state` by state.
    summary: String,
}

impl PgStates {
    fn is_ready(&self, map: &PoolMap) -> bool {
        map.pg_num > 0 && self.listed == map.pg_num && self.clean == map.pg_num
    }

    fn describe(&self, map: &PoolMap) -> String {
        let mut text = format!(
            "{} of {} PGs active+clean ({})",
            self.clean, map.pg_num, self.summary
        );
        if self.resized > 0 {
            text.push_str(&format!(
                "; {} PGs listed with an acting set of other than the pool's size {}",
                self.resized, map.size
            ));
        }
        if self.listed != map.pg_num {
            text.push_str(&format!("; the manager lists {} PGs", self.listed));
        }
        text
    }
}

/// Reads `ceph pg ls-by-pool -f json`: `{"pg_stats": [...]}` (Nautilus and
/// later) or a bare list (older releases).
fn pg_states(json_text: &str, map: &PoolMap) -> PgStates {
    let value: serde_json::Value = serde_json::from_str(json_text.trim()).unwrap_or_default();
    let pgs = value
        .get("pg_stats")
        .unwrap_or(&value)
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    let (mut clean, mut resized) = (0, 0);
    for pg in &pgs {
        let state = pg
            .get("state")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        let parts: Vec<&str> = state.split('+').collect();
        let acting = pg
            .get("acting")
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len);
        let full = acting == map.size;
        if acting > 0 && !full {
            resized += 1;
        }
        if full && parts.contains(&"active") && parts.contains(&"clean") {
            clean += 1;
        }
        *counts.entry(state.to_string()).or_default() += 1;
    }
    let summary = counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    PgStates {
        listed: pgs.len(),
        clean,
        resized,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::{Creation, PoolMap, creation_outcome, pg_states, pool_map};

    #[test]
    fn tells_created_from_already_existing() {
        // stderr of `ceph osd pool create flake-t1 8 8 replicated --size 1
        // --autoscale-mode=off`, run twice on Ceph 16.2.15 (both exit 0).
        assert_eq!(
            creation_outcome("pool 'flake-t1' created\n", "flake-t1"),
            Creation::Created
        );
        assert_eq!(
            creation_outcome("pool 'flake-t1' already exists\n", "flake-t1"),
            Creation::AlreadyExisted
        );
        // Another pool's message is not this one's.
        assert_eq!(
            creation_outcome("pool 'flake-t1-x' created\n", "flake-t1"),
            Creation::Unknown
        );
        assert_eq!(creation_outcome("", "flake-t1"), Creation::Unknown);
    }

    #[test]
    fn reads_the_pool_from_the_osd_map() {
        // `ceph osd dump -f json` on Ceph 16.2.15, trimmed .
        let dump = r#"{"epoch":145,"pools":[{"pool":21,"pool_name":"flake-t1","size":1,"min_size":1,"pg_num":8,"last_change":"141"}]}"#;
        assert_eq!(
            pool_map(dump, "flake-t1"),
            Some(PoolMap { pg_num: 8, size: 1 })
        );
        assert_eq!(pool_map(dump, "other"), None);
    }

    #[test]
    fn lagging_or_resized_pg_stats_are_not_clean() {
        let map = PoolMap { pg_num: 2, size: 1 };
        // Seen on the sandbox 0.7 s after `osd pool set P size 1`: the manager
        // still listed every PG active+clean, with 3 OSDs acting.
        let lagging = r#"{"pg_stats":[{"state":"active+clean","reported_epoch":147,"acting":[0,1,2]},{"state":"active+clean","reported_epoch":147,"acting":[2,0,1]}]}"#;
        let pgs = pg_states(lagging, &map);
        assert!(!pgs.is_ready(&map));
        assert_eq!(pgs.resized, 2);
        assert!(
            pgs.describe(&map)
                .contains("2 PGs listed with an acting set")
        );
        let creating = r#"{"pg_ready":true,"pg_stats":[{"state":"unknown","reported_epoch":0,"acting":[]},{"state":"creating+peering","reported_epoch":149,"acting":[1]}]}"#;
        let pgs = pg_states(creating, &map);
        assert_eq!(pgs.summary, "1 creating+peering, 1 unknown");
        assert!(!pgs.is_ready(&map));
        let ready = r#"{"pg_stats":[{"state":"active+clean","reported_epoch":150,"acting":[1]},{"state":"active+clean+scrubbing","reported_epoch":149,"acting":[0]}]}"#;
        assert!(pg_states(ready, &map).is_ready(&map));
        assert_eq!(pg_states("not json", &map).listed, 0);
    }
}
