//! Secrets and identifiers generated at `up`: fsid, OSD uuids, cephx keys, S3/Swift keys.
//!
//! They are generated here rather than with `uuidgen`/`ceph-authtool --gen-print-key`
//! to save a dozen process starts per `up`; randomness comes from `/dev/urandom`.

use std::io::Read;

use crate::error::SandboxError;

const URANDOM: &str = "/dev/urandom";

/// `n` random bytes from the kernel.
pub(crate) fn random_bytes(n: usize) -> Result<Vec<u8>, SandboxError> {
    let mut buf = vec![0u8; n];
    std::fs::File::open(URANDOM)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(SandboxError::io("read", URANDOM))?;
    Ok(buf)
}

/// A random version-4 UUID in the usual `8-4-4-4-12` hex form (Ceph fsid, OSD uuid).
pub(crate) fn uuid_v4() -> Result<String, SandboxError> {
    let bytes: [u8; 16] = random_bytes(16)?.try_into().unwrap_or([0; 16]);
    Ok(format_uuid(bytes))
}

fn format_uuid(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A cephx secret as `ceph-authtool --gen-print-key` prints it.
pub(crate) fn cephx_key() -> Result<String, SandboxError> {
    let secret: [u8; 16] = random_bytes(16)?.try_into().unwrap_or([0; 16]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(encode_cephx_key(
        secret,
        now.as_secs() as u32,
        now.subsec_nanos(),
    ))
}

/// Ceph's `CryptoKey` encoding: type (u16, 1 = AES), created (u32 s, u32 ns), length (u16),
/// secret; little-endian, then base64.
fn encode_cephx_key(secret: [u8; 16], secs: u32, nanos: u32) -> String {
    let mut raw = Vec::with_capacity(28);
    raw.extend_from_slice(&1u16.to_le_bytes());
    raw.extend_from_slice(&secs.to_le_bytes());
    raw.extend_from_slice(&nanos.to_le_bytes());
    raw.extend_from_slice(&16u16.to_le_bytes());
    raw.extend_from_slice(&secret);
    base64(&raw)
}

/// A random string of `len` characters from `alphabet` (rejection sampling, so unbiased).
pub(crate) fn random_token(len: usize, alphabet: &[u8]) -> Result<String, SandboxError> {
    let limit = 256 - 256 % alphabet.len().max(1);
    let mut out = String::with_capacity(len);
    while out.len() < len {
        for b in random_bytes(len * 2)? {
            if (b as usize) < limit && out.len() < len {
                out.push(alphabet[b as usize % alphabet.len()] as char);
            }
        }
    }
    Ok(out)
}

/// Upper-case letters and digits, the alphabet of AWS-style access key ids.
pub(crate) const ACCESS_KEY_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// Letters and digits: safe in URLs, headers and shells without quoting.
pub(crate) const SECRET_ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn base64(data: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn cephx_key_has_ceph_shape() {
        // Real keys from ceph-authtool start with "AQ" (type 1) and are 40 characters.
        let key = encode_cephx_key([7; 16], 1_796_030_712, 123);
        assert_eq!(key.len(), 40);
        assert!(key.starts_with("AQ"), "{key}");
        assert!(key.ends_with("=="), "{key}");
        let live = cephx_key().unwrap();
        assert_eq!(live.len(), 40);
    }

    #[test]
    fn uuid_is_version_4() {
        let id = format_uuid([0xff; 16]);
        assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let live = uuid_v4().unwrap();
        assert_eq!(live.len(), 36);
        assert_eq!(&live[14..15], "4");
    }

    #[test]
    fn tokens_use_only_the_alphabet() {
        let token = random_token(40, SECRET_ALPHABET).unwrap();
        assert_eq!(token.len(), 40);
        assert!(token.bytes().all(|b| SECRET_ALPHABET.contains(&b)));
    }
}
