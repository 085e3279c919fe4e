//! Errors about the user's input, rendered like a compiler's: `file:line:col`,
//! the offending line with a caret under the bad token, what is wrong, and a
//! hint. Every check returns these instead of failing fast, so `validate`
//! prints all problems at once.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded input file; kept alive so diagnostics can quote its lines.
#[derive(Debug)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

impl Source {
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Arc<Self> {
        Arc::new(Source {
            path: path.into(),
            text: text.into(),
        })
    }

    pub fn read(path: &Path) -> Result<Arc<Self>, Diagnostic> {
        std::fs::read_to_string(path)
            .map(|text| Source::new(path, text))
            .map_err(|e| {
                Diagnostic::error(format!("cannot read `{}`: {e}", path.display()))
                    .with_help("check the path and that the file is readable UTF-8 text")
            })
    }

    pub fn line(&self, line: u32) -> Option<&str> {
        self.text.lines().nth(line.checked_sub(1)? as usize)
    }
}

/// A place in a source file (1-based line and column, in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
    /// Width of the caret underline, in characters; 0 means "guess the token".
    pub len: u32,
}

impl Loc {
    pub fn new(line: u32, col: u32) -> Self {
        Loc { line, col, len: 0 }
    }

    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

#[derive(Debug, Clone)]
pub struct Label {
    pub source: Arc<Source>,
    pub loc: Loc,
}

/// One problem with the user's input.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub message: String,
    pub label: Option<Label>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            message: message.into(),
            label: None,
            help: None,
        }
    }

    pub fn at(mut self, source: &Arc<Source>, loc: Loc) -> Self {
        self.label = Some(Label {
            source: source.clone(),
            loc,
        });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the hint unless one is already set: chain candidates from the
    /// most specific ("did you mean") to the most general ("valid keys: ...").
    pub fn with_help_opt(mut self, help: Option<String>) -> Self {
        if self.help.is_none() {
            self.help = help;
        }
        self
    }
}

impl fmt::Display for Diagnostic {
    /// ```text
    /// error: unknown plugin `exex`
    ///   --> pipelines/smoke.yaml:7:11
    ///    |
    ///  7 |     uses: exex
    ///    |           ^^^^
    ///    = help: did you mean `exec`?
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", visible(&self.message))?;
        let mut gutter = 1;
        if let Some(label) = &self.label {
            let loc = label.loc;
            if loc.is_known() {
                let line_no = loc.line.to_string();
                gutter = line_no.len() + 1;
                let pad = " ".repeat(gutter);
                writeln!(
                    f,
                    "{}--> {}:{}:{}",
                    " ".repeat(gutter - 1),
                    label.source.path.display(),
                    loc.line,
                    loc.col
                )?;
                if let Some(text) = label.source.line(loc.line) {
                    let text = text.trim_end();
                    let start = loc.col.saturating_sub(1) as usize;
                    let width = if loc.len > 0 {
                        loc.len as usize
                    } else {
                        token_width(text, start)
                    };
                    let (text, start, width) = shown_window(text, start, width);
                    let text = text.as_str();
                    writeln!(f, "{pad}|")?;
                    writeln!(f, "{line_no} | {text}")?;
                    let mut underline = String::new();
                    for ch in text.chars().take(start) {
                        underline.push(if ch == '\t' { '\t' } else { ' ' });
                    }
                    let _ = write!(underline, "{}", "^".repeat(width.max(1)));
                    writeln!(f, "{pad}| {underline}")?;
                }
            } else {
                writeln!(
                    f,
                    "{}--> {}",
                    " ".repeat(gutter - 1),
                    label.source.path.display()
                )?;
            }
        }
        if let Some(help) = &self.help {
            writeln!(f, "{}= help: {}", " ".repeat(gutter), visible(help))?;
        }
        Ok(())
    }
}

/// Whether `c` would be invisible or rearrange what is shown: control
/// characters (but line breaks and tabs), direction overrides and
/// isolates, zero-width characters, the byte-order mark.
fn invisible(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || crate::terminal::bidi_control(c)
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{FEFF}')
}

