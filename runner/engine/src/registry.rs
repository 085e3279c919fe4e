//! The stages a pipeline can use, by name. Native stages are listed
//! explicitly by `pipeline_native::registry()`; WASM plugins will join the
//! same namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::stage::{Stage, StageDescription};

#[derive(Clone)]
pub struct RegisteredStage {
    pub stage: Arc<dyn Stage>,
    pub description: StageDescription,
    /// `native`, or where a plugin file was loaded from.
    pub origin: String,
}

#[derive(Clone, Default)]
pub struct Registry {
    stages: BTreeMap<String, RegisteredStage>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    pub fn add_native(&mut self, stage: impl Stage + 'static) {
        let description = stage.describe();
        self.stages.insert(
            description.name.clone(),
            RegisteredStage {
                stage: Arc::new(stage),
                description,
                origin: "native".into(),
            },
        );
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredStage> {
        self.stages.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.stages.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &RegisteredStage> {
        self.stages.values()
    }
}
