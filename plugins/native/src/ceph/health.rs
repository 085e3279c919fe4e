//! `ceph-health`: `ceph health detail`, recorded with the results (the
//! status and the number of health checks as metrics, each check as a note
//! in the report), and a gate: the stage fails when the cluster is at least
//! as unhealthy as `fail_on` says, so a suite does not benchmark a cluster
//! that is recovering or degraded without saying so.

use pipeline_model::{Aggregate, Direction, Metric, unit};
use pipeline_parsers::ceph_health::{self, Check, Health, Status};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, OutputSpec, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Seconds, TypedStage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::admin;

pub struct CephHealth;

// The cluster's state, not a host's: neither combines across hosts.
pub const HEALTH_STATUS: MetricDecl = MetricDecl::declare(
    "health_status",
    "",
    Direction::Lower,
    Aggregate::None,
    "0 for HEALTH_OK, 1 for HEALTH_WARN, 2 for HEALTH_ERR.",
);
pub const HEALTH_CHECKS: MetricDecl = MetricDecl::declare(
    "health_checks",
    unit::COUNT,
    Direction::Lower,
    Aggregate::None,
    "Health checks reported.",
);
pub const HEALTH_WAITED: MetricDecl = MetricDecl::declare(
    "health_waited",
    unit::SECONDS,
    Direction::Lower,
    Aggregate::None,
    "How long the stage waited for the health `fail_on` accepts (with `wait`).",
);

/// Pause between two looks at the health while waiting.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// `with:` of a `ceph-health` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Fail the stage at this health or worse: `warn` (HEALTH_WARN), `err` (HEALTH_ERR), or `never` (only record it). Checks below it are noted in the report.
    #[serde(default)]
    pub fail_on: FailOn,
    /// Health check codes that never fail the stage (e.g. `POOL_NO_REDUNDANCY` on a test cluster); they are still recorded.
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Wait up to this long for a health `fail_on` accepts before failing, looking every 2 s (e.g. `3m` after a fault, while the cluster recovers); the time waited is recorded. 0: look once.
    #[serde(default = "no_wait")]
    pub wait: Seconds,
}

fn no_wait() -> Seconds {
    Seconds::secs(0)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    Warn,
    #[default]
    Err,
    Never,
}

impl FailOn {
    /// The least bad status that fails the stage.
    fn threshold(self) -> Option<Status> {
        match self {
            FailOn::Warn => Some(Status::Warn),
            FailOn::Err => Some(Status::Err),
            FailOn::Never => None,
        }
    }
}

const ARGS: [&str; 4] = ["health", "detail", "--format", "json"];

/// Detail lines shown per check: a check about PGs can list thousands.
const DETAIL_LINES: usize = 5;

impl TypedStage for CephHealth {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "ceph-health",
            summary: "ceph health detail: status and health checks recorded; fails at the health `fail_on` names.",
            per_host: true,
            requires: vec!["ceph"],
            outputs: vec![
                OutputSpec::new("health", "HEALTH_OK, HEALTH_WARN or HEALTH_ERR."),
                OutputSpec::new(
                    "checks",
                    "The codes of the health checks, e.g. [\"OSD_DOWN\"].",
                ),
            ],
            metrics: vec![HEALTH_STATUS, HEALTH_CHECKS, HEALTH_WAITED],
        }
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        config
            .ignore
            .iter()
            .filter(|code| !is_check_code(code))
            .map(|code| {
                (
                    "ignore".to_string(),
                    format!("`{code}` is not a health check code (upper case, e.g. OSD_DOWN)"),
                )
            })
            .collect()
    }

    fn plan(&self, config: &Config, ctx: &PlanContext) -> Vec<Action> {
        let rule = match config.fail_on.threshold() {
            Some(status) => format!("fail at {} or worse", status.as_str()),
            None => "never fail".to_string(),
        };
        let ignoring = if config.ignore.is_empty() {
            String::new()
        } else {
            format!(" (not counting {})", config.ignore.join(", "))
        };
        vec![
            Action::command("ceph health detail", ctx.ceph.argv("ceph", &ARGS)),
            Action::note(format!("{rule}{ignoring}")),
        ]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let spec = admin(&ctx.ceph, "ceph", &ARGS);
        let started = std::time::Instant::now();
        let mut look = 0;
        let (out, health) = loop {
            look += 1;
            let out = ctx.run_ok(&format!("ceph-health-detail-{look}"), &spec)?;
            let health = ceph_health::parse(out.whole_stdout(&spec.display())?)
                .map_err(|e| StageError::failed(format!("cannot read ceph health: {e}")))?;
            match failure(&health, config) {
                None => break (out, health),
                Some(reason) if started.elapsed() >= config.wait.0 => {
                    let waited = if config.wait.0.is_zero() {
                        String::new()
                    } else {
                        format!(" (after waiting {} s)", started.elapsed().as_secs())
                    };
                    return Err(StageError::failed(format!("{reason}{waited}")));
                }
                Some(reason) => {
                    ctx.progress(&format!(
                        "waiting: {}",
                        reason.chars().take(120).collect::<String>()
                    ));
                    // Ctrl-C and the stage's timeout end the wait at once.
                    ctx.sleep(WAIT_POLL)?;
                }
            }
        };
        let mut output = StageOutput {
            metrics: metrics(&health)
                .into_iter()
                .chain(
                    (!config.wait.0.is_zero())
                        .then(|| HEALTH_WAITED.value(started.elapsed().as_secs_f64())),
                )
                .collect(),
            notes: health.checks.iter().map(|c| note(c, config)).collect(),
            ..Default::default()
        };
        let codes: Vec<&str> = health.checks.iter().map(|c| c.code.as_str()).collect();
        output
            .outputs
            .insert("health".into(), json!(health.status.as_str()));
        output.outputs.insert("checks".into(), json!(codes));
        let document: Value = serde_json::from_str(out.stdout.trim()).unwrap_or(Value::Null);
        output
            .environment
            .insert("ceph health detail".into(), document);
        Ok(output)
    }
}

