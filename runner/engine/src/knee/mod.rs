//! Finding the knee: the highest load a stage can be offered before its
//! latency breaks a target (a stage's `search:`). The search ([`search`])
//! steps the stage's target rate up and bisects; each step is one ordinary
//! run of the stage at one rate, judged by [`step`]; a final hold at a
//! share of the knee gives the stage's figures. The runner drives it
//! (`runner::stage_search`); [`curve`] turns the steps into the metrics and
//! notes of the stage's record, which the report draws as a curve.
//!
//! Only open-loop loads are searched: a stage that follows a fixed schedule
//! at the target rate (s3-bench and swift-bench with latency counted from
//! each request's intended start; fio with `rate_iops` and
//! `rate_process=poisson`). A step whose load fell behind its schedule
//! fails, so the knee is never where a closed loop's latency would hide
//! the queue (coordinated omission).

pub mod config;
pub mod curve;
pub mod search;
pub mod step;

pub use config::{PlannedSearch, SearchConfig};
