#!/usr/bin/env python3
"""Paired runs of pipelines/full-baseline.yaml with the telemetry on and off;
run by benches/telemetry.sh (PIPELINE, WORK in the environment).

Per headline figure (a stage's metrics marked headline): the median of the
REPS runs with the watches on and with them off, on/off, and the spread of
each variant's own runs (max/min): a ratio inside that spread is noise.
Telemetry cost: the cluster sampler's and every host sampler's CPU-s
(`cluster.sampler_cpu_s`, `hosts[].sampler_cpu_s`) over the watched
stages' seconds, as a share of one core.
"""

import json
import os
import re
import statistics
import subprocess
import sys

PIPELINE = os.environ["PIPELINE"]
WORK = os.environ["WORK"]
REPS = int(os.environ.get("REPS", "3"))
SECONDS = os.environ.get("SECONDS_PER_STAGE", "5")
SUITE = "pipelines/full-baseline.yaml"


def suites():
    with open(SUITE) as f:
        text = f.read()
    on = os.path.join(WORK, "on.yaml")
    with open(on, "w") as f:
        f.write(text)
    # The same suite with both watches off: `watch: false` under `cluster:`,
    # and an inventory that only says so.
    off_text, n = re.subn(r"^cluster:\n", "cluster:\n  watch: false\n", text, flags=re.M)
    if n != 1:
        sys.exit(f"{SUITE}: expected one top-level `cluster:` mapping")
    off_text += "\ninventory:\n  watch: false\n"
    off = os.path.join(WORK, "off.yaml")
    with open(off, "w") as f:
        f.write(off_text)
    return {"on": on, "off": off}


def run(path, label, rep):
    out = os.path.join(WORK, f"run-{label}-{rep}")
    proc = subprocess.run(
        [PIPELINE, "run", path, "--out", out, "--set", f"seconds={SECONDS}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if proc.returncode != 0:
        lines = proc.stdout.decode(errors="replace").splitlines()
        failed = [l for l in lines if "FAILED" in l] or lines[-20:]
        sys.exit(f"{label}: pipeline run failed:\n" + "\n".join(failed))
    with open(os.path.join(out, "results.json")) as f:
        results = json.load(f)
    figures, cpu_s, watched_s, samples = {}, 0.0, 0.0, 0
    for stage in results["stages"]:
        for m in stage.get("metrics", []):
            if m.get("headline"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(m.get("labels", {}).items()))
                figures[f"{stage['id']} {m['name']}{{{labels}}} ({m.get('unit', '')})"] = m["value"]
        cluster = stage.get("cluster") or {}
        hosts = stage.get("hosts") or []
        if cluster.get("samples") or hosts:
            watched_s += stage.get("duration_s", 0.0)
        cpu_s += cluster.get("sampler_cpu_s") or 0.0
        samples += len(cluster.get("samples", []))
        cpu_s += sum(h.get("sampler_cpu_s", 0.0) for h in hosts)
    return figures, cpu_s, watched_s, samples


def main():
    paths = suites()
    runs = {"on": [], "off": []}
    for rep in range(REPS):
        order = ["on", "off"] if rep % 2 == 0 else ["off", "on"]
        for label in order:
            r = run(paths[label], label, rep)
            runs[label].append(r)
            print(f"pair {rep + 1} {label:3}: {len(r[0])} headline figures, telemetry {r[1]:.3f} CPU-s "
                  f"over {r[2]:.0f} s watched, {r[3]} cluster samples", flush=True)
    print()
    print(f"full-baseline, seconds={SECONDS}, {REPS} pairs (interleaved), medians; "
          "spread = max/min of that variant's own runs")
    print()
    print("| figure | on | off | on/off | spread on | spread off |")
    print("|---|---:|---:|---:|---:|---:|")
    names = sorted(set(runs["on"][0][0]) & set(runs["off"][0][0]))
    inside = 0
    for name in names:
        on = [r[0][name] for r in runs["on"] if name in r[0]]
        off = [r[0][name] for r in runs["off"] if name in r[0]]
        m_on, m_off = statistics.median(on), statistics.median(off)
        spread = lambda xs: max(xs) / min(xs) if min(xs) > 0 else float("nan")
        ratio = m_on / m_off if m_off else float("nan")
        noise = max(spread(on), spread(off))
        inside += 1 / noise <= ratio <= noise
        print(f"| {name} | {m_on:.4g} | {m_off:.4g} | {ratio:.3f} | {spread(on):.3f} | {spread(off):.3f} |")
    print()
    print(f"{inside} of {len(names)} figures' on/off ratio lies within their runs' own spread")
    cpu = statistics.median(r[1] for r in runs["on"])
    watched = statistics.median(r[2] for r in runs["on"])
    print(f"telemetry CPU (cluster sampler + every host sampler), median run: {cpu:.3f} CPU-s over "
          f"{watched:.0f} s of watched stages = {100 * cpu / watched:.2f}% of a core" if watched else "no watched stage")


if __name__ == "__main__":
    main()
