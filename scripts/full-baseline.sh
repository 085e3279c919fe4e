#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is missing, build
# the runner, start a local sandbox Ceph cluster, run pipelines/full-baseline.yaml
# against it, stop the cluster, and print where the report is.
#
# `scripts/full-baseline.sh --lab` is its multi-host form (root): a lab of
# 3 cluster hosts with 2 OSDs each and 2 client hosts, each a network
# namespace with its own sshd (`pipeline sandbox up --hosts 3 --clients 2`),
# and pipelines/lab-baseline.yaml over the lab's inventory.
set -euo pipefail
suite=pipelines/full-baseline.yaml
up_args=()
if [ "${1:-}" = "--lab" ]; then
  shift
  suite=pipelines/lab-baseline.yaml
  up_args=(--hosts 3 --clients 2)
fi
cd "$(dirname "$0")/.."

scripts/install-deps.sh
plugins/guests/build.sh --rust   # the ceph-df WASM plugin full-baseline uses
cargo build --release --bin pipeline
pipeline=./target/release/pipeline

export PIPELINE_SANDBOX_DIR="${PIPELINE_SANDBOX_DIR:-/tmp/pipeline-sandbox}"
"$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR" "${up_args[@]}"
trap '"$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR"' EXIT
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

status=0
"$pipeline" run "$suite" "$@" || status=$?
echo "pools left on the cluster after the run: $(ceph osd pool ls | tr '\n' ' ')"
exit $status
