//! Plugins shared through OCI registries.
//!
//! A suite names one as `uses: oci://HOST[:PORT]/NAMESPACE/NAME:TAG` (or
//! `@sha256:…`). [`fetch`] turns that into a local `.wasm` file: from the
//! digest-keyed [`cache`] when the lock (or the reference) pins a digest that
//! is cached, which needs no network; else pulled from the registry, checked
//! and cached. [`lockfile`] is `SUITE.lock`; [`client`] talks to registries.

pub mod cache;
pub mod client;
pub mod credentials;
pub mod error;
pub mod lockfile;
pub mod reference;
mod registry_http;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

pub use cache::Cache;
pub use client::RegistryClient;
pub use error::OciError;
pub use lockfile::{LockedPlugin, Lockfile, lock_path};
pub use reference::{OciReference, ReferenceError, is_oci};

/// `sha256:<hex>` of some bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in hash {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A plugin reference made local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub path: PathBuf,
    /// The manifest digest it resolved to.
    pub manifest: String,
    /// The digest of the `.wasm` bytes at `path`.
    pub wasm: String,
    /// Taken from the cache, without asking the registry.
    pub cached: bool,
}

/// A reference, the lock's digests for it, the cache folder.
type MemoKey = (String, Option<String>, PathBuf);

/// Where plugins are cached, and how the environment is read (credentials,
/// insecure registries).
pub struct Fetcher<'a> {
    pub cache: Cache,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Fetcher<'a> {
    pub fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Fetcher {
            cache: Cache::new(cache::default_dir(env)),
            env,
        }
    }

    /// The plugin `reference` names, as the lock pins it when `locked` is given.
    /// Offline whenever the digest to run is known and cached.
    pub fn fetch(
        &self,
        reference: &OciReference,
        locked: Option<&LockedPlugin>,
    ) -> Result<Fetched, OciError> {
        // A run resolves each reference once: stages that share a tag run the
        // same bytes even if the tag moves mid-run.
        static MEMO: OnceLock<Mutex<HashMap<MemoKey, Result<Fetched, OciError>>>> = OnceLock::new();
        let key = (
            reference.to_string(),
            locked.map(|l| format!("{}{}", l.manifest, l.wasm)),
            self.cache.dir().to_path_buf(),
        );
        let memo = MEMO.get_or_init(Default::default);
        if let Some(found) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return found;
        }
        let result = self.fetch_uncached(reference, locked);
        if let Ok(mut m) = memo.lock() {
            m.insert(key, result.clone());
        }
        result
    }

    fn fetch_uncached(
        &self,
        reference: &OciReference,
        locked: Option<&LockedPlugin>,
    ) -> Result<Fetched, OciError> {
        let pinned = locked
            .map(|l| l.manifest.clone())
            .or_else(|| reference.digest.clone());
        if let Some(manifest) = &pinned
            && let Some((record, path)) = self.cache.get(manifest)
        {
            check_locked_wasm(reference, locked, &record.wasm)?;
            return Ok(Fetched {
                path,
                manifest: record.manifest,
                wasm: record.wasm,
                cached: true,
            });
        }
        let target = match &pinned {
            Some(d) => reference.pinned(d),
            None => reference.clone(),
        };
        let client = RegistryClient::new(&reference.registry, self.env);
        let pulled = match client.pull(&target, &|digest| self.cache.wasm(digest)) {
            Err(OciError::NotFound { .. }) if locked.is_some() && reference.tag.is_some() => {
                let locked = pinned.clone().unwrap_or_default();
                return Err(OciError::LockedDigestGone {
                    reference: reference.to_string(),
                    now: client.resolve(reference).ok().filter(|d| *d != locked),
                    locked,
                });
            }
            other => other?,
        };
        check_locked_wasm(reference, locked, &pulled.wasm_digest)?;
        let record = cache::CachedManifest {
            reference: reference.to_string(),
            manifest: pulled.manifest.clone(),
            wasm: pulled.wasm_digest.clone(),
            size: pulled.wasm.len() as u64,
            title: pulled.title,
            pulled_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let path = self.cache.put(&record, &pulled.wasm)?;
        Ok(Fetched {
            path,
            manifest: pulled.manifest,
            wasm: pulled.wasm_digest,
            cached: false,
        })
    }
}

/// The lock names the plugin bytes too: a manifest that now names other
/// bytes (a registry that rewrote it) is refused.
fn check_locked_wasm(
    reference: &OciReference,
    locked: Option<&LockedPlugin>,
    actual: &str,
) -> Result<(), OciError> {
    match locked {
        Some(l) if l.wasm != actual => Err(OciError::DigestMismatch {
            reference: reference.to_string(),
            what: "plugin (as locked)".into(),
            expected: l.wasm.clone(),
            actual: actual.to_string(),
        }),
        _ => Ok(()),
    }
}
