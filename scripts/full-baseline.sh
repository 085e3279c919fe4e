#!/usr/bin/env bash
# The main job: on a fresh Debian 12 machine, install what is missing, build
# the runner, start a local sandbox Ceph cluster, run pipelines/full-baseline.yaml
# against it, stop the cluster, and print where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
plugins/guests/build.sh --rust   # the ceph-df WASM plugin full-baseline uses
cargo build --release --bin pipeline
pipeline=./target/release/pipeline

export PIPELINE_SANDBOX_DIR="${PIPELINE_SANDBOX_DIR:-/tmp/pipeline-sandbox}"
"$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR"
trap '"$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR"' EXIT
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

status=0
"$pipeline" run pipelines/full-baseline.yaml "$@" || status=$?
echo "pools left on the cluster after the run: $(ceph osd pool ls | tr '\n' ' ')"
exit $status
