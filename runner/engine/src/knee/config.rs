//! A stage's `search:` as written, and the checked [`PlannedSearch`] it
//! compiles to (every problem collected, each at its own `file:line:col`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::Sp;
use crate::diagnostic::{Diagnostic, Loc, Source, did_you_mean};
use crate::params;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::rate_search::RateSearch;

/// `search:` of a stage: find the highest target rate that holds a latency
/// target, e.g. `{slo: {metric: latency_p99, below: 50ms}, start: 100,
/// max: 20000, precision: 5%}`. Each step is a run of the stage at one
/// rate; the rate doubles from `start` until a step breaks the SLO or falls
/// behind its schedule, then bisects to `precision`; a final hold at
/// `hold` of the knee gives the stage's figures.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// The latency target: a latency metric of the stage and its limit.
    pub slo: Sp<SloConfig>,
    /// The first step's target rate (the stage's rate unit: ops/s, IOPS).
    pub start: Sp<f64>,
    /// No step asks for more than this.
    pub max: Sp<f64>,
    /// Bisect until the bracket around the knee is this narrow, relative
    /// to the knee (default 5%).
    #[serde(default)]
    pub precision: Option<Sp<Share>>,
    /// The final hold's rate, as a share of the knee (default 85%).
    #[serde(default)]
    pub hold: Option<Sp<Share>>,
    /// Most time the steps may take, e.g. `10m` (default 30m); the hold
    /// runs after. When it runs out first, the report says so.
    #[serde(default)]
    pub budget: Option<Sp<String>>,
}

/// The SLO: `metric` must stay below `below`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SloConfig {
    /// A latency metric of the stage, e.g. `latency_p99` (s3-bench,
    /// swift-bench) or `read_clat_p99` (fio).
    pub metric: Sp<String>,
    /// Its limit, a duration: `50ms`, `2ms`, `500us`.
    pub below: Sp<String>,
}

/// A share: `5%` or `0.05`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Share {
    Number(f64),
    Text(String),
}

impl Share {
    fn fraction(&self) -> Option<f64> {
        let f = match self {
            Share::Number(n) => *n,
            Share::Text(t) => t.trim().strip_suffix('%')?.trim().parse::<f64>().ok()? / 100.0,
        };
        f.is_finite().then_some(f)
    }
}

pub const DEFAULT_PRECISION: f64 = 0.05;
pub const DEFAULT_HOLD: f64 = 0.85;
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30 * 60);

/// A checked search.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedSearch {
    pub slo_metric: String,
    /// The SLO's limit in microseconds (the unit of the stages' latencies).
    pub below_us: f64,
    pub start: f64,
    pub max: f64,
    pub precision: f64,
    pub hold: f64,
    pub budget: Duration,
}

