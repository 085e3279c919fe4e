#!/usr/bin/env python3
"""s3-bench GET from 0 (in-process), 1 and 2 client hosts; run by
benches/multi_client.sh, which builds the release binary and starts the
sandbox gateway and the sshd "hosts" (PIPELINE, WORK, PORT in the
environment).

For each variant, REPS runs (interleaved), medians of:
- the aggregate ops/s (host=all with 2 hosts: the sum over the common window),
- the runner's own CPU (`pipeline run` and the ssh clients it started, from
  wait4: start-up, hashing its binary, the copy check, reading the workers'
  streams, merging, the report), and per worker,
- the runner's peak RSS (the largest process of that tree),
- each worker's CPU in the measured phase per 1000 ops, and its peak RSS.
"""

import json
import os
import statistics
import subprocess
import sys
import time

PIPELINE = os.environ["PIPELINE"]
WORK = os.environ["WORK"]
PORT = os.environ["PORT"]
REPS = int(os.environ.get("REPS", "3"))
SECONDS = os.environ.get("SECONDS_PER_RUN", "10")
CONCURRENCY = os.environ.get("CONCURRENCY", "16")

INVENTORY = f"""
inventory:
  ssh: {{user: root, key: {WORK}/key, known_hosts: {WORK}/known_hosts, port: {PORT}}}
  hosts:
    client1: {{address: 127.0.0.2}}
    client2: {{address: 127.0.0.3}}
"""

VARIANTS = [
    ("in-process", None, 0),
    ("1 host", "[client1]", 1),
    ("2 hosts", "[client1, client2]", 2),
]


def suite(name, on):
    on_line = f"    on: {on}\n" if on else ""
    return f"""name: bench-{name}
stages:
  - id: get
    uses: s3-bench
{on_line}    timeout: 5m
    with:
      workload: get
      object_size: 4K
      concurrency: {CONCURRENCY}
      duration: {SECONDS}s
      warmup: 1s
      objects_per_bucket: 200
cleanup:
  - id: cleanup
    uses: ceph-cleanup
{INVENTORY}"""


def run(name, on, workers, rep):
    slug = name.replace(" ", "-")
    path = os.path.join(WORK, f"{slug}.yaml")
    with open(path, "w") as f:
        f.write(suite(slug, on))
    out = os.path.join(WORK, f"run-{slug}-{rep}")
    started = time.monotonic()
    proc = subprocess.Popen(
        [PIPELINE, "run", path, "--out", out],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    stderr = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{name}: pipeline run failed:\n{stderr}")
    with open(os.path.join(out, "results.json")) as f:
        stage = json.load(f)["stages"][0]

    def metric(metric_name, **labels):
        for m in stage["metrics"]:
            have = m.get("labels", {})
            if m["name"] == metric_name and all(have.get(k) == v for k, v in labels.items()):
                if "host" in labels or "host" not in have:
                    return m["value"]
        return None

    measure = {"op": "get", "phase": "measure"}
    if workers == 0:
        ops = metric("ops_per_s", **measure)
    elif workers == 1:
        ops = metric("ops_per_s", host="client1", **measure)
    else:
        ops = metric("ops_per_s", host="all", **measure)
    hosts = [f"client{i + 1}" for i in range(workers)]
    worker_cpu = [metric("client_cpu_per_1000_ops", host=h) for h in hosts]
    worker_rss = [metric("worker_max_rss", host=h) for h in hosts]
    return {
        "ops": ops,
        "runner_cpu": usage.ru_utime + usage.ru_stime,
        "runner_rss_mib": usage.ru_maxrss / 1024,
        "worker_cpu_1000": statistics.mean(worker_cpu) if hosts else metric("client_cpu_per_1000_ops"),
        "worker_rss_mib": statistics.mean(worker_rss) if hosts else None,
        "wall": wall,
    }


def main():
    results = {name: [] for name, _, _ in VARIANTS}
    for rep in range(REPS):
        for name, on, workers in VARIANTS:
            r = run(name, on, workers, rep)
            results[name].append(r)
            print(
                f"rep {rep + 1} {name:10}: {r['ops']:8.1f} ops/s, runner {r['runner_cpu']:.2f} CPU-s "
                f"{r['runner_rss_mib']:.0f} MiB, {r['wall']:.1f} s",
                flush=True,
            )
    med = lambda name, key: statistics.median(x[key] for x in results[name])
    one = med("1 host", "ops")
    print()
    print(f"s3-bench GET 4 KiB, {CONCURRENCY} in flight per client, {SECONDS} s measured after 1 s warm-up; "
          f"medians of {REPS}")
    print()
    print("| clients | aggregate ops/s | vs 1 host | runner CPU-s (whole run) | runner CPU-s per worker | "
          "runner peak RSS | worker CPU-s / 1000 ops | worker peak RSS |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, workers in VARIANTS:
        ops = med(name, "ops")
        cpu = med(name, "runner_cpu")
        per = f"{cpu / workers:.2f}" if workers else "(the load itself)"
        wrss = f"{med(name, 'worker_rss_mib'):.1f} MiB" if workers else "-"
        print(
            f"| {name} | {ops:.0f} | {ops / one:.2f}x | {cpu:.2f} | {per} | "
            f"{med(name, 'runner_rss_mib'):.0f} MiB | {med(name, 'worker_cpu_1000'):.3f} | {wrss} |"
        )
    print()
    print("Caveat: the two client hosts are two addresses of this one 2-core machine; they share its")
    print("cores with each other and with the gateway, so 2 hosts here cannot scale as 2 machines would.")


if __name__ == "__main__":
    main()
