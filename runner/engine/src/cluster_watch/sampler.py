# The cluster watch's sampler (runner/engine/src/cluster_watch/mod.rs):
# `ceph status` (and the manager's `pg stat` and `osd perf`, and each up OSD's
# op counters) once a second over one librados connection, and the counters of
# every radosgw whose admin socket is on this machine, a JSON line each
# on stdout, until stdin closes; a line on stdin (a stage began) makes it read
# at once. Run by the Python that runs the `ceph` CLI
# (its `rados` module is the one the CLI itself uses). One connection does
# what `ceph status -f json` does per call for 0.4 ms of CPU instead of 230
# ms (measured: README, "Cluster state beside each stage").
#   argv: interval_s timeout_s osds(0|1) [ceph CLI args: --conf F --name N --keyring K]
# On an inventory host (host_watch/remote.rs) it reads only that host's
# gateways, one answer per line on stdin, without librados:
#   argv: gateways CONF
import glob
import json
import os
import select
import socket
import struct
import sys
import time


def main():
    if sys.argv[1:2] == ["gateways"]:
        gateways_only(sys.argv[2] if len(sys.argv) > 2 else "/etc/ceph/ceph.conf")
        return
    interval = float(sys.argv[1])
    timeout = float(sys.argv[2])
    osds = sys.argv[3] == "1"
    conf = {}
    args = sys.argv[4:]
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
    osd_perf = json.dumps({"prefix": "osd perf", "format": "json"})
    osd_dump = json.dumps({"prefix": "osd dump", "format": "json"})
    perf_dump = json.dumps({"prefix": "perf dump", "logger": "osd", "format": "json"})
    # The up OSDs, re-read when the OSD map's epoch changes: asking a down
    # OSD would wait for the timeout every second.
    up_osds, epoch = [], None
    conffile = conf.get("conffile") or os.environ.get("CEPH_CONF") or "/etc/ceph/ceph.conf"
    gateways = gateway_sockets(conffile)
    next_at = time.monotonic()
    while True:
        t = time.time()
        try:
            ret, out, err = cluster.mon_command(command, b"", timeout=int(max(1, timeout)))
            if ret == 0:
                sample = {"t": t, "status": parsed(out, "status")}
                ret, out, _ = cluster.mgr_command(pg_stat, b"", timeout=int(max(1, timeout)))
                if ret == 0:
                    sample["pg_stat"] = parsed(out, "pg stat")
                if osds:
                    new_epoch = sample["status"].get("osdmap", {}).get("epoch")
                    if new_epoch != epoch:
                        ret, out, _ = cluster.mon_command(osd_dump, b"", timeout=int(max(1, timeout)))
                        if ret == 0:
                            listed = parsed(out, "osd dump").get("osds", [])
                            up_osds = [o["osd"] for o in listed if o.get("up") == 1][:MAX_OSDS]
                            epoch = new_epoch
                    ret, out, _ = cluster.mgr_command(osd_perf, b"", timeout=int(max(1, timeout)))
                    if ret == 0:
                        sample["osd_perf"] = parsed(out, "osd perf")
                    sample["osd_counters"] = counters(cluster, up_osds, perf_dump)
                if gateways:
                    sample["gateways"] = {name: gateway(path) for name, path in gateways.items()}
                emit(sample)
            else:
                emit({"t": t, "error": f"status returned {ret}: {err}"})
        except Exception as e:  # noqa: BLE001
            emit({"t": t, "error": str(e)})
        next_at += interval
        wait = max(0.0, next_at - time.monotonic())
        readable, _, _ = select.select([sys.stdin], [], [], wait)
        if readable:
            if not os.read(sys.stdin.fileno(), 4096):
                break
            # A stage began: read now, and count its seconds from here.
            next_at = time.monotonic()
    cluster.shutdown()
    # The last CPU time (emit adds it): what the watch cost to its end.
    emit({"t": time.time()})


# librados hands over an answer whole; a longer one than this is not parsed
# (json.loads would take several times its size), and the sample says so.
MAX_ANSWER = 32 << 20


def parsed(out, what):
    if len(out) > MAX_ANSWER:
        raise ValueError(f"the `{what}` answer is {len(out)} bytes, more than the 32 MiB the sampler parses")
    return json.loads(out)


