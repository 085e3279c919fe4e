//! `pipeline plugins new NAME`: a plugin crate that builds with
//! `cargo build --release --target wasm32-wasip2` and runs in the test
//! pipeline it comes with, right away.
//!
//! The SDK and the WIT interface are copied into the new crate (`sdk/`), so
//! it builds anywhere, without this repository next to it. The new plugin
//! targets the newest interface (`pipeline:stage@0.2.0`) through the SDK's
//! root API; the SDK also binds 0.1.0 (`pipeline_plugin_sdk::v0_1`), so
//! both WIT packages are copied.

use std::path::{Path, PathBuf};

/// The SDK's files, as `sdk/` holds them.
const SDK: [(&str, &str); 4] = [
    (
        "sdk/Cargo.toml",
        include_str!("../../../plugins/guests/sdk/Cargo.toml"),
    ),
    (
        "sdk/src/lib.rs",
        include_str!("../../../plugins/guests/sdk/src/lib.rs"),
    ),
    (
        "sdk/src/shared.rs",
        include_str!("../../../plugins/guests/sdk/src/shared.rs"),
    ),
    (
        "sdk/src/v0_1.rs",
        include_str!("../../../plugins/guests/sdk/src/v0_1.rs"),
    ),
];

/// The WIT packages the SDK binds, as `sdk/wit/` holds them.
const WIT: [(&str, &str); 2] = [
    (
        "sdk/wit/pipeline-stage@0.1.0/stage.wit",
        include_str!("../../../plugins/wit/pipeline-stage@0.1.0/stage.wit"),
    ),
    (
        "sdk/wit/pipeline-stage@0.2.0/stage.wit",
        include_str!("../../../plugins/wit/pipeline-stage@0.2.0/stage.wit"),
    ),
];

fn cargo_toml(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
pipeline-plugin-sdk = {{ path = "sdk" }}

[profile.release]
opt-level = "s"
lto = true
strip = true
panic = "abort"

# A crate of its own, even when created inside another workspace.
[workspace]
"#
    )
}

fn lib_rs(name: &str) -> String {
    format!(
        r#"//! `{name}`: a pipeline stage plugin. Edit `describe` and `run`, then
//! `cargo build --release --target wasm32-wasip2` and `pipeline run pipeline.yaml`.

use pipeline_plugin_sdk::*;

// Every metric the plugin reports is declared once: its unit, whether more
// is better, how it combines across hosts, whether the report's summary
// shows it. `run` reports values of it (`WORDS.value(..)`); a value of an
// undeclared metric fails the stage. Others: `MetricSpec::rate("ops_per_s",
// "ops/s", "..")` (higher is better, summed across hosts) or
// `MetricSpec::new("latency", "ms", Direction::LowerIsBetter, Aggregate::Max, "..")`.
const WORDS: MetricSpec =
    MetricSpec::info("words", "count", "words the command printed").headline();

struct Stage;

impl Plugin for Stage {{
    fn describe() -> Description {{
        Description::new("{name}", "0.1.0", "What {name} measures, in one line")
            .param(ParamSpec::with_default(
                "message",
                ParamType::text(),
                Value::Text("hello".into()),
                "what to echo",
            ))
            .metric(WORDS)
            // Running programs needs this AND `grants: {{exec: [echo]}}` in the pipeline.
            .capability(Capability::Exec)
    }}

    fn run(params: &Params, host: &Host) -> Result<Output, Error> {{
        let message = params.str("message").unwrap_or("hello");
        // Runs through the runner, like a native stage's commands: output
        // saved in the run folder, the stage's timeout, Ctrl-C.
        let out = host.exec(&["echo", message])?;
        let words = out.stdout.split_whitespace().count();
        host.info(&format!("echo printed {{words}} word(s)"));
        Ok(Output::new().metric(WORDS.value(words as f64)))
    }}
}}

export_plugin!(Stage);
"#
    )
}

fn pipeline_yaml(name: &str) -> String {
    let file = name.replace('-', "_");
    format!(
        r#"# Try the plugin:
#   cargo build --release --target wasm32-wasip2 && pipeline run pipeline.yaml
name: {name}-try
stages:
  - id: try
    uses: ./target/wasm32-wasip2/release/{file}.wasm
    grants: {{exec: [echo]}}
    with:
      message: hello from {name}
"#
    )
}

