# The cluster watch's sampler (runner/engine/src/cluster_watch/mod.rs):
# `ceph status` (and the manager's `pg stat`) once a second over one librados
# connection, a JSON line each
# on stdout, until stdin closes. Run by the Python that runs the `ceph` CLI
# (its `rados` module is the one the CLI itself uses). One connection does
# what `ceph status -f json` does per call for 0.4 ms of CPU instead of 230
# ms (measured: README, "Cluster state beside each stage").
#   argv: interval_s timeout_s [ceph CLI args: --conf F --name N --keyring K]
import json
import os
import select
import sys
import time


def main():
    interval = float(sys.argv[1])
    timeout = float(sys.argv[2])
    conf = {}
    args = sys.argv[3:]
    options = {"--conf": "conffile", "--name": "name", "--keyring": "keyring"}
    i = 0
    while i + 1 < len(args):
        if args[i] in options:
            conf[options[args[i]]] = args[i + 1]
        i += 2
    try:
        import rados

        cluster = rados.Rados(
            conffile=conf.get("conffile", ""),
            name=conf.get("name", "client.admin"),
            conf={"keyring": conf["keyring"]} if "keyring" in conf else {},
        )
        cluster.connect(timeout=int(max(1, timeout)))
    except Exception as e:  # noqa: BLE001: any failure is reported the same way
        emit({"t": time.time(), "error": f"cannot connect: {e}"})
        return
    command = json.dumps({"prefix": "status", "format": "json"})
    # The PGs from the manager itself: the monitor's copy in `status` lags.
    pg_stat = json.dumps({"prefix": "pg stat", "format": "json"})
    next_at = time.monotonic()
    while True:
        t = time.time()
        try:
            ret, out, err = cluster.mon_command(command, b"", timeout=int(max(1, timeout)))
            if ret == 0:
                sample = {"t": t, "status": json.loads(out)}
                ret, out, _ = cluster.mgr_command(pg_stat, b"", timeout=int(max(1, timeout)))
                if ret == 0:
                    sample["pg_stat"] = json.loads(out)
                emit(sample)
            else:
                emit({"t": t, "error": f"status returned {ret}: {err}"})
        except Exception as e:  # noqa: BLE001
            emit({"t": t, "error": str(e)})
        next_at += interval
        wait = max(0.0, next_at - time.monotonic())
        readable, _, _ = select.select([sys.stdin], [], [], wait)
        if readable and not os.read(sys.stdin.fileno(), 4096):
            break
    cluster.shutdown()


def emit(obj):
    try:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)


main()
