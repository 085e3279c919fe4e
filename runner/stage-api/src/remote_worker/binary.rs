//! The `pipeline` binary each client host runs its worker from: this
//! runner's own for `local`, the inventory's `pipeline:`, or this runner's
//! copied over the host's SSH connection into a per-user cache, checked by
//! sha256, and kept there for the next run (the few most recent copies).

use std::io::Read;
use std::sync::OnceLock;

use crate::context::StageContext;
use crate::exec::{CommandSpec, Stdin};
use crate::hosts::Host;
use crate::stage::StageError;

use super::sh;

/// What `pipeline plan` says of the binary `host` will run.
pub fn describe(host: &Host) -> String {
    match (&host.pipeline, host.is_local()) {
        (_, true) => "this runner's own binary".to_string(),
        (Some(path), false) => format!("`{path}` (from the inventory)"),
        (None, false) => format!(
            "this runner's binary, copied over SSH to {CACHE_DIR}/pipeline-SHA256 unless a copy with that sha256 is there"
        ),
    }
}

/// Where a copied binary goes on a host (per user).
pub const CACHE_DIR: &str = "${XDG_CACHE_HOME:-$HOME/.cache}/pipeline/bin";
/// Copies a host's cache keeps: the most recently used (a copy found in
/// place is touched); older ones are removed after a new copy, so that
/// every new build of the runner does not leave another binary behind. (A
/// worker still running from a removed copy runs on: it is open.)
const KEEP_COPIES: usize = 3;

/// The `pipeline` binary to run on each host: this one locally, the
/// inventory's, or this one copied into the host's cache when no copy with
/// its sha256 is there.
pub fn place_binaries(ctx: &mut StageContext, hosts: &[Host]) -> Result<Vec<String>, StageError> {
    let me = std::env::current_exe()
        .map_err(|e| StageError::failed(format!("cannot find the runner's own binary: {e}")))?;
    let mut paths: Vec<Option<String>> = hosts
        .iter()
        .map(|h| {
            if h.is_local() {
                Some(me.display().to_string())
            } else {
                h.pipeline.clone()
            }
        })
        .collect();
    let needs: Vec<usize> = (0..hosts.len()).filter(|&i| paths[i].is_none()).collect();
    if needs.is_empty() {
        return Ok(paths.into_iter().flatten().collect());
    }
    ctx.progress("sha256 of the runner's binary");
    let sha = own_sha256(&me)?;
    let check = format!(
        "d=\"{CACHE_DIR}\"; f=\"$d/pipeline-{sha}\"; \
         if [ -x \"$f\" ] && [ \"$(sha256sum < \"$f\" | cut -d' ' -f1)\" = {sha} ]; \
         then touch \"$f\"; echo \"present $f\"; else echo \"absent $f\"; fi"
    );
    let checks: Vec<(Host, String, CommandSpec)> = needs
        .iter()
        .map(|&i| (hosts[i].clone(), "pipeline-check".into(), sh(&check, 60)))
        .collect();
    let outputs = ctx.run_parallel_on(&checks)?;
    let mut copies = Vec::new();
    for (&i, out) in needs.iter().zip(&outputs) {
        let line = out.stdout.lines().next().unwrap_or_default();
        match line.split_once(' ') {
            Some(("present", path)) => paths[i] = Some(path.to_string()),
            Some(("absent", path)) => {
                paths[i] = Some(path.to_string());
                copies.push(i);
            }
            _ => {
                return Err(StageError::failed(format!(
                    "host {}: cannot look for a pipeline binary in {CACHE_DIR} (`sh`, `sha256sum` and `cut` are needed there): {}",
                    hosts[i].describe(),
                    out.tail()
                )));
            }
        }
    }
    if !copies.is_empty() {
        let size = std::fs::metadata(&me).map_or(0, |m| m.len());
        ctx.progress(&format!(
            "copying the pipeline binary ({:.0} MiB) to {} host(s)",
            size as f64 / 1048576.0,
            copies.len()
        ));
        let copy = format!(
            "set -e; d=\"{CACHE_DIR}\"; mkdir -p \"$d\"; f=\"$d/pipeline-{sha}\"; t=\"$f.tmp.$$\"; \
             trap 'rm -f \"$t\"' EXIT; cat > \"$t\"; s=$(sha256sum < \"$t\" | cut -d' ' -f1); \
             if [ \"$s\" != {sha} ]; then echo \"the copy has sha256 $s, not {sha}\" >&2; exit 3; fi; \
             chmod 755 \"$t\"; mv -f \"$t\" \"$f\"; trap - EXIT; echo \"$f\"; \
             cd \"$d\" && ls -t | grep -E '^pipeline-[0-9a-f]{{64}}$' | tail -n +{keep} | while read -r old; do rm -f -- \"$old\"; done",
            keep = KEEP_COPIES + 1
        );
        let specs: Vec<(Host, String, CommandSpec)> = copies
            .iter()
            .map(|&i| {
                let spec = sh(&copy, 600).stdin(Stdin::File(me.clone()));
                (hosts[i].clone(), "pipeline-copy".into(), spec)
            })
            .collect();
        let outputs = ctx.run_parallel_on(&specs)?;
        for (&i, out) in copies.iter().zip(&outputs) {
            if !out.success() {
                return Err(StageError::failed(format!(
                    "host {}: copying the pipeline binary failed ({}): {}",
                    hosts[i].describe(),
                    out.exit,
                    out.tail()
                )));
            }
        }
    }
    Ok(paths.into_iter().flatten().collect())
}

/// The sha256 of this binary, hex, computed once per process.
fn own_sha256(path: &std::path::Path) -> Result<String, StageError> {
    static SHA: OnceLock<String> = OnceLock::new();
    if let Some(s) = SHA.get() {
        return Ok(s.clone());
    }
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(path)
        .map_err(|e| StageError::io(format!("reading {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| StageError::io(format!("reading {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(SHA.get_or_init(|| hex).clone())
}
