//! Plugins in OCI registries: `plugins push`, `plugins pull`, the registry
//! part of `plugins list`, and `lock`.

use std::path::Path;

use pipeline_engine::diagnostic::Diagnostic;
use pipeline_engine::plugin_lock::{Change, lock_suite};
use pipeline_oci::client::PushInfo;
use pipeline_oci::{Fetcher, OciError, OciReference, RegistryClient};

use crate::commands::{EXIT_INVALID, EXIT_OK, EXIT_RUN_FAILED, print_diagnostics};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn parse_reference(text: &str) -> Result<OciReference, u8> {
    OciReference::parse(text).map_err(|e| {
        print_diagnostics(&Diagnostic::error(e.to_string()).with_help(e.hint).into());
        EXIT_INVALID
    })
}

fn registry_error(e: &OciError) -> u8 {
    print_diagnostics(
        &Diagnostic::error(e.to_string())
            .with_help_opt(e.hint())
            .into(),
    );
    EXIT_RUN_FAILED
}

/// `pipeline plugins push FILE REF`: the component, loaded and described
/// first (a file that is not a plugin is refused before anything is sent).
pub fn push(file: &Path, reference: &str) -> u8 {
    let reference = match parse_reference(reference) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if reference.tag.is_none() || reference.digest.is_some() {
        print_diagnostics(
            &Diagnostic::error(format!(
                "push to `{reference}`: a push names a tag and no digest (the registry computes the digest)"
            ))
            .with_help("e.g. oci://127.0.0.1:5000/team/my-stage:1.0")
            .into(),
        );
        return EXIT_INVALID;
    }
    let loader =
        pipeline_wasm::WasmLoader::new().with_reserved_names(pipeline_native::registry().names());
    let plugin = match loader.load_plugin(file, None) {
        Ok(p) => p,
        Err(e) => {
            print_diagnostics(
                &Diagnostic::error(format!("cannot push {}: {e}", file.display())).into(),
            );
            return EXIT_INVALID;
        }
    };
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return EXIT_INVALID;
        }
    };
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
    match client.push(&reference, &bytes, &info) {
        Ok(pushed) => {
            println!("pushed {} ({} {})", reference, t(&d.name), t(&d.version));
            println!("  manifest {}", pushed.manifest);
            println!("  wasm     {} ({} bytes)", pushed.wasm, bytes.len());
            println!(
                "use it with `uses: {reference}`, then `pipeline lock SUITE` to pin this digest"
            );
            EXIT_OK
        }
        Err(e) => registry_error(&e),
    }
}

/// `pipeline plugins pull REF`: into the cache, checked, and loaded once so
/// a reference that is not a usable plugin fails here rather than in a run.
pub fn pull(reference: &str) -> u8 {
    let reference = match parse_reference(reference) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let fetched = match Fetcher::new(&env).fetch(&reference, None) {
        Ok(f) => f,
        Err(e) => return registry_error(&e),
    };
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
            EXIT_OK
        }
        Err(e) => {
            print_diagnostics(
                &Diagnostic::error(format!("{reference} is not a usable plugin: {e}")).into(),
            );
            EXIT_RUN_FAILED
        }
    }
}

/// `plugins describe oci://…`: the plugin fetched (from the cache when the
/// reference pins a digest), loaded, with the reference as its origin.
pub fn fetch_for_describe(
    registry: &pipeline_engine::registry::Registry,
    text: &str,
) -> Result<pipeline_engine::registry::RegisteredStage, u8> {
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
        Ok(None) => Err(EXIT_RUN_FAILED),
        Err(e) => {
            print_diagnostics(
                &Diagnostic::error(format!("{reference} is not a usable plugin: {e}")).into(),
            );
            Err(EXIT_RUN_FAILED)
        }
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
pub fn lock(suite: &Path, update: bool) -> u8 {
    match lock_suite(suite, update, &env) {
        Ok(done) => {
            if !done.written {
                println!("{}: no `oci://` plugin; nothing to lock", suite.display());
                return EXIT_OK;
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
            EXIT_OK
        }
        Err(d) => {
            print_diagnostics(&d);
            EXIT_INVALID
        }
    }
}

fn t(s: &str) -> String {
    pipeline_engine::terminal::line(s)
}
