#!/usr/bin/env bash
# Runs the tests that use the Ceph cluster N times in a row (default 10),
# each time against a freshly started sandbox, and stops at the first
# failure. The evidence that these tests do not flake:
#
#   scripts/ceph-tests-repeat.sh [N]
#
# Prints one line per round (tests passed, seconds) and a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-10}"
# The sandbox binds fixed ports (3300, 6789, 7480) and the tests fixed
# iperf3 ports: one test run per machine at a time. A second one stops here
# instead of tearing down the first one's cluster.
exec 9>/tmp/pipeline-tests.lock
if ! flock -n 9; then
  echo "error: another test run holds /tmp/pipeline-tests.lock (scripts/test.sh or scripts/ceph-tests-repeat.sh); wait for it to finish" >&2
  exit 1
fi
cargo build -q --workspace --all-targets
bin=./target/debug/pipeline
export PIPELINE_SANDBOX_DIR="${PIPELINE_SANDBOX_DIR:-/tmp/pipeline-repeat-sandbox}"
# The live tiers these tests belong to (pipeline-test-tiers): on.
export PIPELINE_TEST_TIERS=cluster,hosts
trap '$bin sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true' EXIT
# The test binaries that talk to the cluster.
tests=(--test ceph --test faults --test recovery --test objgw --test multi_client)
passed_rounds=0
for round in $(seq 1 "$rounds"); do
  $bin sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true
  # On bluestore, as scripts/test.sh starts it.
  $bin sandbox up --bluestore --dir "$PIPELINE_SANDBOX_DIR" >/dev/null
  eval "$($bin sandbox env --dir "$PIPELINE_SANDBOX_DIR")"
  log="$(mktemp)"
  start=$(date +%s)
  set +e
  cargo test -q -p pipeline "${tests[@]}" >"$log" 2>&1
  status=$?
  cargo test -q -p pipeline-wasm --test ceph_plugins >>"$log" 2>&1
  status=$((status + $?))
  set -e
  secs=$(( $(date +%s) - start ))
  passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^passed/) p += $i } END { print p + 0 }' "$log")
  failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^failed/) f += $i } END { print f + 0 }' "$log")
  echo "round $round/$rounds: fresh sandbox, $passed passed, $failed failed, ${secs}s"
  if [ "$status" -ne 0 ]; then
    echo "round $round failed; its output:"
    cat "$log"
    exit 1
  fi
  rm -f "$log"
  passed_rounds=$round
done
echo "$passed_rounds consecutive rounds passed, each on a fresh sandbox"
