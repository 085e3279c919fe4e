#!/usr/bin/env bash
# The test command (README, and exactly what .ci/run runs): installs what is
# missing, builds, checks formatting and lints, starts a sandbox Ceph cluster,
# runs every unit and integration test against it, and stops the cluster.
# Then the release matrix: the Ceph-facing integration tests again against
# each release in PIPELINE_CEPH_RELEASES (default "18.2 20.2"; empty skips
# it), each in a Debian root of its own (scripts/test-ceph-release.sh); the
# lab (tier lab) and the .deb (tier package). Last, the README's "Using it"
# block as it stands (tier readme, scripts/readme-using-it.sh), over a
# release build made in the background. The last line says where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."

# The sandbox binds fixed ports (3300, 6789, 7480) and the tests fixed
# iperf3 ports: one test run per machine at a time. A second one stops here
# instead of tearing down the first one's cluster.
exec 9>/tmp/pipeline-tests.lock
if ! flock -n 9; then
  echo "error: another test run holds /tmp/pipeline-tests.lock (scripts/test.sh or scripts/ceph-tests-repeat.sh); wait for it to finish" >&2
  exit 1
fi
# Where the time goes, one "name N s" per phase, printed at the end: CI has
# a budget (45 minutes), and this says which phase to cut.
run_started=$(date +%s)
phase_started=$run_started
times=""
phase_done() { # name
  local now
  now=$(date +%s)
  times+=" $1 $((now - phase_started)) s;"
  phase_started=$now
}
scripts/install-deps.sh
# One build per run: incremental caches would only add gigabytes to the disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free at the start"
releases="${PIPELINE_CEPH_RELEASES-18.2 20.2}"
# The Debian roots with Ceph 18.2 and 20.2 (about 3 minutes each on a fresh
# machine, mostly download and unpacking) are built while the workspace
# compiles: the release matrix runs in them, the client-roots test and the
# README's "Using it" block (which runs offline) take them as client roots.
roots_log="$(mktemp)"
(for r in 18.2 20.2; do scripts/ceph-root.sh "$r" >/dev/null || exit 1; done) >"$roots_log" 2>&1 &
roots_pid=$!
# The example WASM plugins, from source, into plugins/wasm/ (tests and full-baseline use them).
plugins/guests/build.sh
cargo fmt --manifest-path plugins/guests/Cargo.toml --all -- --check
cargo clippy --manifest-path plugins/guests/Cargo.toml --release --target wasm32-wasip2 --workspace -- -D warnings
phase_done "deps and guests"
cargo build --workspace --all-targets
phase_done build
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
phase_done "fmt and clippy"

# The release build the README's block runs (`cargo build --release`, the
# longest compile here: nothing else makes release artifacts), started now
# and niced: it takes the CPU the live tests leave idle while they wait on
# Ceph, and the block's own build is then a no-op. Waited for after the
# release matrix, before the lab tier (the package tier packages it).
release_log="$(mktemp)"
nice -n 19 cargo build --release >"$release_log" 2>&1 &
release_pid=$!
trap 'kill "$release_pid" 2>/dev/null || true' EXIT

wait "$roots_pid" || { cat "$roots_log" >&2; echo "error: building the release roots failed (log above)" >&2; exit 1; }
# The client-roots test runs rados, rbd and fio from them against the host's 16.2 sandbox.
export PIPELINE_CLIENT_ROOTS="${PIPELINE_ROOTS:-/var/cache/pipeline/roots}"
rm -f "$roots_log"

# The sandbox's own lifecycle test needs the Ceph ports to itself: run it first.
cargo test -p pipeline-sandbox --test lifecycle -- --ignored
phase_done "roots and lifecycle"

# The Ceph integration tests run real pipelines against a throw-away cluster,
# its OSDs on bluestore (sparse files): 16.2's memstore keeps a used-bytes
# count that drifted below zero over the test binaries (osd.1 at "16 EiB"
# used, OSD_FULL, every later write blocked) once in several runs; bluestore
# has no such count, and is what clusters run. Measured here, the five test
# binaries that use the cluster the most took 460 s on bluestore (alone) and
# 448 s on memstore (in a CI run).
export PIPELINE_SANDBOX_DIR="${PIPELINE_SANDBOX_DIR:-/tmp/pipeline-test-sandbox}"
./target/debug/pipeline sandbox down --dir "$PIPELINE_SANDBOX_DIR" >/dev/null 2>&1 || true
./target/debug/pipeline sandbox up --bluestore --dir "$PIPELINE_SANDBOX_DIR"
trap './target/debug/pipeline sandbox down --dir "$PIPELINE_SANDBOX_DIR"; kill "$release_pid" 2>/dev/null || true' EXIT
eval "$(./target/debug/pipeline sandbox env --dir "$PIPELINE_SANDBOX_DIR")"

