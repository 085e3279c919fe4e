//! Typed stage configuration: a native stage declares its parameters as one
//! Rust struct (serde + schemars). Doc comments are the parameters' docs,
//! `#[serde(default = ...)]` their defaults, written once. Everything else is
//! derived from that struct: the [`ParamSpec`]s that `describe`, `validate`
//! and `plan` use (read off the struct's JSON Schema), and the typed value
//! `run` gets.
//!
//! ```ignore
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! pub struct Config {
//!     /// Pool to benchmark.
//!     pub pool: String,
//!     /// Duration of the write.
//!     #[serde(default = "ten_seconds")]
//!     pub seconds: Seconds,
//! }
//! ```
//!
//! The engine checks and normalises `with:` against the derived specs first
//! (durations become seconds, sizes bytes, templates are rendered), so the
//! conversion into the struct only fails on a bug, and says so.

use std::borrow::Cow;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::context::StageContext;
use crate::metric::MetricDecl;
use crate::params::{ParamSpec, ParamType, Params, parse_duration, parse_size};
use crate::stage::{
    Action, OutputSpec, PlanContext, Stage, StageDescription, StageError, StageOutput,
};

/// A duration parameter: `90s`, `5m`, `1h30m`, `250ms`, or seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(pub Duration);

impl Seconds {
    pub fn secs(secs: u64) -> Self {
        Seconds(Duration::from_secs(secs))
    }

    pub fn as_secs_f64(&self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl Serialize for Seconds {
    /// As seconds: what the engine normalises `30s` to, and what results show.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let secs = self.0.as_secs_f64();
        if secs.fract() == 0.0 && secs < u64::MAX as f64 {
            s.serialize_u64(secs as u64)
        } else {
            s.serialize_f64(secs)
        }
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => {
                let secs = n.as_f64().unwrap_or(-1.0);
                if secs.is_finite() && (0.0..1e9).contains(&secs) {
                    Ok(Seconds(Duration::from_secs_f64(secs)))
                } else {
                    Err(serde::de::Error::custom("duration out of range"))
                }
            }
            Value::String(s) => parse_duration(&s)
                .map(Seconds)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom("expected a duration")),
        }
    }
}

impl JsonSchema for Seconds {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": ["number", "string"], "format": "duration"})
    }
}

/// A size parameter: `4096`, `4K`, `4M`, `1G` (binary multiples), as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn kib(n: u64) -> Self {
        ByteSize(n << 10)
    }

    pub const fn mib(n: u64) -> Self {
        ByteSize(n << 20)
    }

    pub const fn gib(n: u64) -> Self {
        ByteSize(n << 30)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .map(ByteSize)
                .ok_or_else(|| serde::de::Error::custom("expected a whole number of bytes")),
            Value::String(s) => parse_size(&s)
                .map(ByteSize)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom("expected a size")),
        }
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> Cow<'static, str> {
        "Size".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": ["integer", "string"], "format": "size"})
    }
}

/// What a typed stage says about itself besides its parameters.
#[derive(Debug, Clone, Default)]
pub struct About {
    pub name: &'static str,
    /// One line: what the stage does.
    pub summary: &'static str,
    pub outputs: Vec<OutputSpec>,
    /// Every metric the stage reports, each declared once (a `const`
    /// [`MetricDecl`] whose `value` the stage reports).
    pub metrics: Vec<MetricDecl>,
    /// See [`StageDescription::per_host`].
    pub per_host: bool,
    /// Programs the stage runs on its target hosts.
    pub requires: Vec<&'static str>,
}