/// The problems of a `search:` of a stage whose plugin is `plugin`, or the
/// planned search. `rate_search` is what the plugin says of its rate
/// (`None`: it cannot be searched); `metrics` what it declares.
pub fn check(
    config: &Sp<SearchConfig>,
    plugin: &str,
    rate_search: Option<&RateSearch>,
    metrics: &[MetricDecl],
    source: &std::sync::Arc<Source>,
) -> Result<PlannedSearch, Vec<Diagnostic>> {
    let err = |message: String, loc: Loc| Diagnostic::error(message).at(source, loc);
    let mut problems = Vec::new();
    if rate_search.is_none() {
        problems.push(
            err(
                format!("`search:` needs a stage that follows a target rate; `{plugin}` does not"),
                config.loc,
            )
            .with_help("s3-bench, swift-bench and fio can be searched (fio with the rbd, rados or libaio engine)"),
        );
    }
    let c = &config.value;
    let slo_metric = check_slo_metric(&c.slo.metric, metrics, rate_search.is_some())
        .map_err(|(m, h)| problems.push(err(m, c.slo.metric.loc).with_help(h)))
        .ok();
    let below_us = match params::parse_duration(&c.slo.below) {
        Ok(d) if !d.is_zero() => Some(d.as_secs_f64() * 1e6),
        Ok(_) => {
            problems.push(
                err("`below` must be above zero".into(), c.slo.below.loc)
                    .with_help("e.g. `below: 50ms`"),
            );
            None
        }
        Err(e) => {
            problems.push(
                err(format!("invalid `below`: {e}"), c.slo.below.loc)
                    .with_help("write a duration with its unit: `50ms`, `2ms`, `500us`"),
            );
            None
        }
    };
    if !(c.start.value.is_finite() && c.start.value > 0.0) {
        problems.push(
            err("`start` must be a rate above zero".into(), c.start.loc)
                .with_help("e.g. `start: 100`: the first step's target rate"),
        );
    }
    if !(c.max.value.is_finite() && c.max.value >= c.start.value) {
        problems.push(
            err("`max` must be a rate at least `start`".into(), c.max.loc)
                .with_help("e.g. `max: 20000`: no step asks for more"),
        );
    }
    // A share given and out of its range is `None`; not given, the default.
    let share = |s: &Option<Sp<Share>>, default: f64, most: f64| match s {
        None => Some(default),
        Some(s) => s.fraction().filter(|f| *f > 0.0 && *f <= most),
    };
    let precision = share(&c.precision, DEFAULT_PRECISION, 0.5);
    if precision.is_none() {
        problems.push(share_problem(&c.precision, "precision", "5%", source));
    }
    let hold = share(&c.hold, DEFAULT_HOLD, 1.0);
    if hold.is_none() {
        problems.push(share_problem(&c.hold, "hold", "85%", source));
    }
    let budget = match &c.budget {
        None => Some(DEFAULT_BUDGET),
        Some(b) => match params::parse_duration(b) {
            Ok(d) if !d.is_zero() => Some(d),
            Ok(_) | Err(_) => {
                problems.push(
                    err(format!("invalid `budget`: `{}`", b.value), b.loc)
                        .with_help("a duration above zero, e.g. `budget: 10m`"),
                );
                None
            }
        },
    };
    match (slo_metric, below_us, precision, hold, budget) {
        (Some(slo_metric), Some(below_us), Some(precision), Some(hold), Some(budget))
            if problems.is_empty() =>
        {
            Ok(PlannedSearch {
                slo_metric,
                below_us,
                start: c.start.value,
                max: c.max.value,
                precision,
                hold,
                budget,
            })
        }
        _ => Err(problems),
    }
}

fn share_problem(
    s: &Option<Sp<Share>>,
    name: &str,
    example: &str,
    source: &std::sync::Arc<Source>,
) -> Diagnostic {
    let loc = s.as_ref().map(|s| s.loc).unwrap_or_default();
    let range = if name == "precision" {
        "above 0% and at most 50%"
    } else {
        "above 0% and at most 100%"
    };
    Diagnostic::error(format!("`{name}` must be a share {range}"))
        .at(source, loc)
        .with_help(format!("e.g. `{name}: {example}`"))
}

/// The SLO's metric: one the stage declares, in microseconds (a latency).
fn check_slo_metric(
    name: &str,
    metrics: &[MetricDecl],
    searchable: bool,
) -> Result<String, (String, String)> {
    let latencies: Vec<&str> = metrics
        .iter()
        .filter(|m| {
            m.unit == pipeline_model::unit::MICROSECONDS
                && !m.name.starts_with("search_")
                && !m.name.starts_with("knee")
        })
        .map(|m| &*m.name)
        .collect();
    if latencies.contains(&name) || !searchable {
        return Ok(name.to_string());
    }
    let message = format!("`{name}` is not a latency metric of this stage");
    let help = match did_you_mean(name, latencies.iter().copied()) {
        Some(s) => s,
        None => format!("its latency metrics: {}", latencies.join(", ")),
    };
    Err((message, help))
}
