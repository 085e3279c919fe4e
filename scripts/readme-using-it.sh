#!/usr/bin/env bash
# Runs the README's "Using it" block as it stands (issue #21): the one ```sh
# block under "## Using it" in README.md, taken from the README each time (no
# copy of its commands lives anywhere else), run command by command in one
# `bash -euo pipefail` shell from the repo root, the way a reader pastes it.
#
#   scripts/readme-using-it.sh
#
# Checks: every command exits 0; `pipeline run` prints a report path, that
# report.md exists and its results.json says "status": "succeeded"; after
# `pipeline sandbox down` no sandbox daemon (ceph-mon, ceph-mgr, ceph-osd,
# radosgw, docker-registry) is left running. On a failure it names the
# command (README line number and text), its exit status and its output.
#
# Where it runs: new network, mount and PID namespaces. The network namespace
# has its own loopback and no route out, so the sandbox's fixed ports (3300,
# 6789, 7480, 5055) never meet another cluster on this host, and the block runs
# offline: it expects what needs the network to be in place already
# (scripts/install-deps.sh's packages and Rust target, the crates of both
# workspaces fetched, the client roots of scripts/ceph-root.sh built), as
# scripts/test.sh has it when it runs this (tier `readme`). In the mount
# namespace a temporary folder is the block's /tmp (so its sandbox,
# /tmp/pipeline-sandbox, is its own) and its runs/ (so `pipeline run` writes
# there, not into the work tree's runs/); its plugin caches (XDG_CACHE_HOME)
# are there too. The PID namespace ends every process the block started when
# the block ends, whatever happened, and lets the daemon check see only them.
# The folder is removed at the end.
#
# The block assumes cargo's default target folder (`export
# PATH=$PWD/target/release:$PATH`): when this build's target folder is
# elsewhere (CARGO_TARGET_DIR), it is bind-mounted at ./target inside the
# mount namespace, so the block's `cargo build --release` and its PATH use the
# same binaries. The block gets a fresh environment (PATH, HOME, the Rust and
# cargo homes), not the caller's: no CEPH_CONF or PIPELINE_SANDBOX_DIR of a
# test run leaks into it.
#
# Needs root (namespaces; the block's scripts/ceph-root.sh too).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

[ "$(id -u)" -eq 0 ] || { echo "error: $0 needs root (unshare: network, mount and PID namespaces)" >&2; exit 1; }

# The block: the first ```sh fence in the "## Using it" section, up to its
# closing fence; each line prefixed with its README line number.
block="$(awk '
  /^## / { in_section = ($0 == "## Using it") ; if (!in_section && done) exit }
  in_section && !in_block && !done && /^```sh[[:space:]]*$/ { in_block = 1; next }
  in_section && in_block && /^```/ { in_block = 0; done = 1; next }
  in_section && in_block { print NR "\t" $0 }
  END { if (in_block) exit 3 }
' README.md)" || { echo "error: README.md: the \`\`\`sh block under \"## Using it\" is not closed" >&2; exit 1; }
[ -n "$block" ] || { echo "error: README.md has no \`\`\`sh block under \"## Using it\"" >&2; exit 1; }

