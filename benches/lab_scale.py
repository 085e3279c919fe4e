#!/usr/bin/env python3
"""s3-bench GET from 1..N client hosts of a lab, started together; run by
benches/lab_scale.sh, which builds the release binary, starts the lab and
exports its environment (PIPELINE, WORK, PIPELINE_LAB_* and the gateway's
keys).

For each host count, REPS runs (interleaved), medians of:
- the aggregate ops/s (host=all: the hosts' rates over their common window),
- the coordinator's CPU and peak RSS (`pipeline run` and the ssh clients it
  started, from wait4),
- the start skew: start_spread_ms, latest minus earliest of the instants the
  workers report from their own clocks, brought into this machine's clock,
- the workers' peak RSS (worker_max_rss, mean and largest over the hosts),
- the tail: the run's wall time less the stage's warm-up and measured phase
  (starting the workers, collecting and merging their results, cleanup, the
  report),
and, for every run, whether host=all's latency histogram is exactly the sum
of the hosts' histograms, and its p99 the p99 of that sum. The HDR
histograms are decoded here (V2 deflate), not by the runner.
"""

import base64
import datetime
import json
import math
import os
import re
import statistics
import struct
import subprocess
import sys
import time
import zlib

PIPELINE = os.environ["PIPELINE"]
WORK = os.environ["WORK"]
REPS = int(os.environ.get("REPS", "3"))
SECONDS = int(os.environ.get("SECONDS_PER_RUN", "10"))
WARMUP = 1
CONCURRENCY = os.environ.get("CONCURRENCY", "4")
HOSTS = [int(h) for h in os.environ.get("HOSTS", "1 2 4 8 16").split()]


def suite(n):
    hosts = ", ".join(f"client{i + 1}" for i in range(n))
    return f"""name: lab-scale-{n}
inventory:
  ansible: {os.environ["PIPELINE_LAB_INVENTORY"]}
  ssh:
    key: {os.environ["PIPELINE_LAB_SSH_KEY"]}
    known_hosts: {os.environ["PIPELINE_LAB_KNOWN_HOSTS"]}
stages:
  - id: get
    uses: s3-bench
    on: [{hosts}]
    parallel: {n}
    timeout: 5m
    with:
      workload: get
      object_size: 4K
      concurrency: {CONCURRENCY}
      duration: {SECONDS}s
      warmup: {WARMUP}s
      objects_per_bucket: 100
cleanup:
  - id: cleanup
    uses: ceph-cleanup
"""


# --- HdrHistogram V2 (deflate) decoding -----------------------------------
# The cookies carry the word size in bits 4-7 (0x10 from the Rust crate).
V2_COOKIE = 0x1C849303
V2_DEFLATE_COOKIE = 0x1C849304
WORD_SIZE_BITS = 0xF0


def zigzag_leb128(data):
    """HdrHistogram's ZigZag LEB128: 7 bits a byte for up to 8 bytes, then a
    9th byte of 8 bits."""
    i = 0
    while i < len(data):
        value = 0
        for k in range(9):
            byte = data[i]
            i += 1
            if k == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << (7 * k)
            if not byte & 0x80:
                break
        yield (value >> 1) ^ -(value & 1)


def decode_hdr(b64):
    raw = base64.b64decode(b64)
    cookie, length = struct.unpack(">ii", raw[:8])
    assert cookie & ~WORD_SIZE_BITS == V2_DEFLATE_COOKIE, hex(cookie)
    inner = zlib.decompress(raw[8 : 8 + length])
    cookie, payload, offset, digits, lowest, _highest, _ratio = struct.unpack(">iiiiqqd", inner[:40])
    assert cookie & ~WORD_SIZE_BITS == V2_COOKIE and offset == 0, (hex(cookie), offset)
    counts = []
    for v in zigzag_leb128(inner[40 : 40 + payload]):
        if v < 0:
            counts.extend([0] * -v)
        else:
            counts.append(v)
    return {"digits": digits, "lowest": lowest, "counts": counts}


def value_at_index(h, index):
    """The highest value an index stands for (HdrHistogram's layout)."""
    largest = 2 * 10 ** h["digits"]
    sub_bucket_count = 1 << (largest - 1).bit_length()
    half = sub_bucket_count // 2
    half_magnitude = half.bit_length() - 1
    unit = h["lowest"].bit_length() - 1
    bucket = (index >> half_magnitude) - 1
    sub = (index & (half - 1)) + half
    if bucket < 0:
        sub -= half
        bucket = 0
    return (sub << (bucket + unit)) + (1 << (bucket + unit)) - 1


def quantile(h, q):
    total = sum(h["counts"])
    rank = max(1, math.ceil(q * total))
    seen = 0
    for i, c in enumerate(h["counts"]):
        seen += c
        if seen >= rank:
            return value_at_index(h, i)
    raise ValueError("empty histogram")


def merged_equals_all(stage, n):
    """(exact, p99 of the sum, host=all's p99 metric)."""
    parts, whole = [], None
    for h in stage.get("histograms", []):
        labels = h.get("labels", {})
        if h["name"] != "latency" or labels.get("op") != "get" or labels.get("phase") != "measure":
            continue
        if labels.get("host") == "all":
            whole = decode_hdr(h["hdr"])
        else:
            parts.append(decode_hdr(h["hdr"]))
    if n == 1:
        return None, None, None
    assert whole is not None and len(parts) == n, (whole is None, len(parts))
    size = max(len(p["counts"]) for p in parts)
    summed = [sum(p["counts"][i] if i < len(p["counts"]) else 0 for p in parts) for i in range(size)]
    exact = summed == whole["counts"] + [0] * (size - len(whole["counts"]))
    p99_sum = quantile({**parts[0], "counts": summed}, 0.99)
    return exact, p99_sum, metric(stage, "latency_p99", host="all", op="get", phase="measure")


