//! README.md documents what pipelines accept; this test keeps it honest.
//!
//! - The YAML block under "## Pipeline reference" and the `inventory:` block
//!   under "### Hosts" are compared, mapping by mapping, with the pipeline's
//!   JSON Schema as `pipeline schema` prints it: a key the schema has and the
//!   README does not show fails, and so does a key the README shows that the
//!   schema does not have.
//! - The stage table under "## Stages" is compared with the native stages of
//!   `pipeline plugins list`: a new stage needs its row.

mod common;

use serde_json::{Map, Value};

const REFERENCE: &str = "## Pipeline reference";
const HOSTS: &str = "### Hosts";
const STAGES: &str = "## Stages";

#[test]
fn readme_matches_the_pipeline_schema_and_the_native_stages() {
    let readme = std::fs::read_to_string(common::root().join("README.md")).expect("README.md");
    let problems = readme_problems(&readme, &pipeline_schema(), &native_stages());
    assert!(
        problems.is_empty(),
        "README.md is stale:\n- {}",
        problems.join("\n- ")
    );
}

/// The checks themselves: a README that lost a stage row and a few keys
/// must be reported, each with what to add where.
#[test]
fn a_stale_readme_is_reported_with_what_to_add_where() {
    let readme = std::fs::read_to_string(common::root().join("README.md")).expect("README.md");
    let stale: String = readme
        .lines()
        .filter(|l| {
            !l.starts_with("| `iperf3` |")
                && !l.trim_start().starts_with("parallel:")
                && !l.trim_start().starts_with("connect_timeout:")
        })
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("name: full-baseline ", "name: full-baseline\nretries: 3 ");
    let problems = readme_problems(&stale, &pipeline_schema(), &native_stages()).join("\n");
    for expected in [
        "native stage `iperf3` (`pipeline plugins list`) has no row in the table under \"## Stages\": add `| `iperf3` |",
        "`stages[].parallel` is accepted by pipelines (`pipeline schema`) but not shown: add `parallel:` to a stage under `stages:` in the YAML block under \"## Pipeline reference\"",
        "`inventory.ssh.connect_timeout` is accepted by pipelines (`pipeline schema`) but not shown: add `connect_timeout:` under `inventory:` > `ssh:` in the YAML block under \"### Hosts\"",
        "`retries` is shown but `pipeline schema` has no such key: remove it from the YAML block under \"## Pipeline reference\"",
    ] {
        assert!(
            problems.contains(expected),
            "expected {expected:?} in:\n{problems}"
        );
    }
}

fn readme_problems(readme: &str, schema: &Value, native: &[(String, String)]) -> Vec<String> {
    let reference = yaml_block(readme, REFERENCE);
    let hosts = yaml_block(readme, HOSTS);
    let mut problems = Vec::new();
    let mut shown = Shown::default();
    for (heading, block) in [(REFERENCE, &reference), (HOSTS, &hosts)] {
        let Value::Object(documented) = block else {
            problems.push(format!(
                "the YAML block under \"{heading}\" is not a mapping of pipeline keys"
            ));
            continue;
        };
        // The reference documents every top-level key but `inventory`, which
        // has its own block.
        let schema_keys = if heading == HOSTS {
            only(schema, &["inventory"])
        } else {
            except(schema, &["inventory"])
        };
        let mut check = Check {
            root: schema,
            problems: &mut problems,
            shown: &mut shown,
        };
        check.mapping(&KeyPath::root(heading), documented, &schema_keys);
    }
    problems.extend(shown.missing());
    problems.extend(stage_table_problems(readme, native));
    problems
}

/// Where a key is: `stages[].grants.exec`, and the block that documents it.
#[derive(Clone)]
struct KeyPath {
    heading: &'static str,
    keys: Vec<String>,
}

impl KeyPath {
    fn root(heading: &'static str) -> KeyPath {
        KeyPath {
            heading,
            keys: Vec::new(),
        }
    }

    fn join(&self, key: &str) -> KeyPath {
        let mut keys = self.keys.clone();
        keys.push(key.to_string());
        KeyPath {
            heading: self.heading,
            keys,
        }
    }

    fn with_last_suffix(&self, suffix: &str) -> KeyPath {
        let mut p = self.clone();
        if let Some(last) = p.keys.last_mut() {
            last.push_str(suffix);
        }
        p
    }

    fn show(&self, key: &str) -> String {
        let mut all = self.keys.clone();
        all.push(key.to_string());
        all.join(".").replace(".[]", "[]")
    }

