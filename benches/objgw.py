#!/usr/bin/env python3
"""Object-gateway load generators side by side on the same gateway (run by
benches/objgw.sh, which installs the peers and starts nothing itself: the
sandbox must be up and `pipeline sandbox env` evaluated).

S3: our s3-bench, s5cmd (wildcard cp), rclone, a boto3 thread pool.
Swift: our swift-bench stage, rclone's Swift backend, swift-bench 2.0.0.
warp is not here: it is published only as GitHub release binaries, and this
machine reaches crates.io, PyPI, Debian and npm, not GitHub downloads.

Each (workload, concurrency) runs every tool REPS times, interleaved (tool
A, B, C, then A, B, C again), and the table shows medians: ops/s, MiB/s,
the client's CPU-seconds per 1000 operations (user+system, of the whole
process: start-up and listing included for the peers; our stages report
their measured phase, which is what `client_cpu_per_1000_ops` is), the
gateway's CPU-seconds per 1000 operations (radosgw's utime+stime from
/proc, over the timed part only: a GET row excludes the upload before it),
and our ratio to the best peer.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE = os.path.join(ROOT, "target", "release", "pipeline")
REPS = int(os.environ.get("REPS", "3"))
SMALL_N = int(os.environ.get("SMALL_N", "2000"))  # 4 KiB objects per run
LARGE_N = int(os.environ.get("LARGE_N", "100"))  # 4 MiB objects per run
CONCURRENCY = [int(c) for c in os.environ.get("CONCURRENCY", "16 64").split()]
WORKLOADS = [
    (w, s)
    for w, s in (
        ("put", 4096),
        ("get", 4096),
        ("put", 4 << 20),
        ("get", 4 << 20),
    )
    if os.environ.get("ONLY") in (None, "", f"{w}-{s}")
]
SHM = "/dev/shm"
CLK = os.sysconf("SC_CLK_TCK")
ENV = dict(os.environ)


def env(name):
    value = ENV.get(name)
    if not value:
        sys.exit(f"error: {name} is not set: eval \"$(pipeline sandbox env)\" first")
    return value


def gateway_cpu():
    """radosgw's user+system CPU seconds so far."""
    sandbox = ENV.get("PIPELINE_SANDBOX_DIR", "/tmp/pipeline-sandbox")
    with open(os.path.join(sandbox, "run", "client.rgw.sandbox.pid")) as f:
        pid = f.read().strip()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def timed(argv, extra_env=None, cwd=None):
    """Runs argv; (wall seconds, child CPU seconds, gateway CPU seconds,
    stdout+stderr): the gateway's CPU over this command only."""
    e = dict(ENV)
    e.update(extra_env or {})
    before = os.times()
    g0 = gateway_cpu()
    start = time.monotonic()
    p = subprocess.run(argv, env=e, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - start
    gw = gateway_cpu() - g0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    out = p.stdout + p.stderr
    if p.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {p.returncode}: {out[-2000:]}")
    return wall, cpu, gw, out


def s3_curl(method, path):
    """A signed request with curl (bucket create/delete for the peers)."""
    argv = [
        "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method,
        "--aws-sigv4", f"aws:amz:{ENV.get('AWS_DEFAULT_REGION', 'us-east-1')}:s3",
        "--user", f"{env('AWS_ACCESS_KEY_ID')}:{env('AWS_SECRET_ACCESS_KEY')}",
        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        env("AWS_ENDPOINT_URL") + path,
    ]
    return subprocess.run(argv, capture_output=True, text=True).stdout


def files(n, size):
    """A folder of n files of `size` pseudo-random bytes in /dev/shm."""
    d = tempfile.mkdtemp(dir=SHM, prefix="objgw-src-")
    block = os.urandom(size)
    for i in range(n):
        with open(os.path.join(d, f"o{i:08d}"), "wb") as f:
            f.write(block)
    return d


RCLONE_S3 = {
    "RCLONE_CONFIG_GW_TYPE": "s3",
    "RCLONE_CONFIG_GW_PROVIDER": "Ceph",
    "RCLONE_CONFIG_GW_ENDPOINT": ENV.get("AWS_ENDPOINT_URL", ""),
    "RCLONE_CONFIG_GW_ACCESS_KEY_ID": ENV.get("AWS_ACCESS_KEY_ID", ""),
    "RCLONE_CONFIG_GW_SECRET_ACCESS_KEY": ENV.get("AWS_SECRET_ACCESS_KEY", ""),
    "RCLONE_CONFIG_GW_FORCE_PATH_STYLE": "true",
    # rclone 1.60 refuses to start with the environment's CA bundle, even for http.
    "AWS_CA_BUNDLE": "",
}
RCLONE_SWIFT = {
    "RCLONE_CONFIG_SW_TYPE": "swift",
    "RCLONE_CONFIG_SW_AUTH": ENV.get("ST_AUTH", ""),
    "RCLONE_CONFIG_SW_USER": ENV.get("ST_USER", ""),
    "RCLONE_CONFIG_SW_KEY": ENV.get("ST_KEY", ""),
    "RCLONE_CONFIG_SW_AUTH_VERSION": "1",
    "AWS_CA_BUNDLE": "",
}
RCLONE_FAST = ["--no-check-dest", "--ignore-checksum", "--buffer-size", "0", "-q"]
# No config file: the remotes are all in the environment.
ENV["RCLONE_CONFIG"] = "/dev/null"


def rclone(remote, workload, n, size, c, env_extra):
    """rclone copy of n objects up (put) or down (get)."""
    bucket = f"bench-rc-{uuid.uuid4().hex[:8]}"
    flags = ["--transfers", str(c), "--checkers", str(c)] + RCLONE_FAST
    src = files(n, size)
    try:
        subprocess.run(["rclone", "mkdir", f"{remote}:{bucket}"], env={**ENV, **env_extra}, check=True,
                       capture_output=True)
        put_flags = ["--s3-no-check-bucket", "--s3-no-head", "--s3-disable-checksum"] if remote == "GW" else []
        if workload == "put":
            return timed(["rclone", "copy", src, f"{remote}:{bucket}"] + flags + put_flags, env_extra)[:3]
        timed(["rclone", "copy", src, f"{remote}:{bucket}"] + flags + put_flags, env_extra)
        dst = tempfile.mkdtemp(dir=SHM, prefix="objgw-dst-")
        try:
            get_flags = ["--s3-no-head-object", "--use-server-modtime"] if remote == "GW" else []
            return timed(["rclone", "copy", f"{remote}:{bucket}", dst] + flags + get_flags, env_extra)[:3]
        finally:
            shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(src, ignore_errors=True)
        subprocess.run(["rclone", "purge", f"{remote}:{bucket}", "-q"], env={**ENV, **env_extra},
                       capture_output=True)


def s5cmd(workload, n, size, c):
    bucket = f"bench-s5-{uuid.uuid4().hex[:8]}"
    base = ["s5cmd", "--endpoint-url", env("AWS_ENDPOINT_URL"), "--numworkers", str(c)]
    src = files(n, size)
    try:
        s3_curl("PUT", f"/{bucket}")
        up = base + ["cp", f"{src}/*", f"s3://{bucket}/"]
        if workload == "put":
            return timed(up)[:3]
        timed(up)
        dst = tempfile.mkdtemp(dir=SHM, prefix="objgw-dst-")
        try:
            return timed(base + ["cp", f"s3://{bucket}/*", f"{dst}/"])[:3]
        finally:
            shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(src, ignore_errors=True)
        subprocess.run(base + ["rm", f"s3://{bucket}/*"], env=ENV, capture_output=True)
        s3_curl("DELETE", f"/{bucket}")


BOTO3 = r"""
import os, sys, boto3, botocore.config
from concurrent.futures import ThreadPoolExecutor
workload, bucket, n, size, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cfg = botocore.config.Config(max_pool_connections=c, s3={"addressing_style": "path", "payload_signing_enabled": False})
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=cfg)
body = os.urandom(size)
def put(i): s3.put_object(Bucket=bucket, Key=f"o{i:08d}", Body=body)
def get(i): s3.get_object(Bucket=bucket, Key=f"o{i:08d}")["Body"].read()
with ThreadPoolExecutor(c) as pool:
    list(pool.map(put if workload == "put" else get, range(n)))
"""


def boto3(workload, n, size, c):
    bucket = f"bench-b3-{uuid.uuid4().hex[:8]}"
    py = ["/usr/bin/python3", "-c", BOTO3]
    e = {"AWS_CA_BUNDLE": ""}
    try:
        s3_curl("PUT", f"/{bucket}")
        if workload == "put":
            return timed(py + ["put", bucket, str(n), str(size), str(c)], e)[:3]
        timed(py + ["put", bucket, str(n), str(size), str(c)], e)
        return timed(py + ["get", bucket, str(n), str(size), str(c)], e)[:3]
    finally:
        subprocess.run(
            ["s5cmd", "--endpoint-url", env("AWS_ENDPOINT_URL"), "rm", f"s3://{bucket}/*"],
            env=ENV, capture_output=True,
        )
        s3_curl("DELETE", f"/{bucket}")


def swift_bench(workload, n, size, c):
    """swift-bench 2.0.0, objects kept (`-x`) and removed afterwards with
    rclone, so no DELETE phase is in its figures. PUT: a PUT-only run. GET: a
    PUT+GET run; its GET CPU (ours and the gateway's) is that run's minus a
    PUT-only run's, measured just before it. Rates are its FINAL lines."""
    name = f"bench_{uuid.uuid4().hex[:8]}"
    conf = [
        "-A", env("ST_AUTH"), "-U", env("ST_USER"), "-K", env("ST_KEY"), "-V", "1.0",
        "-c", str(c), "-s", str(size), "-n", str(n), "-x", "--container-name", name,
    ]
    try:
        _, put_cpu, put_gw, out = timed(["swift-bench"] + conf + ["-g", "0"])
        if workload == "put":
            return n / final_rate(out, "put"), put_cpu, put_gw
        _, both_cpu, both_gw, out = timed(["swift-bench"] + conf + ["-g", str(n)])
        return n / final_rate(out, "get"), max(both_cpu - put_cpu, 0.0), max(both_gw - put_gw, 0.0)
    finally:
        listed = subprocess.run(["rclone", "lsf", "SW:"], env={**ENV, **RCLONE_SWIFT}, capture_output=True, text=True)
        for container in listed.stdout.split():
            if container.rstrip("/").startswith(name):
                subprocess.run(["rclone", "purge", f"SW:{container.rstrip('/')}", "-q"],
                               env={**ENV, **RCLONE_SWIFT}, capture_output=True)


def final_rate(out, op):
    """ops/s of swift-bench's **FINAL** line, read by our own parser."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(out)
    try:
        parsed = json.loads(subprocess.run(
            [PIPELINE, "parse", "swift-bench", f.name], capture_output=True, text=True, check=True
        ).stdout)
    finally:
        os.unlink(f.name)
    for m in parsed["metrics"]:
        if m["name"] == "ops_per_s" and m.get("labels", {}).get("op") == op:
            return m["value"]
    raise RuntimeError(f"no {op} rate in swift-bench's output: {out[-500:]}")


def ours(stage, workload, n, size, c):
    """Our stage through `pipeline run`: the measured phase's own figures."""
    work = tempfile.mkdtemp(prefix="objgw-ours-")
    try:
        suite = os.path.join(work, "suite.yaml")
        extra = "      unsigned_payload: true\n" if stage == "s3-bench" else ""
        with open(suite, "w") as f:
            f.write(
                f"name: bench\nstages:\n  - id: load\n    uses: {stage}\n    with:\n"
                f"      workload: {workload}\n      object_size: {size}\n      concurrency: {c}\n"
                f"      operations: {n}\n      objects_per_bucket: {n}\n{extra}"
            )
        timed([PIPELINE, "run", suite, "--out", os.path.join(work, "run")])
        with open(os.path.join(work, "run", "results.json")) as f:
            r = json.load(f)
        metrics = r["stages"][0]["metrics"]
        def value(name, **labels):
            for m in metrics:
                if m["name"] == name and all(m.get("labels", {}).get(k) == v for k, v in labels.items()):
                    return m["value"]
            raise RuntimeError(f"no {name} {labels}")
        rate = value("ops_per_s", op=workload, phase="measure")
        cpu = value("client_cpu_per_1000_ops") * n / 1000
        # The stage reads the local gateway's CPU over its measured phase.
        gw = value("gateway_cpu_per_1000_ops") * n / 1000
        return n / rate, cpu, gw
    finally:
        shutil.rmtree(work, ignore_errors=True)


S3_TOOLS = [
    ("s3-bench (ours)", lambda w, n, s, c: ours("s3-bench", w, n, s, c)),
    ("s5cmd 2.3.0", s5cmd),
    ("rclone 1.60 S3", lambda w, n, s, c: rclone("GW", w, n, s, c, RCLONE_S3)),
    ("boto3 threads", boto3),
]
SWIFT_TOOLS = [
    ("swift-bench stage (ours)", lambda w, n, s, c: ours("swift-bench", w, n, s, c)),
    ("rclone 1.60 Swift", lambda w, n, s, c: rclone("SW", w, n, s, c, RCLONE_SWIFT)),
    ("swift-bench 2.0.0", swift_bench),
]


def measure(tools, workload, size, c):
    n = SMALL_N if size < (1 << 20) else LARGE_N
    rows = {name: [] for name, _ in tools}
    for _ in range(REPS):
        for name, tool in tools:
            # Each tool times its workload only (not the upload before a GET),
            # and the gateway's CPU over that part.
            seconds, cpu, gw = tool(workload, n, size, c)
            rows[name].append((n / seconds, n * size / seconds / (1 << 20), cpu * 1000 / n, gw * 1000 / n))
    return {name: tuple(statistics.median(col) for col in zip(*runs)) for name, runs in rows.items()}


def table(api, tools):
    for workload, size in WORKLOADS:
        for c in CONCURRENCY:
            label = f"{'4 KiB' if size == 4096 else '4 MiB'} {workload.upper()}, {c} in flight"
            got = measure(tools, workload, size, c)
            ours_name = tools[0][0]
            best = max((v[0] for k, v in got.items() if k != ours_name), default=0)
            best_cpu = min((v[2] for k, v in got.items() if k != ours_name), default=0)
            print(f"\n{api}: {label} (medians of {REPS})")
            print("| tool | ops/s | MiB/s | client CPU-s / 1000 ops | gateway CPU-s / 1000 ops |")
            print("|---|---:|---:|---:|---:|")
            for name, (ops, mib, cpu, gw) in got.items():
                print(f"| {name} | {ops:.0f} | {mib:.1f} | {cpu:.2f} | {gw:.2f} |")
            o = got[ours_name]
            if best > 0:
                print(f"ours / best peer: {o[0] / best:.2f}x ops/s, {o[2] / best_cpu:.2f}x client CPU per op")
            sys.stdout.flush()


if __name__ == "__main__":
    for var in ("AWS_ENDPOINT_URL", "ST_AUTH"):
        env(var)
    print(f"objgw bench {time.strftime('%Y-%m-%d %H:%M')} on {os.uname().nodename}: "
          f"{os.cpu_count()} CPUs, REPS={REPS}, SMALL_N={SMALL_N}, LARGE_N={LARGE_N}")
    apis = os.environ.get("APIS", "s3 swift").split()
    if "s3" in apis:
        table("S3", S3_TOOLS)
    if "swift" in apis:
        table("Swift", SWIFT_TOOLS)
