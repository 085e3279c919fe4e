//! `swift-bench`: the object-gateway load of the field notes' swift-bench
//! (OpenStack), against the Swift API with v1 auth: the same workloads,
//! phases and figures as `s3-bench` ([`super::load`]), its own lean client
//! ([`super::swift_client`]). Containers are radosgw buckets: `ceph-cleanup`
//! removes a killed run's leftovers as it does S3 buckets.

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

use super::load::{self, LoadConfig};
use super::store::Store;
use super::swift_client::{SwiftAuth, SwiftClient};

/// `with:` of a `swift-bench` stage: where to authenticate and as whom, then the load.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Config {
    /// Swift v1 auth URL, `http://HOST:PORT/auth/1.0` (default: $ST_AUTH; `pipeline sandbox env` exports it).
    #[serde(default)]
    pub auth_url: Option<String>,
    /// Swift user, `account:user` (default: $ST_USER).
    #[serde(default)]
    pub user: Option<String>,
    /// Swift key (default: $ST_KEY). Give it as `{{ env.NAME }}` of an `env:` entry with `secret: true`, never literally: parameters are shown by `plan`.
    #[serde(default)]
    pub key: Option<String>,
    #[serde(flatten)]
    pub load: LoadConfig,
}

pub struct SwiftBench;

impl TypedStage for SwiftBench {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "swift-bench",
            summary: "Swift (v1 auth) PUT/GET/mixed load with its own lean client: ops/s, MiB/s, latency percentiles (HDR), errors by kind, client CPU.",
            per_host: true,
            requires: Vec::new(),
            outputs: Vec::new(),
            metrics: load::metric_specs(),
        }
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut p = config.load.check();
        if let Some(u) = &config.auth_url
            && !u.starts_with("http://")
        {
            p.insert(
                0,
                (
                    "auth_url".into(),
                    "must start with http:// (swift-bench speaks plain HTTP; TLS comes later)"
                        .into(),
                ),
            );
        }
        p
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        let at = config.auth_url.clone().unwrap_or_else(|| "$ST_AUTH".into());
        config.load.plan("container", &at)
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let auth = resolve_auth(config)?;
        let client = SwiftClient::new(
            auth,
            config.load.concurrency as usize,
            config.load.request_timeout.0,
        )
        .map_err(|e| StageError::failed(format!("cannot build the HTTP client: {e}")))?;
        load::run("swift-bench", &config.load, ctx, Store::Swift(client))
    }
}

fn resolve_auth(config: &Config) -> Result<SwiftAuth, StageError> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let missing = |what: &str, param: &str, var: &str| {
        StageError::failed(format!(
            "no Swift {what}: set `{param}:` or {var} (`pipeline sandbox env` exports it for the sandbox gateway)"
        ))
    };
    let url = config
        .auth_url
        .clone()
        .or_else(|| env("ST_AUTH"))
        .ok_or_else(|| missing("auth URL", "auth_url", "ST_AUTH"))?;
    if !url.starts_with("http://") {
        return Err(StageError::failed(format!(
            "Swift auth URL `{url}`: swift-bench speaks plain HTTP only (http://HOST:PORT/auth/1.0)"
        )));
    }
    Ok(SwiftAuth {
        url,
        user: config
            .user
            .clone()
            .or_else(|| env("ST_USER"))
            .ok_or_else(|| missing("user", "user", "ST_USER"))?,
        key: config
            .key
            .clone()
            .or_else(|| env("ST_KEY"))
            .ok_or_else(|| missing("key", "key", "ST_KEY"))?,
    })
}
