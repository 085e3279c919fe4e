//! `settle`: waits before the next stage, so that the cluster's background
//! work (PG peering after a pool was created, a flush after a write test)
//! is over before it is measured. Ctrl-C and the stage's `timeout:` end the
//! wait at once.

use pipeline_model::unit;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

pub struct Settle;

/// `with:` of a `settle` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How long to wait (`30s`, `2m`).
    pub wait: Seconds,
}

/// The one metric, declared once: `plugins describe` shows this, and the
/// value in results.json is made from it.
pub const WAITED: MetricDecl = MetricDecl::info("waited", unit::SECONDS, "Time waited.");

impl TypedStage for Settle {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "settle",
            summary: "Waits, so that the cluster settles before the next stage.",
            per_host: false,
            requires: Vec::new(),
            outputs: Vec::new(),
            metrics: vec![WAITED],
        }
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        vec![Action::note(format!("wait {:?}", config.wait.0))]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let started = std::time::Instant::now();
        ctx.sleep(config.wait.0)?;
        Ok(StageOutput {
            metrics: vec![WAITED.value(started.elapsed().as_secs_f64())],
            ..Default::default()
        })
    }
}
