//! Secrets and identifiers generated at `up`: fsid, OSD uuids, cephx keys, S3/Swift keys.
//!
//! They are generated here rather than with `uuidgen`/`ceph-authtool --gen-print-key`
//! to save a dozen process starts per `up`; randomness comes from `/dev/urandom`.

use std::io::Read;

use crate::error::SandboxError;
use crate::release::KeyCipher;

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

/// A cephx secret as the release's `ceph-authtool --gen-print-key` prints it.
pub(crate) fn cephx_key(cipher: KeyCipher) -> Result<String, SandboxError> {
    let secret = random_bytes(cipher.secret_len())?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Ok(encode_cephx_key(
        cipher,
        &secret,
        now.as_secs() as u32,
        now.subsec_nanos(),
    ))
}

/// Ceph's `CryptoKey` encoding: type (u16: 1 = AES-128, 2 = AES-256k), created (u32 s,
/// u32 ns), length (u16), secret; little-endian, then base64.
fn encode_cephx_key(cipher: KeyCipher, secret: &[u8], secs: u32, nanos: u32) -> String {
    let mut raw = Vec::with_capacity(12 + secret.len());
    raw.extend_from_slice(&cipher.type_code().to_le_bytes());
    raw.extend_from_slice(&secs.to_le_bytes());
    raw.extend_from_slice(&nanos.to_le_bytes());
    raw.extend_from_slice(&(secret.len() as u16).to_le_bytes());
    raw.extend_from_slice(secret);
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

    /// Decodes a key back into (type, secs, nanos, secret).
    fn decode(key: &str) -> (u16, u32, u32, Vec<u8>) {
        let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bits = 0u32;
        let mut n = 0;
        let mut raw = Vec::new();
        for c in key.bytes().filter(|&c| c != b'=') {
            bits = bits << 6 | table.iter().position(|&t| t == c).unwrap() as u32;
            n += 6;
            if n >= 8 {
                n -= 8;
                raw.push((bits >> n) as u8);
            }
        }
        let u16_at = |i: usize| u16::from_le_bytes([raw[i], raw[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(raw[i..i + 4].try_into().unwrap());
        let len = u16_at(10) as usize;
        (u16_at(0), u32_at(2), u32_at(6), raw[12..12 + len].to_vec())
    }

    #[test]
    fn keys_are_encoded_as_each_release_s_authtool_prints_them() {
        // `ceph-authtool --gen-print-key` of 16.2.15 (Debian 12) and of 20.2.4 (sid),
        // printed here on 2026-12-02: re-encoding their fields gives the same text.
        for (real, cipher) in [
            (
                "AQCqvQ9r/9glBhAAlT5nPj2dQUhMsKzw+XQb2w==",
                KeyCipher::Aes128,
            ),
            (
                "AgCqvQ9rvWlKBCAAn4rfDoEjQnIPRWmGlFpSKiy1jegfOJPSRn7qri1cr/c=",
                KeyCipher::Aes256k,
            ),
        ] {
            let (kind, secs, nanos, secret) = decode(real);
            assert_eq!(kind, cipher.type_code(), "{real}");
            assert_eq!(secret.len(), cipher.secret_len(), "{real}");
            assert_eq!(encode_cephx_key(cipher, &secret, secs, nanos), real);
            let live = cephx_key(cipher).unwrap();
            assert_eq!(live.len(), real.len());
            assert_eq!(live[..2], real[..2]);
            assert_eq!(decode(&live).3.len(), cipher.secret_len());
        }
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
