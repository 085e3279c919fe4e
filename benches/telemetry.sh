#!/usr/bin/env bash
# What the telemetry costs: full-baseline with the cluster watch (status,
# pg stat, every OSD's counters) and the host watch on, and with both off
# (`cluster: {watch: false}`, `inventory: {watch: false}`), in paired runs
# against the sandbox cluster, interleaved (on/off, then off/on, …). Prints
# each headline figure's median with and without, their ratio beside the
# spread of the runs themselves (the noise it must stay within), and the
# samplers' own CPU as a share of a core. benches/telemetry.py does the runs.
#   benches/telemetry.sh                      # REPS=3 pairs, seconds=5
#   REPS=5 SECONDS_PER_STAGE=10 benches/telemetry.sh
# Starts its own sandbox unless PIPELINE_SANDBOX_DIR names a running one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh >/dev/null
plugins/guests/build.sh >/dev/null
cargo build --release -q -p pipeline --bin pipeline
pipeline="$root/target/release/pipeline"

# Inside the project, so the suite copies find plugins/wasm/ (the ceph-df stage).
mkdir -p "$root/target"
work="$(mktemp -d "$root/target/telemetry-bench.XXXXXX")"
cleanup() {
  if [ -n "${started_sandbox:-}" ]; then "$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${PIPELINE_SANDBOX_DIR:-}" ] || ! "$pipeline" sandbox status --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1; then
  export PIPELINE_SANDBOX_DIR=/tmp/pipeline-telemetry-bench-sandbox
  "$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR" >/dev/null
  started_sandbox=1
fi
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"
PIPELINE="$pipeline" WORK="$work" python3 benches/telemetry.py
