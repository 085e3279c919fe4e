//! Write a pipeline stage in Rust: implement [`Plugin`] (a description and
//! one `run` function), then `pipeline_plugin_sdk::export_plugin!(MyStage);`.
//!
//! The crate root targets the newest interface, `pipeline:stage@0.2.0`: a
//! metric is declared once in the description, with its unit, direction,
//! rule across hosts and headline mark ([`MetricSpec`]), and `run` reports
//! values of the declared metrics ([`MetricSpec::value`], or
//! [`Metric::new`] by name). The runner fails a stage that reports a metric
//! it does not declare.
//!
//! ```ignore
//! use pipeline_plugin_sdk::*;
//!
//! const GREETINGS: MetricSpec = MetricSpec::info("greetings", "count", "greetings said").headline();
//!
//! struct Hello;
//! impl Plugin for Hello {
//!     fn describe() -> Description {
//!         Description::new("hello", "0.1.0", "Says hello")
//!             .param(ParamSpec::optional("who", ParamType::text(), "whom to greet"))
//!             .metric(GREETINGS)
//!     }
//!     fn run(params: &Params, host: &Host) -> Result<Output, Error> {
//!         let who = params.str("who").unwrap_or("world");
//!         host.info(&format!("hello {who}"));
//!         Ok(Output::new().metric(GREETINGS.value(1.0).label("who", who)))
//!     }
//! }
//! export_plugin!(Hello);
//! ```
//!
//! Plugins built against 0.1.0 use [`v0_1`] (`use pipeline_plugin_sdk::v0_1::*;`),
//! the 0.1.0 API as it was; the runner runs both.
//!
//! Build: `cargo build --release --target wasm32-wasip2`; the component is
//! `target/wasm32-wasip2/release/<crate>.wasm`. The interface is the WIT
//! package `pipeline:stage@0.2.0` in `wit/` (and `pipeline:stage@0.1.0` for
//! [`v0_1`]).

use std::borrow::Cow;

#[macro_use]
mod shared;
pub mod v0_1;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        // The released package, under a world name of the SDK's own (see
        // `v0_1::bindings`: each version's world needs its own name).
        inline: "package pipeline-sdk:bindings;
                 world stage-v020 { include pipeline:stage/stage@0.2.0; }",
        path: "wit/pipeline-stage@0.2.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_v0_2",
        default_bindings_module: "pipeline_plugin_sdk::bindings",
    });
}

pub use bindings::pipeline::stage::host as raw_host;
pub use bindings::pipeline::stage::types::{
    Action, Capability, Cluster, Command, CommandFailure, CommandOutput, Description, Direction,
    Entry, ExitStatus, HostError, HttpRequest, HttpResponse, LogLevel, Metric, OutputSpec,
    ParamProblem, ParamSpec, ParamType, ScalarType, Series, StageError, StageInfo, Value,
};

stage_api!();

/// Exports a [`Plugin`] as the component's `pipeline:stage/plugin@0.2.0`.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        type __PipelinePluginExport = $crate::Export<$plugin>;
        $crate::bindings::export_v0_2!(__PipelinePluginExport with_types_in $crate::bindings);
    };
}

// ---- declaring metrics -------------------------------------------------------

/// How a metric measured on several hosts (a stage whose `on:` names more
/// than one) combines into one figure for all of them (`host=all`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aggregate {
    /// Add the values: rates and counts of hosts that ran at the same time.
    Sum,
    /// The largest value (e.g. a maximum latency).
    Max,
    /// The smallest value.
    Min,
    /// The plain mean.
    Mean,
    /// The mean weighted by the named metric with the same labels on the
    /// same host (e.g. an average latency by an op count):
    /// [`Aggregate::mean_weighted_by`]`("ops")`.
    MeanWeightedBy(Cow<'static, str>),
    /// Does not combine: no `host=all` figure (percentiles, standard
    /// deviations, sizes, a host's own durations).
    None,
}

impl Aggregate {
    /// The mean weighted by the metric `weight` (usable in a `const`).
    pub const fn mean_weighted_by(weight: &'static str) -> Self {
        Aggregate::MeanWeightedBy(Cow::Borrowed(weight))
    }
}

