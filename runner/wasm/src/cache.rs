//! Compiled components on disk, so that a plugin is compiled once and later
//! runs start it in well under a millisecond.
//!
//! Key: the SHA-256 of the `.wasm` file AND a hash of the engine's
//! `precompile_compatibility_hash()` (wasmtime version, target, settings such
//! as epoch interruption). A changed `.wasm` or a new runner build gets a new
//! entry; stale entries are simply never read again.
//!
//! Loading a precompiled artifact is `unsafe` in wasmtime: the bytes are
//! trusted machine code, run as the runner's user (often root). So the
//! cache only loads files it can show it wrote itself (see [`crate::cache_trust`]):
//!
//! - the folder (and `<cache>.trust`) must be owned by this user and
//!   writable by no one else;
//!   otherwise the cache is not used at all (every load compiles) and a
//!   warning says so once;
//! - each artifact has a tag, an HMAC under a per-user key kept outside
//!   the cache folder (`<cache>.trust/key`, mode 0600), over the `.wasm` hash it was
//!   compiled from and the artifact file's identity (device, inode, size,
//!   modification and change times). A file swapped, edited, renamed or
//!   copied into place no longer matches its tag and is recompiled. The
//!   identity, not the content, is hashed so that a cache hit stays a
//!   `stat` away (hashing a Python plugin's 40 MB artifact would cost more
//!   than loading it).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::cache_trust;

/// Where the cache lives: `$PIPELINE_CACHE_DIR/wasm`, else
/// `$XDG_CACHE_HOME/pipeline/wasm`, else `~/.cache/pipeline/wasm`.
pub fn default_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env("PIPELINE_CACHE_DIR") {
        return Some(dir.join("wasm"));
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return Some(dir.join("pipeline").join("wasm"));
    }
    env("HOME").map(|h| h.join(".cache").join("pipeline").join("wasm"))
}

/// Whether a component came from the cache (for `plugins describe` and benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    Hit,
    /// Compiled now (and stored, when the cache is usable).
    Compiled,
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// `None`: never cache (every load compiles).
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache { dir }
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The cache file for a wasm file with this SHA-256.
    pub fn entry(&self, engine: &Engine, sha256: &str) -> Option<PathBuf> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let compat = h.finish();
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{sha256}-{compat:016x}.cwasm")))
    }

    /// Why the cache folder is not used, if it is not (also warned about once).
    pub fn refused(&self) -> Option<String> {
        let dir = self.dir.as_ref()?;
        cache_trust::problem(dir)
    }

    /// The compiled component for `bytes` (a `.wasm` or `.wat` file's content).
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha256: &str,
    ) -> Result<(Component, CacheOutcome), wasmtime::Error> {
        let trusted = self.dir.as_deref().and_then(cache_trust::trusted);
        let entry = trusted.as_ref().and(self.entry(engine, sha256));
        if let (Some(key), Some(path)) = (&trusted, &entry)
            && cache_trust::verify(key, path, sha256)
        {
            // SAFETY: the folder is this user's alone and the file carries a
            // tag only this user's key makes, for exactly this file and this
            // `.wasm` hash: it is an artifact this cache wrote (see the module
            // comment). wasmtime still checks its header and refuses an
            // artifact for another engine configuration.
            if let Ok(component) = unsafe { Component::deserialize_file(engine, path) } {
                return Ok((component, CacheOutcome::Hit));
            }
        }
        let compiled = engine.precompile_component(bytes)?;
        if let (Some(key), Some(path)) = (&trusted, &entry) {
            // A cache that cannot be written costs a compile next time; not an error.
            let _ = store(path, &compiled).and_then(|()| cache_trust::sign(key, path, sha256));
        }
        // SAFETY: `compiled` was produced by this engine a moment ago.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, CacheOutcome::Compiled))
    }
}

fn store(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    // Atomic: a concurrent runner sees the old state or the whole file.
    std::fs::rename(&tmp, path)
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    hex(&digest)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