/// `OSD_DOWN`, `POOL_NO_REDUNDANCY`: how Ceph names its checks.
fn is_check_code(code: &str) -> bool {
    !code.is_empty()
        && code
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn metrics(health: &Health) -> Vec<Metric> {
    let level = match health.status {
        Status::Ok => 0.0,
        Status::Warn => 1.0,
        Status::Err => 2.0,
    };
    vec![
        HEALTH_STATUS.value(level),
        HEALTH_CHECKS.value(health.checks.len() as f64),
    ]
}

/// Why the stage fails, if it does: the checks at or above the threshold
/// that are neither muted (Ceph does not count those) nor ignored.
fn failure(health: &Health, config: &Config) -> Option<String> {
    let threshold = config.fail_on.threshold()?;
    let failing: Vec<String> = health
        .checks
        .iter()
        .filter(|c| c.severity >= threshold && !c.muted && !config.ignore.contains(&c.code))
        .map(|c| format!("{} ({})", c.code, c.summary))
        .collect();
    if failing.is_empty() {
        return None;
    }
    Some(format!(
        "the cluster reports {}: {}; the stage fails at {} or worse (`fail_on`), \
         list a check under `ignore` to go on despite it",
        health.status.as_str(),
        failing.join("; "),
        threshold.as_str()
    ))
}

/// One report line per check: `HEALTH_WARN OSD_DOWN: 1 osds down (osd.3 is down)`.
fn note(check: &Check, config: &Config) -> String {
    let mut text = format!(
        "{} {}: {}",
        check.severity.as_str(),
        check.code,
        check.summary
    );
    if !check.detail.is_empty() {
        let shown: Vec<&str> = check
            .detail
            .iter()
            .take(DETAIL_LINES)
            .map(String::as_str)
            .collect();
        text.push_str(&format!(" ({}", shown.join("; ")));
        if check.detail.len() > DETAIL_LINES {
            text.push_str(&format!("; and {} more", check.detail.len() - DETAIL_LINES));
        }
        text.push(')');
    }
    if check.muted {
        text.push_str(" [muted]");
    } else if config.ignore.contains(&check.code) {
        text.push_str(" [ignored]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(v: Value) -> Config {
        serde_json::from_value(v).unwrap()
    }

    /// A real `ceph health -f json` of the sandbox with an OSD down.
    fn osd_down() -> Health {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../parsers/tests/data/ceph-health-16.2.15-osd-down-local.json");
        ceph_health::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn fails_at_the_configured_health() {
        let down = osd_down();
        assert_eq!(failure(&down, &config(json!({}))), None);
        assert_eq!(failure(&down, &config(json!({"fail_on": "never"}))), None);
        let reason = failure(&down, &config(json!({"fail_on": "warn"}))).unwrap();
        assert!(
            reason.starts_with(
                "the cluster reports HEALTH_WARN: OSD_DOWN (1 osds down); PG_DEGRADED (Degraded"
            ),
            "{reason}"
        );
        let ignoring = config(json!({"fail_on": "warn", "ignore": ["OSD_DOWN"]}));
        let reason = failure(&down, &ignoring).unwrap();
        assert!(
            !reason.contains("OSD_DOWN") && reason.contains("PG_DEGRADED"),
            "{reason}"
        );
        let both = config(json!({"fail_on": "warn", "ignore": ["OSD_DOWN", "PG_DEGRADED"]}));
        assert_eq!(failure(&down, &both), None);
    }

    #[test]
    fn records_status_checks_and_notes() {
        let down = osd_down();
        let m = metrics(&down);
        assert_eq!((m[0].name.as_str(), m[0].value), ("health_status", 1.0));
        assert_eq!((m[1].name.as_str(), m[1].value), ("health_checks", 2.0));
        let ignoring = config(json!({"ignore": ["OSD_DOWN"]}));
        assert_eq!(
            note(&down.checks[0], &ignoring),
            "HEALTH_WARN OSD_DOWN: 1 osds down [ignored]"
        );
        let many = Check {
            detail: (1..=7).map(|i| format!("pg 1.{i} is degraded")).collect(),
            ..down.checks[1].clone()
        };
        let text = note(&many, &config(json!({})));
        assert!(
            text.ends_with("(pg 1.1 is degraded; pg 1.2 is degraded; pg 1.3 is degraded; pg 1.4 is degraded; pg 1.5 is degraded; and 2 more)"),
            "{text}"
        );
    }

    #[test]
    fn ignore_takes_check_codes() {
        assert!(
            CephHealth
                .check(&config(json!({"ignore": ["OSD_DOWN", "MON_CLOCK_SKEW"]})))
                .is_empty()
        );
        let problems = CephHealth.check(&config(json!({"ignore": ["osd_down"]})));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "ignore");
    }
}
