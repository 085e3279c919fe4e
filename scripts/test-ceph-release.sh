#!/usr/bin/env bash
# The release matrix: runs the Ceph-facing integration tests against another
# Ceph release, in a Debian root that carries it (scripts/ceph-root.sh builds
# or reuses it), inside a network namespace and a mount namespace of its own.
#
#   scripts/test-ceph-release.sh 18.2|20.2 [TEST-BINARY[:FILTER]]...
#
# The test binaries are this work tree's debug build (built here on Debian 12,
# run inside the root); the work tree is bind-mounted into the root at its own
# path, so the paths compiled into them hold there too. Inside, the root's own
# `ceph`, `rados`, `rbd`, `fio`, `radosgw` and `sshd` are the ones on PATH: the
# sandbox cluster those tests run against is that release's, started with
# `pipeline sandbox up` like on the host. The namespace has its own loopback,
# so the sandbox's fixed ports never meet the host's sandbox, and no route out.
#
# Called by scripts/test.sh for each release of the matrix; also usable alone
# (after `cargo build --workspace --all-targets`).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

release="${1:?usage: scripts/test-ceph-release.sh 18.2|20.2 [TEST-BINARY[:FILTER]]...}"
shift
# What runs against each release: full-baseline and every native Ceph stage
# (ceph), the object gateways with the counter cross-check and ownership of a
# pre-existing bucket (objgw), SIGKILL then `pipeline cleanup` (recovery), the
# load from several sshd hosts (multi_client), and the sandbox's own lifecycle
# (memstore and bluestore, started and stopped).
tests=("$@")
((${#tests[@]})) || tests=(lifecycle ceph objgw recovery multi_client)

root="$(scripts/ceph-root.sh "$release")"
# The build's folder (CARGO_TARGET_DIR may put it outside the work tree): bound too.
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
# Never a folder that is not one of ours: its /tmp is emptied below.
[ -n "$root" ] && [ -f "$root/.pipeline-root" ] || { echo "error: '$root' is not a release root" >&2; exit 1; }

# The test executables, by target name, from cargo's own account of the build.
declare -A exe=()
while IFS=$'\t' read -r name path; do
  exe[$name]="$path"
done < <(cargo test --workspace --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"] + "\t" + m["executable"])
')

plan=""
for t in "${tests[@]}"; do
  name="${t%%:*}"
  filter=""
  [[ "$t" == *:* ]] && filter="${t#*:}"
  [ -n "${exe[$name]:-}" ] || { echo "error: no test binary named '$name' in this build" >&2; exit 2; }
  plan+="$name"$'\t'"${exe[$name]}"$'\t'"$filter"$'\n'
done

log_dir="$target/ceph-release-$release"
rm -rf "$log_dir"
mkdir -p "$log_dir"
echo "== Ceph $release: $(chroot "$root" ceph --version) in $root"
started=$(date +%s)

# Everything from here runs in new mount, network and PID namespaces: the
# binds and the loopback vanish with the last process, whatever happens to
# this script, and every process left is killed when it ends. The PID
# namespace also lets two releases run at once (scripts/test.sh does):
# the tests that find, signal or count workers and daemons by pgrep see
# only their own release's.
set +e
PLAN="$plan" ROOT="$root" REPO="$repo" TARGET="$target" LOG_DIR="$log_dir" \
  unshare --mount --net --pid --fork --propagation private bash -euo pipefail -c '
  ip link set lo up
  for d in proc sys dev "$REPO" "$TARGET"; do mkdir -p "$ROOT/$d"; done
  mount -t proc proc "$ROOT/proc"
  mount --rbind /sys "$ROOT/sys"
  mount --rbind /dev "$ROOT/dev"
  mount --bind "$REPO" "$ROOT$REPO"
  mountpoint -q "$ROOT$TARGET" || mount --bind "$TARGET" "$ROOT$TARGET"
  # The root keeps a /tmp of its own (the sandbox, the tests folders, sshd keys): emptied first.
  find "$ROOT/tmp" -mindepth 1 -delete
  exec chroot "$ROOT" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 PLAN="$PLAN" LOG_DIR="$LOG_DIR" PIPELINE="$TARGET/debug/pipeline" \
    bash "$REPO/scripts/in-ceph-root.sh"
'
status=$?
set -e
echo "== Ceph $release: tests ended with status $status after $(($(date +%s) - started)) s (logs in $log_dir)"
exit "$status"
