//! Errors of the plugin host. Each names the plugin (its file, or its name
//! once described) so that a message read in a report says who did what.

use std::path::PathBuf;

use pipeline_stage_api::registry::{PinError, PluginError};

use crate::limits::LimitsError;

#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The `sha256:` pin is malformed or does not match the file.
    #[error(transparent)]
    Pin(#[from] PinError),
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
    /// `PIPELINE_WASM_MEMORY` or `PIPELINE_WASM_TIME` is malformed.
    #[error("cannot start the WebAssembly engine: {0}")]
    Limits(#[from] LimitsError),
}

/// What the registry sees: a pin problem stays one (the engine reports it at
/// `sha256:`), anything else makes the file an invalid plugin.
impl From<WasmError> for PluginError {
    fn from(e: WasmError) -> Self {
        match e {
            WasmError::Pin(pin) => PluginError::Pin(pin),
            other => PluginError::Invalid(Box::new(other)),
        }
    }
}
