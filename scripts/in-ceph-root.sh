#!/usr/bin/env bash
# Inside a release root (scripts/test-ceph-release.sh puts us here, chrooted,
# in namespaces of our own): starts that release's sandbox cluster and runs
# the planned test binaries against it. PLAN: lines of NAME<TAB>EXE<TAB>FILTER.
set -euo pipefail
cd "$(dirname "$0")/.."

export PIPELINE_SANDBOX_DIR=/tmp/pipeline-test-sandbox
# Every live tier on (pipeline-test-tiers): the sandbox below, sshd hosts inside the root.
export PIPELINE_TEST_TIERS=cluster,hosts
pipeline="${PIPELINE:-./target/debug/pipeline}"
status=0

run_one() { # name exe filter
  local name=$1 exe=$2 filter=$3 dir=runner/cli args=()
  [ -n "$filter" ] && args+=("$filter")
  # the sandbox's lifecycle test (ignored on plain `cargo test`) starts and stops sandboxes of its own
  [ "$name" = lifecycle ] && { dir=runner/sandbox; args+=(--ignored); }
  echo "-- $name ${filter:-(all)}"
  set +e
  (cd "$dir" && "$exe" "${args[@]}") 2>&1 | tee "$LOG_DIR/$name.log"
  local rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || status=1
}

# The lifecycle test needs the Ceph ports to itself: it goes first, before the shared sandbox.
while IFS=$'\t' read -r name exe filter; do
  [ "$name" = lifecycle ] && run_one "$name" "$exe" "$filter"
done <<<"$PLAN"

if grep -qvP '^(lifecycle\t|$)' <<<"$PLAN"; then
  "$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true
  "$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR"
  trap '"$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true' EXIT
  eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"
  while IFS=$'\t' read -r name exe filter; do
    [ -n "$name" ] && [ "$name" != lifecycle ] && run_one "$name" "$exe" "$filter"
  done <<<"$PLAN"
fi
exit "$status"
