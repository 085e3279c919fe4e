//! The stages a pipeline can use, by name. Native stages are listed
//! explicitly by `pipeline_native::registry()`; WASM plugins will join the
//! same namespace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::stage::{Stage, StageDescription};

#[derive(Clone)]
pub struct RegisteredStage {
    pub stage: Arc<dyn Stage>,
    pub description: StageDescription,
    /// `native`, or where a plugin file was loaded from (a path, or an
    /// `oci://` reference with the manifest digest it resolved to).
    pub origin: String,
    /// `sha256:<hex>` of a plugin file's bytes: what a run records it ran.
    pub sha256: Option<String>,
}

/// Why a plugin named by `uses:` was not loaded. The variants are what the
/// engine acts on (a pin problem is reported at `sha256:`, anything else at
/// `uses:`); the messages are what a person reads after "cannot load plugin".
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// `uses:` is a path, and no file is there.
    #[error("no plugin file {}", .path.display())]
    NotFound { path: PathBuf },
    /// The `sha256:` pin is malformed or does not match the file.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// Found by name, but the plugin calls itself something else.
    #[error("{} describes itself as `{described}`, not `{uses}`; rename the file or use its path", .path.display())]
    WrongName {
        path: PathBuf,
        uses: String,
        described: String,
    },
    /// The file is there but is not a usable plugin: unreadable, not a
    /// component, built for an unsupported interface, or its `describe` failed.
    #[error(transparent)]
    Invalid(Box<dyn std::error::Error + Send + Sync>),
}

/// A `sha256:` pin that refuses the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("sha256 mismatch for {}: the pipeline pins {expected}, the file has {actual}; refusing to load it", .path.display())]
    Mismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("invalid sha256 pin `{0}`: expected 64 hex digits (optionally prefixed `sha256:`)")]
    Malformed(String),
}

/// Finds plugins that are not compiled in (WASM components): by path
/// (`uses: ./plugins/foo.wasm`, relative to the pipeline file) or by name on
/// the plugin path.
pub trait PluginLoader: Send + Sync {
    /// `Ok(None)` when `uses` names no plugin this loader knows. `sha256`, when
    /// given, must match the file's content or the plugin is refused.
    fn load(
        &self,
        uses: &str,
        base_dir: &Path,
        sha256: Option<&str>,
    ) -> Result<Option<RegisteredStage>, PluginError>;

    /// Plugins found on the plugin path, for `pipeline plugins list`.
    fn discover(&self) -> Vec<RegisteredStage>;
}

#[derive(Clone, Default)]
pub struct Registry {
    stages: BTreeMap<String, RegisteredStage>,
    loader: Option<Arc<dyn PluginLoader>>,
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
                sha256: None,
            },
        );
    }

    /// Registers an already described stage (how loaders add plugins).
    pub fn add(&mut self, registered: RegisteredStage) {
        self.stages
            .insert(registered.description.name.clone(), registered);
    }

    pub fn set_loader(&mut self, loader: Arc<dyn PluginLoader>) {
        self.loader = Some(loader);
    }

    pub fn loader(&self) -> Option<&Arc<dyn PluginLoader>> {
        self.loader.as_ref()
    }

    /// A native stage by name, else whatever the loader finds for `uses`.
    pub fn resolve(
        &self,
        uses: &str,
        base_dir: &Path,
        sha256: Option<&str>,
    ) -> Result<Option<RegisteredStage>, PluginError> {
        let looks_like_path = uses.contains('/') || uses.ends_with(".wasm");
        if !looks_like_path
            && sha256.is_none()
            && let Some(native) = self.stages.get(uses)
        {
            return Ok(Some(native.clone()));
        }
        match &self.loader {
            Some(loader) => loader.load(uses, base_dir, sha256),
            None => Ok(None),
        }
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
