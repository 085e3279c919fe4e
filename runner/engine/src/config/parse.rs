//! YAML text -> `PipelineConfig`, with serde-saphyr's budgets on (a hostile or
//! broken file must not exhaust memory or panic) and its errors turned into
//! located diagnostics.

use std::sync::Arc;

use super::{Node, NodeValue, PipelineConfig};
use crate::diagnostic::{Diagnostic, Diagnostics, Loc, Source, did_you_mean};

/// serde-saphyr's settings: strict booleans (`on:` and `yes` stay strings)
/// and budgets a hostile file cannot exceed.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        strict_booleans: true,
        budget: serde_saphyr::budget! {
            max_events: 1_000_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_depth: 64,
            max_documents: 1,
            max_nodes: 250_000,
            max_total_scalar_bytes: 16 * 1024 * 1024,
        },
    }
}

/// The file as a located YAML tree.
pub fn parse_node(source: &Arc<Source>) -> Result<Node, Diagnostic> {
    serde_saphyr::from_str_with_options::<Node>(&source.text, options())
        .map_err(|e| yaml_error(source, &e))
}

pub fn parse_pipeline(source: &Arc<Source>) -> Result<PipelineConfig, Diagnostics> {
    if source.text.trim().is_empty() {
        return Err(Diagnostic::error("the pipeline file is empty")
            .at(source, Loc::default())
            .with_help("a pipeline needs at least `name:` and `stages:`; see pipelines/smoke.yaml")
            .into());
    }
    // First the shape of the whole file against the schema, so every unknown
    // or missing key is reported at once; then the typed parse.
    let node = parse_node(source)?;
    if matches!(node.value, NodeValue::Map(_)) {
        let problems = super::shape::check(&node, &super::pipeline_schema(), source);
        if !problems.is_empty() {
            return Err(problems);
        }
    }
    serde_saphyr::from_str_with_options::<PipelineConfig>(&source.text, options())
        .map_err(|e| yaml_error(source, &e).into())
}

/// Turns a serde-saphyr error into a diagnostic, adding a hint where we can.
pub fn yaml_error(source: &Arc<Source>, error: &serde_saphyr::Error) -> Diagnostic {
    let loc = error
        .location()
        .map(|l| Loc::new(l.line() as u32, l.column() as u32))
        .unwrap_or_default();
    let raw = error.without_snippet().to_string();
    let message = strip_location_suffix(&raw);
    let (message, help) = match integer_range(message) {
        // "invalid u16": name the value and the range instead.
        Some(range) => {
            let token = source
                .line(loc.line)
                .and_then(|l| l.get(loc.col.saturating_sub(1) as usize..))
                .map(|rest| {
                    rest.split([',', '}', ']', ' ', '#'])
                        .next()
                        .unwrap_or_default()
                        .to_string()
                })
                .filter(|t| !t.is_empty());
            (
                match token {
                    Some(t) => format!("`{t}` is out of range here"),
                    None => "a number out of range".to_string(),
                },
                Some(format!("a whole number from {range} is expected")),
            )
        }
        None => explain(message),
    };
    let mut d = Diagnostic::error(message).with_help_opt(help);
    if loc.is_known() {
        d = d.at(source, loc);
    } else {
        d = d.at(source, Loc::default());
    }
    d
}

/// The range of the integer type serde names in "invalid u16".
fn integer_range(message: &str) -> Option<&'static str> {
    Some(match message.strip_prefix("invalid ")? {
        "u8" => "0 to 255",
        "u16" => "0 to 65535",
        "u32" => "0 to 4294967295",
        "u64" | "usize" => "0 to 18446744073709551615",
        "i8" => "-128 to 127",
        "i16" => "-32768 to 32767",
        "i32" => "-2147483648 to 2147483647",
        "i64" | "isize" => "-9223372036854775808 to 9223372036854775807",
        _ => return None,
    })
}

/// serde-saphyr appends " at line L, column C"; we show the location ourselves.
fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

