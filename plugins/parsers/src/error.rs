//! The one error type of every parser.
//!
//! A parse failure is read by a person looking at a failed pipeline stage, so
//! each variant says which tool's output was being read, what was expected,
//! and quotes the line that did not fit (or the last line of the output when
//! the expected line is missing: that is usually the tool's own error
//! message, e.g. `dd: failed to open 'x': No such file or directory`).

use thiserror::Error;

/// Longest quoted line, in characters; a runaway line (binary garbage, a
/// whole JSON document on one line) is cut so the message stays readable.
const MAX_QUOTE_CHARS: usize = 160;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The line that carries the result never appeared.
    #[error("{tool}: expected {expected}, but no such line was found (last line: {last_line:?})")]
    Missing {
        tool: &'static str,
        expected: String,
        /// The last non-blank line of the input, quoted (empty if the input was blank).
        last_line: String,
    },

    /// A line looked like the expected one but a field in it did not parse.
    #[error("{tool}: line {line_no}: expected {expected}, found {line:?}")]
    BadLine {
        tool: &'static str,
        expected: String,
        /// 1-based line number in the input.
        line_no: usize,
        line: String,
    },

    /// The tool itself reported a failure in its output (rados' "Must write
    /// data before running a read benchmark!", iperf3's JSON `"error"`, a
    /// fio job with a non-zero `error`).
    #[error("{tool} reported an error: {message}")]
    ToolError { tool: &'static str, message: String },

    /// JSON output that is not valid JSON or lacks a required field.
    #[error("{tool}: expected {expected}: {detail} (at line {line_no}: {line:?})")]
    Json {
        tool: &'static str,
        expected: String,
        detail: String,
        line_no: usize,
        line: String,
    },

    /// `parse(format, …)` was given a format name not in [`crate::FORMATS`].
    #[error("unknown format {format:?}: expected one of {known}")]
    UnknownFormat { format: String, known: String },
}

impl ParseError {
    /// A `Missing` error quoting the last non-blank line of `text`.
    pub(crate) fn missing(tool: &'static str, expected: impl Into<String>, text: &str) -> Self {
        let last = text
            .split(['\n', '\r'])
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        ParseError::Missing {
            tool,
            expected: expected.into(),
            last_line: quote(last),
        }
    }

    /// A `BadLine` error for the 0-based line index `idx`.
    pub(crate) fn bad_line(
        tool: &'static str,
        expected: impl Into<String>,
        idx: usize,
        line: &str,
    ) -> Self {
        ParseError::BadLine {
            tool,
            expected: expected.into(),
            line_no: idx + 1,
            line: quote(line),
        }
    }

    pub(crate) fn tool(tool: &'static str, message: impl Into<String>) -> Self {
        ParseError::ToolError {
            tool,
            message: message.into(),
        }
    }
}

/// Trims a line and cuts it to [`MAX_QUOTE_CHARS`] characters (never inside a
/// UTF-8 sequence).
pub(crate) fn quote(line: &str) -> String {
    let line = line.trim();
    if line.chars().count() <= MAX_QUOTE_CHARS {
        line.to_string()
    } else {
        let mut cut: String = line.chars().take(MAX_QUOTE_CHARS).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_quotes_last_non_blank_line() {
        let e = ParseError::missing("dd", "a summary", "a\nlast words\n\n  \n");
        let msg = e.to_string();
        assert!(msg.contains("expected a summary"), "{msg}");
        assert!(msg.contains("\"last words\""), "{msg}");
    }

    #[test]
    fn quote_cuts_on_char_boundary() {
        let long = "é".repeat(500);
        let q = quote(&long);
        assert_eq!(q.chars().count(), MAX_QUOTE_CHARS + 1);
    }
}
