//! `exec`: run a command (argv, no shell unless `shell:` is used), keep its
//! output in the run folder, and pull metrics out of it with a regex or a
//! JSON pointer. The escape hatch for any tool without a dedicated stage.

use std::collections::BTreeMap;
use std::time::Duration;

use pipeline_model::{Aggregate, Direction};
use pipeline_stage_api::context::StageContext;
use pipeline_stage_api::exec::CommandSpec;
use pipeline_stage_api::metric::MetricDecl;
use pipeline_stage_api::stage::{Action, OutputSpec, PlanContext, StageError, StageOutput};
use pipeline_stage_api::typed::{About, Seconds, TypedStage};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub struct Exec;

/// `with:` of an `exec` stage.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Program and arguments, run without a shell.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// A shell command line, run with `sh -c` (instead of `command`).
    #[serde(default)]
    pub shell: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, Value>>,
    /// Limit for the command (the stage `timeout` also applies).
    #[serde(default)]
    pub timeout: Option<Seconds>,
    /// Exit codes that count as success.
    #[serde(default = "only_zero")]
    pub allowed_exit_codes: Vec<i64>,
    /// Metrics to extract: {name, regex | json_pointer, unit, direction: higher|lower|none, headline, from: stdout|stderr, scale, aggregate: sum|max|min|mean|none}.
    #[serde(default)]
    pub metrics: Vec<Extract>,
}

fn only_zero() -> Vec<i64> {
    vec![0]
}

/// One `metrics:` entry.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extract {
    /// Metric name.
    name: String,
    /// A regex whose group `value` (or first group) is the number.
    #[serde(default)]
    regex: Option<String>,
    /// A JSON pointer (`/jobs/0/read/iops`) into stdout parsed as JSON.
    #[serde(default)]
    json_pointer: Option<String>,
    /// Unit of the value (after `scale`), e.g. `MiB/s`.
    #[serde(default)]
    unit: String,
    #[serde(default)]
    direction: Direction,
    /// Shown in the report's summary.
    #[serde(default)]
    headline: bool,
    /// `stdout` (default) or `stderr`.
    #[serde(default = "default_source")]
    from: String,
    /// Multiply the extracted number (unit conversion).
    #[serde(default)]
    scale: Option<f64>,
    /// How the metric combines across hosts (`sum`, `max`, `min`, `mean`,
    /// `{mean: {weight: METRIC}}`, `none`); without it, `sum` for a rate
    /// unit (`.../s`, `IOPS`), else `none`.
    #[serde(default)]
    aggregate: Option<Aggregate>,
}

fn default_source() -> String {
    "stdout".into()
}

impl Extract {
    /// The metric this entry declares. Without `aggregate`, the rule is
    /// `sum` for a rate unit (`.../s`, `IOPS`), else `none`.
    fn declaration(&self) -> MetricDecl {
        let rule = self
            .aggregate
            .clone()
            .unwrap_or_else(|| Aggregate::inferred_from_unit(&self.unit));
        let source = match (&self.regex, &self.json_pointer) {
            (Some(r), _) => format!("regex `{r}` on {}", self.from),
            (_, Some(p)) => format!("JSON pointer `{p}` into stdout"),
            _ => String::new(),
        };
        MetricDecl::owned(
            self.name.clone(),
            self.unit.clone(),
            self.direction,
            rule,
            self.headline,
            format!("Extracted by {source}."),
        )
    }
}

impl TypedStage for Exec {
    type Config = Config;

    fn about(&self) -> About {
        About {
            name: "exec",
            summary: "Run a command, capture its output, extract metrics by regex or JSON pointer.",
            per_host: true,
            requires: Vec::new(),
            outputs: vec![
                OutputSpec::new(
                    "stdout",
                    "The command's standard output, trimmed (its first 64 KiB; the raw file keeps all).",
                ),
                OutputSpec::new("exit_code", "The exit code."),
            ],
            metrics: Vec::new(),
        }
    }

    fn declared_metrics(&self, config: &Config) -> Vec<MetricDecl> {
        config.metrics.iter().map(Extract::declaration).collect()
    }

