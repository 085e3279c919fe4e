//! Secrets (env variables marked `secret: true`) never reach results.json, the
//! report, or `plan` output: every string written out passes through here.

/// Bytes read at a time by [`Redactor::redact_file`].
const CHUNK: usize = 64 * 1024;

/// Shorter secrets are refused when the suite is compiled (see `compile`).
pub const MIN_SECRET_LEN: usize = 4;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "***");
        }
        out
    }

    /// Replaces every secret in the file at `path` (raw command output),
    /// streaming, so a large file is never held whole. Returns whether it
    /// held one. The file is rewritten through a temporary file beside it
    /// only when it did.
    pub fn redact_file(&self, path: &std::path::Path) -> std::io::Result<bool> {
        use std::io::Write;
        if self.secrets.is_empty() {
            return Ok(false);
        }
        if !self.scan(std::fs::File::open(path)?, &mut std::io::sink())? {
            return Ok(false);
        }
        let tmp = path.with_extension("redacting");
        let mut out = std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?,
        );
        let done = self
            .scan(std::fs::File::open(path)?, &mut out)
            .and_then(|_| out.flush());
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        drop(out);
        std::fs::rename(&tmp, path)?;
        Ok(true)
    }

    /// Copies `input` to `out` with every secret replaced; whether any was.
    fn scan(
        &self,
        mut input: impl std::io::Read,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<bool> {
        let longest = self.secrets.iter().map(String::len).max().unwrap_or(1);
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + longest);
        let mut chunk = vec![0u8; CHUNK];
        let mut found = false;
        loop {
            let n = input.read(&mut chunk)?;
            let eof = n == 0;
            buf.extend_from_slice(&chunk[..n]);
            // A secret that starts before `limit` lies wholly in `buf`.
            let limit = if eof {
                buf.len()
            } else {
                buf.len().saturating_sub(longest - 1)
            };
            let mut plain = Vec::with_capacity(limit);
            let mut i = 0;
            while i < limit {
                match self
                    .secrets
                    .iter()
                    .find(|s| buf[i..].starts_with(s.as_bytes()))
                {
                    Some(s) => {
                        plain.extend_from_slice(b"***");
                        i += s.len();
                        found = true;
                    }
                    None => {
                        plain.push(buf[i]);
                        i += 1;
                    }
                }
            }
            out.write_all(&plain)?;
            buf.drain(..i.min(buf.len()));
            if eof {
                return Ok(found);
            }
        }
    }

    pub fn redact_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.redact_json(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.redact_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_occurrence() {
        let r = Redactor::new(["s3cr3t".to_string(), "ab".to_string()]);
        assert_eq!(r.redact("key=s3cr3t and s3cr3t ab"), "key=*** and *** ***");
    }

    #[test]
    fn files_are_redacted_in_place_across_chunk_boundaries() {
        let r = Redactor::new(["s3cr3t".to_string(), "s3cr3t-longer".to_string()]);
        let dir = std::env::temp_dir().join(format!("redact-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        // A secret straddling every chunk boundary, and the longer one whole.
        let mut text = Vec::new();
        while text.len() < 3 * CHUNK {
            text.extend_from_slice(b"xxxxxxxxxxxxxxxxxxxxxxs3cr3t\n");
        }
        text.extend_from_slice(b"end s3cr3t-longer \xff binary");
        std::fs::write(&path, &text).unwrap();
        assert!(r.redact_file(&path).unwrap());
        let out = std::fs::read(&path).unwrap();
        let expected = String::from_utf8_lossy(&text)
            .replace("s3cr3t-longer", "***")
            .replace("s3cr3t", "***");
        assert_eq!(String::from_utf8_lossy(&out), expected);
        assert!(!r.redact_file(&path).unwrap(), "nothing left to redact");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
