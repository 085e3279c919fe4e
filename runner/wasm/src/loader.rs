//! Finding, checking and loading plugin files.
//!
//! `uses:` is either a path (`./plugins/foo.wasm`, relative to the pipeline
//! file) or a name looked up as `NAME.wasm` on the plugin path, first match
//! wins:
//!
//! 1. `plugins/wasm/` next to the pipeline file or in a parent folder up to
//!    the project root (the folder with `.git`): the project's plugins,
//! 2. each folder of `$PIPELINE_PLUGIN_PATH` (`:`-separated),
//! 3. `$XDG_DATA_HOME/pipeline/plugins` (default `~/.local/share/pipeline/plugins`).
//!
//! A `sha256:` pin is checked against the file's bytes before anything else
//! is done with them; a mismatch is a refusal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pipeline_stage_api::registry::{PinError, PluginError, PluginLoader, RegisteredStage};

use crate::SUPPORTED_INTERFACES;
use crate::cache::{ComponentCache, default_dir, sha256_hex};
use crate::engine::engine;
use crate::error::WasmError;
use crate::host::{CallSetup, Phase};
use crate::limits::{Limits, LimitsError};
use crate::stage::{Plugin, WasmStage, call, explain};
use crate::versions::{Bindings, interface_version};

pub struct WasmLoader {
    limits: Limits,
    cache: ComponentCache,
    /// Names of native stages: a plugin may not take one.
    reserved: Vec<String>,
    /// Plugin folders after the project's `plugins/wasm/`.
    search: Vec<PathBuf>,
    /// Set when the environment's limits are malformed: every load reports it.
    config_error: Option<LimitsError>,
    /// Loaded plugins by content hash: a plugin used by several stages is
    /// compiled and described once.
    loaded: Mutex<HashMap<(PathBuf, String), Arc<Plugin>>>,
}

impl Default for WasmLoader {
    fn default() -> Self {
        Self::new()
    }
}

impl WasmLoader {
    /// Limits from the environment (`PIPELINE_WASM_MEMORY`, `PIPELINE_WASM_TIME`),
    /// the default cache folder, the default plugin path.
    pub fn new() -> Self {
        let (limits, config_error) = match Limits::from_env() {
            Ok(l) => (l, None),
            Err(e) => (Limits::default(), Some(e)),
        };
        WasmLoader {
            limits,
            cache: ComponentCache::new(default_dir()),
            reserved: Vec::new(),
            search: default_search_path(),
            config_error,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn with_cache(mut self, cache: ComponentCache) -> Self {
        self.cache = cache;
        self
    }

    /// Plugin folders searched after the project's `plugins/wasm/`.
    pub fn with_search_path(mut self, dirs: Vec<PathBuf>) -> Self {
        self.search = dirs;
        self
    }

    pub fn with_reserved_names<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Self {
        self.reserved = names.into_iter().map(str::to_string).collect();
        self
    }

    /// Where a plugin named `name` is looked for, in order: `plugins/wasm/`
    /// in the pipeline's folder and its parents up to the project root (the
    /// folder holding `.git`), then the configured plugin path.
    pub fn search_dirs(&self, base_dir: &Path) -> Vec<PathBuf> {
        let start = base_dir
            .canonicalize()
            .unwrap_or_else(|_| base_dir.to_path_buf());
        let mut dirs = Vec::new();
        for dir in start.ancestors().take(8) {
            dirs.push(dir.join("plugins").join("wasm"));
            if dir.join(".git").exists() {
                break;
            }
        }
        dirs.extend(self.search.iter().cloned());
        dirs
    }

    /// Loads a plugin file as a stage for the registry.
    pub fn load_file(
        &self,
        path: &Path,
        sha256: Option<&str>,
    ) -> Result<RegisteredStage, WasmError> {
        let plugin = self.load_plugin(path, sha256)?;
        Ok(RegisteredStage {
            description: plugin.description.clone(),
            origin: plugin.path.display().to_string(),
            sha256: Some(format!("sha256:{}", plugin.sha256)),
            stage: Arc::new(WasmStage { plugin }),
        })
    }

    /// Loads a plugin file, checking the pin first.
    pub fn load_plugin(&self, path: &Path, sha256: Option<&str>) -> Result<Arc<Plugin>, WasmError> {
        if let Some(e) = &self.config_error {
            return Err(WasmError::Limits(e.clone()));
        }
        let expected = sha256.map(normalize_pin).transpose()?;
        let bytes = std::fs::read(path).map_err(|source| WasmError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let actual = sha256_hex(&bytes);
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(PinError::Mismatch {
                path: path.to_path_buf(),
                expected,
                actual,
            }
            .into());
        }
        let key = (path.to_path_buf(), actual.clone());
        if let Some(found) = self.loaded.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(found);
        }
        let registered = self.compile(path, &bytes, actual)?;
        if let Ok(mut m) = self.loaded.lock() {
            m.insert(key, registered.clone());
        }
        Ok(registered)
    }

    fn compile(&self, path: &Path, bytes: &[u8], sha256: String) -> Result<Arc<Plugin>, WasmError> {
        let engine = engine()?;
        let invalid = |reason: String| WasmError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        if let Some(reason) = crate::diagnose::not_wasm(path, bytes) {
            return Err(invalid(reason));
        }
        let (component, cache) = self
            .cache
            .load(engine, bytes, &sha256)
            .map_err(|e| invalid(format!("{:#}", e.root_cause())))?;
        let interface =
            interface_version(engine, &component).map_err(|e| WasmError::NotAPlugin {
                path: path.to_path_buf(),
                exports: e.listed(),
            })?;
        let bindings = Bindings::link(engine, &component, &interface)
            .map_err(|e| WasmError::Link {
                path: path.to_path_buf(),
                reason: format!("{e:#}"),
            })?
            .ok_or_else(|| WasmError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: interface.clone(),
                supported: SUPPORTED_INTERFACES.join(", "),
            })?;
        let shown = path.display().to_string();
        let setup = CallSetup::offline(Phase::Describe, Default::default());
        let (described, state) = call(
            engine,
            &bindings,
            &shown,
            &[],
            &self.limits,
            setup,
            |b, s| b.describe(s),
        );
        let description = described.map_err(|e| WasmError::Plugin {
            plugin: shown.clone(),
            message: explain(&shown, Phase::Describe, &e, &state)
                .trim_start_matches(&format!("plugin `{shown}` "))
                .to_string(),
        })?;
        if let Some(problem) = check_name(&description.name, &self.reserved) {
            return Err(WasmError::Plugin {
                plugin: shown,
                message: problem,
            });
        }
        Ok(Arc::new(Plugin {
            path: path.to_path_buf(),
            sha256,
            interface,
            description,
            limits: self.limits,
            cache,
            bindings,
            engine,
        }))
    }