    /// "a stage under `stages:`", "under `inventory:` > `ssh:`".
    fn placement(&self) -> String {
        match self.keys.as_slice() {
            [] => "at the top level".to_string(),
            [list] if list.ends_with("[]") => {
                let list = list.trim_end_matches("[]");
                if list == "stages" || list == "cleanup" {
                    format!("to a stage under `{list}:`")
                } else {
                    format!("to an entry of `{list}:`")
                }
            }
            keys => format!(
                "under {}",
                keys.iter()
                    .map(|k| format!("`{}:`", k.trim_end_matches("[]")))
                    .collect::<Vec<_>>()
                    .join(" > ")
            ),
        }
    }
}

/// The keys shown for each object schema, wherever it is used: `cleanup:`
/// entries are stages too, and the reference shows a stage's keys once.
#[derive(Default)]
struct Shown {
    /// (schema address, where it was first shown, its keys, the keys shown).
    schemas: Vec<(usize, KeyPath, Vec<String>, Vec<String>)>,
}

impl Shown {
    fn add(
        &mut self,
        schema: &Value,
        path: &KeyPath,
        properties: &Map<String, Value>,
        keys: Vec<String>,
    ) {
        let id = schema as *const Value as usize;
        match self.schemas.iter_mut().find(|(s, ..)| *s == id) {
            Some((_, _, _, shown)) => shown.extend(keys),
            None => {
                self.schemas
                    .push((id, path.clone(), properties.keys().cloned().collect(), keys))
            }
        }
    }

    fn missing(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (_, path, properties, shown) in &self.schemas {
            for key in properties.iter().filter(|k| !shown.contains(*k)) {
                problems.push(format!(
                    "`{}` is accepted by pipelines (`pipeline schema`) but not shown: add `{key}:` {} in the YAML block under \"{}\"",
                    path.show(key),
                    path.placement(),
                    path.heading
                ));
            }
        }
        problems
    }
}

struct Check<'a> {
    /// The whole pipeline schema (for `$ref`s).
    root: &'a Value,
    problems: &'a mut Vec<String>,
    shown: &'a mut Shown,
}

impl Check<'_> {
    /// A documented mapping against the schema of that mapping: a key the
    /// schema does not have is reported here, keys the README does not show
    /// once everything was seen ([`Shown::missing`]). Nested mappings are
    /// checked the same way.
    fn mapping(&mut self, path: &KeyPath, documented: &Map<String, Value>, schema: &Value) {
        let root = self.root;
        let Some(schema) = resolve(root, schema, "object") else {
            return;
        };
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema
            .get("additionalProperties")
            .and_then(|a| resolve(root, a, "object").or_else(|| resolve(root, a, "array")));
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            // Names chosen by the user (hosts, groups): check what each holds,
            // all entries together (one host shows `address`, another `port`).
            if let Some(entry) = additional {
                self.value(&path.join("<name>"), &merge(documented.values()), entry);
            }
            return;
        };
        self.shown.add(
            schema,
            path,
            properties,
            documented.keys().cloned().collect(),
        );
        for (key, value) in documented {
            match (properties.get(key), additional) {
                (Some(sub), _) => self.value(&path.join(key), value, sub),
                (None, Some(entry)) => self.value(&path.join(key), value, entry),
                (None, None) => self.problems.push(format!(
                    "`{}` is shown but `pipeline schema` has no such key: remove it from the YAML block under \"{}\"",
                    path.show(key),
                    path.heading
                )),
            }
        }
    }

    fn value(&mut self, path: &KeyPath, value: &Value, schema: &Value) {
        match value {
            Value::Object(map) => self.mapping(path, map, schema),
            Value::Array(items) => {
                let Some(items_schema) =
                    resolve(self.root, schema, "array").and_then(|s| s.get("items"))
                else {
                    return;
                };
                // All entries together: `- NAME`, `- {name, secret}`, `- {name, default}`.
                if let Value::Object(map) = merge(items.iter())
                    && !map.is_empty()
                {
                    self.mapping(&path.with_last_suffix("[]"), &map, items_schema);
                }
            }
            _ => {}
        }
    }
}

/// The mappings among `values` as one mapping (the first value of a key
/// wins, nested mappings are merged).
fn merge<'a>(values: impl Iterator<Item = &'a Value>) -> Value {
    let mut out = Map::new();
    for value in values {
        let Value::Object(map) = value else { continue };
        for (k, v) in map {
            match (out.get_mut(k), v) {
                (Some(Value::Object(_)), Value::Object(_)) => {
                    let merged = merge([&out[k], v].into_iter());
                    out.insert(k.clone(), merged);
                }
                (Some(_), _) => {}
                (None, _) => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
    Value::Object(out)
}

/// Follows `$ref`s, and picks the `anyOf`/`oneOf` branch of `kind`
/// (`object` or `array`); `None` when the schema does not describe one.
fn resolve<'a>(root: &'a Value, schema: &'a Value, kind: &str) -> Option<&'a Value> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.strip_prefix("#/$defs/")?;
        return resolve(root, &root["$defs"][name], kind);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            return branches.iter().find_map(|b| resolve(root, b, kind));
        }
    }
    let is_kind = match schema.get("type") {
        Some(Value::String(t)) => t == kind,
        Some(Value::Array(types)) => types.iter().any(|t| t == kind),
        _ => {
            (kind == "object" && schema.get("properties").is_some())
                || (kind == "array" && schema.get("items").is_some())
        }
    };
    is_kind.then_some(schema)
}