/// A message as shown: an id or name from the file that holds invisible
/// characters is written with them spelled out (`\u{202e}`), so `a<RLO>b`
/// cannot pass for another name, or reorder the line.
fn visible(text: &str) -> String {
    text.chars()
        .map(|c| {
            if invisible(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Characters of a source line shown around the error at most.
const SHOWN_CHARS: usize = 100;

/// The part of `line` shown under the location: at most [`SHOWN_CHARS`]
/// characters around the caret (with `…` where it was cut), and every
/// control or direction-changing character replaced by `?` one for one, so
/// the caret stays in place and nothing in the file can rewrite the
/// terminal. Returns the text and the caret's start and width in it.
fn shown_window(line: &str, start: usize, width: usize) -> (String, usize, usize) {
    let chars: Vec<char> = line
        .chars()
        .map(|c| if invisible(c) { '?' } else { c })
        .collect();
    if chars.len() <= SHOWN_CHARS {
        return (chars.into_iter().collect(), start, width);
    }
    let from = start.saturating_sub(SHOWN_CHARS / 3).min(chars.len());
    let to = (from + SHOWN_CHARS).min(chars.len());
    let mut text: String = chars[from..to].iter().collect();
    let mut caret = start - from;
    if from > 0 {
        text.insert(0, '…');
        caret += 1;
    }
    if to < chars.len() {
        text.push('…');
    }
    let width = width.min(to.saturating_sub(start)).max(1);
    (text, caret, width)
}

/// Width of the YAML token starting at `start`: a quoted string, or up to the
/// end of a plain scalar (before ` #` comments and `:` key separators).
fn token_width(line: &str, start: usize) -> usize {
    let rest: Vec<char> = line.chars().skip(start).collect();
    let Some(&first) = rest.first() else {
        return 1;
    };
    if first == '[' || first == '{' {
        let close = if first == '[' { ']' } else { '}' };
        let mut depth = 0;
        for (i, &c) in rest.iter().enumerate() {
            if c == first {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
        }
        return rest.len();
    }
    if first == '"' || first == '\'' {
        return rest
            .iter()
            .skip(1)
            .position(|&c| c == first)
            .map_or(rest.len(), |p| p + 2);
    }
    let mut width = 0;
    for (i, &c) in rest.iter().enumerate() {
        let next = rest.get(i + 1).copied();
        if c == ':' && matches!(next, None | Some(' ')) {
            break;
        }
        if c == ' ' && next == Some('#') {
            break;
        }
        // Flow collections: `{a: 1, b: [x, y]}` ends a plain scalar at `,]}`.
        if matches!(c, ',' | ']' | '}') {
            break;
        }
        width = i + 1;
    }
    let trimmed: String = rest[..width].iter().collect();
    trimmed.trim_end().chars().count().max(1)
}

/// All diagnostics found in one pass.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Orders by file, then position (diagnostics without a place last).
    pub fn sort(&mut self) {
        self.0.sort_by_key(|d| match &d.label {
            Some(l) if l.loc.is_known() => (l.source.path.clone(), l.loc.line, l.loc.col),
            Some(l) => (l.source.path.clone(), u32::MAX, 0),
            None => (PathBuf::new(), u32::MAX, 0),
        });
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// "did you mean `x`?" for a misspelt name, when one candidate is close.
pub use pipeline_stage_api::suggest::did_you_mean;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_token() {
        let src = Source::new("p.yaml", "stages:\n  - id: a\n    uses: exex # typo\n");
        let d = Diagnostic::error("unknown plugin `exex`")
            .at(&src, Loc::new(3, 11))
            .with_help("did you mean `exec`?");
        assert_eq!(
            d.to_string(),
            "error: unknown plugin `exex`\n --> p.yaml:3:11\n  |\n3 |     uses: exex # typo\n  |           ^^^^\n  = help: did you mean `exec`?\n"
        );
    }

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("stges", ["stages", "vars"]).as_deref(),
            Some("did you mean `stages`?")
        );
        assert_eq!(did_you_mean("zzz", ["stages", "vars"]), None);
    }
}