    fn metrics_from_param(&self) -> Option<&'static str> {
        Some("metrics")
    }

    fn check(&self, config: &Config) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        match (&config.command, &config.shell) {
            (None, None) => problems.push((
                "command".into(),
                "give `command` (a list) or `shell` (a string)".into(),
            )),
            (Some(_), Some(_)) => problems.push((
                "shell".into(),
                "give either `command` or `shell`, not both".into(),
            )),
            (Some(a), None) if a.is_empty() => {
                problems.push(("command".into(), "the command is empty".into()))
            }
            _ => {}
        }
        for e in extracts(&config.metrics)
            .into_iter()
            .filter_map(Result::err)
        {
            problems.push(("metrics".into(), e));
        }
        problems
    }

    fn plan(&self, config: &Config, _ctx: &PlanContext) -> Vec<Action> {
        vec![Action::command("run", argv(config))]
    }

    fn run(&self, config: &Config, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let extracts: Vec<&Extract> = extracts(&config.metrics)
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|e| StageError::Param {
                name: "metrics".into(),
                message: e,
            })?;
        let mut spec = CommandSpec::new(argv(config));
        if let Some(env) = &config.env {
            for (k, v) in env {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                spec = spec.env(k, &v);
            }
        }
        if let Some(t) = config.timeout {
            spec = spec.timeout(t.0.max(Duration::from_millis(1)));
        }
        // Metrics are read from the first READ_BACK bytes; the file keeps all.
        ctx.limit_read_back(Some(READ_BACK));
        let out = ctx.run("command", &spec)?;
        let code = match out.exit {
            pipeline_stage_api::exec::Exit::Code(c) => c,
            _ => -1,
        };
        if !config.allowed_exit_codes.contains(&i64::from(code)) {
            return Err(StageError::CommandFailed {
                command: spec.display(),
                status: out.exit.to_string(),
                stderr_tail: out.tail(),
            });
        }
        let mut metrics = Vec::new();
        for e in &extracts {
            let text = if e.from == "stderr" {
                &out.stderr
            } else {
                &out.stdout
            };
            let value = extract(e, text)?;
            metrics.push(e.declaration().value(value * e.scale.unwrap_or(1.0)));
        }
        let mut output = StageOutput {
            metrics,
            ..Default::default()
        };
        let stdout = out.stdout.trim();
        let kept = if stdout.len() > STDOUT_OUTPUT {
            let cut = (0..=STDOUT_OUTPUT)
                .rev()
                .find(|&i| stdout.is_char_boundary(i))
                .unwrap_or(0);
            output.notes.push(format!(
                "stdout is {} bytes: the `stdout` output keeps its first {} KiB (the command's .stdout file has all of it)",
                stdout.len(),
                STDOUT_OUTPUT >> 10
            ));
            &stdout[..cut]
        } else {
            stdout
        };
        output
            .outputs
            .insert("stdout".into(), Value::String(kept.to_string()));
        output.outputs.insert("exit_code".into(), json!(code));
        Ok(output)
    }
}

/// Bytes of the command's stdout and stderr read back for metrics.
const READ_BACK: u64 = 16 << 20;
/// Bytes of stdout kept as the `stdout` output (in results.json).
const STDOUT_OUTPUT: usize = 64 << 10;

fn argv(config: &Config) -> Vec<String> {
    match &config.shell {
        Some(line) => vec!["sh".into(), "-c".into(), line.clone()],
        None => config.command.clone().unwrap_or_default(),
    }
}

fn extracts(metrics: &[Extract]) -> Vec<Result<&Extract, String>> {
    metrics
        .iter()
        .map(|e| {
            match (&e.regex, &e.json_pointer) {
                (Some(r), None) => {
                    Regex::new(r)
                        .map_err(|err| format!("metric `{}`: invalid regex: {err}", e.name))?;
                }
                (None, Some(p)) if !p.is_empty() && !p.starts_with('/') => {
                    return Err(format!(
                        "metric `{}`: a JSON pointer starts with `/`, e.g. `/jobs/0/read/iops`",
                        e.name
                    ));
                }
                (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "metric `{}`: give exactly one of `regex` or `json_pointer`",
                        e.name
                    ));
                }
            }
            if matches!(e.aggregate, Some(Aggregate::Histogram { .. })) {
                return Err(format!(
                    "metric `{}`: exec records no histograms, so a `histogram` rule cannot apply",
                    e.name
                ));
            }
            if e.from != "stdout" && e.from != "stderr" {
                return Err(format!("metric `{}`: `from` is stdout or stderr", e.name));
            }
            Ok(e)
        })
        .collect()
}

fn extract(e: &Extract, text: &str) -> Result<f64, StageError> {
    let fail = |why: String| StageError::failed(format!("metric `{}`: {why}", e.name));
    let raw: String = if let Some(r) = &e.regex {
        let re = Regex::new(r).map_err(|err| fail(err.to_string()))?;
        let caps = re
            .captures(text)
            .ok_or_else(|| fail(format!("pattern `{r}` not found in {}", e.from)))?;
        caps.name("value")
            .or_else(|| caps.get(1))
            .or_else(|| caps.get(0))
            .map(|m| m.as_str().to_string())
            .unwrap_or_default()
    } else {
        let pointer = e.json_pointer.as_deref().unwrap_or_default();
        let doc: Value = serde_json::from_str(text.trim())
            .map_err(|err| fail(format!("{} is not JSON: {err}", e.from)))?;
        match doc.pointer(pointer) {
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(fail(format!("`{pointer}` is not a number: {other}"))),
            None => return Err(fail(format!("`{pointer}` not found in the JSON"))),
        }
    };
    raw.trim()
        .parse::<f64>()
        .map_err(|_| fail(format!("`{raw}` is not a number")))
}