# At most this many OSDs are asked for their counters each second.
MAX_OSDS = 64
# A single OSD's answer waits at most this long (one that hangs delays the sample).
OSD_TIMEOUT = 2


def counters(cluster, ids, perf_dump):
    """Each OSD's op counters, only those the runner reads (osd_perf.rs)."""
    wanted = ("op_wip", "op_r", "op_w", "op_rw", "op_in_bytes", "op_out_bytes",
              "op_r_latency", "op_w_latency", "op_rw_latency")
    found = {}
    for osd in ids:
        try:
            ret, out, _ = cluster.osd_command(osd, perf_dump, b"", timeout=OSD_TIMEOUT)
            if ret == 0:
                section = parsed(out, "perf dump").get("osd", {})
                found[str(osd)] = {"osd": {k: section[k] for k in wanted if k in section}}
        except Exception:  # noqa: BLE001: an OSD that does not answer is left out
            pass
    return found


# At most this many gateways on this machine are read.
MAX_GATEWAYS = 8


def gateway_sockets(conffile):
    """The radosgw admin sockets on this machine, by daemon name: in the
    folders ceph.conf's `admin_socket` settings name, and in /run/ceph, and
    bound in this network namespace. Read once, when the watch starts."""
    folders = ["/run/ceph", "/var/run/ceph"]
    try:
        with open(conffile, encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                key, _, value = line.partition("=")
                if key.strip().replace(" ", "_") == "admin_socket":
                    folder = os.path.dirname(value.strip())
                    if folder and "$" not in folder and folder not in folders:
                        folders.insert(0, folder)
    except OSError:
        pass
    listening = bound_unix_sockets()
    found = {}
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(glob.escape(folder), "*rgw*.asok"))):
            if listening is not None and path not in listening:
                # Not bound in this network namespace: a gateway of another
                # host that shares this filesystem (a lab's), or a stale file.
                continue
            name = os.path.basename(path)[: -len(".asok")]
            # ceph-client.rgw.NAME.asok: the cluster's name, then the daemon's.
            name = name.split("-", 1)[1] if "-" in name else name
            if name not in found and len(found) < MAX_GATEWAYS:
                found[name] = path
    return found


def bound_unix_sockets():
    """The paths of the Unix sockets bound in this network namespace
    (/proc/net/unix lists only those), or None when it cannot be read."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read(8 << 20).splitlines()[1:]
    except OSError:
        return None
    return {fields[7] for fields in (line.split(None, 7) for line in lines) if len(fields) == 8}


def admin_socket(path, command):
    """One command over a daemon's admin socket: the JSON request and a NUL,
    then a 4-byte big-endian length and that many bytes of answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(OSD_TIMEOUT)
        s.connect(path)
        s.sendall(json.dumps(command).encode() + b"\0")
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                raise OSError("closed")
            head += chunk
        (length,) = struct.unpack(">I", head)
        if length > (1 << 20):
            raise OSError("answer too long")
        body = b""
        while len(body) < length:
            chunk = s.recv(length - len(body))
            if not chunk:
                raise OSError("closed")
            body += chunk
        return json.loads(body)


def gateway(path):
    """A gateway's `rgw` counters (and `rgw_op`, 19.2 on), or an error."""
    try:
        found = {}
        for logger in ("rgw", "rgw_op"):
            answer = admin_socket(path, {"prefix": "perf dump", "logger": logger})
            for section, values in answer.items():
                # Counts and gauges only: the latency pairs are not read.
                found[section] = {k: v for k, v in values.items() if isinstance(v, int)}
        return found
    except Exception as e:  # noqa: BLE001: a gateway that does not answer is noted
        return {"error": str(e)}


def gateways_only(conffile):
    """Answers each line on stdin with the counters of every radosgw whose
    admin socket is on this host (none: an empty map), until stdin closes.
    The runner stamps each answer with its own clock as it arrives."""
    sockets = gateway_sockets(conffile)
    while sys.stdin.readline():
        emit({"t": time.time(), "gateways": {name: gateway(path) for name, path in sockets.items()}})


def emit(obj):
    # Every line says what the sampler has cost so far, start-up and
    # connection included: the runner takes a stage's share as a difference.
    # process_time (CLOCK_PROCESS_CPUTIME_ID) counts nanoseconds; os.times
    # counts 10 ms ticks, and a stage's few milliseconds read there as 0.
    obj["cpu_s"] = time.process_time()
    try:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)


main()
