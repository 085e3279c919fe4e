#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz, nightly) of every
# input surface: pipeline YAML -> compile -> plan, templates, inventories,
# every tool-output parser, results.json as report/compare load it, what
# an S3 or Swift gateway answers, and what a remote worker sends.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 600, all)
#
# Seeds come from the test data (suites, inventories, captured tool outputs,
# real results.json files). Each target runs for the given time; a crash,
# a hang (-timeout) or running out of memory (-rss_limit_mb) stops it and
# leaves the input in fuzz/artifacts/TARGET/. One line per target at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pipeline_yaml template inventory tool_output results_json wasm_values gateway_answers worker_protocol)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

seeds=fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{pipeline_yaml,template,inventory,tool_output,results_json,wasm_values,gateway_answers,worker_protocol}
# WASM values: bytes read as WIT values (any bytes are a valid input).
head -c 4096 runner/wasm/tests/fixtures/testkit-0.1.0.wasm > "$seeds/wasm_values/testkit-head"
for f in pipelines/*.yaml tests/*/*.yaml; do
  cp "$f" "$seeds/pipeline_yaml/$(echo "$f" | tr / _)"
done
# Template seeds: every value of the test suites that holds template syntax.
grep -ho '{{[^}]*}}\|{%[^%]*%}' pipelines/*.yaml tests/*/*.yaml | sort -u |
  split -l 1 - "$seeds/template/t-"
# Inventories: first byte 0 = Ansible INI, 1 = Ansible YAML.
for f in tests/plan/*.ini; do { printf '\0'; cat "$f"; } > "$seeds/inventory/$(basename "$f")"; done
for f in tests/plan/*.yml; do { printf '\1'; cat "$f"; } > "$seeds/inventory/$(basename "$f")"; done
# Tool outputs: first byte = index of the format in pipeline_parsers::FORMATS.
seed_output() { # INDEX FILE...
  local index="$1"; shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    { printf "\\$(printf '%03o' "$index")"; head -c 200000 "$f"; } > "$seeds/tool_output/$index-$(basename "$f")"
  done
}
data=plugins/parsers/tests/data
seed_output 0 "$data"/rados-bench-*
seed_output 1 "$data"/rbd-bench-*
seed_output 2 "$data"/fio-*.json
seed_output 3 "$data"/dd-*
seed_output 4 "$data"/iperf3-*.json
seed_output 5 "$data"/iperf*-*.txt
# Gateway answers captured from radosgw: first byte = which answer
# (0 listing, 1 error, 2 create-multipart, 3 complete-multipart, 4 Swift listing).
seed_answer() { # INDEX FILE...
  local index="$1"; shift
  for f in "$@"; do
    { printf "\\$(printf '%03o' "$index")"; cat "$f"; } > "$seeds/gateway_answers/$index-$(basename "$f")"
  done
}
answers=plugins/native/tests/data/gateway
seed_answer 0 "$answers"/s3-list-v2-*.xml
seed_answer 1 "$answers"/s3-error-*.xml
seed_answer 2 "$answers"/s3-create-multipart.xml
seed_answer 3 "$answers"/s3-complete-multipart-error.xml
seed_answer 4 "$answers"/swift-list-json-*.json
# Worker outputs captured from real workers (one protocol line per line).
cp plugins/native/tests/data/worker/*.jsonl "$seeds/worker_protocol/"
for f in tests/report/*.results.json tests/compare/*.results.json tests/report/charts/results.json; do
  cp "$f" "$seeds/results_json/$(echo "$f" | tr / _)"
done

cd fuzz
summary=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log="artifacts/$t/last-run.log"
  set +e
  cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
    -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  corpus=$(ls "corpus/$t" | wc -l)
  if [ "$status" -eq 0 ]; then verdict="no crash, hang or leak"; else verdict="FAILED (exit $status): see fuzz/$log and fuzz/artifacts/$t/"; fi
  summary+=("$t: ${seconds}s, $runs runs, corpus $corpus inputs: $verdict")
  echo "${summary[-1]}"
done
echo
echo "fuzzing, $(date -u +%Y-%m-%d):"
printf '  %s\n' "${summary[@]}"
