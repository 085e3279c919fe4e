//! Plugins in OCI registries: `plugins push`, `plugins pull`, the registry
//! part of `plugins list`, and `lock`.

use std::path::Path;

use pipeline_engine::diagnostic::{Diagnostic, Diagnostics};
use pipeline_engine::plugin_lock::{Change, lock_suite};
use pipeline_oci::client::PushInfo;
use pipeline_oci::{Fetcher, OciError, OciReference, RegistryClient};

use crate::commands::CliResult;
use crate::error::CliError;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn parse_reference(text: &str) -> Result<OciReference, CliError> {
    OciReference::parse(text)
        .map_err(|e| Diagnostics::from(Diagnostic::error(e.to_string()).with_help(e.hint)).into())
}

fn registry_error(e: &OciError) -> CliError {
    CliError::FailedDiagnostics(
        Diagnostic::error(e.to_string())
            .with_help_opt(e.hint())
            .into(),
    )
}

/// `reference` is not a plugin this runner can load (exit 1: what the registry holds).
fn not_usable(reference: &OciReference, e: impl std::fmt::Display) -> CliError {
    CliError::FailedDiagnostics(
        Diagnostic::error(format!("{reference} is not a usable plugin: {e}")).into(),
    )
}

/// `pipeline plugins push FILE REF`: the component, loaded and described
/// first (a file that is not a plugin is refused before anything is sent).
pub fn push(file: &Path, reference: &str) -> CliResult {
    let reference = parse_reference(reference)?;
    if reference.tag.is_none() || reference.digest.is_some() {
        return Err(Diagnostics::from(
            Diagnostic::error(format!(
                "push to `{reference}`: a push names a tag and no digest (the registry computes the digest)"
            ))
            .with_help("e.g. oci://127.0.0.1:5000/team/my-stage:1.0"),
        )
        .into());
    }
    let loader =
        pipeline_wasm::WasmLoader::new().with_reserved_names(pipeline_native::registry().names());
    let plugin = loader.load_plugin(file, None).map_err(|e| {
        CliError::from(Diagnostics::from(Diagnostic::error(format!(
            "cannot push {}: {e}",
            file.display()
        ))))
    })?;
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::invalid(format!("cannot read {}: {e}", file.display())))?;
    let d = &plugin.description;
    let info = PushInfo {
        name: d.name.clone(),
        description: d.summary.clone(),
        version: Some(d.version.clone()).filter(|v| !v.is_empty()),
        interface: format!(
            "{}{}",
            pipeline_wasm::versions::PLUGIN_EXPORT,
            plugin.interface
        ),
    };
    let client = RegistryClient::new(&reference.registry, &env);
    let pushed = client
        .push(&reference, &bytes, &info)
        .map_err(|e| registry_error(&e))?;
    println!("pushed {} ({} {})", reference, t(&d.name), t(&d.version));
    println!("  manifest {}", pushed.manifest);
    println!("  wasm     {} ({} bytes)", pushed.wasm, bytes.len());
    println!("use it with `uses: {reference}`, then `pipeline lock SUITE` to pin this digest");
    Ok(())
}

/// `pipeline plugins pull REF`: into the cache, checked, and loaded once so
/// a reference that is not a usable plugin fails here rather than in a run.
pub fn pull(reference: &str) -> CliResult {
    let reference = parse_reference(reference)?;
    let fetched = Fetcher::new(&env)
        .fetch(&reference, None)
        .map_err(|e| registry_error(&e))?;
    let loader =
        pipeline_wasm::WasmLoader::new().with_reserved_names(pipeline_native::registry().names());
    match loader.load_plugin(&fetched.path, Some(&fetched.wasm)) {
        Ok(p) => {
            println!(
                "pulled {reference} ({} {}){}",
                t(&p.description.name),
                t(&p.description.version),
                if fetched.cached {
                    ", already cached"
                } else {
                    ""
                }
            );
            println!("  manifest {}", fetched.manifest);
            println!("  wasm     {}", fetched.wasm);
            println!("  file     {}", fetched.path.display());
            Ok(())
        }
        Err(e) => Err(not_usable(&reference, e)),
    }
}

/// `plugins describe oci://…`: the plugin fetched (from the cache when the
/// reference pins a digest), loaded, with the reference as its origin.
pub fn fetch_for_describe(
    registry: &pipeline_engine::registry::Registry,
    text: &str,
) -> Result<pipeline_engine::registry::RegisteredStage, CliError> {
    let reference = parse_reference(text)?;
    let fetched = Fetcher::new(&env)
        .fetch(&reference, None)
        .map_err(|e| registry_error(&e))?;
    let local = fetched.path.display().to_string();
    match registry.resolve(&local, Path::new("."), Some(&fetched.wasm)) {
        Ok(Some(mut p)) => {
            p.origin = format!("{reference} ({})", fetched.manifest);
            Ok(p)
        }
        Ok(None) => Err(not_usable(&reference, "no plugin at its path")),
        Err(e) => Err(not_usable(&reference, e)),
    }
}

/// The registry plugins in the cache, for `plugins list`.
pub fn list_cached() {
    let fetcher = Fetcher::new(&env);
    let cached = fetcher.cache.list();
    if cached.is_empty() {
        return;
    }
    println!(
        "\npulled from registries (cache {}):",
        fetcher.cache.dir().display()
    );
    for (record, path) in cached {
        println!(
            "  {}  {}\n      manifest {}  pulled {}\n      {}",
            t(record.title.as_deref().unwrap_or("?")),
            t(&record.reference),
            record.manifest,
            record.pulled_at,
            path.display()
        );
    }
}

/// `pipeline lock SUITE [--update]`.
pub fn lock(suite: &Path, update: bool) -> CliResult {
    let done = lock_suite(suite, update, &env)?;
    if !done.written {
        println!("{}: no `oci://` plugin; nothing to lock", suite.display());
        return Ok(());
    }
    for (change, entry) in &done.entries {
        let what = match change {
            Change::Added => "locked ",
            Change::Updated => "updated",
            Change::Kept => "kept   ",
            Change::Removed => "removed",
        };
        println!("{what} {} {}", entry.reference, entry.manifest);
    }
    println!("wrote {}", done.lock_file.display());
    Ok(())
}

fn t(s: &str) -> String {
    pipeline_engine::terminal::line(s)
}
