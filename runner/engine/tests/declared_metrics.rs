//! The engine keeps only metrics a stage declares, as it declares them: a
//! native stage reporting any other fails, naming itself and the metric, and
//! results.json never holds a figure `plugins describe` does not show.

use std::sync::atomic::{AtomicUsize, Ordering};

use pipeline_engine::compile::{CompileOptions, compile_file};
use pipeline_engine::progress::Progress;
use pipeline_engine::registry::Registry;
use pipeline_engine::results::{RunResults, StageStatus};
use pipeline_engine::runner::{self, RunOptions};
use pipeline_model::unit;
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Typed, TypedStage};
use schemars::JsonSchema;
use serde::Deserialize;

const OPS: MetricDecl = MetricDecl::rate("ops_per_s", unit::IOPS, "Operations per second.");

/// Reports what `report` says: its declared metric, one it does not
/// declare, or its declared metric in another unit.
struct Reporter;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Config {
    report: String,
}

impl TypedStage for Reporter {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "reporter",
            summary: "Reports a metric, declared or not.",
            per_host: true,
            requires: Vec::new(),
            outputs: Vec::new(),
            metrics: vec![OPS],
        }
    }

    fn plan(&self, _config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        vec![Action::note("report a metric")]
    }

    fn run(&self, config: &Config, _ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let metric = match config.report.as_str() {
            "declared" => OPS.value(10.0),
            "undeclared" => MetricDecl::rate("bytes_per_s", unit::BYTES_PER_S, "").value(1.0),
            _ => {
                let mut m = OPS.value(10.0);
                m.unit = unit::COUNT.into();
                m
            }
        };
        Ok(StageOutput {
            metrics: vec![metric],
            ..Default::default()
        })
    }
}

fn run(report: &str) -> RunResults {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pipeline-declared-metrics-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pipeline.yaml");
    let yaml = format!(
        "name: declared\nstages:\n  - id: measure\n    uses: reporter\n    with:\n      report: {report}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    let mut registry = Registry::new();
    registry.add_native(Typed(Reporter));
    let plan = compile_file(&file, &registry, &CompileOptions::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let outcome = runner::run(
        &plan,
        RunOptions {
            out_dir: Some(dir.join("run")),
            runs_root: dir.clone(),
            signals: Default::default(),
            progress: Progress::Quiet,
            live: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    outcome.results
}

#[test]
fn a_declared_metric_is_recorded() {
    let results = run("declared");
    let stage = &results.stages[0];
    assert_eq!(stage.status, StageStatus::Succeeded, "{:?}", stage.error);
    assert_eq!(stage.metrics, vec![OPS.value(10.0)]);
}

#[test]
fn an_undeclared_metric_fails_the_stage_naming_it() {
    let results = run("undeclared");
    let stage = &results.stages[0];
    assert_eq!(stage.status, StageStatus::Failed);
    assert_eq!(
        stage.error.as_deref(),
        Some(
            "stage `reporter` reported the metric `bytes_per_s`, which it does not declare \
             (it declares: ops_per_s)"
        )
    );
    assert!(stage.metrics.is_empty());
}

#[test]
fn a_metric_unlike_its_declaration_fails_the_stage() {
    let results = run("other-unit");
    let stage = &results.stages[0];
    assert_eq!(stage.status, StageStatus::Failed);
    assert_eq!(
        stage.error.as_deref(),
        Some(
            "stage `reporter` reported the metric `ops_per_s` with unit `count`, \
             but declares it with `IOPS`"
        )
    );
}
