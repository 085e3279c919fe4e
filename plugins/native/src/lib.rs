//! The native (compiled-in) stages. [`registry`] is the one list of them:
//! adding a stage means adding a module and a line there.

pub mod exec;

use pipeline_engine::registry::Registry;

/// Every native stage.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.add_native(exec::Exec);
    r
}
