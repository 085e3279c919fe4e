//! What every interface version of the SDK has in common, written once and
//! expanded in each version's module (`stage_api!()` in the crate root for
//! the newest, in [`crate::v0_1`] for 0.1.0). The expansion names the
//! version's generated types through that module's `bindings` and its
//! re-exports (`Description`, `Entry`, `Metric`, ...), so the same text
//! makes the same API over each version's own types.
//!
//! Only what differs between versions stays outside: the bindings, the
//! re-exports, declaring a metric (`Description::metric`) and making one
//! (`Metric::new`), and the export macro.

macro_rules! stage_api {
    () => {
        /// What a failed `run` returns.
        pub type Error = StageError;

        /// A stage plugin. Only `describe` and `run` are required.
        pub trait Plugin {
            fn describe() -> Description;

            /// Checks that need more than the declared types (`(param, message)`).
            fn check(_params: &Params) -> Vec<ParamProblem> {
                Vec::new()
            }

            /// What `run` would do, for `pipeline plan`.
            fn plan(_params: &Params, _cluster: &Cluster) -> Vec<Action> {
                Vec::new()
            }

            fn run(params: &Params, host: &Host) -> Result<Output, Error>;
        }

        #[doc(hidden)]
        pub struct Export<P>(::std::marker::PhantomData<P>);

        impl<P: Plugin> bindings::exports::pipeline::stage::plugin::Guest for Export<P> {
            fn describe() -> Description {
                P::describe()
            }
            fn check(params: Vec<Entry>) -> Vec<ParamProblem> {
                P::check(&Params(params))
            }
            fn plan(params: Vec<Entry>, cluster: Cluster) -> Vec<Action> {
                P::plan(&Params(params), &cluster)
            }
            fn run(
                params: Vec<Entry>,
            ) -> Result<bindings::pipeline::stage::types::StageOutput, StageError> {
                P::run(&Params(params), &Host).map(|o| o.0)
            }
        }

        // ---- describing ----------------------------------------------------

        impl Description {
            pub fn new(name: &str, version: &str, summary: &str) -> Self {
                Description {
                    name: name.into(),
                    version: version.into(),
                    summary: summary.into(),
                    params: Vec::new(),
                    outputs: Vec::new(),
                    metrics: Vec::new(),
                    capabilities: Vec::new(),
                }
            }
            pub fn param(mut self, p: ParamSpec) -> Self {
                self.params.push(p);
                self
            }
            pub fn output(mut self, name: &str, doc: &str) -> Self {
                self.outputs.push(OutputSpec {
                    name: name.into(),
                    doc: doc.into(),
                });
                self
            }
            /// Asks for a capability; the pipeline must also grant it.
            pub fn capability(mut self, c: Capability) -> Self {
                self.capabilities.push(c);
                self
            }
        }

        impl ParamSpec {
            pub fn required(name: &str, ty: ParamType, doc: &str) -> Self {
                ParamSpec {
                    name: name.into(),
                    type_: ty,
                    required: true,
                    default: None,
                    doc: doc.into(),
                }
            }
            pub fn optional(name: &str, ty: ParamType, doc: &str) -> Self {
                ParamSpec {
                    required: false,
                    ..Self::required(name, ty, doc)
                }
            }
            pub fn with_default(name: &str, ty: ParamType, default: Value, doc: &str) -> Self {
                ParamSpec {
                    default: Some(default),
                    ..Self::optional(name, ty, doc)
                }
            }
        }

        impl ParamType {
            pub fn text() -> Self {
                ParamType::Scalar(ScalarType::Text)
            }
            pub fn integer() -> Self {
                ParamType::Scalar(ScalarType::Integer)
            }
            pub fn number() -> Self {
                ParamType::Scalar(ScalarType::Number)
            }
            pub fn boolean() -> Self {
                ParamType::Scalar(ScalarType::Boolean)
            }
            /// Seconds for the plugin; `30s`, `5m` in the pipeline.
            pub fn duration() -> Self {
                ParamType::Scalar(ScalarType::Duration)
            }
            /// Bytes for the plugin; `4K`, `1G` in the pipeline.
            pub fn size() -> Self {
                ParamType::Scalar(ScalarType::Size)
            }
            pub fn choice(values: &[&str]) -> Self {
                ParamType::Choice(values.iter().map(|v| v.to_string()).collect())
            }
            pub fn list_of(item: ScalarType) -> Self {
                ParamType::List(item)
            }
        }

        // ---- parameters ----------------------------------------------------

        /// The stage's parameters, already checked against their declared types
        /// (defaults filled in).
        pub struct Params(pub Vec<Entry>);

        impl Params {
            pub fn get(&self, name: &str) -> Option<&Value> {
                self.0.iter().find(|e| e.name == name).map(|e| &e.value)
            }
            pub fn str(&self, name: &str) -> Option<&str> {
                match self.get(name) {
                    Some(Value::Text(s)) => Some(s),
                    _ => None,
                }
            }
            pub fn i64(&self, name: &str) -> Option<i64> {
                match self.get(name) {
                    Some(Value::Integer(i)) => Some(*i),
                    _ => None,
                }
            }
            /// Numbers and durations (seconds); integers too.
            pub fn f64(&self, name: &str) -> Option<f64> {
                match self.get(name) {
                    Some(Value::Number(n)) => Some(*n),
                    Some(Value::Integer(i)) => Some(*i as f64),
                    _ => None,
                }
            }
            pub fn bool(&self, name: &str) -> Option<bool> {
                match self.get(name) {
                    Some(Value::Boolean(b)) => Some(*b),
                    _ => None,
                }
            }
            pub fn strings(&self, name: &str) -> Vec<String> {
                match self.get(name) {
                    Some(Value::TextList(l)) => l.clone(),
                    Some(Value::Text(s)) => vec![s.clone()],
                    _ => Vec::new(),
                }
            }
            /// `map` and `any` parameters: JSON text.
            pub fn json(&self, name: &str) -> Option<&str> {
                match self.get(name) {
                    Some(Value::Json(s)) => Some(s),
                    _ => None,
                }
            }
            /// A required text parameter, or an `invalid-param` error.
            pub fn require_str(&self, name: &str) -> Result<&str, Error> {
                self.str(name)
                    .ok_or_else(|| Error::invalid_param(name, "is required"))
            }
        }

        // ---- results -------------------------------------------------------

        /// What a successful `run` returns.
        pub struct Output(bindings::pipeline::stage::types::StageOutput);

        impl Default for Output {
            fn default() -> Self {
                Self::new()
            }
        }

        impl Output {
            pub fn new() -> Self {
                Output(bindings::pipeline::stage::types::StageOutput {
                    metrics: Vec::new(),
                    series: Vec::new(),
                    outputs: Vec::new(),
                    artifacts: Vec::new(),
                    environment: Vec::new(),
                    skipped: None,
                })
            }
            pub fn metric(mut self, m: Metric) -> Self {
                self.0.metrics.push(m);
                self
            }
            pub fn push_metric(&mut self, m: Metric) {
                self.0.metrics.push(m);
            }
            /// Values over time: `points` are `(seconds since the start, value)`.
            pub fn series(
                mut self,
                name: &str,
                unit: &str,
                direction: Direction,
                points: Vec<(f64, f64)>,
            ) -> Self {
                self.0.series.push(Series {
                    name: name.into(),
                    unit: unit.into(),
                    direction,
                    labels: Vec::new(),
                    points,
                });
                self
            }
            /// A value later stages read as `{{ stages.ID.outputs.NAME }}`.
            pub fn output(mut self, name: &str, value: Value) -> Self {
                self.0.outputs.push(Entry {
                    name: name.into(),
                    value,
                });
                self
            }
            /// A fact about the system under test (JSON text), for the results' environment.
            pub fn environment(mut self, name: &str, json: &str) -> Self {
                self.0.environment.push(Entry {
                    name: name.into(),
                    value: Value::Json(json.into()),
                });
                self
            }
            /// A file saved in the stage's work folder and listed in the results.
            pub fn artifact(mut self, name: &str, contents: impl Into<Vec<u8>>) -> Self {
                self.0
                    .artifacts
                    .push(bindings::pipeline::stage::types::Artifact {
                        name: name.into(),
                        contents: contents.into(),
                    });
                self
            }
            /// The stage chose not to measure: recorded as skipped.
            pub fn skipped(mut self, reason: &str) -> Self {
                self.0.skipped = Some(reason.into());
                self
            }
        }

        impl StageError {
            pub fn failed(message: impl Into<String>) -> Self {
                StageError::Failed(message.into())
            }
            pub fn invalid_param(name: &str, message: &str) -> Self {
                StageError::InvalidParam(ParamProblem {
                    name: name.into(),
                    message: message.into(),
                })
            }
        }

        impl HostError {
            /// The runner's message (a refusal names the plugin and what it tried).
            pub fn message(&self) -> String {
                match self {
                    HostError::Denied(m) | HostError::Failed(m) | HostError::Timeout(m) => {
                        m.clone()
                    }
                    HostError::Cancelled => "cancelled".into(),
                }
            }
        }

        impl From<HostError> for StageError {
            fn from(e: HostError) -> Self {
                StageError::Failed(e.message())
            }
        }

        // ---- the host ------------------------------------------------------

        /// What the runner does for the plugin. Exec, files and HTTP need the
        /// capability in the description AND a grant in the pipeline.
        pub struct Host;

        impl Host {
            pub fn debug(&self, message: &str) {
                raw_host::log(LogLevel::Debug, message);
            }
            pub fn info(&self, message: &str) {
                raw_host::log(LogLevel::Info, message);
            }
            pub fn warn(&self, message: &str) {
                raw_host::log(LogLevel::Warn, message);
            }
            pub fn progress(&self, message: &str) {
                raw_host::progress(message);
            }
            /// Reports a metric now (same as returning it from `run`).
            pub fn emit(&self, metric: &Metric) {
                raw_host::emit_metric(metric);
            }
            pub fn stage_info(&self) -> StageInfo {
                raw_host::stage()
            }
            pub fn cluster(&self) -> Cluster {
                raw_host::stage().cluster
            }

            /// Runs a program (argv, no shell). A non-zero exit is not an error here.
            pub fn exec(&self, argv: &[&str]) -> Result<CommandOutput, HostError> {
                raw_host::exec(&Command {
                    argv: argv.iter().map(|a| a.to_string()).collect(),
                    env: Vec::new(),
                    timeout: None,
                    label: None,
                })
            }

            pub fn exec_command(&self, command: &Command) -> Result<CommandOutput, HostError> {
                raw_host::exec(command)
            }

            /// `program <cluster args> args...` (for `ceph`, `rados`, `rbd`) with the
            /// cluster's command timeout; its stdout, or an error when it fails.
            pub fn ceph_tool(&self, program: &str, args: &[&str]) -> Result<String, Error> {
                let cluster = self.cluster();
                let mut argv = vec![program.to_string()];
                argv.extend(cluster.cli_args);
                argv.extend(args.iter().map(|a| a.to_string()));
                let out = raw_host::exec(&Command {
                    argv: argv.clone(),
                    env: Vec::new(),
                    timeout: Some(cluster.command_timeout),
                    label: Some(format!(
                        "{program}-{}",
                        args.first().copied().unwrap_or("call")
                    )),
                })?;
                match out.status {
                    ExitStatus::Code(0) => Ok(out.stdout),
                    status => Err(StageError::CommandFailed(CommandFailure {
                        command: argv.join(" "),
                        status: match status {
                            ExitStatus::Code(c) => format!("exit code {c}"),
                            ExitStatus::Signal(s) => format!("signal {s}"),
                        },
                        stderr_tail: crate::tail(&out.stderr, 5),
                    })),
                }
            }

            pub fn read_file(&self, path: &str) -> Result<Vec<u8>, HostError> {
                raw_host::read_file(path)
            }
            pub fn write_file(&self, path: &str, contents: &[u8]) -> Result<(), HostError> {
                raw_host::write_file(path, contents)
            }
            pub fn http(&self, request: &HttpRequest) -> Result<HttpResponse, HostError> {
                raw_host::http(request)
            }
            pub fn http_get(&self, url: &str) -> Result<HttpResponse, HostError> {
                raw_host::http(&HttpRequest {
                    method: "GET".into(),
                    url: url.into(),
                    headers: Vec::new(),
                    body: Vec::new(),
                    timeout: None,
                })
            }
        }
    };
}
