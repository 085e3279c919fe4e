//! `pipeline lock SUITE`: resolve each `oci://` plugin of a suite to the
//! manifest digest its reference names now, pull it into the cache (so a
//! locked run needs no network), and write `SUITE.lock`. Like `cargo`, an
//! entry already locked is kept unless `update` asks to resolve it anew.

use std::path::{Path, PathBuf};

use pipeline_oci::{Fetcher, LockedPlugin, Lockfile, OciReference, is_oci, lock_path};

use crate::config::parse::parse_pipeline;
use crate::diagnostic::{Diagnostic, Diagnostics, Source};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Updated,
    Kept,
    Removed,
}

pub struct Locked {
    pub lock_file: PathBuf,
    /// `None` when the suite uses no registry plugin (and had no lock).
    pub written: bool,
    pub entries: Vec<(Change, LockedPlugin)>,
}

pub fn lock_suite(
    suite: &Path,
    update: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Locked, Diagnostics> {
    let source = Source::read(suite)?;
    let config = parse_pipeline(&source)?;
    let lock_file = lock_path(suite);
    let mut diags = Diagnostics::default();
    let old = Lockfile::load(&lock_file).unwrap_or_else(|e| {
        if !update {
            diags.push(
                Diagnostic::error(e.to_string())
                    .with_help("`pipeline lock --update` writes it anew"),
            );
        }
        None
    });
    let fetcher = Fetcher::new(env);
    let mut lock = Lockfile {
        version: pipeline_oci::lockfile::VERSION,
        plugins: Vec::new(),
    };
    let mut entries = Vec::new();
    for stage in config.stages.iter().chain(&config.cleanup) {
        let uses = &stage.uses;
        if !is_oci(uses) || lock.entry(uses).is_some() {
            continue;
        }
        let at = |d: Diagnostic| d.at(&source, uses.loc);
        let reference = match OciReference::parse(uses) {
            Ok(r) => r,
            Err(e) => {
                diags.push(at(Diagnostic::error(e.to_string()).with_help(e.hint)));
                continue;
            }
        };
        let before = old.as_ref().and_then(|l| l.entry(uses)).cloned();
        if let Some(kept) = before.clone().filter(|_| !update) {
            lock.plugins.push(kept.clone());
            entries.push((Change::Kept, kept));
            continue;
        }
        match fetcher.fetch(&reference, None) {
            Ok(f) => {
                let entry = LockedPlugin {
                    reference: uses.value.clone(),
                    manifest: f.manifest,
                    wasm: f.wasm,
                };
                let change = match &before {
                    None => Change::Added,
                    Some(b) if *b == entry => Change::Kept,
                    Some(_) => Change::Updated,
                };
                lock.plugins.push(entry.clone());
                entries.push((change, entry));
            }
            Err(e) => diags.push(at(Diagnostic::error(format!(
                "cannot lock `{}`: {e}",
                uses.value
            ))
            .with_help_opt(e.hint()))),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    if let Some(old) = &old {
        for gone in old
            .plugins
            .iter()
            .filter(|p| lock.entry(&p.reference).is_none())
        {
            entries.push((Change::Removed, gone.clone()));
        }
    }
    if lock.plugins.is_empty() && old.is_none() {
        return Ok(Locked {
            lock_file,
            written: false,
            entries,
        });
    }
    let name = suite
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    lock.save(&lock_file, &name)
        .map_err(|e| Diagnostics::from(Diagnostic::error(e.to_string())))?;
    Ok(Locked {
        lock_file,
        written: true,
        entries,
    })
}
