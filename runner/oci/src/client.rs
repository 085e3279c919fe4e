//! Talking to a registry: resolve a tag, pull a plugin (manifest checked to
//! be a WASM component, bytes checked against their digest), push one in the
//! wasm OCI layout wkg, Spin and wasmCloud use; the HTTP under bounds is
//! [`crate::registry_http`].
//!
//! Plain HTTP only for loopback registries and the ones listed in
//! `PIPELINE_REGISTRY_INSECURE` (comma-separated `host[:port]`); HTTPS otherwise.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::credentials::{self, Credentials};
use crate::error::OciError;
use crate::reference::{OciReference, host_of};
use crate::registry_http::{HttpError, RegistryHttp};

/// The wasm OCI layout (CNCF TAG Runtime's "Wasm OCI Artifact layout").
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The older wasm-to-oci types, still accepted on pull.
const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Annotation naming the plugin interface (`pipeline:stage@0.2.0`) a component exports.
pub const INTERFACE_ANNOTATION: &str = "dev.pipeline.plugin.interface";
const TITLE: &str = "org.opencontainers.image.title";
const DESCRIPTION: &str = "org.opencontainers.image.description";
const VERSION: &str = "org.opencontainers.image.version";
const CREATED: &str = "org.opencontainers.image.created";

/// Largest plugin pulled: bigger blobs are refused before they are read whole.
pub const MAX_PLUGIN_BYTES: u64 = 64 * 1024 * 1024;
/// A whole registry operation, however the server trickles.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);

/// What the pushed manifest says about the plugin.
pub struct PushInfo {
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    /// The WIT interface it exports, e.g. `pipeline:stage/plugin@0.2.0`.
    pub interface: String,
}

pub struct Pulled {
    pub manifest: String,
    pub wasm: Vec<u8>,
    pub wasm_digest: String,
    pub title: Option<String>,
}

pub struct Pushed {
    pub manifest: String,
    pub wasm: String,
}

pub struct RegistryClient {
    registry: String,
    /// Decided once from the registry and PIPELINE_REGISTRY_INSECURE.
    https: bool,
    /// An error if its HTTP client could not be built.
    http: Result<RegistryHttp, String>,
    credentials: Credentials,
}

/// Loopback registries, and those the user lists, may speak plain HTTP.
pub fn plain_http_allowed(registry: &str, env: &dyn Fn(&str) -> Option<String>) -> bool {
    let host = host_of(registry);
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback
        || env("PIPELINE_REGISTRY_INSECURE").is_some_and(|list| {
            list.split(',')
                .map(str::trim)
                .any(|e| !e.is_empty() && (e == registry || e == host))
        })
}

impl RegistryClient {
    pub fn new(registry: &str, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let https = !plain_http_allowed(registry, env);
        let credentials = credentials::for_registry(registry, env);
        RegistryClient {
            registry: registry.to_string(),
            https,
            http: RegistryHttp::new(registry, https, credentials.auth.clone(), env)
                .map_err(|e| e.to_string()),
            credentials,
        }
    }

    /// The manifest digest a reference resolves to now.
    pub fn resolve(&self, reference: &OciReference) -> Result<String, OciError> {
        let raw = self.manifest(reference)?;
        Ok(crate::sha256_digest(&raw))
    }

    /// The manifest's bytes, at most 4 MiB of them.
    fn manifest(&self, reference: &OciReference) -> Result<Vec<u8>, OciError> {
        let pull = self.bounded()?;
        let named = reference
            .digest
            .clone()
            .or_else(|| reference.tag.clone())
            .unwrap_or_default();
        self.run(async {
            pull.manifest(&reference.repository, &named)
                .await
                .map_err(|e| self.http_error(reference, what_of(reference), e))
        })
    }

    fn bounded(&self) -> Result<&RegistryHttp, OciError> {
        self.http.as_ref().map_err(|e| OciError::Unreachable {
            registry: self.registry.clone(),
            https: self.https,
            reason: format!("no HTTP client ({e})"),
        })
    }

