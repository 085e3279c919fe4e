//! What the bindings of every interface version share: the plugin calls,
//! the `host` functions and the conversions of the types that did not
//! change between versions. Each version's module generates its own Rust
//! types (`bindgen!`), so this is a macro expanded in each, next to what
//! differs: `declaration` (a `metric-spec` as a [`MetricDecl`]), `metric`
//! (a reported value as a [`Metric`]) and `METRIC_VALUES`.
//!
//! [`MetricDecl`]: pipeline_stage_api::metric::MetricDecl
//! [`Metric`]: pipeline_model::Metric

macro_rules! interface_common {
    () => {
        use pipeline_model::{Direction, Metric, Series};
        use pipeline_stage_api::ceph::CephConnection;
        use pipeline_stage_api::exec::Exit;
        use pipeline_stage_api::metric::{Declared, MetricDecl};
        use pipeline_stage_api::params::{ParamSpec, ParamType, Params};
        use pipeline_stage_api::stage::{
            Action, OutputSpec, StageDescription, StageError, StageOutput,
        };
        use serde_json::Value as Json;
        use wasmtime::component::{Component, HasSelf, Linker};
        use wasmtime::{Engine, Store};

        use super::{RunOutput, entries_map};
        use crate::host::exec::ExecRequest;
        use crate::host::http::HttpRequest;
        use crate::host::{self, HostState};

        use pipeline::stage::types as wit;

        pub struct Plugin {
            pre: StagePre<HostState>,
        }

        impl Plugin {
            pub fn link(engine: &Engine, component: &Component) -> wasmtime::Result<Self> {
                let mut linker = Linker::new(engine);
                wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
                crate::host::wait::add_to_linker(&mut linker)?;
                Stage::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
                let pre = StagePre::new(linker.instantiate_pre(component)?)?;
                Ok(Plugin { pre })
            }

            fn instance(&self, store: &mut Store<HostState>) -> wasmtime::Result<Stage> {
                self.pre.instantiate(store)
            }

            pub fn describe(
                &self,
                store: &mut Store<HostState>,
            ) -> wasmtime::Result<StageDescription> {
                let stage = self.instance(store)?;
                let d = stage.pipeline_stage_plugin().call_describe(store)?;
                description(d).map_err(wasmtime::Error::msg)
            }

            pub fn check(
                &self,
                store: &mut Store<HostState>,
                specs: &[ParamSpec],
                params: &Params,
            ) -> wasmtime::Result<Vec<(String, String)>> {
                let entries = to_entries(specs, params);
                let stage = self.instance(store)?;
                let problems = stage.pipeline_stage_plugin().call_check(store, &entries)?;
                Ok(problems.into_iter().map(|p| (p.name, p.message)).collect())
            }

            pub fn plan(
                &self,
                store: &mut Store<HostState>,
                specs: &[ParamSpec],
                params: &Params,
                ceph: &CephConnection,
            ) -> wasmtime::Result<Vec<Action>> {
                let entries = to_entries(specs, params);
                let stage = self.instance(store)?;
                let actions =
                    stage
                        .pipeline_stage_plugin()
                        .call_plan(store, &entries, &cluster(ceph))?;
                Ok(actions
                    .into_iter()
                    .map(|a| Action {
                        summary: a.summary,
                        command: a.command,
                        destructive: a.destructive,
                    })
                    .collect())
            }

            pub fn run(
                &self,
                store: &mut Store<HostState>,
                specs: &[ParamSpec],
                params: &Params,
            ) -> wasmtime::Result<Result<RunOutput, StageError>> {
                let entries = to_entries(specs, params);
                let stage = self.instance(store)?;
                let decls = store.data().setup.metrics.clone();
                match stage.pipeline_stage_plugin().call_run(store, &entries)? {
                    Ok(out) => Ok(Ok(run_output(out, &decls).map_err(wasmtime::Error::msg)?)),
                    Err(e) => Ok(Err(stage_error(e))),
                }
            }
        }

        // ---- host functions ------------------------------------------------------

        impl wit::Host for HostState {}

        impl pipeline::stage::host::Host for HostState {
            fn log(&mut self, level: wit::LogLevel, message: String) {
                let level = match level {
                    wit::LogLevel::Debug => "debug",
                    wit::LogLevel::Info => "info",
                    wit::LogLevel::Warn => "warn",
                    wit::LogLevel::Error => "error",
                };
                HostState::log(self, level, &message);
            }

            fn progress(&mut self, message: String) {
                HostState::progress(self, &message);
            }

            fn emit_metric(&mut self, m: wit::Metric) {
                let m = metric(m, &self.setup.metrics);
                HostState::emit_metric(self, m);
            }

            fn stage(&mut self) -> wit::StageInfo {
                let info = &self.setup.info;
                wit::StageInfo {
                    instance_id: info.instance_id.clone(),
                    run_id: info.run_id.clone(),
                    host: info.host.clone(),
                    cluster: cluster(&info.ceph),
                }
            }

            fn exec(
                &mut self,
                command: wit::Command,
            ) -> Result<wit::CommandOutput, wit::HostError> {
                let req = ExecRequest {
                    argv: command.argv,
                    env: command.env,
                    timeout: command.timeout.and_then(seconds),
                    label: command.label,
                };
                let out = HostState::exec(self, req).map_err(host_error)?;
                Ok(wit::CommandOutput {
                    status: match out.exit {
                        Exit::Code(c) => wit::ExitStatus::Code(c),
                        Exit::Signal(s) => wit::ExitStatus::Signal(s),
                        // Reported as errors by the stage context; never seen here.
                        Exit::TimedOut(_) | Exit::Cancelled => wit::ExitStatus::Code(-1),
                    },
                    stdout: out.stdout,
                    stderr: out.stderr,
                    elapsed: out.elapsed.as_secs_f64(),
                })
            }

            fn read_file(&mut self, path: String) -> Result<Vec<u8>, wit::HostError> {
                HostState::read_file(self, &path).map_err(host_error)
            }

            fn write_file(
                &mut self,
                path: String,
                contents: Vec<u8>,
            ) -> Result<(), wit::HostError> {
                HostState::write_file(self, &path, &contents).map_err(host_error)
            }

            fn http(
                &mut self,
                request: wit::HttpRequest,
            ) -> Result<wit::HttpResponse, wit::HostError> {
                let req = HttpRequest {
                    method: request.method,
                    url: request.url,
                    headers: request.headers,
                    body: request.body,
                    timeout: request.timeout.and_then(seconds),
                };
                let resp = HostState::http(self, req).map_err(host_error)?;
                Ok(wit::HttpResponse {
                    status: resp.status,
                    headers: resp.headers,
                    body: resp.body,
                })
            }
        }

        fn seconds(s: f64) -> Option<std::time::Duration> {
            (s.is_finite() && s >= 0.0).then(|| std::time::Duration::from_secs_f64(s.min(1e9)))
        }

        fn host_error(e: host::HostError) -> wit::HostError {
            match e {
                host::HostError::Denied(m) => wit::HostError::Denied(m),
                host::HostError::Failed(m) => wit::HostError::Failed(m),
                host::HostError::Timeout(m) => wit::HostError::Timeout(m),
                host::HostError::Cancelled => wit::HostError::Cancelled,
            }
        }

        // ---- conversions ---------------------------------------------------------

        fn cluster(c: &CephConnection) -> wit::Cluster {
            wit::Cluster {
                conf: c.conf.clone(),
                name: c.name.clone(),
                keyring: c.keyring.clone(),
                args: c.args.clone(),
                cli_args: c.cli_args(),
                command_timeout: c.command_timeout,
            }
        }

        fn scalar(t: wit::ScalarType) -> ParamType {
            match t {
                wit::ScalarType::Text => ParamType::String,
                wit::ScalarType::Integer => ParamType::Integer,
                wit::ScalarType::Number => ParamType::Number,
                wit::ScalarType::Boolean => ParamType::Bool,
                wit::ScalarType::Duration => ParamType::Duration,
                wit::ScalarType::Size => ParamType::Size,
            }
        }

        fn param_type(t: wit::ParamType) -> ParamType {
            match t {
                wit::ParamType::Scalar(s) => scalar(s),
                wit::ParamType::Choice(values) => ParamType::Enum { values },
                wit::ParamType::List(s) => ParamType::list(scalar(s)),
                wit::ParamType::Map => ParamType::Map,
                wit::ParamType::Any => ParamType::Any,
            }
        }

        /// A WIT value as JSON (the engine's representation).
        fn to_json(v: wit::Value) -> Result<Json, String> {
            Ok(match v {
                wit::Value::Text(s) => Json::String(s),
                wit::Value::Integer(i) => Json::from(i),
                wit::Value::Number(n) => serde_json::Number::from_f64(n)
                    .map(Json::Number)
                    .ok_or_else(|| format!("{n} is not a finite number"))?,
                wit::Value::Boolean(b) => Json::Bool(b),
                wit::Value::TextList(l) => Json::from(l),
                wit::Value::IntegerList(l) => Json::from(l),
                // A non-finite number is refused, not written as `null`.
                wit::Value::NumberList(l) => Json::Array(
                    l.into_iter()
                        .map(|n| {
                            serde_json::Number::from_f64(n)
                                .map(Json::Number)
                                .ok_or_else(|| format!("{n} is not a finite number"))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                wit::Value::BooleanList(l) => Json::from(l),
                wit::Value::Json(text) => serde_json::from_str(&text)
                    .map_err(|e| format!("invalid JSON `{text}`: {e}"))?,
            })
        }

        /// A validated parameter as the WIT value its declared type says.
        fn to_value(ty: &ParamType, v: &Json) -> wit::Value {
            let strings = |v: &Json| -> Vec<String> {
                v.as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            match (ty, v) {
                (ParamType::String | ParamType::Enum { .. }, Json::String(s)) => {
                    wit::Value::Text(s.clone())
                }
                (ParamType::Integer | ParamType::Size, Json::Number(n)) if n.as_i64().is_some() => {
                    wit::Value::Integer(n.as_i64().unwrap_or_default())
                }
                (ParamType::Number | ParamType::Duration, Json::Number(n)) => {
                    wit::Value::Number(n.as_f64().unwrap_or_default())
                }
                (ParamType::Bool, Json::Bool(b)) => wit::Value::Boolean(*b),
                (ParamType::List { item }, Json::Array(items)) => match item.as_ref() {
                    ParamType::String | ParamType::Enum { .. } => wit::Value::TextList(strings(v)),
                    ParamType::Integer | ParamType::Size => {
                        wit::Value::IntegerList(items.iter().filter_map(Json::as_i64).collect())
                    }
                    ParamType::Number | ParamType::Duration => {
                        wit::Value::NumberList(items.iter().filter_map(Json::as_f64).collect())
                    }
                    ParamType::Bool => {
                        wit::Value::BooleanList(items.iter().filter_map(Json::as_bool).collect())
                    }
                    _ => wit::Value::Json(v.to_string()),
                },
                // Map, Any, and anything the engine left in another shape.
                _ => wit::Value::Json(v.to_string()),
            }
        }

        fn to_entries(specs: &[ParamSpec], params: &Params) -> Vec<wit::Entry> {
            params
                .iter()
                .map(|(name, v)| {
                    let value = match specs.iter().find(|s| &s.name == name) {
                        Some(spec) => to_value(&spec.ty, v),
                        None => wit::Value::Json(v.to_string()),
                    };
                    wit::Entry {
                        name: name.clone(),
                        value,
                    }
                })
                .collect()
        }

        fn description(d: wit::Description) -> Result<StageDescription, String> {
            let mut params = Vec::new();
            for p in d.params {
                let default = match p.default {
                    Some(v) => {
                        Some(to_json(v).map_err(|e| format!("default of `{}`: {e}", p.name))?)
                    }
                    None => None,
                };
                params.push(ParamSpec {
                    name: p.name,
                    ty: param_type(p.type_),
                    required: p.required,
                    default,
                    doc: p.doc,
                });
            }
            Ok(StageDescription {
                name: d.name,
                version: d.version,
                summary: d.summary,
                params,
                outputs: d
                    .outputs
                    .into_iter()
                    .map(|o| OutputSpec {
                        name: o.name,
                        doc: o.doc,
                    })
                    .collect(),
                metrics: d.metrics.into_iter().map(declaration).collect(),
                metric_values: METRIC_VALUES,
                metrics_from_param: None,
                capabilities: d
                    .capabilities
                    .into_iter()
                    .map(|c| {
                        match c {
                            wit::Capability::Exec => "exec",
                            wit::Capability::Files => "files",
                            wit::Capability::Http => "http",
                        }
                        .to_string()
                    })
                    .collect(),
                per_host: true,
                // The interface has no way to wait for the other hosts.
                sync_start: false,
                requires: Vec::new(),
                // A sandboxed plugin's commands stay on the host's own tools.
                client_root: false,
            })
        }

        fn direction(d: wit::Direction) -> Direction {
            match d {
                wit::Direction::HigherIsBetter => Direction::Higher,
                wit::Direction::LowerIsBetter => Direction::Lower,
                wit::Direction::Neutral => Direction::None,
            }
        }

        fn series(s: wit::Series) -> Series {
            Series {
                name: s.name,
                unit: s.unit,
                direction: direction(s.direction),
                labels: s.labels.into_iter().collect(),
                points: s.points.into_iter().map(|(t, v)| [t, v]).collect(),
            }
        }

        /// What `run` returned; its metrics are those `decls` declares.
        fn run_output(out: wit::StageOutput, decls: &[MetricDecl]) -> Result<RunOutput, String> {
            let json_entries = |what: &str, entries: Vec<wit::Entry>| -> Result<_, String> {
                let pairs = entries
                    .into_iter()
                    .map(|e| {
                        let name = e.name;
                        to_json(e.value)
                            .map(|v| (name.clone(), v))
                            .map_err(|err| format!("{what} `{name}`: {err}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                entries_map(what, pairs).map_err(|e| e.to_string())
            };
            Ok(RunOutput {
                output: StageOutput {
                    metrics: out.metrics.into_iter().map(|m| metric(m, decls)).collect(),
                    series: out.series.into_iter().map(series).collect(),
                    outputs: json_entries("output", out.outputs)?,
                    environment: json_entries("environment fact", out.environment)?,
                    skipped: out.skipped,
                    notes: Vec::new(),
                    histograms: Vec::new(),
                },
                artifacts: out
                    .artifacts
                    .into_iter()
                    .map(|a| (a.name, a.contents))
                    .collect(),
            })
        }

        fn stage_error(e: wit::StageError) -> StageError {
            match e {
                wit::StageError::Failed(m) => StageError::Failed(m),
                wit::StageError::InvalidParam(p) => StageError::Param {
                    name: p.name,
                    message: p.message,
                },
                wit::StageError::CommandFailed(c) => StageError::CommandFailed {
                    command: c.command,
                    status: c.status,
                    stderr_tail: c.stderr_tail,
                },
            }
        }
    };
}

pub(crate) use interface_common;