/// A stage with a typed configuration. Register it as `Typed(MyStage)`.
pub trait TypedStage: Send + Sync + 'static {
    /// The `with:` mapping as one struct.
    type Config: DeserializeOwned + JsonSchema;

    fn about(&self) -> About;

    /// Whether the stage calls [`StageContext::start_together`] before its
    /// measured command (see [`StageDescription::sync_start`]). A method
    /// with a default rather than a field of [`About`], so the stages that
    /// write out every field of theirs need no change.
    fn sync_start(&self) -> bool {
        false
    }

    /// Whether the stage's commands may run from a client root (see
    /// [`StageDescription::client_root`]).
    fn client_root(&self) -> bool {
        false
    }

    /// The metrics a run with this configuration reports (see
    /// [`Stage::declared_metrics`]): those of [`About::metrics`], unless the
    /// configuration declares them ([`TypedStage::metrics_from_param`]).
    fn declared_metrics(&self, _config: &Self::Config) -> Vec<MetricDecl> {
        self.about().metrics
    }

    /// The parameter whose entries declare the stage's metrics (see
    /// [`StageDescription::metrics_from_param`]).
    fn metrics_from_param(&self) -> Option<&'static str> {
        None
    }

    /// See [`Stage::rate_search`]; the search's metrics are then declared
    /// beside [`About::metrics`].
    fn rate_search(&self) -> Option<crate::rate_search::RateSearch> {
        None
    }

    /// Checks that need more than types. Returned messages name the parameter.
    fn check(&self, _config: &Self::Config) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The actions `run` would take, for `pipeline plan`.
    fn plan(&self, config: &Self::Config, ctx: &PlanContext) -> Vec<Action>;

    fn run(&self, config: &Self::Config, ctx: &mut StageContext)
    -> Result<StageOutput, StageError>;
}

/// Adapts a [`TypedStage`] to the engine's [`Stage`] interface.
pub struct Typed<S>(pub S);

impl<S: TypedStage> Typed<S> {
    fn config(&self, params: &Params) -> Result<S::Config, StageError> {
        config_from::<S::Config>(params)
    }
}

/// Converts validated parameters into the stage's config struct.
pub fn config_from<C: DeserializeOwned>(params: &Params) -> Result<C, StageError> {
    let message = match parse::<C>(params) {
        Ok(config) => return Ok(config),
        Err(e) => e.to_string(),
    };
    let (name, message) = match culprit::<C>(params) {
        Some((name, Some(entry))) => (name, format!("entry {}: {message}", entry + 1)),
        Some((name, None)) => (name, message),
        None => (field_of(&message).unwrap_or_else(|| "with".into()), message),
    };
    Err(StageError::Param { name, message })
}

fn parse<C: DeserializeOwned>(params: &Params) -> Result<C, serde_json::Error> {
    serde_json::from_value(Value::Object(params.clone()))
}

/// The parameter (and, in a list, the entry) at fault when the config does
/// not parse. serde_json's messages carry no path ("unknown field `regx`" of
/// which metric?); the culprit is the value whose removal makes the error go
/// away (or leaves only its own absence to complain about).
fn culprit<C: DeserializeOwned>(params: &Params) -> Option<(String, Option<usize>)> {
    let parses_without = |name: &str, rest: &Params| match parse::<C>(rest) {
        Ok(_) => true,
        Err(e) => e
            .to_string()
            .starts_with(&format!("missing field `{name}`")),
    };
    let (name, value) = params.iter().find(|(name, _)| {
        let mut rest = params.clone();
        rest.shift_remove(name.as_str());
        parses_without(name, &rest)
    })?;
    let entry = value.as_array().and_then(|items| {
        (0..items.len()).find(|&i| {
            let mut fewer = items.clone();
            fewer.remove(i);
            let mut rest = params.clone();
            rest.insert(name.clone(), Value::Array(fewer));
            parse::<C>(&rest).is_ok()
        })
    });
    Some((name.clone(), entry))
}