/// A metric the plugin reports, declared once in its [`Description`]: every
/// value of it has this unit, direction and rule. A `const` can hold one,
/// so `describe` declares it and `run` reports [`MetricSpec::value`]s of it:
///
/// ```ignore
/// const IOPS: MetricSpec = MetricSpec::rate("iops", "IOPS", "operations per second").headline();
/// const LATENCY: MetricSpec = MetricSpec::new(
///     "latency_p99", "ms", Direction::LowerIsBetter, Aggregate::None, "99th percentile latency",
/// );
/// // describe: Description::new(..).metric(IOPS).metric(LATENCY)
/// // run:      Output::new().metric(IOPS.value(1234.0).label("op", "write"))
/// ```
///
/// A metric whose name is known only at run time is a struct literal:
/// `MetricSpec { name: name.into(), ..MetricSpec::info("", "B", "a size") }`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Stable, machine-friendly name, e.g. `commit_latency`.
    pub name: Cow<'static, str>,
    /// `ms`, `IOPS`, `MiB/s`, `B`, `%`, `count`, ...
    pub unit: Cow<'static, str>,
    pub direction: Direction,
    pub aggregate: Aggregate,
    /// Shown in the report's summary table.
    pub headline: bool,
    /// One line: what it means, its labels.
    pub doc: Cow<'static, str>,
}

impl MetricSpec {
    /// A metric with every property given.
    pub const fn new(
        name: &'static str,
        unit: &'static str,
        direction: Direction,
        aggregate: Aggregate,
        doc: &'static str,
    ) -> Self {
        MetricSpec {
            name: Cow::Borrowed(name),
            unit: Cow::Borrowed(unit),
            direction,
            aggregate,
            headline: false,
            doc: Cow::Borrowed(doc),
        }
    }

    /// A rate (bandwidth, IOPS, ops/s): higher is better, and the rates of
    /// hosts that ran at the same time add up.
    pub const fn rate(name: &'static str, unit: &'static str, doc: &'static str) -> Self {
        Self::new(name, unit, Direction::HigherIsBetter, Aggregate::Sum, doc)
    }

    /// An informational figure (a size, a count, a capacity): neither
    /// better nor worse, and it does not combine across hosts.
    pub const fn info(name: &'static str, unit: &'static str, doc: &'static str) -> Self {
        Self::new(name, unit, Direction::Neutral, Aggregate::None, doc)
    }

    /// Marks the metric as a headline figure (the report's summary table).
    pub const fn headline(mut self) -> Self {
        self.headline = true;
        self
    }

    /// A value of this metric, to label and return from `run`.
    pub fn value(&self, value: f64) -> Metric {
        Metric::new(&self.name, value)
    }
}

impl From<MetricSpec> for bindings::pipeline::stage::types::MetricSpec {
    fn from(m: MetricSpec) -> Self {
        use bindings::pipeline::stage::types::Aggregate as Wit;
        bindings::pipeline::stage::types::MetricSpec {
            name: m.name.into_owned(),
            unit: m.unit.into_owned(),
            direction: m.direction,
            aggregate: match m.aggregate {
                Aggregate::Sum => Wit::Sum,
                Aggregate::Max => Wit::Max,
                Aggregate::Min => Wit::Min,
                Aggregate::Mean => Wit::Mean(None),
                Aggregate::MeanWeightedBy(weight) => Wit::Mean(Some(weight.into_owned())),
                Aggregate::None => Wit::None,
            },
            headline: m.headline,
            doc: m.doc.into_owned(),
        }
    }
}

impl Description {
    /// Declares a metric `run` (or [`Host::emit`]) reports; a value of an
    /// undeclared one fails the stage.
    pub fn metric(mut self, spec: MetricSpec) -> Self {
        self.metrics.push(spec.into());
        self
    }
}

impl Metric {
    /// A value of the declared metric `name` (its unit, direction and rule
    /// are the declaration's); [`MetricSpec::value`] names it for you.
    pub fn new(name: &str, value: f64) -> Self {
        Metric {
            name: name.into(),
            value,
            labels: Vec::new(),
        }
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }
}

// ---- helpers ---------------------------------------------------------------

/// The last `n` non-empty lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
