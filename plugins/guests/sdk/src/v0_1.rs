//! The SDK for `pipeline:stage@0.1.0`, the first released interface, exactly
//! as it was: for plugins built against 0.1.0, which the runner keeps
//! running. New plugins use the crate root (the newest interface).
//!
//! In 0.1.0 a metric's declaration is documentation only (name, unit, doc)
//! and every reported value carries its own unit, direction and headline
//! mark:
//!
//! ```ignore
//! use pipeline_plugin_sdk::v0_1::*;
//!
//! struct Hello;
//! impl Plugin for Hello {
//!     fn describe() -> Description {
//!         Description::new("hello", "0.1.0", "Says hello")
//!             .param(ParamSpec::optional("who", ParamType::text(), "whom to greet"))
//!             .metric("greetings", "count", "greetings said")
//!     }
//!     fn run(params: &Params, host: &Host) -> Result<Output, Error> {
//!         host.info(&format!("hello {}", params.str("who").unwrap_or("world")));
//!         Ok(Output::new().metric(Metric::new("greetings", 1.0, "count", Direction::Neutral)))
//!     }
//! }
//! export_plugin!(Hello);
//! ```

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        // The released package, under a world name of the SDK's own: the
        // generated `__export_<world>_impl` macro is exported at the crate
        // root, so each version's world needs a name no other one has.
        inline: "package pipeline-sdk:bindings;
                 world stage-v010 { include pipeline:stage/stage@0.1.0; }",
        path: "wit/pipeline-stage@0.1.0",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_v0_1",
        default_bindings_module: "pipeline_plugin_sdk::v0_1::bindings",
    });
}

/// Exports a [`Plugin`] as the component's `pipeline:stage/plugin@0.1.0`.
pub use crate::__pipeline_export_plugin_v0_1 as export_plugin;
pub use crate::tail;
pub use bindings::pipeline::stage::host as raw_host;
pub use bindings::pipeline::stage::types::{
    Action, Capability, Cluster, Command, CommandFailure, CommandOutput, Description, Direction,
    Entry, ExitStatus, HostError, HttpRequest, HttpResponse, LogLevel, Metric, MetricSpec,
    OutputSpec, ParamProblem, ParamSpec, ParamType, ScalarType, Series, StageError, StageInfo,
    Value,
};

stage_api!();

/// Exports a 0.1.0 [`Plugin`]; use it as `pipeline_plugin_sdk::v0_1::export_plugin!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __pipeline_export_plugin_v0_1 {
    ($plugin:ty) => {
        type __PipelinePluginExportV0_1 = $crate::v0_1::Export<$plugin>;
        $crate::v0_1::bindings::export_v0_1!(
            __PipelinePluginExportV0_1 with_types_in $crate::v0_1::bindings
        );
    };
}

impl Description {
    /// Documents a metric `run` reports (its values carry their own unit
    /// and direction in 0.1.0).
    pub fn metric(mut self, name: &str, unit: &str, doc: &str) -> Self {
        self.metrics.push(MetricSpec {
            name: name.into(),
            unit: unit.into(),
            doc: doc.into(),
        });
        self
    }
}

impl Metric {
    pub fn new(name: &str, value: f64, unit: &str, direction: Direction) -> Self {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
            direction,
            labels: Vec::new(),
            headline: false,
        }
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }
    /// Shown in the report's summary table.
    pub fn headline(mut self) -> Self {
        self.headline = true;
        self
    }
}