fn readme(name: &str) -> String {
    let file = name.replace('-', "_");
    format!(
        r#"# {name}

A stage plugin for the `pipeline` runner (a WebAssembly component,
interface `pipeline:stage@0.2.0`).

```sh
rustup target add wasm32-wasip2          # once
cargo build --release --target wasm32-wasip2
pipeline run pipeline.yaml               # the test pipeline
pipeline plugins describe ./target/wasm32-wasip2/release/{file}.wasm
```

Share it: copy `target/wasm32-wasip2/release/{file}.wasm` to
`plugins/wasm/{name}.wasm` in a suite's project (then `uses: {name}`), or to
`~/.local/share/pipeline/plugins/`. Pin it in a pipeline with
`sha256: <sha256sum of the file>`.

`sdk/` is a copy of the Rust SDK and `sdk/wit/` of the interface (0.2.0,
and 0.1.0 for `pipeline_plugin_sdk::v0_1`, the API of plugins built against
0.1.0).
"#
    )
}

/// Why `pipeline plugins new` made nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error(
        "invalid plugin name `{0}`: use lower-case letters, digits, `-` and `_`, starting with a letter"
    )]
    InvalidName(String),
    #[error("`{0}` is the name of a native stage; choose another name")]
    NativeName(String),
    #[error("{} already exists", .0.display())]
    Exists(PathBuf),
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Whether `name` can name a plugin (and a crate).
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= 64;
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::InvalidName(name.to_string()))
    }
}

/// Creates `DIR/NAME/` (DIR defaults to the current folder). Returns the crate folder.
pub fn create(
    name: &str,
    dir: Option<&Path>,
    reserved: &[String],
) -> Result<PathBuf, ScaffoldError> {
    check_name(name)?;
    if reserved.iter().any(|r| r == name) {
        return Err(ScaffoldError::NativeName(name.to_string()));
    }
    let root = dir.unwrap_or(Path::new(".")).join(name);
    if root.exists() {
        return Err(ScaffoldError::Exists(root));
    }
    let own = [
        ("Cargo.toml", cargo_toml(name)),
        ("src/lib.rs", lib_rs(name)),
        ("pipeline.yaml", pipeline_yaml(name)),
        ("README.md", readme(name)),
        (".gitignore", "target/\n".to_string()),
    ];
    let copied = SDK
        .iter()
        .chain(&WIT)
        .map(|(rel, text)| (*rel, text.to_string()));
    for (rel, text) in own.into_iter().chain(copied) {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ScaffoldError::Io {
                what: "create",
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| ScaffoldError::Io {
            what: "write",
            path: path.clone(),
            source,
        })?;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("ceph-df").is_ok());
        assert!(check_name("Ceph").is_err());
        assert!(check_name("1x").is_err());
        assert!(check_name("a/b").is_err());
    }

    /// A file added to the SDK must be copied too, or the new crate does not build.
    #[test]
    fn every_sdk_source_file_is_copied() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/guests/sdk/src");
        for entry in std::fs::read_dir(src).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let rel = format!("sdk/src/{name}");
            assert!(
                SDK.iter().any(|(file, _)| *file == rel),
                "{rel} is not in plugin_scaffold::SDK"
            );
        }
    }

    #[test]
    fn creates_a_crate_and_refuses_to_overwrite() {
        let dir = std::env::temp_dir().join(format!("pipeline-scaffold-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = create("my-stage", Some(&dir), &[]).unwrap();
        let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
        assert!(lib.contains("Description::new(\"my-stage\""));
        assert!(
            lib.contains(".metric(WORDS)"),
            "declares its metric (0.2.0)"
        );
        let yaml = std::fs::read_to_string(root.join("pipeline.yaml")).unwrap();
        assert!(yaml.contains("uses: ./target/wasm32-wasip2/release/my_stage.wasm"));
        for file in SDK.iter().chain(&WIT).map(|(rel, _)| rel) {
            assert!(root.join(file).is_file(), "{file}");
        }
        let sdk = std::fs::read_to_string(root.join("sdk/src/lib.rs")).unwrap();
        assert!(sdk.contains("path: \"wit/pipeline-stage@0.2.0\""));
        assert!(
            create("my-stage", Some(&dir), &[])
                .unwrap_err()
                .to_string()
                .contains("already exists")
        );
        assert!(create("exec", Some(&dir), &["exec".into()]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
