//! `uses: oci://…`: plugins from registries, made local before the stages
//! are compiled. Each distinct reference is fetched once: at the digest the
//! suite's lock file pins (from the cache when it is there, without network),
//! else at what its tag points to now. `--locked` insists on the lock.

use std::collections::BTreeMap;
use std::sync::Arc;

use pipeline_oci::{Fetched, Fetcher, Lockfile, OciReference, is_oci, lock_path};

use super::CompileOptions;
use crate::config::PipelineConfig;
use crate::diagnostic::{Diagnostic, Diagnostics, Source};

/// The registry plugins of one suite, by `uses` text. A reference that could
/// not be fetched is absent (and diagnosed once).
#[derive(Default)]
pub struct OciPlugins {
    pub fetched: BTreeMap<String, Fetched>,
    /// The lock file's text, for the run folder.
    pub lock_text: Option<String>,
}

pub fn resolve(
    source: &Arc<Source>,
    config: &PipelineConfig,
    options: &CompileOptions,
    diags: &mut Diagnostics,
) -> OciPlugins {
    let mut out = OciPlugins::default();
    let stages: Vec<_> = config
        .stages
        .iter()
        .chain(&config.cleanup)
        .filter(|s| is_oci(&s.uses))
        .collect();
    if stages.is_empty() && !options.locked {
        return out;
    }
    let lock_file = lock_path(&source.path);
    let suite = source.path.display().to_string();
    let lock = match Lockfile::load(&lock_file) {
        Ok(l) => l,
        Err(e) => {
            diags.push(Diagnostic::error(e.to_string()).with_help_opt(e.hint()));
            return out;
        }
    };
    if lock.is_some() {
        out.lock_text = std::fs::read_to_string(&lock_file).ok();
    }
    if options.locked && lock.is_none() {
        diags.push(
            Diagnostic::error(format!(
                "--locked: there is no lock file {}",
                lock_file.display()
            ))
            .with_help(format!(
                "write it with `pipeline lock {suite}` and commit it"
            )),
        );
    }
    let fetcher = Fetcher::new(options.env);
    for stage in stages {
        let uses = &stage.uses;
        if out.fetched.contains_key(&uses.value) {
            continue;
        }
        let at = |d: Diagnostic| d.at(source, uses.loc);
        let reference = match OciReference::parse(uses) {
            Ok(r) => r,
            Err(e) => {
                diags.push(at(Diagnostic::error(e.to_string()).with_help(e.hint)));
                continue;
            }
        };
        let locked = lock.as_ref().and_then(|l| l.entry(uses));
        if options.locked && locked.is_none() {
            if lock.is_some() {
                diags.push(at(Diagnostic::error(format!(
                    "--locked: `{}` is not in {}",
                    uses.value,
                    lock_file.display()
                ))
                .with_help(format!("the lock is stale: run `pipeline lock {suite}`"))));
            }
            continue;
        }
        match fetcher.fetch(&reference, locked) {
            Ok(f) => {
                out.fetched.insert(uses.value.clone(), f);
            }
            Err(e) => {
                // The message names the reference; the diagnostic already does.
                let text = e.to_string();
                let text = text
                    .strip_prefix(&format!("{reference}: "))
                    .unwrap_or(&text);
                diags.push(at(Diagnostic::error(format!(
                    "cannot load plugin `{}`: {text}",
                    uses.value
                ))
                .with_help_opt(e.hint())))
            }
        }
    }
    if options.locked
        && let Some(lock) = &lock
    {
        for entry in &lock.plugins {
            let used = config
                .stages
                .iter()
                .chain(&config.cleanup)
                .any(|s| s.uses.value == entry.reference);
            if !used {
                diags.push(
                    Diagnostic::error(format!(
                        "--locked: {} is stale: it locks `{}`, which the suite no longer uses",
                        lock_file.display(),
                        entry.reference
                    ))
                    .with_help(format!("run `pipeline lock {suite}`")),
                );
            }
        }
    }
    out
}

/// The local file a registry plugin was fetched to, as `uses` for the loader.
pub fn local_uses(fetched: &Fetched) -> String {
    fetched.path.display().to_string()
}

/// What results.json and the plan say a registry plugin is.
pub fn origin(uses: &str, fetched: &Fetched) -> String {
    format!("{uses} ({})", fetched.manifest)
}
