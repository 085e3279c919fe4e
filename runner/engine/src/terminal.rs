//! Text from stages and plugins, made safe to print on a terminal.
//!
//! A plugin's progress message, error or plan summary could otherwise carry
//! escape sequences (ANSI CSI such as "erase line", OSC hyperlinks and
//! window titles), carriage returns and backspaces that move the cursor, or
//! Unicode bidi overrides that reorder what is shown: enough to erase or
//! forge lines, including the `!! DESTRUCTIVE` marker of `pipeline plan`.
//! Everything printed that a stage or plugin wrote goes through [`line`]
//! or [`text`]; both remove whole escape sequences (not just the ESC byte,
//! which would leave `[2K` behind) and every other control character.

/// One line: no line breaks, no tabs, no control characters or escape
/// sequences (line breaks and tabs become spaces).
pub fn line(s: &str) -> String {
    clean(s, false)
}

/// Longest part of a command's stderr quoted in a message.
const QUOTED_CHARS: usize = 300;
/// How much of a stderr file's end is read for its last line.
const TAIL_BYTES: u64 = 64 << 10;

/// The last non-empty line of a command's stderr file, safe to show and at
/// most 300 characters: what the commands the runner itself runs (`ceph osd
/// set`, a client probe, a `during:` command) are quoted by when they fail.
/// Only the file's last 64 KiB are read, however much it wrote.
pub fn last_line_of_file(path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut tail = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
        let _ = f.take(TAIL_BYTES).read_to_end(&mut tail);
    }
    let text = String::from_utf8_lossy(&tail);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    line(last).chars().take(QUOTED_CHARS).collect()
}

/// Several lines: `\n` and `\t` kept, everything else as in [`line`]
/// (a `\r\n` becomes `\n`; a lone `\r` is dropped).
pub fn text(s: &str) -> String {
    clean(s, true)
}

/// Whether `c` changes the direction text is shown in: the embeddings and
/// overrides U+202A..U+202E and the isolates U+2066..U+2069.
pub(crate) fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn clean(s: &str, multiline: bool) -> String {
    // Fast path: most text has nothing to remove.
    if !s.chars().any(|c| c.is_control() || bidi_control(c)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' if multiline => out.push(c),
            '\n' | '\t' => out.push(' '),
            // ESC: skip the whole sequence.
            '\u{1b}' => match chars.peek() {
                // CSI: ESC [ parameters/intermediates, then a final byte @..~.
                Some('[') => {
                    chars.next();
                    skip_csi(&mut chars);
                }
                // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    skip_string(&mut chars);
                }
                // A two-byte sequence (ESC c, ESC 7, ...).
                Some(_) => {
                    chars.next();
                }
                None => {}
            },
            // C1 CSI and the C1 string introducers.
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() || bidi_control(c) => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
        // Anything that cannot be inside a CSI ends it too (and is dropped).
        if !('\u{20}'..='\u{3f}').contains(&c) {
            return;
        }
    }
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_commands_stderr_is_quoted_by_its_last_line_cleaned_and_capped() {
        let path = std::env::temp_dir().join(format!("pipeline-last-line-{}", std::process::id()));
        // 1 MiB of noise, then a hostile last line, then blank lines.
        let mut body = "x".repeat(1 << 20);
        body.push_str("\nError EPERM: \u{1b}]0;pwned\u{7}");
        body.push_str(&"y".repeat(1000));
        body.push_str("\n\n  \n");
        std::fs::write(&path, body).unwrap();
        let last = last_line_of_file(&path);
        assert!(last.starts_with("Error EPERM: "), "{last}");
        assert!(
            !last.contains('\u{1b}') && !last.contains('\u{7}'),
            "{last:?}"
        );
        assert_eq!(last.chars().count(), QUOTED_CHARS);
        let _ = std::fs::remove_file(&path);
        assert_eq!(last_line_of_file(&path), "", "no file: nothing to quote");
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(
            line("fio: 3 of 4 jobs, 1.2 GiB/s ↑"),
            "fio: 3 of 4 jobs, 1.2 GiB/s ↑"
        );
        assert_eq!(text("a\n\tb"), "a\n\tb");
    }

    #[test]
    fn escape_sequences_are_removed_whole() {
        assert_eq!(line("\u{1b}[2K\rforged"), "forged");
        assert_eq!(line("a\u{1b}[1;31mred\u{1b}[0m"), "ared");
        assert_eq!(
            line("x\u{1b}]8;;http://evil/\u{7}link\u{1b}]8;;\u{7}y"),
            "xlinky"
        );
        assert_eq!(line("t\u{1b}]0;title\u{1b}\\u"), "tu");
        assert_eq!(line("c\u{1b}cd"), "cd");
        assert_eq!(line("\u{9b}31mred"), "red");
        assert_eq!(line("\u{9d}0;title\u{9c}after"), "after");
        assert_eq!(line("end\u{1b}"), "end");
    }

    #[test]
    fn control_characters_and_bidi_overrides_go() {
        assert_eq!(line("a\rb\u{8}c\u{7}d\u{0}e\u{7f}f\u{85}g"), "abcdefg");
        assert_eq!(line("\u{202e}txet\u{2066}x\u{2069}"), "txetx");
        assert_eq!(line("two\nlines\tand tab"), "two lines and tab");
        assert_eq!(text("two\r\nlines\rx"), "two\nlinesx");
    }

    #[test]
    fn a_forged_destructive_marker_stays_on_its_line() {
        let forged = "harmless\n     !! DESTRUCTIVE rm -rf /\u{1b}[1A\u{1b}[2K";
        let shown = line(forged);
        assert!(!shown.contains('\n') && !shown.contains('\u{1b}'));
        assert_eq!(shown, "harmless      !! DESTRUCTIVE rm -rf /");
    }
}
