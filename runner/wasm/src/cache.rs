//! Compiled components on disk, so that a plugin is compiled once and later
//! runs start it in well under a millisecond.
//!
//! Key: the SHA-256 of the `.wasm` file AND a hash of the engine's
//! `precompile_compatibility_hash()` (wasmtime version, target, settings such
//! as epoch interruption). A changed `.wasm` or a new runner build gets a new
//! entry; stale entries are simply never read again.
//!
//! Loading a precompiled artifact is `unsafe` in wasmtime (the bytes are
//! trusted machine code), so the cache only reads files it wrote itself: its
//! own folder, created with mode 0700, files written under a temporary name
//! and renamed into place. Anything it cannot deserialize is recompiled.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

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
    /// Compiled now (and stored, when the cache is writable).
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

    /// The compiled component for `bytes` (a `.wasm` or `.wat` file's content).
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha256: &str,
    ) -> Result<(Component, CacheOutcome), wasmtime::Error> {
        let entry = self.entry(engine, sha256);
        if let Some(path) = &entry
            && path.is_file()
        {
            // SAFETY: the file is one this cache wrote (see the module comment),
            // keyed on the engine's compatibility hash; wasmtime still checks its
            // header and refuses an artifact for another engine configuration.
            if let Ok(component) = unsafe { Component::deserialize_file(engine, path) } {
                return Ok((component, CacheOutcome::Hit));
            }
        }
        let compiled = engine.precompile_component(bytes)?;
        if let Some(path) = &entry {
            // A cache that cannot be written costs a compile next time; not an error.
            let _ = store(path, &compiled);
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
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
