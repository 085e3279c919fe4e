#!/usr/bin/env bash
# Builds the guest plugins from source: the examples into plugins/wasm/
# (where pipelines find them by name), the test guests of
# plugins/guests/testing/ into plugins/guests/target/NAME.wasm (where the
# runner's tests find them), the Rust ones with cargo for wasm32-wasip2, the
# Python one with componentize-py. Needs: `rustup target add wasm32-wasip2`,
# `pip install componentize-py==0.25.1`.
#
# Interface versions: ceph-df targets pipeline:stage@0.2.0 (the SDK's root
# API); the test guests (testing/*, through pipeline_plugin_sdk::v0_1) and
# the Python osd-perf stay on 0.1.0, which the runner keeps running. A guest's
# export names its version: `pipeline:stage/plugin@X.Y.Z`.
#
#   plugins/guests/build.sh            # everything
#   plugins/guests/build.sh --rust     # Rust guests only
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../wasm"
mkdir -p "$out"

# Its own target folder, whatever CARGO_TARGET_DIR says: the copies below
# read from it, and a host build's target folder has no wasm32 builds to share.
cargo build --manifest-path "$here/Cargo.toml" --target-dir "$here/target" --release --target wasm32-wasip2 --workspace
for crate in ceph-df; do
  cp "$here/target/wasm32-wasip2/release/${crate//-/_}.wasm" "$out/$crate.wasm"
done
for dir in "$here"/testing/*/; do
  crate="$(basename "$dir")"
  cp "$here/target/wasm32-wasip2/release/${crate//-/_}.wasm" "$here/target/${crate//-/_}.wasm"
done

if [ "${1:-}" != "--rust" ]; then
  command -v componentize-py >/dev/null || { echo "error: componentize-py not found (pip install componentize-py==0.25.1)" >&2; exit 1; }
  py="$here/python-osd-perf"
  # osd-perf is a 0.1.0 plugin: its bindings come from the 0.1.0 package.
  (cd "$py" && componentize-py -d "$here/../wit/pipeline-stage@0.1.0" -w stage componentize app -o "$out/osd-perf.wasm")
fi
ls -l "$out"