# Commands: a line, joined with the next ones while it ends with a backslash;
# blank lines and comment lines are not commands.
nums=()
cmds=()
pending=""
pending_num=""
while IFS=$'\t' read -r num text; do
  if [ -z "$pending" ]; then
    [[ "$text" =~ ^[[:space:]]*(#.*)?$ ]] && continue
    pending_num="$num"
  fi
  if [[ "$text" == *\\ ]]; then
    pending+="${text}"$'\n'
    continue
  fi
  pending+="$text"
  nums+=("$pending_num")
  cmds+=("$pending")
  pending=""
done <<<"$block"
[ -z "$pending" ] || { nums+=("$pending_num"); cmds+=("$pending"); }
total=${#cmds[@]}

# The build's target folder, from cargo (CARGO_TARGET_DIR, a config's build.target-dir).
target="$(cargo metadata --offline --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

work="$(mktemp -d "${TMPDIR:-/tmp}/readme-using-it.XXXXXX")"
made=() # mount points this script created in the work tree (removed again)
cleanup() {
  rm -rf "$work"
  local d
  for d in "${made[@]}"; do rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
mkdir -p "$work/runs" "$work/cache" "$work/logs"
binds=("$work/runs" "$repo/runs")
[ -d "$repo/runs" ] || { mkdir "$repo/runs"; made+=("$repo/runs"); }
if [ "$(realpath -m "$target")" != "$(realpath -m "$repo/target")" ]; then
  [ -d "$repo/target" ] || { mkdir "$repo/target"; made+=("$repo/target"); }
  mkdir -p "$target"
  binds+=("$target" "$repo/target")
fi

# The driver: the block's commands verbatim, each in a brace group of the one
# shell (so `export` and `eval` carry over to the next), its output into a log
# of its own. errexit ends the shell at a failing simple command (the EXIT trap
# names it); a failing `a && b` does not trip errexit, so each command's status
# is checked after it too.
driver="$work/block.sh"
{
  cat <<'EOF'
__logs=/tmp/logs
__n=0
__fail() { # README-LINE STATUS
  trap - EXIT
  {
    echo "FAILED: README.md line $1 exited with status $2:"
    sed -n "$1p" README.md | sed 's/^/    /'
    echo "its output:"
    sed 's/^/    | /' "$__logs/$1.log"
  } >/tmp/failed.txt # not to stderr: after errexit the trap runs inside the command's redirection
  exit 1
}
__begin() { # N README-LINE
  __n=$2
  __t0=$(date +%s)
  echo "[$1/__TOTAL__] README.md:$2 \$ $(sed -n "$2p" README.md)"
}
__end() { # README-LINE STATUS
  [ "$2" -eq 0 ] || __fail "$1" "$2"
  echo "    ok ($(($(date +%s) - __t0)) s)"
}
trap 'rc=$?; [ "$__n" = 0 ] || __fail "$__n" "$rc"' EXIT
EOF
  for ((i = 0; i < total; i++)); do
    n="${nums[$i]}"
    printf '__begin %d %s\n{ %s\n} >"$__logs/%s.log" 2>&1 </dev/null\n__end %s $?\n' \
      "$((i + 1))" "$n" "${cmds[$i]}" "$n" "$n"
  done
  echo 'trap - EXIT'
} | sed "s/__TOTAL__/$total/" >"$driver"

# What runs in the namespaces: the block, then the checks.
inner="$work/inner.sh"
cat >"$inner" <<'EOF'
set -euo pipefail
ip link set lo up
while (($#)); do mount --bind "$1" "$2"; shift 2; done
mount --bind "$WORK" /tmp
cd "$REPO"
set +e
echo "== README.md \"Using it\": $TOTAL commands, offline, in namespaces of their own (work folder $WORK)"
started=$(date +%s)
env -i PATH="$PATH" HOME="$HOME" USER=root LOGNAME=root LANG=C.UTF-8 TERM=dumb \
  ${CARGO_HOME:+CARGO_HOME="$CARGO_HOME"} ${RUSTUP_HOME:+RUSTUP_HOME="$RUSTUP_HOME"} \
  XDG_CACHE_HOME=/tmp/cache \
  bash -euo pipefail /tmp/block.sh || {
  rc=$?
  cat /tmp/failed.txt >&2 2>/dev/null || echo "FAILED: the block's shell ended with status $rc" >&2
  exit 1
}
problems=()

# `pipeline run` printed its report path, the report is there and the run succeeded.
run_log=""
for f in /tmp/logs/*.log; do
  n=$(basename "$f" .log)
  sed -n "${n}p" README.md | grep -q '^pipeline run ' && run_log="$f"
done
if [ -z "$run_log" ]; then
  problems+=("the block has no \`pipeline run\` command")
else
  report=$(sed -n 's/^report: //p' "$run_log" | tail -n 1)
  if [ -z "$report" ]; then
    problems+=("\`pipeline run\` printed no 'report: PATH' line")
  elif [ ! -f "$report" ]; then
    problems+=("\`pipeline run\` printed 'report: $report', and there is no such file")
  else
    status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$(dirname "$report")/results.json" 2>&1)
    [ "$status" = succeeded ] || problems+=("$(dirname "$report")/results.json: status '$status', not succeeded")
    echo "report: $report (results.json status: $status, $(wc -l <"$report") lines; the block's own runs/, removed at the end)"
    grep '^run ' "$run_log" | sed 's/^/    /'
  fi
fi

# `pipeline sandbox down` left no daemon behind (this PID namespace's processes only).
left=$(pgrep -a -f '(^|/)(ceph-mon|ceph-mgr|ceph-osd|ceph-mds|radosgw|docker-registry)( |$)' || true)
[ -z "$left" ] || problems+=("still running after the block: $(echo "$left" | tr '\n' ';')")

if ((${#problems[@]})); then
  printf 'FAILED: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "== README.md \"Using it\" passed: $TOTAL commands in $(($(date +%s) - started)) s, no sandbox daemon left"
EOF

WORK="$work" REPO="$repo" TOTAL="$total" \
  unshare --net --mount --pid --fork --mount-proc --propagation private \
  bash "$inner" "${binds[@]}"
