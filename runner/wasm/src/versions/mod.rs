//! One module per released interface version; [`Bindings`] dispatches to the
//! one a component was built against. A released WIT folder is never edited:
//! a new version is a new `plugins/wit/pipeline-stage@X.Y.Z/`, a new
//! `vX_Y_Z.rs` next to the others (what did not change comes from
//! `shared.rs`) and a new variant here, so plugins built against an older
//! version keep running through their own bindings.

mod shared;
pub mod v0_1_0;
pub mod v0_2_0;

use std::collections::BTreeMap;

use pipeline_stage_api::ceph::CephConnection;
use pipeline_stage_api::params::{ParamSpec, Params};
use pipeline_stage_api::stage::{Action, StageDescription, StageError, StageOutput};
use wasmtime::component::Component;
use wasmtime::{Engine, Store};

use crate::host::HostState;

/// The export every plugin has, whatever its version: `pipeline:stage/plugin@X.Y.Z`.
pub const PLUGIN_EXPORT: &str = "pipeline:stage/plugin@";

/// What `run` returns besides errors: the stage output and the artifacts to save.
pub struct RunOutput {
    pub output: StageOutput,
    pub artifacts: Vec<(String, Vec<u8>)>,
}

/// A linked plugin of some interface version.
pub enum Bindings {
    V0_1_0(v0_1_0::Plugin),
    V0_2_0(v0_2_0::Plugin),
}

/// A component with no `pipeline:stage/plugin@X.Y.Z` export: not a stage plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoPluginExport {
    /// What it exports instead.
    pub exports: Vec<String>,
}

impl NoPluginExport {
    /// The exports as a message lists them (`none` for none).
    pub fn listed(&self) -> String {
        if self.exports.is_empty() {
            "none".to_string()
        } else {
            self.exports.join(", ")
        }
    }
}

/// The interface version a component targets (from its export names).
pub fn interface_version(engine: &Engine, component: &Component) -> Result<String, NoPluginExport> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    exports
        .iter()
        .find_map(|n| n.strip_prefix(PLUGIN_EXPORT).map(str::to_string))
        .ok_or(NoPluginExport { exports })
}

impl Bindings {
    /// Links `component` for interface `version`; `Ok(None)` for an unknown version.
    pub fn link(
        engine: &Engine,
        component: &Component,
        version: &str,
    ) -> wasmtime::Result<Option<Self>> {
        Ok(match version {
            "0.1.0" => Some(Bindings::V0_1_0(v0_1_0::Plugin::link(engine, component)?)),
            "0.2.0" => Some(Bindings::V0_2_0(v0_2_0::Plugin::link(engine, component)?)),
            _ => None,
        })
    }

    pub fn describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<StageDescription> {
        match self {
            Bindings::V0_1_0(p) => p.describe(store),
            Bindings::V0_2_0(p) => p.describe(store),
        }
    }

    pub fn check(
        &self,
        store: &mut Store<HostState>,
        specs: &[ParamSpec],
        params: &Params,
    ) -> wasmtime::Result<Vec<(String, String)>> {
        match self {
            Bindings::V0_1_0(p) => p.check(store, specs, params),
            Bindings::V0_2_0(p) => p.check(store, specs, params),
        }
    }

    pub fn plan(
        &self,
        store: &mut Store<HostState>,
        specs: &[ParamSpec],
        params: &Params,
        ceph: &CephConnection,
    ) -> wasmtime::Result<Vec<Action>> {
        match self {
            Bindings::V0_1_0(p) => p.plan(store, specs, params, ceph),
            Bindings::V0_2_0(p) => p.plan(store, specs, params, ceph),
        }
    }

    pub fn run(
        &self,
        store: &mut Store<HostState>,
        specs: &[ParamSpec],
        params: &Params,
    ) -> wasmtime::Result<Result<RunOutput, StageError>> {
        match self {
            Bindings::V0_1_0(p) => p.run(store, specs, params),
            Bindings::V0_2_0(p) => p.run(store, specs, params),
        }
    }
}

/// An entry a plugin returned twice (two outputs of one name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{name}` is given twice")]
pub struct GivenTwice {
    /// What the entries are: `output`, `environment fact`.
    pub what: String,
    pub name: String,
}

/// Entries (`name`, JSON) into a map, refusing duplicates.
pub(crate) fn entries_map(
    what: &str,
    entries: Vec<(String, serde_json::Value)>,
) -> Result<BTreeMap<String, serde_json::Value>, GivenTwice> {
    let mut map = BTreeMap::new();
    for (name, value) in entries {
        if map.insert(name.clone(), value).is_some() {
            return Err(GivenTwice {
                what: what.to_string(),
                name,
            });
        }
    }
    Ok(map)
}
