//! Text into Markdown, escaped for the place it lands. Stage ids, metric
//! and series names, labels, skip reasons, notes, errors, artifact names and
//! environment keys come from stages and plugins; written raw, they could
//! forge headings, tables and links (`javascript:`), inject HTML
//! (`<script>`, `</summary>`), or break out of a code block. Each filter
//! here is for one context of `report.md.j2`, and each first strips the
//! control characters a terminal would act on (`cat report.md`).

use crate::terminal;

// Characters with a meaning in Markdown inline text are escaped with `\`:
// `\ ` * [ ] | ~ !`; `<>&` become entities. (`_` is left alone: inside
// words GFM does not emphasise with it, and metric names are full of it.)

/// Escapes `text` (one line) into `out`. Code spans the text already
/// has (`` `ceph osd pool ls` ``, as errors and notes write commands) are
/// kept: their content is shown literally by every Markdown reader, so
/// nothing inside one can become a link, HTML or structure. In a table
/// cell (`in_cell`), a `|` inside one is escaped too (GFM splits cells first).
fn escape_inline(text: &str, out: &mut String, in_cell: bool) {
    let mut rest = text;
    while let Some(start) = rest.find(['`', '<', '>', '&', '\\', '*', '[', ']', '|', '~', '!']) {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        if from.starts_with('`') {
            let run = from.len() - from.trim_start_matches('`').len();
            if let Some(len) = code_span_len(from, run) {
                let span = &from[..len];
                if in_cell {
                    out.push_str(&span.replace('|', "\\|"));
                } else {
                    out.push_str(span);
                }
                rest = &from[len..];
                continue;
            }
            // No closing run: the backticks are text.
            for _ in 0..run {
                out.push_str("\\`");
            }
            rest = &from[run..];
            continue;
        }
        let c = from.chars().next().unwrap_or_default();
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => {
                out.push('\\');
                out.push(c);
            }
        }
        rest = &from[c.len_utf8()..];
    }
    out.push_str(rest);
}

/// The length of the code span `text` starts with (a run of `run`
/// backticks up to the next run of exactly as many), if it has one.
fn code_span_len(text: &str, run: usize) -> Option<usize> {
    let body = &text[run..];
    let mut at = 0;
    while let Some(i) = body[at..].find('`') {
        let start = at + i;
        let len = body[start..].len() - body[start..].trim_start_matches('`').len();
        if len == run {
            return Some(run + start + len);
        }
        at = start + len;
    }
    None
}

/// Running text on one line (a list item, a heading, after a colon):
/// line breaks become spaces, so nothing can start a heading, a table or a
/// block; a leading `#`, `>`, `-`, `+` or `1.` is escaped too.
pub fn inline(text: &str) -> String {
    let one_line = terminal::line(text);
    let trimmed = one_line.trim_start();
    let mut out = String::with_capacity(one_line.len() + 8);
    let starts_block = trimmed.starts_with(['#', '>', '-', '+', '='])
        || trimmed
            .split_once(['.', ')'])
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if starts_block {
        out.push('\\');
    }
    escape_inline(trimmed, &mut out, false);
    out
}

/// A table cell: pipes and Markdown escaped, HTML as entities, line breaks
/// as `<br>` (the one tag the report itself puts in cells).
pub fn cell(text: &str) -> String {
    let text = terminal::text(text);
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push_str("<br>");
        }
        escape_inline(line, &mut out, true);
    }
    out
}

