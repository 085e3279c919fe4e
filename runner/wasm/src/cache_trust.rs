//! Whether the compile cache may be trusted, and the tags that bind each
//! artifact to the `.wasm` it was compiled from (see [`crate::cache`]).
//!
//! The key and the tags live in a sibling folder, `<cache>.trust`
//! (`~/.cache/pipeline/wasm.trust`), under the same ownership rules: the
//! cache folder itself holds nothing but artifacts.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::cache::hex;

/// The per-user secret of a cache folder, and where its tags are kept.
pub struct Key {
    secret: [u8; 32],
    trust_dir: PathBuf,
}

const KEY_FILE: &str = "key";
const TAG_VERSION: &[u8] = b"pipeline-wasm-cache-tag-v1\0";

/// The folder's key when the folder is fit to hold machine code this
/// process will run; `None` (after a warning, once per folder) when not.
pub fn trusted(dir: &Path) -> Option<Key> {
    let trust_dir = trust_dir(dir);
    let checked = check_dir(dir)
        .and_then(|()| check_dir(&trust_dir))
        .and_then(|()| key(&trust_dir).map_err(|e| e.to_string()));
    match checked {
        Ok(key) => Some(key),
        Err(reason) => {
            warn_once(dir, &reason);
            None
        }
    }
}

/// Why the cache folder is not used, if it is not.
pub fn problem(dir: &Path) -> Option<String> {
    check_dir(dir)
        .and_then(|()| check_dir(&trust_dir(dir)))
        .err()
}

/// `<cache>.trust`, next to the cache folder.
fn trust_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".trust");
    dir.with_file_name(name)
}

/// `Err`: why the folder is not used. A missing folder is created (0700).
fn check_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        // Best effort: if it cannot be created, the checks below say why.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot use it: {e}"))?;
    if !meta.is_dir() {
        return Err("it is not a folder".into());
    }
    check_owner(&meta, 0o022, "folder")
}

/// Owned by this user, and none of the `forbidden` mode bits set.
fn check_owner(meta: &std::fs::Metadata, forbidden: u32, what: &str) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "the {what} belongs to user id {}, not to this user ({me})",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & forbidden != 0 {
        return Err(format!(
            "the {what} is open to other users (mode {mode:03o}); `chmod go-rwx` it"
        ));
    }
    Ok(())
}

fn warn_once(dir: &Path, reason: &str) {
    static WARNED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let Ok(mut warned) = WARNED.lock() else {
        return;
    };
    if warned
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
    {
        eprintln!(
            "warning: not using the WebAssembly compile cache {}: {reason}. Plugins are compiled on every run until it is fixed (or set PIPELINE_CACHE_DIR to a private folder).",
            dir.display()
        );
    }
}

/// The folder's key, created on first use (32 random bytes, mode 0600).
fn key(dir: &Path) -> std::io::Result<Key> {
    let path = dir.join(KEY_FILE);
    let to_key = |bytes: &[u8]| {
        <[u8; 32]>::try_from(bytes)
            .map(|secret| Key {
                secret,
                trust_dir: dir.to_path_buf(),
            })
            .map_err(|_| std::io::Error::other("the cache key file is damaged; delete it"))
    };
    match read_private(&path, 0o077) {
        Ok(bytes) => return to_key(&bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut fresh = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut fresh)?;
    let tmp = dir.join(format!(".{KEY_FILE}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    file.write_all(&fresh)?;
    file.sync_all()?;
    // A hard link never replaces: of two runners creating a key at once,
    // both end up using the one that landed first.
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => to_key(&fresh),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            to_key(&read_private(&path, 0o077)?)
        }
        Err(e) => Err(e),
    }
}

/// A regular file of this user's, read without following a symlink.
fn read_private(path: &Path, forbidden: u32) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    check_owner(&meta, forbidden, "file").map_err(std::io::Error::other)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn tag_path(key: &Key, artifact: &Path) -> PathBuf {
    let mut name = artifact.file_name().unwrap_or_default().to_os_string();
    name.push(".tag");
    key.trust_dir.join(name)
}

/// The tag of the artifact at `path` as it is now, compiled from the
/// `.wasm` with hash `sha256`.
fn tag(key: &Key, path: &Path, sha256: &str) -> std::io::Result<String> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    check_owner(&meta, 0o022, "file").map_err(std::io::Error::other)?;
    let mut message = Vec::with_capacity(160);
    message.extend_from_slice(TAG_VERSION);
    message.extend_from_slice(sha256.as_bytes());
    message.push(0);
    message.extend_from_slice(path.file_name().unwrap_or_default().as_encoded_bytes());
    message.push(0);
    for n in [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
        meta.ctime() as u64,
        meta.ctime_nsec() as u64,
    ] {
        message.extend_from_slice(&n.to_le_bytes());
    }
    Ok(hex(&hmac_sha256(&key.secret, &message)))
}

/// Writes the tag of a freshly stored artifact.
pub fn sign(key: &Key, path: &Path, sha256: &str) -> std::io::Result<()> {
    let tag = tag(key, path, sha256)?;
    let tag_file = tag_path(key, path);
    let tmp = tag_file.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?
        .write_all(tag.as_bytes())?;
    // Renamed into place: a reader sees a whole tag or none.
    std::fs::rename(&tmp, &tag_file)
}

/// Whether the artifact at `path` is the one this cache wrote for `sha256`.
pub fn verify(key: &Key, path: &Path, sha256: &str) -> bool {
    let (Ok(expected), Ok(stored)) = (
        tag(key, path, sha256),
        read_private(&tag_path(key, path), 0o022),
    ) else {
        return false;
    };
    // Constant time: the comparison does not tell how much of a forged tag was right.
    expected.len() == stored.len()
        && expected
            .bytes()
            .zip(stored.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// HMAC-SHA-256 (RFC 2104) with a 32-byte key.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |b: u8| block.map(|k| k ^ b);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_openssl() {
        // printf 'Hi There' | openssl dgst -sha256 -mac HMAC -macopt hexkey:0b0b...(32 bytes)
        let key = [0x0b; 32];
        let mac = hex(&hmac_sha256(&key, b"Hi There"));
        assert_eq!(
            mac,
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }
}
