#!/usr/bin/env bash
# WASM plugin start-up figures (README, "WASM plugins"):
#  1. per plugin: first compile, load from the disk cache, instantiate + call
#     (runner/wasm/examples/plugin_start.rs);
#  2. the runner: `pipeline validate` and `pipeline run` of a suite with one
#     native stage, and of the same suite plus 10 WASM stages (cache warm).
# Release build; run from anywhere. Needs plugins/wasm/*.wasm for the example
# plugins (plugins/guests/build.sh); the committed testkit fixture otherwise.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
runs="${RUNS:-15}"

cargo build --release -q -p pipeline --bin pipeline
cargo build --release -q -p pipeline-wasm --example plugin_start
bin="$root/target/release/pipeline"
fixture="$root/runner/wasm/tests/fixtures/testkit-0.1.0.wasm"

echo "== per plugin (release build)"
plugins=("$fixture")
for f in plugins/wasm/*.wasm; do [ -e "$f" ] && plugins+=("$f"); done
"$root/target/release/examples/plugin_start" "${plugins[@]}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PIPELINE_CACHE_DIR="$work/cache"
cp "$fixture" "$work/testkit.wasm"
native_stage='  - id: native
    uses: exec
    with: {command: ["true"]}'
{ echo "name: none"; echo "stages:"; echo "$native_stage"; } > "$work/none.yaml"
{
  echo "name: ten-wasm"; echo "stages:"; echo "$native_stage"
  for i in $(seq 1 10); do
    printf '  - id: wasm-%s\n    uses: ./testkit.wasm\n    with: {mode: ok}\n' "$i"
  done
} > "$work/wasm.yaml"
"$bin" validate "$work/wasm.yaml" >/dev/null # fills the cache

# Median wall time of a command, in ms.
median_ms() {
  local times=()
  for _ in $(seq 1 "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}

run_fresh() { "$bin" run "$1" --out "$(mktemp -d -u "$work/run.XXXXXX")"; }
validate() { "$bin" validate "$1"; }

echo "== the runner (median of $runs, cache warm)"
for cmd in validate run_fresh; do
  n=$(median_ms $cmd "$work/none.yaml")
  w=$(median_ms $cmd "$work/wasm.yaml")
  echo "pipeline ${cmd%_fresh}: 1 native stage ${n} ms; + 10 WASM stages ${w} ms"
done
