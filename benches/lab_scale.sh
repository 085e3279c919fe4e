#!/usr/bin/env bash
# How the runner scales with its client hosts: the same s3-bench GET load
# from 1, 2, 4, 8 and 16 client hosts of a lab (network namespaces that run
# only sshd, `pipeline sandbox up --hosts 1 --clients 16`), all started
# together (s3-bench starts its hosts at one instant), against the lab's one gateway. For each host count:
# the coordinator's CPU and peak memory, the start skew from the workers'
# own clocks, each worker's peak memory, the time from the end of the
# measured phase to the run's exit (collecting and merging the hosts'
# results: what warp users see hang at 30 clients), and whether host=all's
# latency histogram is exactly the merge of the hosts' own, checked here by
# decoding the HDR histograms in results.json independently of the runner.
# benches/lab_scale.py does the runs; REPS repetitions (default 3),
# interleaved, medians.
#   sudo benches/lab_scale.sh
#   HOSTS="1 2 4 8 16 32" CLIENTS=32 sudo -E benches/lab_scale.sh   # further
#   REPS=1 SECONDS_PER_RUN=5 sudo -E benches/lab_scale.sh           # a quick look
# Needs root (the lab does). CAVEAT: the "hosts" share this machine's two
# cores with each other and with the gateway: the aggregate rate cannot grow
# with the host count here; what this measures is the runner's own cost and
# correctness as hosts are added.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[ "$(id -u)" -eq 0 ] || { echo "error: the lab needs root (network namespaces); run with sudo" >&2; exit 1; }
scripts/install-deps.sh >/dev/null
cargo build --release -q -p pipeline --bin pipeline
pipeline="$root/target/release/pipeline"

clients="${CLIENTS:-16}"
export PIPELINE_SANDBOX_DIR="${PIPELINE_SANDBOX_DIR:-/tmp/pipeline-lab-scale-bench}"
work="$(mktemp -d /tmp/pipeline-lab-scale.XXXXXX)"
cleanup() {
  "$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
up_started=$(date +%s.%N)
"$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR" --hosts 1 --osds-per-host 3 --clients "$clients" --memstore 1G >"$work/up.log"
echo "lab of 1 cluster host (3 memstore OSDs, mon, mgr, radosgw) + $clients client hosts up in $(awk -v a="$up_started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

PIPELINE="$pipeline" WORK="$work" python3 benches/lab_scale.py
