#!/usr/bin/env bash
# Does the telemetry's memory stay flat over a long stage? Runs
# benches/telemetry-hour.yaml (one fio stage of SECONDS, default 3600, with
# the cluster and host watch on) against the sandbox and reads, every
# minute, the resident memory of the runner (`pipeline run`) and of its
# cluster sampler (the Python beside it), from /proc/PID/status. Prints one
# line a minute and, at the end, the growth from the first minute to the
# last, per hour. Starts its own sandbox unless PIPELINE_SANDBOX_DIR names a
# running one. PIPELINE: the runner binary to use (default: a release build).
# Beside another test run (whose sandbox holds the fixed Ceph ports), in a
# network namespace of its own:
#   unshare --net --fork sh -c "ip link set lo up; benches/telemetry-hour.sh"
#   benches/telemetry-hour.sh
#   SECONDS_OF_LOAD=600 benches/telemetry-hour.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [ -z "${PIPELINE:-}" ]; then
  scripts/install-deps.sh >/dev/null
  cargo build --release -q -p pipeline --bin pipeline
  PIPELINE="$root/target/release/pipeline"
fi
seconds="${SECONDS_OF_LOAD:-3600}"
work="$(mktemp -d /tmp/pipeline-telemetry-hour.XXXXXX)"
cleanup() {
  if [ -n "${started_sandbox:-}" ]; then "$PIPELINE" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null || true; fi
}
trap cleanup EXIT
if [ -z "${PIPELINE_SANDBOX_DIR:-}" ] || ! "$PIPELINE" sandbox status --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1; then
  export PIPELINE_SANDBOX_DIR=/tmp/pipeline-telemetry-hour-sandbox
  "$PIPELINE" sandbox up --dir "$PIPELINE_SANDBOX_DIR" >/dev/null
  started_sandbox=1
fi
eval "$("$PIPELINE" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

"$PIPELINE" run benches/telemetry-hour.yaml --out "$work/run" --set "seconds=$seconds" >"$work/run.log" 2>&1 &
runner=$!
# Sampled from Python, not with `sleep`: the tests look for stray `sleep`s.
RUNNER="$runner" python3 - <<'PY'
import os, re, time
runner = int(os.environ["RUNNER"])

def status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) for k, v in (l.split(":", 1) for l in f) if k in ("VmRSS", "VmHWM")}
    except OSError:
        return {}

def sampler():
    # The cluster sampler: the runner's child running `python3 -c <sampler.py>`.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == runner and b"cluster watch's sampler" in cmd:
            return int(entry)
    return None

print("minute  runner_rss_kib  runner_hwm_kib  sampler_rss_kib")
rows = []
minute = 0
while True:
    time.sleep(60)
    minute += 1
    r = status(runner)
    if not r:
        break
    s_pid = sampler()
    s = status(s_pid).get("VmRSS") if s_pid else None
    rows.append((minute, r["VmRSS"], s))
    print(minute, r["VmRSS"], r["VmHWM"], s if s is not None else "-", flush=True)
# From the second minute (the fill is over by then) to the last.
base = [x for x in rows if x[0] == 2]
if base and rows[-1][0] > 3:
    (m0, r0, s0), (m1, r1, s1) = base[0], rows[-1]
    hours = (m1 - m0) / 60
    print(f"runner: {r0} KiB at minute {m0}, {r1} KiB at minute {m1}: {(r1 - r0) / hours:+.0f} KiB per hour")
    if s0 and s1:
        print(f"cluster sampler: {s0} KiB at minute {m0}, {s1} KiB at minute {m1}: {(s1 - s0) / hours:+.0f} KiB per hour")
PY
wait "$runner" || { echo "the run failed:" >&2; tail -20 "$work/run.log" >&2; exit 1; }
tail -3 "$work/run.log"
echo "run folder: $work/run"
