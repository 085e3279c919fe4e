#!/usr/bin/env bash
# The same s3-bench GET load from 1 and from 2 client hosts (real sshd
# "hosts" on 127.0.0.2 and 127.0.0.3 of this machine), against the sandbox
# gateway, beside the stage run in-process (no worker): the aggregate ops/s
# of each, their ratio, and what the runner itself costs per worker (its
# CPU and memory, and the workers' own). benches/multi_client.py does the
# runs; REPS repetitions (default 3), interleaved, medians.
#   benches/multi_client.sh
#   REPS=1 SECONDS_PER_RUN=5 benches/multi_client.sh   # a quick look
# CAVEAT: on one 2-core machine the "hosts" and the gateway share the same
# cores; two hosts here cannot show the scaling two real machines would.
# Starts its own sandbox unless PIPELINE_SANDBOX_DIR names a running one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh >/dev/null
cargo build --release -q -p pipeline --bin pipeline
pipeline="$root/target/release/pipeline"

work="$(mktemp -d /tmp/pipeline-multi-client-bench.XXXXXX)"
cleanup() {
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  if [ -n "${started_sandbox:-}" ]; then "$pipeline" sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "${PIPELINE_SANDBOX_DIR:-}" ] || ! "$pipeline" sandbox status --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1; then
  export PIPELINE_SANDBOX_DIR=/tmp/pipeline-multi-client-bench-sandbox
  "$pipeline" sandbox up --dir "$PIPELINE_SANDBOX_DIR" >/dev/null
  started_sandbox=1
fi
eval "$("$pipeline" sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

# Two SSH "hosts": one sshd on 127.0.0.2 and 127.0.0.3, keys made here.
port="${PORT:-2298}"
ssh-keygen -q -t ed25519 -N "" -f "$work/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$work/key"
cp "$work/key.pub" "$work/authorized_keys"
cat > "$work/sshd_config" <<CONF
ListenAddress 127.0.0.2:$port
ListenAddress 127.0.0.3:$port
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $work/sshd.pid
CONF
mkdir -p /run/sshd
/usr/sbin/sshd -f "$work/sshd_config" -E "$work/sshd.log"
for a in 127.0.0.2 127.0.0.3; do echo "[$a]:$port $(cut -d' ' -f1,2 "$work/host_key.pub")"; done > "$work/known_hosts"
for _ in $(seq 50); do ssh -i "$work/key" -o BatchMode=yes -o UserKnownHostsFile="$work/known_hosts" -p "$port" root@127.0.0.3 true 2>/dev/null && break; sleep 0.1; done

PIPELINE="$pipeline" WORK="$work" PORT="$port" python3 benches/multi_client.py