def metric(stage, name, **labels):
    for m in stage["metrics"]:
        have = m.get("labels", {})
        if m["name"] == name and all(have.get(k) == v for k, v in labels.items()):
            return m["value"]
    return None


def phases(stage):
    """(seconds from the stage's start to the hosts' common start instant,
    seconds from the end of the measured phase to the stage's end): setting
    up the workers (SSH, the worker binary, clocks), and collecting,
    merging and their bucket cleanup."""
    at = None
    for note in stage.get("notes", []):
        m = re.search(r"started together at (\d\d:\d\d:\d\d\.\d+) UTC", note)
        if m:
            at = m.group(1)
    if at is None:
        return None, None
    began = datetime.datetime.fromisoformat(stage["started_at"].replace("Z", "+00:00"))
    ended = datetime.datetime.fromisoformat(stage["ended_at"].replace("Z", "+00:00"))
    start = datetime.datetime.combine(began.date(), datetime.time.fromisoformat(at), began.tzinfo)
    if start < began:  # the start instant is past midnight
        start += datetime.timedelta(days=1)
    before = (start - began).total_seconds()
    after = (ended - start).total_seconds() - WARMUP - SECONDS
    return before, after


def run(n, rep):
    path = os.path.join(WORK, f"scale-{n}.yaml")
    with open(path, "w") as f:
        f.write(suite(n))
    out = os.path.join(WORK, f"run-{n}-{rep}")
    started = time.monotonic()
    proc = subprocess.Popen([PIPELINE, "run", path, "--out", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{n} hosts: pipeline run failed:\n{stderr}")
    with open(os.path.join(out, "results.json")) as f:
        stage = json.load(f)["stages"][0]
    hosts = [f"client{i + 1}" for i in range(n)]
    whose = "all" if n > 1 else "client1"
    before, after = phases(stage)
    worker_rss = [metric(stage, "worker_max_rss", host=h) for h in hosts]
    exact, p99_sum, p99_all = merged_equals_all(stage, n)
    return {
        "ops": metric(stage, "ops_per_s", host=whose, op="get", phase="measure"),
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
        "spread": metric(stage, "start_spread_ms", host="all") if n > 1 else 0.0,
        "worker_rss": statistics.mean(worker_rss),
        "worker_rss_max": max(worker_rss),
        "tail": wall - WARMUP - SECONDS,
        "before": before,
        "after": after,
        "wall": wall,
        "exact": exact,
        "p99_sum": p99_sum,
        "p99_all": p99_all,
    }


def main():
    results = {n: [] for n in HOSTS}
    for rep in range(REPS):
        for n in HOSTS:
            r = run(n, rep)
            results[n].append(r)
            check = "-" if r["exact"] is None else (
                f"merge {'exact' if r['exact'] else 'DIFFERS'}, p99 {r['p99_all']:.0f} us (sum's {r['p99_sum']:.0f})"
            )
            print(
                f"rep {rep + 1} {n:2} hosts: {r['ops']:7.1f} ops/s, coordinator {r['cpu']:.2f} CPU-s "
                f"{r['rss']:.0f} MiB, spread {r['spread']:.3f} ms, worker {r['worker_rss']:.1f} MiB, "
                f"wall {r['wall']:.1f} s (start {r['before'] or 0:.1f} s, after {r['after'] or 0:.1f} s), {check}",
                flush=True,
            )

    def med(n, key):
        return statistics.median(x[key] for x in results[n])

    def fmt_s(n, key):
        values = [x[key] for x in results[n] if x[key] is not None]
        return f"{statistics.median(values):.1f} s" if values else "-"

    print()
    print(f"s3-bench GET 4 KiB, {CONCURRENCY} in flight per host, {SECONDS} s measured after {WARMUP} s warm-up, "
          f"all hosts started at one instant; medians of {REPS}")
    print()
    print("| client hosts | aggregate ops/s | coordinator CPU-s | coordinator peak RSS | start skew | "
          "worker peak RSS (mean / max) | stage start to the hosts' start | measure end to stage end | "
          "run wall less warm-up and measure | host=all = merge of hosts |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in HOSTS:
        runs = results[n]
        if n == 1:
            merge = "- (one host)"
        else:
            same = sum(1 for r in runs if r["exact"])
            p99 = all(r["p99_all"] == r["p99_sum"] for r in runs)
            merge = f"{same}/{len(runs)} exact, p99 {'equal' if p99 else 'DIFFERS'}"
        print(
            f"| {n} | {med(n, 'ops'):.0f} | {med(n, 'cpu'):.2f} | {med(n, 'rss'):.0f} MiB | "
            f"{med(n, 'spread'):.2f} ms | {med(n, 'worker_rss'):.1f} / {max(r['worker_rss_max'] for r in runs):.1f} MiB | "
            f"{fmt_s(n, 'before')} | {fmt_s(n, 'after')} | {med(n, 'tail'):.1f} s | {merge} |"
        )
    if any(r["exact"] is False for runs in results.values() for r in runs):
        sys.exit("host=all's histogram is not the merge of the hosts' histograms")


if __name__ == "__main__":
    main()
