//! The pipeline runner's engine: a pipeline file is parsed (`config`),
//! checked and expanded into a `Plan` (`compile`), executed stage by stage
//! (`runner`), recorded in `results.json` (`results`) and rendered into a
//! Markdown report (`report`). Stages implement one trait (`stage`).

pub mod bounded_series;
pub mod cancel;
pub mod ceph;
pub mod client_versions;
pub mod cluster_flags;
pub mod cluster_watch;
pub mod compare;
pub mod compile;
pub mod config;
pub mod diagnostic;
pub mod during;
pub mod facts;
pub mod fanout;
pub mod history;
pub mod host;
pub mod host_watch;
pub mod hosts;
pub mod knee;
pub mod live_metrics;
pub mod orphans;
mod per_host;
pub mod plan;
pub mod plugin_lock;
pub mod preflight;
pub mod progress;
pub mod recovery;
pub mod repetition;
pub mod report;
pub mod results;
pub mod run_lock;
pub mod runner;
pub mod sync_start;
pub mod template;
pub mod terminal;

pub use pipeline_model as model;
// The stage API lives in its own crate; re-exported so the engine reads as one.
pub use pipeline_stage_api::{
    client_root, context, exec, http_url, ledger_journal, params, registry, remote_worker, secrets,
    stage,
};
