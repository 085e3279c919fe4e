//! WebAssembly component plugins: stages written once, shared as a `.wasm`
//! file, run sandboxed by wasmtime next to the native stages.
//!
//! - The interface is the WIT package `pipeline:stage@0.2.0`
//!   (`plugins/wit/pipeline-stage@0.2.0/stage.wit`: a metric declared once,
//!   with its direction, rule across hosts and headline mark); plugins built
//!   against `pipeline:stage@0.1.0` keep running. Released versions are never
//!   edited; [`versions`] holds one binding per supported version.
//! - [`WasmLoader`] finds plugins (`uses: ./x.wasm` or a name on the plugin
//!   path), checks `sha256:` pins, compiles through the on-disk [`cache`] and
//!   registers a [`WasmStage`] that the engine treats like any other stage.
//! - The sandbox: capabilities deny by default ([`host`]), a per-call time
//!   budget through epoch interruption and a memory cap per instance
//!   ([`limits`]), and WASI with no preopened folders, no environment and no
//!   sockets.

pub mod cache;
mod cache_trust;
mod diagnose;
pub mod engine;
pub mod error;
pub mod host;
pub mod limits;
pub mod loader;
pub mod stage;
pub mod versions;

pub use error::WasmError;
pub use limits::Limits;
pub use loader::WasmLoader;
pub use stage::WasmStage;
/// The WIT value conversions, for the fuzz target `wasm_values`.
#[cfg(feature = "fuzzing")]
pub use versions::v0_1_0::fuzz_conversions;

/// Interface versions this runner runs, newest last.
pub const SUPPORTED_INTERFACES: &[&str] = &["0.1.0", "0.2.0"];
