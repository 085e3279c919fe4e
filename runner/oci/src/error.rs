//! What can go wrong between a suite's `oci://` reference and the plugin's
//! bytes. Each variant is one situation a person can act on; `hint()` says how.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OciError {
    #[error("registry {registry} is unreachable: {reason}")]
    Unreachable {
        registry: String,
        reason: String,
        /// The client spoke HTTPS (the registry may serve plain HTTP).
        https: bool,
    },
    #[error("registry {registry} refused access (401 Unauthorized) with {credentials} credentials")]
    Unauthorized {
        registry: String,
        /// Where the credentials came from (never the secret itself).
        credentials: String,
        helper_skipped: bool,
    },
    #[error("{reference}: {what} is not in the registry")]
    NotFound { reference: String, what: String },
    #[error("{reference} is not a WASM component: {found}")]
    NotAComponent { reference: String, found: String },
    #[error("{reference}: the {what} has digest {actual}, expected {expected}; refusing it")]
    DigestMismatch {
        reference: String,
        what: String,
        expected: String,
        actual: String,
    },
    #[error(
        "{reference}: the lock pins {locked}, which the registry no longer has{}; refusing to run other bytes",
        .now.as_ref().map(|d| format!(" (the tag now points at {d})")).unwrap_or_default()
    )]
    LockedDigestGone {
        reference: String,
        locked: String,
        now: Option<String>,
    },
    #[error("registry {registry}: {message}")]
    Registry { registry: String, message: String },
    #[error("plugin cache {path}: {message}")]
    Cache { path: String, message: String },
    #[error("lock file {path}: {message}")]
    Lock { path: String, message: String },
}

impl OciError {
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            OciError::Unreachable {
                registry,
                reason,
                https,
            } => {
                let mut h = format!(
                    "check that the registry runs and that {registry} is its address; a suite whose plugins are all locked and pulled (`pipeline lock`, `pipeline plugins pull`) runs without it"
                );
                if *https && (reason.contains("TLS") || reason.contains("tls")) {
                    h.push_str("; if it serves plain HTTP, list it in PIPELINE_REGISTRY_INSECURE");
                }
                h
            }
            OciError::Unauthorized { helper_skipped, .. } => {
                let mut h = "set PIPELINE_REGISTRY_USER and PIPELINE_REGISTRY_PASSWORD, or log in (`docker login`, `podman login`, `skopeo login`) so ~/.docker/config.json has the registry in `auths`".to_string();
                if *helper_skipped {
                    h.push_str("; credential helpers (credsStore, credHelpers) are not run");
                }
                h
            }
            OciError::NotFound { .. } => {
                "check the repository and tag (`skopeo list-tags docker://REGISTRY/REPOSITORY`), or publish it with `pipeline plugins push FILE REF`".into()
            }
            OciError::NotAComponent { .. } => {
                "a plugin is published with `pipeline plugins push`, or by any tool in the wasm OCI layout (config application/vnd.wasm.config.v0+json, one application/wasm layer)".into()
            }
            OciError::DigestMismatch { .. } => {
                "the registry or a cache served other bytes than the digest names; nothing was run. Check the registry's storage, then `pipeline plugins pull` again".into()
            }
            OciError::LockedDigestGone { .. } => {
                "if the new bytes are wanted, review them and run `pipeline lock --update SUITE`".into()
            }
            OciError::Lock { .. } => "`pipeline lock SUITE` writes it anew".into(),
            OciError::Registry { .. } | OciError::Cache { .. } => return None,
        })
    }
}
