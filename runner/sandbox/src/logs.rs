//! Tails of daemon logs, for error messages that explain themselves.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of a log's end is read: enough for 20 long Ceph log lines.
const TAIL_BYTES: u64 = 64 * 1024;

/// The last `n` lines of `text`, without the trailing newline.
pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last `n` lines of the file at `path`, or a note saying why there are none.
pub(crate) fn tail_file(path: &Path, n: usize) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    match read() {
        Ok(text) if text.trim().is_empty() => "(log is empty)".into(),
        Ok(text) => last_lines(&text, n),
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\n", 5), "a");
        assert_eq!(last_lines("", 5), "");
    }

    #[test]
    fn missing_file_is_explained_not_fatal() {
        let text = tail_file(Path::new("/nonexistent/pipeline-sandbox.log"), 20);
        assert!(text.starts_with("(cannot read"), "{text}");
    }
}