# Every live tier but lab, package and readme on (pipeline-test-tiers; plain
# `cargo test` lists them as ignored): the sandbox above, sshd hosts and
# registries the tests start, the release roots, the integrations (JUnit XSD,
# PostgreSQL, Prometheus). lab, package and readme run later, on their own.
export PIPELINE_TEST_TIERS=cluster,hosts,registry,roots,integrations
# Ceph tests share one cluster: they take a lock among themselves, the rest run in parallel.
log="$(mktemp)"
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

./target/debug/pipeline sandbox down --dir "$PIPELINE_SANDBOX_DIR"
trap 'kill "$release_pid" 2>/dev/null || true' EXIT
phase_done tests

# The release matrix, after the host's sandbox is down (the CPU is the host's
# to share, the ports are not: each release has network and PID namespaces
# of its own). The releases run at once, each into a log of its own printed
# when all have ended (one after the other took 721 s in CI, at once about
# 430 s: their tests mostly wait on their clusters), beside the end of the
# niced release build, as the tests above did: they check what the runner
# does, not how fast.
matrix=""
declare -A release_pids=() release_logs=()
for r in $releases; do
  release_logs[$r]="$(mktemp)"
  scripts/test-ceph-release.sh "$r" >"${release_logs[$r]}" 2>&1 &
  release_pids[$r]=$!
done
for r in $releases; do
  set +e
  wait "${release_pids[$r]}"
  rc=$?
  set -e
  tee -a "$log" <"${release_logs[$r]}"
  rm -f "${release_logs[$r]}"
  [ "$rc" -eq 0 ] || status=1
  matrix+=" $r $([ "$rc" -eq 0 ] && echo passed || echo FAILED);"
done
phase_done "Ceph releases"

# The background release build is waited for before the lab: the lab's
# verdict tests read this machine's CPU, and a client held to one thread is
# named by one core busy while the others idle. Beside a build on every core
# (niced or not), the scheduler moves that thread between the cores and
# neither is full for long (seen locally with nice -n 19 loops on both
# cores). The package tier packages the build and the README's block finds
# it done. Should it have failed, build-deb.sh's own build fails and the
# package test shows its output.
wait "$release_pid" || echo "warning: the background release build failed; build-deb.sh's and the README block's builds will say why" >&2
trap - EXIT
rm -f "$release_log"
phase_done "release build (rest)"

# The lab (tier lab): several hosts in network namespaces, each with its own
# sshd and OSDs, built and torn down by the tests themselves. On its own,
# after the host sandbox is down: starting it takes both cores.
set +e
lab_log="$(mktemp)"
PIPELINE_TEST_TIERS=lab cargo test -p pipeline --test lab 2>&1 | tee "$lab_log" | tee -a "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || status=1
lab="lab: $([ "$rc" -eq 0 ] && echo passed || echo FAILED)"
# A failure's reason goes into the summary too: the end of the output is
# what a CI page shows.
if [ "$rc" -ne 0 ]; then
  lab+=$'\n'"$(grep -A3 -m2 'panicked at' "$lab_log" | cut -c1-400)"
fi
rm -f "$lab_log"
phase_done lab

# The Debian package (tier package): scripts/build-deb.sh's .deb installed
# into an overlay of the trixie root, its completion tried in a login bash
# under tmux. It packages the release binary built above.
set +e
package_log="$(mktemp)"
PIPELINE_TEST_TIERS=package cargo test -p pipeline --test package 2>&1 | tee "$package_log" | tee -a "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || status=1
package="package: $([ "$rc" -eq 0 ] && echo passed || echo FAILED)"
if [ "$rc" -ne 0 ]; then
  package+=$'\n'"$(grep -A3 -m2 'panicked at' "$package_log" | cut -c1-400)"
fi
rm -f "$package_log"
phase_done package

# The README's "Using it" block, verbatim, in namespaces of its own (tier
# readme, scripts/readme-using-it.sh), over the release build waited for
# before the package tier. Should that build have failed, the block's
# `cargo build --release` fails too, and the test shows its output.
set +e
PIPELINE_TEST_TIERS=readme cargo test -p pipeline --test readme_using_it 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || status=1
readme="README \"Using it\": $([ "$rc" -eq 0 ] && echo passed || echo FAILED)"
phase_done readme

# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
[ -z "$matrix" ] || echo "Ceph releases:$matrix host $(ceph --version | awk '{print $3}')"
echo "$lab"
echo "$package"
echo "$readme"
echo "time:$times total $(($(date +%s) - run_started)) s"
rm -f "$log"
exit "$status"
