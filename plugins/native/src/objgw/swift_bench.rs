//! `swift-bench`: the object-gateway load of the field notes' swift-bench
//! (OpenStack), against the Swift API with v1 auth: the same workloads,
//! phases and figures as `s3-bench` ([`super::load`]), its own lean client
//! ([`super::swift_client`]). Containers are radosgw buckets: `ceph-cleanup`
//! removes a killed run's leftovers as it does S3 buckets.

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::clients;
use super::load::{self, LoadConfig};
use super::store::Store;
use super::swift_client::{SwiftAuth, SwiftClient};
use super::{missing_setting, plain_http, setting};

/// `with:` of a `swift-bench` stage: where to authenticate and as whom, then the load.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
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
    /// Hosts (`HOST:PORT`) other than the auth URL's that the storage URL
    /// the auth server answers with may name (a gateway whose
    /// `rgw_swift_url` points elsewhere). Any other host is refused: the
    /// token goes only where the suite says.
    #[serde(default)]
    pub storage_hosts: Vec<String>,
    #[serde(flatten)]
    pub load: LoadConfig,
}

pub struct SwiftBench;

impl TypedStage for SwiftBench {
    type Config = Config;

    fn about(&self) -> About {
        load::about(
            "swift-bench",
            "Swift (v1 auth) PUT/GET/mixed load with its own lean client: ops/s, MiB/s, latency percentiles (HDR), errors by kind, client CPU.",
        )
    }

    fn rate_search(&self) -> Option<pipeline_stage_api::rate_search::RateSearch> {
        Some(load::rate_search())
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        config
            .load
            .check_with_url("swift-bench", "auth_url", config.auth_url.as_deref())
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let at = config.auth_url.clone().unwrap_or_else(|| "$ST_AUTH".into());
        clients::plan(ctx, config.load.plan("container", &at))
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        if clients::runs_here(ctx) {
            return load::run("swift-bench", &config.load, ctx, store(config)?);
        }
        // The workers get the auth the runner resolved, not their hosts' own.
        let auth = resolve_auth(config)?;
        let resolved = Config {
            auth_url: Some(auth.url),
            user: Some(auth.user),
            key: Some(auth.key),
            storage_hosts: auth.storage_hosts,
            load: config.load.per_host(ctx.targets.len()),
        };
        clients::run("swift-bench", &resolved, &config.load, ctx)
    }
}

/// The Swift client of a stage's config.
pub(crate) fn store(config: &Config) -> Result<Store, StageError> {
    let auth = resolve_auth(config)?;
    let client = SwiftClient::new(
        auth,
        config.load.concurrency as usize,
        config.load.request_timeout.0,
    )
    .map_err(|e| StageError::failed(format!("cannot build the HTTP client: {e}")))?;
    Ok(Store::Swift(client))
}

fn resolve_auth(config: &Config) -> Result<SwiftAuth, StageError> {
    let url = setting(&config.auth_url, "ST_AUTH")
        .ok_or_else(|| missing_setting("Swift", "auth URL", "auth_url", "ST_AUTH"))?;
    plain_http(
        "swift-bench",
        "Swift auth URL",
        &url,
        "http://HOST:PORT/auth/1.0",
    )?;
    Ok(SwiftAuth {
        url,
        user: setting(&config.user, "ST_USER")
            .ok_or_else(|| missing_setting("Swift", "user", "user", "ST_USER"))?,
        key: setting(&config.key, "ST_KEY")
            .ok_or_else(|| missing_setting("Swift", "key", "key", "ST_KEY"))?,
        storage_hosts: config.storage_hosts.clone(),
    })
}