/// The field serde names in a message such as "unknown field `x`".
fn field_of(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

impl<S: TypedStage> Stage for Typed<S> {
    fn describe(&self) -> StageDescription {
        let about = self.0.about();
        let mut metrics = about.metrics;
        if self.0.sync_start() {
            // With `sync_start: true` the engine adds how the hosts started.
            metrics.extend(crate::start_report::metrics());
        }
        if let Some(search) = self.0.rate_search() {
            metrics.extend(crate::rate_search::metrics(search.spec.rate_unit));
        }
        StageDescription {
            name: about.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary: about.summary.into(),
            params: param_specs::<S::Config>(),
            outputs: about.outputs,
            metrics,
            metric_values: Default::default(),
            metrics_from_param: self.0.metrics_from_param().map(String::from),
            capabilities: Vec::new(),
            per_host: about.per_host,
            sync_start: self.0.sync_start(),
            client_root: self.0.client_root(),
            requires: about.requires.into_iter().map(String::from).collect(),
        }
    }

    fn check(&self, params: &Params) -> Vec<(String, String)> {
        match self.config(params) {
            Ok(config) => self.0.check(&config),
            Err(StageError::Param { name, message }) => vec![(name, message)],
            Err(e) => vec![("with".into(), e.to_string())],
        }
    }

    fn plan(&self, params: &Params, ctx: &PlanContext) -> Vec<Action> {
        match self.config(params) {
            Ok(config) => self.0.plan(&config, ctx),
            Err(e) => vec![Action::note(format!("cannot plan: {e}"))],
        }
    }

    fn run(&self, params: &Params, ctx: &mut StageContext) -> Result<StageOutput, StageError> {
        let config = self.config(params)?;
        self.0.run(&config, ctx)
    }

    fn declared_metrics(&self, params: &Params) -> Vec<MetricDecl> {
        // Parameters that do not convert never get to run.
        match self.config(params) {
            Ok(config) => self.0.declared_metrics(&config),
            Err(_) => self.0.about().metrics,
        }
    }

    fn config_schema(&self) -> Option<Value> {
        Some(config_schema::<S::Config>())
    }

    fn rate_search(&self) -> Option<crate::rate_search::RateSearch> {
        self.0.rate_search()
    }
}

/// The JSON Schema of a config struct with every subschema inlined: it is
/// embedded in the pipeline's schema, whose `$defs` are not its own.
pub fn config_schema<C: JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<C>();
    // Every config struct is called `Config`: its title says nothing.
    schema.remove("$schema");
    schema.remove("title");
    schema.to_value()
}

