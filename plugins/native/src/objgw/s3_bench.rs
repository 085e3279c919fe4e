//! `s3-bench`: S3 load with its own lean client ([`super::client`]); the
//! load itself (workloads, phases, figures, removal) is [`super::load`].

use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::client::{Endpoint, S3Client};
use super::clients;
use super::load::{self, LoadConfig};
use super::store::Store;
use super::{missing_setting, plain_http, setting};

/// `with:` of an `s3-bench` stage: where and as whom, then the load.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct Config {
    /// S3 endpoint, `http://HOST:PORT` (default: $AWS_ENDPOINT_URL; `pipeline sandbox env` exports it).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Region the requests are signed for (default: $AWS_DEFAULT_REGION, then $AWS_REGION, then `us-east-1`).
    #[serde(default)]
    pub region: Option<String>,
    /// Access key id (default: $AWS_ACCESS_KEY_ID).
    #[serde(default)]
    pub access_key: Option<String>,
    /// Secret key (default: $AWS_SECRET_ACCESS_KEY). Give it as `{{ env.NAME }}` of an `env:` entry with `secret: true`, never literally: parameters are shown by `plan`.
    #[serde(default)]
    pub secret_key: Option<String>,
    /// Profile of the AWS shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials) to take the keys from when `access_key`/`secret_key` and $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY are not set (default: $AWS_PROFILE, then `default`).
    #[serde(default)]
    pub profile: Option<String>,
    /// Sign PUTs with `UNSIGNED-PAYLOAD` instead of the body's SHA-256 (plain HTTP to a gateway you trust).
    #[serde(default)]
    pub unsigned_payload: bool,
    #[serde(flatten)]
    pub load: LoadConfig,
}

pub struct S3Bench;

impl TypedStage for S3Bench {
    type Config = Config;

    fn about(&self) -> About {
        load::about(
            "s3-bench",
            "S3 PUT/GET/mixed load with its own lean client: ops/s, MiB/s, latency percentiles (HDR), errors by kind, client CPU.",
        )
    }

    fn rate_search(&self) -> Option<pipeline_stage_api::rate_search::RateSearch> {
        Some(load::rate_search())
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        config
            .load
            .check_with_url("s3-bench", "endpoint", config.endpoint.as_deref())
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let at = config
            .endpoint
            .clone()
            .unwrap_or_else(|| "$AWS_ENDPOINT_URL".into());
        clients::plan(ctx, config.load.plan("bucket", &at))
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        if clients::runs_here(ctx) {
            return load::run("s3-bench", &config.load, ctx, store(config)?);
        }
        // The workers get the endpoint and keys the runner resolved, not
        // their hosts' own.
        let endpoint = resolve_endpoint(config)?;
        let resolved = Config {
            endpoint: Some(endpoint.url),
            region: Some(endpoint.region),
            access_key: Some(endpoint.access_key),
            secret_key: Some(endpoint.secret_key),
            profile: None,
            unsigned_payload: config.unsigned_payload,
            load: config.load.per_host(ctx.targets.len()),
        };
        clients::run("s3-bench", &resolved, &config.load, ctx)
    }
}

/// The S3 client of a stage's config.
pub(crate) fn store(config: &Config) -> Result<Store, StageError> {
    let endpoint = resolve_endpoint(config)?;
    let client = S3Client::new(
        endpoint,
        config.load.concurrency as usize,
        config.load.request_timeout.0,
        config.unsigned_payload,
    )
    .map_err(|e| StageError::failed(format!("cannot build the HTTP client: {e}")))?;
    Ok(Store::S3(client))
}
fn resolve_endpoint(config: &Config) -> Result<Endpoint, StageError> {
    let url = setting(&config.endpoint, "AWS_ENDPOINT_URL")
        .ok_or_else(|| missing_setting("S3", "endpoint", "endpoint", "AWS_ENDPOINT_URL"))?;
    plain_http("s3-bench", "S3 endpoint", &url, "http://HOST:PORT")?;
    Ok(Endpoint {
        url: url.trim_end_matches('/').to_string(),
        region: setting(&config.region, "AWS_DEFAULT_REGION")
            .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
            .unwrap_or_else(|| "us-east-1".into()),
        access_key: setting(&config.access_key, "AWS_ACCESS_KEY_ID")
            .or_else(|| profile_key(config, "aws_access_key_id"))
            .ok_or_else(|| {
                missing_setting("S3", "access key", "access_key", "AWS_ACCESS_KEY_ID")
            })?,
        secret_key: setting(&config.secret_key, "AWS_SECRET_ACCESS_KEY")
            .or_else(|| profile_key(config, "aws_secret_access_key"))
            .ok_or_else(|| {
                missing_setting("S3", "secret key", "secret_key", "AWS_SECRET_ACCESS_KEY")
            })?,
    })
}

/// A key of the profile in the AWS shared credentials file, as the AWS CLI
/// and SDKs read it: `[NAME]` sections of `key = value` lines.
fn profile_key(config: &Config, key: &str) -> Option<String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let file = env("AWS_SHARED_CREDENTIALS_FILE")
        .map(std::path::PathBuf::from)
        .or_else(|| env("HOME").map(|h| std::path::Path::new(&h).join(".aws/credentials")))?;
    let profile = config
        .profile
        .clone()
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let text = std::fs::read_to_string(file).ok()?;
    ini_value(&text, &profile, key)
}

/// `key` of `[section]` in an INI text (`#` and `;` comments, spaces around `=`).
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_section = name.trim() == section;
            continue;
        }
        if in_section
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().to_string()).filter(|v| !v.is_empty());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_read_as_the_aws_cli_writes_them() {
        let text = "[default]\naws_access_key_id = AKIADEFAULT\n\n# a comment\n[bench]\naws_access_key_id=AKIABENCH\naws_secret_access_key = s3cr3t \n";
        assert_eq!(
            ini_value(text, "default", "aws_access_key_id").as_deref(),
            Some("AKIADEFAULT")
        );
        assert_eq!(
            ini_value(text, "bench", "aws_secret_access_key").as_deref(),
            Some("s3cr3t")
        );
        assert_eq!(ini_value(text, "default", "aws_secret_access_key"), None);
        assert_eq!(ini_value(text, "other", "aws_access_key_id"), None);
    }

    #[test]
    fn credentials_sit_beside_the_load_parameters() {
        let c: Config = serde_json::from_value(serde_json::json!({
            "endpoint": "https://x", "concurrency": 0, "unsigned_payload": true
        }))
        .unwrap();
        assert!(c.unsigned_payload);
        let params: Vec<String> = S3Bench.check(&c).into_iter().map(|(p, _)| p).collect();
        assert_eq!(params, vec!["endpoint", "concurrency"]);
        let names: Vec<String> = pipeline_stage_api::typed::param_specs::<Config>()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert!(
            names.contains(&"secret_key".to_string()) && names.contains(&"workload".to_string())
        );
    }
}