    /// The manifest `reference` names, checked to be a WASM component, and its
    /// bytes: from `cached` when it has them (by digest), else from the registry.
    pub fn pull(
        &self,
        reference: &OciReference,
        cached: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<Pulled, OciError> {
        let shown = reference.to_string();
        let raw = self.manifest(reference)?;
        let manifest_digest = crate::sha256_digest(&raw);
        if let Some(expected) = &reference.digest
            && *expected != manifest_digest
        {
            return Err(OciError::DigestMismatch {
                reference: shown,
                what: "manifest".into(),
                expected: expected.clone(),
                actual: manifest_digest,
            });
        }
        let layer = wasm_layer(&raw).map_err(|found| OciError::NotAComponent {
            reference: shown.clone(),
            found,
        })?;
        if layer.size < 0 || layer.size as u64 > MAX_PLUGIN_BYTES {
            return Err(OciError::NotAComponent {
                reference: shown,
                found: format!(
                    "its layer is {} bytes; a plugin is at most {MAX_PLUGIN_BYTES}",
                    layer.size
                ),
            });
        }
        if let Some(wasm) = cached(&layer.digest) {
            return Ok(Pulled {
                manifest: manifest_digest,
                wasm_digest: layer.digest,
                wasm,
                title: layer.title,
            });
        }
        let pull = self.bounded()?;
        let wasm = self.run(async {
            pull.blob(&reference.repository, &layer.digest, layer.size as u64)
                .await
                .map_err(|e| self.http_error(reference, format!("its blob {}", layer.digest), e))
        })?;
        let wasm_digest = crate::sha256_digest(&wasm);
        if wasm_digest != layer.digest {
            return Err(OciError::DigestMismatch {
                reference: shown,
                what: "plugin blob".into(),
                expected: layer.digest,
                actual: wasm_digest,
            });
        }
        Ok(Pulled {
            manifest: manifest_digest,
            wasm,
            wasm_digest,
            title: layer.title,
        })
    }

    /// Pushes a component: its bytes as one `application/wasm` layer, a wasm
    /// config, and a manifest annotated with the plugin's own description.
    pub fn push(
        &self,
        reference: &OciReference,
        wasm: &[u8],
        info: &PushInfo,
    ) -> Result<Pushed, OciError> {
        let wasm_digest = crate::sha256_digest(wasm);
        let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let config = serde_json::to_vec(&serde_json::json!({
            "created": created,
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [wasm_digest],
            "component": {
                "exports": [info.interface],
                "imports": [],
                "target": null,
            },
        }))
        .unwrap_or_default();
        let config_digest = crate::sha256_digest(&config);
        let mut annotations = BTreeMap::from([
            (TITLE.to_string(), info.name.clone()),
            (DESCRIPTION.to_string(), info.description.clone()),
            (CREATED.to_string(), created),
            (INTERFACE_ANNOTATION.to_string(), info.interface.clone()),
        ]);
        if let Some(v) = &info.version {
            annotations.insert(VERSION.to_string(), v.clone());
        }
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": WASM_CONFIG_MEDIA_TYPE,
            "config": {
                "mediaType": WASM_CONFIG_MEDIA_TYPE,
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": [{
                "mediaType": WASM_LAYER_MEDIA_TYPE,
                "digest": wasm_digest,
                "size": wasm.len(),
                "annotations": { TITLE: format!("{}.wasm", info.name) },
            }],
            "annotations": annotations,
        }))
        .unwrap_or_default();
        let manifest_digest = crate::sha256_digest(&manifest);
        let http = self.bounded()?;
        let named = reference
            .tag
            .clone()
            .unwrap_or_else(|| manifest_digest.clone());
        self.run(async {
            http.push(
                &reference.repository,
                &named,
                &[(&wasm_digest, wasm), (&config_digest, &config)],
                &manifest,
                OCI_MANIFEST,
            )
            .await
            .map_err(|e| self.http_error(reference, what_of(reference), e))
        })?;
        Ok(Pushed {
            manifest: manifest_digest,
            wasm: wasm_digest,
        })
    }

    /// Runs one registry operation to its end on a runtime of its own (on its
    /// own thread: the caller may already be inside a runtime), bounded by
    /// [`OPERATION_TIMEOUT`], with the error turned into one a person can act on.
    fn run<T: Send>(
        &self,
        operation: impl Future<Output = Result<T, OciError>> + Send,
    ) -> Result<T, OciError> {
        let outcome = std::thread::scope(|s| {
            s.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| OciError::Registry {
                        registry: self.registry.clone(),
                        message: format!("no runtime for the registry client ({e})"),
                    })?;
                runtime.block_on(async {
                    match tokio::time::timeout(OPERATION_TIMEOUT, operation).await {
                        Ok(result) => result,
                        Err(_) => Err(OciError::Unreachable {
                            registry: self.registry.clone(),
                            https: self.https,
                            reason: format!("no answer within {} s", OPERATION_TIMEOUT.as_secs()),
                        }),
                    }
                })
            })
            .join()
        });
        outcome.unwrap_or_else(|_| {
            Err(OciError::Registry {
                registry: self.registry.clone(),
                message: "the registry client stopped unexpectedly".into(),
            })
        })
    }

    fn unauthorized(&self) -> OciError {
        OciError::Unauthorized {
            registry: self.registry.clone(),
            credentials: if self.credentials.source == "anonymous" {
                "no".to_string()
            } else {
                format!("the {}", self.credentials.source)
            },
            helper_skipped: self.credentials.helper_skipped,
        }
    }

    /// A bounded read's failure, `what` being what was asked for.
    fn http_error(&self, reference: &OciReference, what: String, e: HttpError) -> OciError {
        match e {
            HttpError::Unreachable(reason) => OciError::Unreachable {
                registry: self.registry.clone(),
                https: self.https,
                reason,
            },
            HttpError::Unauthorized => self.unauthorized(),
            HttpError::NotFound => OciError::NotFound {
                reference: reference.to_string(),
                what,
            },
            other => OciError::Registry {
                registry: self.registry.clone(),
                message: other.to_string(),
            },
        }
    }
}

