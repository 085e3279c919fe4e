//! The stage API: what every stage, native or WASM, is written against.
//!
//! Layers: `pipeline-model` (metrics, results data) → this crate (the
//! [`stage::Stage`] trait, typed [`params`], the [`context::StageContext`] a
//! running stage uses, [`exec`] and [`hosts`] for commands, [`ceph`] for the
//! cluster connection) → the engine, the native stages and the WASM host →
//! the CLI. Nothing here parses pipelines, renders templates or draws progress.

pub mod cancel;
pub mod ceph;
pub mod client_root;
pub mod clock;
pub mod context;
pub mod exec;
pub mod finite;
pub mod grants;
pub mod hosts;
pub mod http_url;
pub mod ledger_journal;
pub mod live;
pub mod metric;
pub mod params;
pub mod rate_search;
pub mod registry;
pub mod remote_worker;
pub mod safe_fs;
pub mod secrets;
pub mod stage;
pub mod start_barrier;
pub mod start_report;
pub mod suggest;
pub mod typed;

pub use pipeline_model as model;