/// An inline code span that is also safe in a table cell: the delimiter is
/// longer than any backtick run inside, pipes are escaped (GFM unescapes
/// `\|` inside code spans in tables), line breaks become spaces.
pub fn code(text: &str) -> String {
    let text = terminal::line(text).replace('|', "\\|");
    let longest = longest_run(&text, '`');
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// A fenced code block of `lang` holding `text` as is: the fence is longer
/// than any backtick run inside, so the text cannot close it.
pub fn block(text: &str, lang: &str) -> String {
    let text = terminal::text(text);
    let fence = "`".repeat((longest_run(&text, '`') + 1).max(3));
    format!("{fence}{lang}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// Text inside an HTML element of the report (`<summary>`): entities for
/// `<>&"'` and for ``[]` ``, one line (a blank line would end the HTML block).
pub fn html(text: &str) -> String {
    let text = terminal::line(text);
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Not HTML, but a Markdown reader that renders inside the
            // element must not find links or code spans either.
            '[' => out.push_str("&#91;"),
            ']' => out.push_str("&#93;"),
            '`' => out.push_str("&#96;"),
            c => out.push(c),
        }
    }
    out
}

/// A link target, only for a relative path inside the run folder (what
/// the runner writes: `stages/ID/01-fio.stdout`): `None` for an absolute
/// path, a URL (`javascript:`), a `..` step or a backslash. Characters that
/// would end or confuse the link are percent-encoded.
pub fn link_target(path: &str) -> Option<String> {
    let relative = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(':')
        && !path.contains('\\')
        && !path.split('/').any(|seg| seg == ".." || seg.is_empty());
    if !relative {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_./=,~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Some(out)
}

/// `[text](path)` when `path` is a link target the runner would write
/// ([`link_target`]), else the text and the path as code.
pub fn link(text: &str, path: &str) -> String {
    match link_target(path) {
        Some(target) => format!("[{}]({target})", inline(text)),
        None => format!("{} ({})", inline(text), code(path)),
    }
}

/// `![alt](path)`: an image the runner drew in the run folder (a chart),
/// else the alt text and the path as code, like [`link`].
pub fn image(alt: &str, path: &str) -> String {
    match link_target(path) {
        Some(target) => format!("![{}]({target})", inline(alt)),
        None => format!("{} ({})", inline(alt), code(path)),
    }
}

/// The heading anchor GitHub derives for `### N. text`: lower case,
/// letters, digits, `-` and `_` kept, spaces as `-`, the rest dropped.
pub fn anchor(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn longest_run(text: &str, c: char) -> usize {
    text.split(|x| x != c).map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "x | y\n\n## Forged\n\n| a | b |\n|---|---|\n</summary><script>alert(1)</script>[c](javascript:alert(1))``` \u{1b}[2K\r";

    #[test]
    fn inline_text_cannot_open_blocks_links_or_html() {
        let s = inline(HOSTILE);
        assert!(!s.contains('\n') && !s.contains('\u{1b}') && !s.contains('\r'));
        assert!(!s.contains('<') && !s.contains('>'));
        assert!(s.contains("\\[c\\](javascript:alert(1))"), "{s}");
        assert!(s.contains("\\`\\`\\`"), "{s}");
        assert_eq!(inline("## heading"), "\\## heading");
        assert_eq!(inline("1. item"), "\\1. item");
        assert_eq!(inline("- item"), "\\- item");
        assert_eq!(inline("clat_p99 of host-a"), "clat_p99 of host-a");
    }

    #[test]
    fn code_spans_in_text_are_kept_and_stay_literal() {
        assert_eq!(
            inline("stage `broken` failed: `a[b](javascript:x)` <b>"),
            "stage `broken` failed: `a[b](javascript:x)` &lt;b&gt;"
        );
        assert_eq!(cell("`a | b` | c"), "`a \\| b` \\| c");
        assert_eq!(inline("``a`b`` and ` alone"), "``a`b`` and \\` alone");
    }

    #[test]
    fn a_cell_stays_one_cell() {
        let s = cell(HOSTILE);
        assert!(!s.contains('\n'));
        assert_eq!(s.matches('|').count(), s.matches("\\|").count(), "{s}");
        assert!(s.contains("x \\| y<br><br>## Forged"), "{s}");
        assert!(s.contains("&lt;/summary&gt;&lt;script&gt;"));
        assert_eq!(cell("fio[bs=4k]"), "fio\\[bs=4k\\]");
        assert_eq!(cell("read_bw"), "read_bw");
    }

    #[test]
    fn code_and_blocks_outlast_any_backtick_run() {
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("``x"), "``` ``x ```");
        assert_eq!(code("a|b\nc"), "`a\\|b c`");
        let b = block("before\n````\nafter", "text");
        assert!(
            b.starts_with("`````text\n") && b.ends_with("\n`````"),
            "{b}"
        );
        assert_eq!(block("plain", "json"), "```json\nplain\n```");
    }

    #[test]
    fn html_context() {
        assert_eq!(
            html("</summary><img src=x onerror='a'>\n\nx"),
            "&lt;/summary&gt;&lt;img src=x onerror=&#39;a&#39;&gt;  x"
        );
        assert_eq!(html("[a](javascript:x)`"), "&#91;a&#93;(javascript:x)&#96;");
    }

    #[test]
    fn links_only_to_relative_paths_inside_the_run() {
        assert_eq!(
            link_target("stages/fio[bs=4k]/01-fio.stdout").as_deref(),
            Some("stages/fio%5Bbs=4k%5D/01-fio.stdout")
        );
        for bad in [
            "javascript:alert(1)",
            "/etc/passwd",
            "../../x",
            "stages/../../x",
            "http://evil/",
            "a\\b",
            "",
        ] {
            assert_eq!(link_target(bad), None, "{bad}");
        }
        assert_eq!(
            link("javascript:alert(1)", "javascript:alert(1)"),
            "javascript:alert(1) (`javascript:alert(1)`)"
        );
        assert_eq!(link("out", "stages/x/out"), "[out](stages/x/out)");
    }

    #[test]
    fn anchors_match_the_headings() {
        assert_eq!(anchor("fio[bs=4k, qd=1.5]"), "fiobs4k-qd15");
        assert_eq!(anchor("Prepare Pool"), "prepare-pool");
        assert_eq!(anchor("a)(b\"<x>"), "abx");
    }
}
