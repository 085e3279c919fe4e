"""osd-perf: per-OSD commit and apply latency from `ceph osd perf`.

A pipeline stage plugin written in Python, built into a WebAssembly
component with componentize-py against the same WIT interface as the Rust
plugins (pipeline:stage@0.1.0):

    componentize-py -d ../../wit/pipeline-stage@0.1.0 -w stage componentize app -o osd-perf.wasm

The class below implements the `plugin` export; `wit_world.imports.host`
is the runner (exec, logging, progress), `wit_world.imports.types` the
records and variants of the interface.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports import types as t


def _number(value: float) -> t.Value:
    return t.Value_Number(value)


class Plugin(exports.Plugin):
    def describe(self) -> t.Description:
        return t.Description(
            name="osd-perf",
            version="0.1.0",
            summary="Per-OSD commit and apply latency from `ceph osd perf` (a Python plugin)",
            params=[
                t.ParamSpec(
                    name="samples",
                    type=t.ParamType_Scalar(t.ScalarType.INTEGER),
                    required=False,
                    default=t.Value_Integer(1),
                    doc="how many times to sample `ceph osd perf` (the report keeps the mean and the max)",
                ),
            ],
            outputs=[t.OutputSpec(name="osds", doc="number of OSDs reported")],
            metrics=[
                t.MetricSpec(name="commit_latency", unit="ms", doc="commit latency of an OSD (label osd)"),
                t.MetricSpec(name="apply_latency", unit="ms", doc="apply latency of an OSD (label osd)"),
                t.MetricSpec(name="commit_latency_max", unit="ms", doc="highest commit latency of any OSD"),
            ],
            capabilities=[t.Capability.EXEC],
        )

    def check(self, params):
        for p in params:
            if p.name == "samples" and isinstance(p.value, t.Value_Integer) and not 1 <= p.value.value <= 100:
                return [t.ParamProblem(name="samples", message="must be between 1 and 100")]
        return []

    def plan(self, params, cluster):
        argv = ["ceph", *cluster.cli_args, "osd", "perf", "-f", "json"]
        return [t.Action(summary="OSD latencies", command=argv, destructive=False)]

    def run(self, params):
        samples = 1
        for p in params:
            if p.name == "samples" and isinstance(p.value, t.Value_Integer):
                samples = p.value.value
        cluster = host.stage().cluster
        argv = ["ceph", *cluster.cli_args, "osd", "perf", "-f", "json"]
        commit: dict[str, list[float]] = {}
        apply: dict[str, list[float]] = {}
        for i in range(samples):
            host.progress(f"ceph osd perf ({i + 1}/{samples})")
            try:
                out = host.exec(t.Command(argv=argv, env=[], timeout=cluster.command_timeout, label="ceph-osd-perf"))
            except Err as e:
                raise Err(t.StageError_Failed(f"cannot run `ceph osd perf`: {e.value.value if hasattr(e.value, 'value') else e.value}"))
            if not (isinstance(out.status, t.ExitStatus_Code) and out.status.value == 0):
                raise Err(t.StageError_CommandFailed(t.CommandFailure(
                    command=" ".join(argv), status=str(out.status), stderr_tail=out.stderr[-500:])))
            try:
                doc = json.loads(out.stdout)
            except ValueError as e:
                raise Err(t.StageError_Failed(f"`ceph osd perf -f json` printed invalid JSON: {e}"))
            # Pacific and later nest the list under osdstats; older releases do not.
            infos = doc.get("osdstats", doc).get("osd_perf_infos", [])
            for info in infos:
                osd = str(info["id"])
                stats = info.get("perf_stats", {})
                commit.setdefault(osd, []).append(float(stats.get("commit_latency_ms", 0)))
                apply.setdefault(osd, []).append(float(stats.get("apply_latency_ms", 0)))
        host.log(t.LogLevel.INFO, f"{len(commit)} OSDs, {samples} sample(s)")
        metrics = []
        for osd in sorted(commit, key=int):
            for name, series in (("commit_latency", commit[osd]), ("apply_latency", apply[osd])):
                metrics.append(t.Metric(name=name, value=sum(series) / len(series), unit="ms",
                                        direction=t.Direction.LOWER_IS_BETTER, labels=[("osd", osd)], headline=False))
        worst = max((max(v) for v in commit.values()), default=0.0)
        metrics.append(t.Metric(name="commit_latency_max", value=worst, unit="ms",
                                direction=t.Direction.LOWER_IS_BETTER, labels=[], headline=True))
        # Commit latency of each sample, worst OSD: a series the report can chart.
        series = [t.Series(name="commit_latency_max", unit="ms", direction=t.Direction.LOWER_IS_BETTER,
                           labels=[], points=[(float(i), max(v[i] for v in commit.values()) if commit else 0.0)
                                              for i in range(samples)])]
        return t.StageOutput(
            metrics=metrics,
            series=series,
            outputs=[t.Entry(name="osds", value=t.Value_Integer(len(commit)))],
            artifacts=[],
            environment=[],
            skipped=None,
        )