/// The parameters of a config struct, in declaration order, read off its
/// JSON Schema: type, required, default, doc.
pub fn param_specs<C: JsonSchema>() -> Vec<ParamSpec> {
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<C>();
    let root = schema.as_value();
    let defs = root
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = root.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, prop)| {
            let prop = resolve(prop, &defs);
            let (ty, nullable) = param_type(&prop, &defs);
            let default = prop.get("default").cloned().filter(|d| !d.is_null());
            ParamSpec {
                name: name.clone(),
                ty,
                required: required.contains(&name.as_str()) && !nullable && default.is_none(),
                default,
                doc: prop
                    .get("description")
                    .and_then(Value::as_str)
                    .map(one_paragraph)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Doc comments wrap lines; a parameter's doc is one paragraph.
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Follows a `$ref` into `$defs`, keeping the property's own keywords
/// (its description and default sit beside the reference).
fn resolve(schema: &Value, defs: &Map<String, Value>) -> Value {
    let Some(obj) = schema.as_object() else {
        return schema.clone();
    };
    let Some(target) = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
    else {
        return schema.clone();
    };
    let mut merged = target.as_object().cloned().unwrap_or_default();
    for (k, v) in obj {
        if k != "$ref" {
            merged.insert(k.clone(), v.clone());
        }
    }
    Value::Object(merged)
}

/// The parameter type a schema describes, and whether `null` is allowed (an `Option`).
fn param_type(schema: &Value, defs: &Map<String, Value>) -> (ParamType, bool) {
    let schema = resolve(schema, defs);
    // Option<T> of a referenced type: anyOf [T, null]. Enums whose variants
    // carry doc comments: oneOf [{const}, ...], undocumented ones grouped in
    // one {enum: [...]} listed first.
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let not_null: Vec<Value> = options
                .iter()
                .map(|o| resolve(o, defs))
                .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            let nullable = not_null.len() < options.len();
            if let Some(values) = string_values(&not_null) {
                return (ParamType::Enum { values }, nullable);
            }
            if let [only] = not_null.as_slice() {
                return (param_type(only, defs).0, nullable);
            }
            return (ParamType::Any, nullable);
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        // Option<Enum>, inlined: {type: [string, null], enum: [..., null]}.
        let nullable = values.contains(&Value::Null);
        let values: Vec<String> = values
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        return (ParamType::Enum { values }, nullable);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = types.contains(&"null");
    let main: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    let ty = match schema.get("format").and_then(Value::as_str) {
        Some("duration") => ParamType::Duration,
        Some("size") => ParamType::Size,
        _ => match main.as_slice() {
            ["string"] => ParamType::String,
            ["integer"] => ParamType::Integer,
            ["number"] => ParamType::Number,
            ["boolean"] => ParamType::Bool,
            ["array"] => ParamType::List {
                item: Box::new(
                    schema
                        .get("items")
                        .map_or(ParamType::Any, |i| param_type(i, defs).0),
                ),
            },
            ["object"] => ParamType::Map,
            _ => ParamType::Any,
        },
    };
    (ty, nullable)
}

/// The strings of alternatives that are all `{const: "x"}` or `{enum: [...]}`.
fn string_values(options: &[Value]) -> Option<Vec<String>> {
    let mut values = Vec::new();
    for option in options {
        match (option.get("const"), option.get("enum")) {
            (Some(Value::String(v)), _) => values.push(v.clone()),
            (None, Some(Value::Array(vs))) => {
                for v in vs {
                    values.push(v.as_str()?.to_string());
                }
            }
            _ => return None,
        }
    }
    (!values.is_empty()).then_some(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Write,
        Seq,
    }

    fn write() -> Mode {
        Mode::Write
    }

    fn ten() -> Seconds {
        Seconds::secs(10)
    }

    fn four_mib() -> ByteSize {
        ByteSize::mib(4)
    }

    fn sixteen() -> u32 {
        16
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read through the derived specs only
    struct Config {
        /// Pool to
        /// benchmark.
        pool: String,
        /// Benchmark mode.
        #[serde(default = "write")]
        mode: Mode,
        /// How long.
        #[serde(default = "ten")]
        seconds: Seconds,
        /// Object size.
        #[serde(default = "four_mib")]
        block_size: ByteSize,
        /// In flight.
        #[serde(default = "sixteen")]
        threads: u32,
        /// Optional limit.
        #[serde(default)]
        max_objects: Option<u64>,
        /// More arguments.
        #[serde(default)]
        extra_args: Vec<String>,
        /// Free-form options.
        #[serde(default)]
        options: BTreeMap<String, Value>,
        /// A flag.
        #[serde(default)]
        verify: bool,
    }

    #[test]
    fn specs_come_from_the_struct() {
        let specs = param_specs::<Config>();
        let by = |n: &str| specs.iter().find(|s| s.name == n).unwrap().clone();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "pool",
                "mode",
                "seconds",
                "block_size",
                "threads",
                "max_objects",
                "extra_args",
                "options",
                "verify"
            ]
        );
        assert!(by("pool").required);
        assert_eq!(by("pool").ty, ParamType::String);
        assert_eq!(by("pool").doc, "Pool to benchmark.");
        assert_eq!(by("mode").ty, ParamType::enumeration(&["write", "seq"]));
        assert_eq!(by("mode").default, Some(Value::from("write")));
        assert!(!by("mode").required);
        assert_eq!(by("seconds").ty, ParamType::Duration);
        assert_eq!(by("seconds").default, Some(Value::from(10)));
        assert_eq!(by("block_size").ty, ParamType::Size);
        assert_eq!(by("block_size").default, Some(Value::from(4u64 << 20)));
        assert_eq!(by("threads").ty, ParamType::Integer);
        assert_eq!(by("max_objects").ty, ParamType::Integer);
        assert!(!by("max_objects").required);
        assert_eq!(by("max_objects").default, None);
        assert_eq!(by("extra_args").ty, ParamType::list(ParamType::String));
        assert_eq!(by("options").ty, ParamType::Map);
        assert_eq!(by("verify").ty, ParamType::Bool);
        assert_eq!(by("verify").default, Some(Value::Bool(false)));
    }

    #[test]
    fn validated_params_become_the_struct() {
        let mut params = Params::new();
        params.insert("pool".into(), "p".into());
        params.insert("seconds".into(), Value::from(2.5));
        params.insert("block_size".into(), Value::from(4096));
        let c: Config = config_from(&params).unwrap();
        assert_eq!(c.mode, Mode::Write);
        assert_eq!(c.seconds, Seconds(Duration::from_millis(2500)));
        assert_eq!(c.block_size, ByteSize(4096));
        assert_eq!(c.threads, 16);
        params.insert("bogus".into(), Value::from(1));
        match config_from::<Config>(&params) {
            Err(StageError::Param { name, .. }) => assert_eq!(name, "bogus"),
            other => panic!("{other:?}"),
        }
    }

    /// A documented variant makes schemars write `oneOf: [{const}, {enum}]`.
    #[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "kebab-case")]
    enum Test {
        /// Sequential write.
        DdWrite,
        DdRead,
        FioRandread,
    }

    #[derive(Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Extract {
        name: String,
        #[serde(default)]
        regex: Option<String>,
    }

    fn all_tests() -> Vec<Test> {
        vec![Test::DdWrite, Test::FioRandread]
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read through the derived specs only
    struct Nested {
        /// Which tests.
        #[serde(default = "all_tests")]
        tests: Vec<Test>,
        /// Optional mode.
        #[serde(default)]
        mode: Option<Mode>,
        /// Optional documented test.
        #[serde(default)]
        only: Option<Test>,
        /// Entries.
        #[serde(default)]
        metrics: Vec<Extract>,
        /// Named entries.
        #[serde(default)]
        by_name: BTreeMap<String, Extract>,
        /// One entry.
        #[serde(default)]
        first: Option<Extract>,
        /// Anything.
        #[serde(default)]
        any: Value,
        /// An Option without a default: optional.
        timeout: Option<Seconds>,
    }

    #[test]
    fn specs_of_lists_of_enums_options_and_nested_structs() {
        let specs = param_specs::<Nested>();
        let by = |n: &str| specs.iter().find(|s| s.name == n).unwrap().clone();
        // schemars lists the undocumented variants first: document all or none
        // of an enum's variants to keep their order in `describe`.
        let tests = ParamType::enumeration(&["dd-read", "fio-randread", "dd-write"]);
        assert_eq!(by("tests").ty, ParamType::list(tests.clone()));
        assert_eq!(
            by("tests").default,
            Some(serde_json::json!(["dd-write", "fio-randread"]))
        );
        assert_eq!(by("mode").ty, ParamType::enumeration(&["write", "seq"]));
        assert!(!by("mode").required);
        assert_eq!(by("only").ty, tests);
        assert!(!by("only").required);
        assert_eq!(by("metrics").ty, ParamType::list(ParamType::Map));
        assert_eq!(by("metrics").default, Some(serde_json::json!([])));
        assert_eq!(by("by_name").ty, ParamType::Map);
        assert_eq!(by("first").ty, ParamType::Map);
        assert_eq!(by("any").ty, ParamType::Any);
        assert_eq!(by("timeout").ty, ParamType::Duration);
        assert!(!by("timeout").required);
        assert_eq!(by("timeout").default, None);
    }

    fn param_error<C: DeserializeOwned + std::fmt::Debug>(v: Value) -> (String, String) {
        match config_from::<C>(v.as_object().unwrap()) {
            Err(StageError::Param { name, message }) => (name, message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_parameter_and_the_entry() {
        use serde_json::json;
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Small {
            pool: String,
            #[serde(default)]
            threads: u32,
            #[serde(default)]
            metrics: Vec<Extract>,
        }
        let (name, message) = param_error::<Small>(json!({
            "pool": "p",
            "metrics": [{"name": "a"}, {"name": "b", "regx": "1"}],
        }));
        assert_eq!(name, "metrics");
        assert!(
            message.starts_with("entry 2: unknown field `regx`"),
            "{message}"
        );
        let (name, message) = param_error::<Small>(json!({"pool": "p", "threads": -1}));
        assert_eq!(name, "threads");
        assert!(message.contains("expected u32"), "{message}");
        // A required parameter of the wrong type: its absence is the only other complaint.
        let (name, _) = param_error::<Small>(json!({"pool": 7}));
        assert_eq!(name, "pool");
        let (name, message) = param_error::<Small>(json!({"threads": 1}));
        assert_eq!(
            (name.as_str(), message.as_str()),
            ("pool", "missing field `pool`")
        );
    }

    #[test]
    fn config_schema_is_self_contained() {
        let schema = config_schema::<Nested>();
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
        assert_eq!(schema["additionalProperties"], Value::Bool(false));
        assert_eq!(schema["properties"]["metrics"]["items"]["type"], "object");
        assert_eq!(schema["properties"]["tests"]["description"], "Which tests.");
        assert!(schema.get("title").is_none() && schema.get("$schema").is_none());
    }
}