/// The pipeline schema restricted to some top-level keys, or without them.
fn only(schema: &Value, keys: &[&str]) -> Value {
    filter_properties(schema, |k| keys.contains(&k))
}

fn except(schema: &Value, keys: &[&str]) -> Value {
    filter_properties(schema, |k| !keys.contains(&k))
}

fn filter_properties(schema: &Value, keep: impl Fn(&str) -> bool) -> Value {
    let mut out = schema.clone();
    if let Some(Value::Object(props)) = out.get_mut("properties") {
        props.retain(|k, _| keep(k));
    }
    out
}

/// The first ```yaml block of a section, parsed.
fn yaml_block(readme: &str, heading: &str) -> Value {
    let section = section(readme, heading);
    let start = section
        .find("```yaml\n")
        .unwrap_or_else(|| panic!("no ```yaml block under \"{heading}\" in README.md"))
        + "```yaml\n".len();
    let end = section[start..]
        .find("```")
        .unwrap_or_else(|| panic!("unterminated ```yaml block under \"{heading}\""));
    serde_saphyr::from_str(&section[start..start + end])
        .unwrap_or_else(|e| panic!("the YAML block under \"{heading}\" does not parse: {e}"))
}

/// From a heading to the next heading of the same or a higher level.
fn section<'a>(readme: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let start = readme
        .lines()
        .position(|l| l.trim_end() == heading)
        .unwrap_or_else(|| panic!("README.md has no \"{heading}\" heading"));
    let lines: Vec<&str> = readme.lines().collect();
    let offset: usize = lines[..=start].iter().map(|l| l.len() + 1).sum();
    let rest = &readme[offset..];
    let mut end = rest.len();
    let mut at = 0;
    let mut in_code = false;
    for line in rest.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !in_code && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
            end = at;
            break;
        }
        at += line.len() + 1;
    }
    &rest[..end]
}

/// Stage names in the first column of the table under "## Stages".
fn stage_table(readme: &str) -> Vec<String> {
    section(readme, STAGES)
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect()
}

fn stage_table_problems(readme: &str, native: &[(String, String)]) -> Vec<String> {
    let table = stage_table(readme);
    let mut problems = Vec::new();
    for (name, summary) in native {
        if !table.contains(name) {
            problems.push(format!(
                "native stage `{name}` (`pipeline plugins list`) has no row in the table under \"{STAGES}\": add `| `{name}` | ... |` (it says of itself: {summary})"
            ));
        }
    }
    for name in &table {
        if !native.iter().any(|(n, _)| n == name) {
            problems.push(format!(
                "the table under \"{STAGES}\" lists `{name}`, which is not a native stage of `pipeline plugins list`: remove its row or fix the name"
            ));
        }
    }
    problems
}

fn pipeline_schema() -> Value {
    let out = common::pipeline(&["schema"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: Value = serde_json::from_slice(&out.stdout).expect("the schema is JSON");
    assert!(
        schema["properties"]["stages"].is_object(),
        "unexpected schema: {schema:#}"
    );
    schema
}

/// (name, summary) of every native stage. Run from an empty folder with an
/// empty plugin path, so that no WASM plugin is compiled just to be skipped.
fn native_stages() -> Vec<(String, String)> {
    // One folder per call: both tests of this binary call this at once, and
    // a shared folder was removed by one while the other ran in it.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let empty = common::temp_dir(&format!("readme-plugins-{n}"));
    let out = common::pipeline_command(&["plugins", "list"])
        .current_dir(&empty)
        .env("PIPELINE_PLUGIN_PATH", "")
        .env("XDG_DATA_HOME", &empty)
        .output()
        .expect("run pipeline");
    let _ = std::fs::remove_dir_all(&empty);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stages: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            (words.next()? == "native")
                .then(|| (name.to_string(), words.collect::<Vec<_>>().join(" ")))
        })
        .collect();
    assert!(
        stages.iter().any(|(n, _)| n == "exec"),
        "no native stages in `pipeline plugins list`: {stages:?}"
    );
    stages
}
