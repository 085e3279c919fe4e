//! The one wasmtime [`Engine`] of the process, and the ticker that drives
//! epoch interruption.
//!
//! Why one engine: compiled code, the compile cache key
//! (`precompile_compatibility_hash`) and the epoch counter all belong to an
//! engine; sharing it makes every plugin in a run use the same settings and
//! lets one ticker thread serve all of them.

use std::sync::OnceLock;
use std::time::Duration;

use wasmtime::{Config, Engine};

use crate::error::WasmError;

/// How often the epoch advances: the resolution of every time limit.
pub const TICK: Duration = Duration::from_millis(10);

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

/// The shared engine (created on first use, with its ticker thread).
pub fn engine() -> Result<&'static Engine, WasmError> {
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.wasm_component_model(true);
            // Guest code checks the epoch at loop heads and function entries;
            // without this a looping guest would hang the runner forever.
            config.epoch_interruption(true);
            // Guests cannot grow a stack past this; deep recursion traps.
            config.max_wasm_stack(2 << 20);
            let engine = Engine::new(&config).map_err(|e| format!("{e:#}"))?;
            let ticker = engine.weak();
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || {
                    while let Some(engine) = ticker.upgrade() {
                        engine.increment_epoch();
                        drop(engine);
                        std::thread::sleep(TICK);
                    }
                })
                .map_err(|e| format!("cannot start the epoch thread: {e}"))?;
            Ok(engine)
        })
        .as_ref()
        .map_err(|e| WasmError::Engine(e.clone()))
}