/// Rewrites serde's wording into ours and finds a hint.
fn explain(message: &str) -> (String, Option<String>) {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let name = rest.split('`').next().unwrap_or_default();
        // serde lists the accepted keys: "..., expected one of a, b, c".
        let expected: Vec<&str> = message
            .split_once("expected one of ")
            .or_else(|| message.split_once("expected "))
            .map(|(_, list)| list.split(", ").map(|k| k.trim_matches('`')).collect())
            .unwrap_or_default();
        let help = did_you_mean(name, expected.iter().copied()).or_else(|| {
            (!expected.is_empty()).then(|| format!("valid keys here: {}", expected.join(", ")))
        });
        return (format!("unknown key `{name}`"), help);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or_default();
        return (
            format!("missing required key `{name}`"),
            Some(format!("add `{name}:` to this mapping")),
        );
    }
    // serde-saphyr's words name its own option ("set DuplicateKeyPolicy in
    // Options if acceptable"); say what the user can do.
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return (
            format!("`{key}` appears twice in the same mapping"),
            Some("keep one: the later one would silently replace the earlier".into()),
        );
    }
    // The budgets, in the words of what the file does rather than the
    // library's names ("budget breached: Documents { documents: 2 }").
    if let Some(rest) = message.strip_prefix("budget breached: ") {
        let what = rest.split([' ', '{']).next().unwrap_or_default();
        let (text, help) = match what {
            "Documents" => (
                "a pipeline file holds one YAML document; a second one starts here".to_string(),
                "remove the `---` line and what follows, or put that suite in a file of its own",
            ),
            "Nodes" | "Events" => (
                "the file expands to more YAML nodes than a pipeline may have (250000 nodes, 1000000 events)".to_string(),
                "aliases that repeat aliases multiply: write the values out, or use `matrix:`",
            ),
            "Aliases" | "Anchors" => (
                "the file uses more than 1000 YAML anchors or aliases".to_string(),
                "write the values out, or use `vars:` and templates",
            ),
            "Depth" => (
                "values nest deeper than 64 levels".to_string(),
                "a pipeline never needs that: check the brackets",
            ),
            "TotalScalarBytes" | "ScalarBytes" => (
                "the file's values add up to more than 16 MiB of text".to_string(),
                "keep large data in files the stages read, not in the suite",
            ),
            _ => (
                format!("the file is too large or too deep for a pipeline ({rest})"),
                "pipelines are small files; check for a runaway generator or alias",
            ),
        };
        return (text, Some(help.into()));
    }
    if message == "recursion limit exceeded" {
        return (
            "values nest deeper than a pipeline may".into(),
            Some("a pipeline never needs that: check the brackets".into()),
        );
    }
    if message.starts_with("expected mapping") {
        return (
            format!("{message}: a pipeline file is a mapping"),
            Some("start with `name: ...` and `stages:`; see pipelines/smoke.yaml".into()),
        );
    }
    (message.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        let src = Source::new("t.yaml", text);
        parse_pipeline(&src).unwrap_err().to_string()
    }

    #[test]
    fn a_duplicate_key_is_explained_in_the_users_words() {
        let e = err("name: a\nvars:\n  pool: x\n  pool: y\nstages: []\n");
        assert!(
            e.contains("`pool` appears twice in the same mapping"),
            "{e}"
        );
        assert!(!e.contains("DuplicateKeyPolicy"), "{e}");
    }

    #[test]
    fn unknown_stage_key_suggests() {
        let e = err("name: x\nstages:\n  - id: a\n    uses: exec\n    wiht: {}\n");
        println!("{e}");
        assert!(e.contains("unknown key `wiht`"), "{e}");
        assert!(e.contains("did you mean `with`?"), "{e}");
        assert!(e.contains("t.yaml:5:5"), "{e}");
    }

    #[test]
    fn type_errors_and_syntax_are_located() {
        let cases = [
            (
                "name: x\nstages:\n  - id: a\n    uses: exec\n    continue_on_error: maybe\n",
                "t.yaml:5:24",
                "invalid boolean",
            ),
            ("name: x\nstages: [\n", "t.yaml:2:9", "unclosed bracket"),
            ("name: x\n", "t.yaml:1:1", "missing required key `stages`"),
            (
                "name: x\nstages:\n  - uses: exec\n",
                "t.yaml:3:5",
                "missing required key `id`",
            ),
            (
                "name: [1]\nstages: []\n",
                "t.yaml:1:7",
                "`name` must be a string, found a list",
            ),
        ];
        for (text, place, message) in cases {
            let e = err(text);
            assert!(
                e.contains(place) && e.contains(message),
                "{text:?} gave:\n{e}"
            );
        }
    }
}
