//! Errors of the plugin host. Each names the plugin (its file, or its name
//! once described) so that a message read in a report says who did what.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "sha256 mismatch for {path}: the pipeline pins {expected}, the file has {actual}; refusing to load it"
    )]
    HashMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("invalid sha256 pin `{0}`: expected 64 hex digits (optionally prefixed `sha256:`)")]
    BadPin(String),
    #[error("{path} is not a valid WebAssembly component: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error(
        "{path} does not export `pipeline:stage/plugin`: it is not a stage plugin (exports: {exports})"
    )]
    NotAPlugin { path: PathBuf, exports: String },
    #[error(
        "{path} is built against pipeline:stage@{found}, which this runner does not support (supported: {supported})"
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: String,
        supported: String,
    },
    #[error("{path} cannot be linked: {reason}")]
    Link { path: PathBuf, reason: String },
    #[error("plugin `{plugin}`: {message}")]
    Plugin { plugin: String, message: String },
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
}
