//! The WASM guests of `plugins/guests/` (the example plugins and the test
//! guests), which some self-contained tests run. They are build outputs,
//! not services: on a fresh clone the first test that needs them builds
//! them with `plugins/guests/build.sh --rust` (a minute or two; it needs the
//! `wasm32-wasip2` target, which `scripts/install-deps.sh` adds), so plain
//! `cargo test --workspace` passes with nothing built beforehand.
//! `scripts/test.sh` builds them before the tests, so there this finds them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` (a file the guest build writes, relative to the repository), built
/// first when missing. Panics, saying what to run, when the build fails.
pub fn built(path: &str) -> PathBuf {
    // Tests of one binary run in parallel threads: one builds, the others
    // wait for it and then find the file.
    static BUILD: Mutex<()> = Mutex::new(());
    let file = repo().join(path);
    if file.is_file() {
        return file;
    }
    let _turn = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if file.is_file() {
        return file;
    }
    let script = repo().join("plugins/guests/build.sh");
    eprintln!(
        "{path} is missing: building the guests ({} --rust)",
        script.display()
    );
    let out = std::process::Command::new(&script)
        .arg("--rust")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success() && file.is_file(),
        "{path} is missing and `plugins/guests/build.sh --rust` did not make it ({}): {}\n\
         (it needs the wasm32-wasip2 target: `rustup target add wasm32-wasip2`, or scripts/install-deps.sh)",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    file
}