fn what_of(reference: &OciReference) -> String {
    match (&reference.digest, &reference.tag) {
        (Some(d), _) => format!("the manifest {d}"),
        (None, Some(t)) => format!("the tag `{t}`"),
        _ => "the manifest".into(),
    }
}

/// reqwest's error, with its causes: "error sending request" alone hides
/// "Connection refused".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

struct WasmLayer {
    digest: String,
    size: i64,
    title: Option<String>,
}

/// The one wasm layer of a wasm OCI manifest; else what the manifest is.
fn wasm_layer(raw: &[u8]) -> Result<WasmLayer, String> {
    let m: Manifest =
        serde_json::from_slice(raw).map_err(|e| format!("its manifest is not valid JSON ({e})"))?;
    if m.manifests.is_some()
        || matches!(m.media_type.as_deref(), Some(OCI_INDEX) | Some(DOCKER_LIST))
    {
        return Err("it is an image index (a multi-platform image), not a WASM component".into());
    }
    let config = m.config.map(|c| c.media_type).unwrap_or_default();
    let wasm_config = config == WASM_CONFIG_MEDIA_TYPE || config == LEGACY_CONFIG_MEDIA_TYPE;
    let wasm: Vec<&Descriptor> = m
        .layers
        .iter()
        .filter(|l| {
            l.media_type == WASM_LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE
        })
        .collect();
    if !wasm_config || wasm.len() != 1 || m.layers.len() != 1 {
        let layers: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
        return Err(format!(
            "its config is `{config}` and its layers are [{}]; a plugin has config `{WASM_CONFIG_MEDIA_TYPE}` and one `{WASM_LAYER_MEDIA_TYPE}` layer",
            layers.join(", ")
        ));
    }
    let layer = wasm[0];
    if !crate::reference::is_digest(&layer.digest) {
        return Err(format!(
            "its layer digest `{}` is not a sha256 digest",
            layer.digest
        ));
    }
    Ok(WasmLayer {
        digest: layer.digest.clone(),
        size: layer.size,
        title: layer
            .annotations
            .get(TITLE)
            .map(|t| t.trim_end_matches(".wasm").to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_for_loopback_or_listed_registries() {
        let none = |_: &str| None;
        assert!(plain_http_allowed("127.0.0.1:5000", &none));
        assert!(plain_http_allowed("localhost:5000", &none));
        assert!(plain_http_allowed("[::1]:5000", &none));
        assert!(!plain_http_allowed("registry.example:5000", &none));
        let listed = |k: &str| {
            (k == "PIPELINE_REGISTRY_INSECURE").then(|| "other, registry.example:5000".to_string())
        };
        assert!(plain_http_allowed("registry.example:5000", &listed));
        assert!(!plain_http_allowed("registry.example:5001", &listed));
    }

    #[test]
    fn only_the_wasm_layout_is_a_plugin() {
        let d = format!("sha256:{}", "a".repeat(64));
        let wasm = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"{WASM_CONFIG_MEDIA_TYPE}","digest":"{d}","size":2}},"layers":[{{"mediaType":"application/wasm","digest":"{d}","size":9,"annotations":{{"org.opencontainers.image.title":"ceph-df.wasm"}}}}]}}"#
        );
        let layer = wasm_layer(wasm.as_bytes()).unwrap();
        assert_eq!(layer.title.as_deref(), Some("ceph-df"));
        let image = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{d}","size":2}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{d}","size":9}}]}}"#
        );
        let e = wasm_layer(image.as_bytes()).err().unwrap();
        assert!(
            e.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
            "{e}"
        );
        let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        assert!(
            wasm_layer(index.as_bytes())
                .err()
                .unwrap()
                .contains("image index")
        );
    }
}