    /// `name.wasm` on the plugin path.
    pub fn find(&self, name: &str, base_dir: &Path) -> Option<PathBuf> {
        self.search_dirs(base_dir)
            .into_iter()
            .map(|d| d.join(format!("{name}.wasm")))
            .find(|p| p.is_file())
    }
}

impl PluginLoader for WasmLoader {
    fn load(
        &self,
        uses: &str,
        base_dir: &Path,
        sha256: Option<&str>,
    ) -> Result<Option<RegisteredStage>, PluginError> {
        let looks_like_path =
            uses.contains('/') || uses.ends_with(".wasm") || uses.ends_with(".wat");
        let path = if looks_like_path {
            let path = base_dir.join(uses);
            if !path.is_file() {
                return Err(PluginError::NotFound { path });
            }
            path
        } else {
            match self.find(uses, base_dir) {
                Some(p) => p,
                None => return Ok(None),
            }
        };
        let registered = self.load_file(&path, sha256)?;
        if !looks_like_path && registered.description.name != uses {
            return Err(PluginError::WrongName {
                path,
                uses: uses.to_string(),
                described: registered.description.name,
            });
        }
        Ok(Some(registered))
    }

    /// Every `*.wasm` on the plugin path (the project's folder relative to the
    /// current directory). A file that does not load is reported on stderr and
    /// left out: `plugins list` should still list the others.
    fn discover(&self) -> Vec<RegisteredStage> {
        let mut found: Vec<RegisteredStage> = Vec::new();
        for dir in self.search_dirs(Path::new(".")) {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .collect();
            files.sort();
            for file in files {
                match self.load_file(&file, None) {
                    // Earlier folders shadow later ones, as in `load`.
                    Ok(r)
                        if !found
                            .iter()
                            .any(|f| f.description.name == r.description.name) =>
                    {
                        found.push(r)
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("warning: {e}"),
                }
            }
        }
        found
    }
}

fn default_search_path() -> Vec<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let mut dirs: Vec<PathBuf> = env("PIPELINE_PLUGIN_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    let data = env("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local").join("share")));
    if let Some(data) = data {
        dirs.push(data.join("pipeline").join("plugins"));
    }
    dirs
}

/// `sha256:ABC...` or `abc...` -> lower-case hex.
fn normalize_pin(pin: &str) -> Result<String, WasmError> {
    let hex = pin
        .trim()
        .strip_prefix("sha256:")
        .unwrap_or(pin.trim())
        .to_ascii_lowercase();
    if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(hex)
    } else {
        Err(PinError::Malformed(pin.to_string()).into())
    }
}

/// A plugin name appears in reports, `uses:` and file names.
fn check_name(name: &str, reserved: &[String]) -> Option<String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Some(format!(
            "describes itself as `{name}`; a plugin name uses letters, digits, `-` and `_`"
        ));
    }
    if reserved.iter().any(|r| r == name) {
        return Some(format!(
            "describes itself as `{name}`, which is the name of a native stage; rename the plugin"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins() {
        let h = "a".repeat(64);
        assert_eq!(
            normalize_pin(&format!("sha256:{}", h.to_uppercase())).unwrap(),
            h
        );
        assert!(matches!(
            normalize_pin("abc"),
            Err(WasmError::Pin(PinError::Malformed(_)))
        ));
    }

    #[test]
    fn names() {
        assert!(check_name("ceph-df", &[]).is_none());
        assert!(check_name("exec", &["exec".to_string()]).is_some());
        assert!(check_name("a b", &[]).is_some());
    }
}
