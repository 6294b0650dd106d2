"""``sweep``: the engines' flags over a grid on the user's trace; ``Sweep``: what it found.

Each point is sized as the engine sizes it (``_size``), replayed by the fast simulator pass and
queued at its concurrency cap (``_evaluate``), serially or on Dask (``_parallel``); the Pareto
front and the recommendation come from ``_choose``. docs/plan.md has the rules and sources.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.plan._choose import OBJECTIVES, pareto, recommend
from kda_core.plan._evaluate import Job, size
from kda_core.plan._flags import ENGINES, MAX_POINTS, check_grid, launch_command
from kda_core.plan._parallel import connect, local_cluster, run_dask, run_serial
from kda_core.plan._size import PointFailed
from kda_core.sim import costmodel
from kda_core.sim.fast import PreparedTrace, prepare_trace
from kda_core.sizing.hf import shipped_configs
from kda_core.workloads import Trace, load_trace

_CSV_SKIP = ("log_lines",)


@dataclass(frozen=True, slots=True, eq=False)
class Sweep:
    """A sweep's rows (``points``: one dict per grid point in grid order, its flags as the
    engine's argument names plus ``status``, ``max_running``, ``cached_tokens``, the hit rates,
    queueing and TTFT), the ``pareto`` front (point indices), the recommended point (``best``,
    None when none qualifies: ``note`` says why), its ``launch_command`` and ``log_lines`` (what
    the engine prints at start-up), the ``failed`` point indices and how it ran (``runner``)."""

    engine: str
    model: str
    tp: int
    rest_bytes: int
    objective: str
    min_running: int | None
    trace_name: str
    n_requests: int
    points: list
    pareto: tuple
    failed: tuple
    best: dict | None
    launch_command: str | None
    log_lines: tuple
    note: str
    runner: str
    elapsed_s: float

    def to_csv(self) -> str:
        """The points as CSV (one row per point, the start-up lines left out)."""
        cols: list[str] = []
        for p in self.points:
            cols += [k for k in p if k not in cols and k not in _CSV_SKIP]
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for p in self.points:
            w.writerow({k: p.get(k, "") for k in cols})
        return out.getvalue()


def _hub_id(spec: sizing.ModelSpec) -> str:
    """The model id of the shipped config ``spec`` was read from, else its name."""
    for key, entry in shipped_configs().items():
        if key == spec.name or key.startswith(spec.name):
            return entry["source"]["hf_model_id"]
    return spec.name


def _cost(spec: sizing.ModelSpec) -> costmodel.CostSpec | None:
    """The cost model of the preset whose cache shape ``spec`` has (None: none)."""
    try:
        name = sizing.preset_name(spec)
    except ValueError:
        return None
    return costmodel.cost_spec(name) if name in costmodel.COST_PRESETS else None


def _check_model(model: Any) -> tuple[sizing.ModelSpec, str, costmodel.CostSpec | None]:
    """(spec, a model path for the launch command, the cost model or None): a ModelSpec, a
    preset, a shipped config's name, or a config (dict, ``config.json`` or its folder)."""
    if isinstance(model, sizing.ModelSpec):
        spec = model
    elif isinstance(model, str) and model in sizing.PRESETS:
        spec = sizing.preset(model)
    elif isinstance(model, str) and model in shipped_configs():
        spec = sizing.shipped_spec(model)
    elif isinstance(model, (str, Path, dict)):
        try:
            spec = sizing.from_hf_config(model)
        except (ValueError, OSError) as e:
            raise ValueError(f"model: {e}") from None
        if not isinstance(model, dict):
            return spec, str(model), _cost(spec)
    else:
        raise ValueError(
            f"model must be a preset {sorted(sizing.PRESETS)}, a shipped config, a config "
            f"(dict, file or folder) or a ModelSpec, got {type(model).__name__}"
        )
    return spec, _hub_id(spec), _cost(spec)


def _check_trace(trace: Any) -> PreparedTrace:
    if isinstance(trace, (str, Path)):
        try:
            trace = load_trace(trace)
        except (ValueError, OSError) as e:
            raise ValueError(f"trace: {e}") from None
    if isinstance(trace, Trace):
        trace = prepare_trace(trace, outputs=True)  # a synthetic trace's decode-time states
    if not isinstance(trace, PreparedTrace):
        raise ValueError(f"trace must be a path, a Trace or a PreparedTrace, got {trace!r}")
    t = trace.trace
    if not len(t):
        raise ValueError("trace: it has no requests")
    if not t.has_prefix_info:
        raise ValueError(f"trace: {t.name!r} gives request lengths only, no prefix to cache")
    if not trace.chained:
        raise ValueError("trace: its block ids break the chain rule (an id names its prefix)")
    return trace


def _check_options(objective: str, min_running: Any, runners: dict) -> int | None:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if min_running is not None:
        min_running = check_int("min_running", min_running, 1, 1 << 20)
    given = [k for k, v in runners.items() if v is not None]
    if len(given) > 1:
        raise ValueError(f"give at most one of client, scheduler, workers; got {given}")
    if runners["workers"] is not None:
        check_int("workers", runners["workers"], 1, 256)
    if runners["scheduler"] is not None and not str(runners["scheduler"]).startswith("tcp://"):
        raise ValueError(f"scheduler must be 'tcp://HOST:PORT', got {runners['scheduler']!r}")
    return min_running


def _check_jobs(engine: str, spec, tp: int, rest: int, pts: list, cost, tm, prep) -> list[Job]:
    t = prep.trace
    ctx_len = spec.context_len or int((t.input_len + t.output_len).max())
    mean_ctx = float((t.input_len + t.output_len).mean())
    ctx = {"context_len": ctx_len, "mean_context": mean_ctx}
    jobs = [Job(i, engine, spec, tp, rest, f, cost, tm, ctx) for i, f in enumerate(pts)]
    reasons = []
    for job in jobs:  # size every point here: argument errors and budgets that fit nothing
        try:
            size(job, t.block_size)
        except PointFailed as e:
            reasons.append(str(e))
    if len(reasons) == len(jobs):
        raise ValueError(f"no point of the grid can be sized at rest_bytes={rest}: {reasons[0]}")
    return jobs


def _check_scheduler(address: str, timeout_s: float, fallback: str | None) -> Any:
    """A client of the scheduler at ``address``; None when it is unreachable and ``fallback``
    is "serial", else ``ValueError`` saying so."""
    try:
        return connect(address, timeout_s)
    except (OSError, TimeoutError) as e:
        if fallback != "serial":
            raise ValueError(
                f"scheduler: cannot reach {address} ({type(e).__name__}: {e}); pass "
                "fallback='serial' to run on this machine instead"
            ) from None
        return None


def _execute(prep, jobs, runners, fallback, progress) -> tuple[list[dict], str]:
    client, scheduler, workers = runners["client"], runners["scheduler"], runners["workers"]
    if client is not None:
        return run_dask(client, prep, jobs, progress), "dask (the caller's client)"
    if workers is not None:
        cluster, cl = local_cluster(workers)
        try:
            return run_dask(cl, prep, jobs, progress), f"dask LocalCluster ({workers} workers)"
        finally:
            cl.close()
            cluster.close()
    if scheduler is not None:
        cl = _check_scheduler(scheduler, runners["timeout_s"], fallback)
        if cl is None:
            return run_serial(prep, jobs, progress), f"serial (scheduler {scheduler} unreachable)"
        try:
            return run_dask(cl, prep, jobs, progress), f"dask scheduler {scheduler}"
        finally:
            cl.close()
    return run_serial(prep, jobs, progress), "serial"


def sweep(
    model: Any,
    trace: Any,
    *,
    engine: str = "sglang",
    tp: int = 8,
    rest_bytes: int,
    grid: dict | None = None,
    objective: str = "cached_tokens",
    min_running: int | None = None,
    client: Any = None,
    flags: dict | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    fallback: str | None = None,
    timeout_s: float = 10.0,
    model_path: str | None = None,
    time_model: costmodel.TimeModel | None = None,
    max_points: int = MAX_POINTS,
    progress: Any = None,
) -> Sweep:
    """Sweep ``engine``'s flags over ``grid`` (flag -> values; ``flags``: fixed values) for
    ``model`` (a preset, a config or a ModelSpec) at ``tp`` on ``rest_bytes`` per GPU, on
    ``trace`` (a path, a Trace or a PreparedTrace); recommend the point best at ``objective``
    with at least ``min_running`` running requests. Serial by default; on Dask with ``client``
    (a ``distributed.Client``), ``workers`` (a LocalCluster of that many processes, stopped
    after) or ``scheduler`` ("tcp://HOST:8786"; unreachable: ValueError, unless ``fallback=
    "serial"``). ``progress(done, total)`` after each point. Flags and rules: docs/plan.md."""
    t0 = time.perf_counter()
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    spec, name, cost = _check_model(model)
    tp = check_int("tp", tp, 1, 1024)
    rest = check_int("rest_bytes", rest_bytes, 1, 1 << 50)
    max_points = check_int("max_points", max_points, 1, 4096)
    pts = check_grid(engine, grid, flags, max_points)
    runners = {"client": client, "scheduler": scheduler, "workers": workers}
    min_running = _check_options(objective, min_running, runners)
    if fallback not in (None, "serial"):
        raise ValueError(f"fallback must be None or 'serial', got {fallback!r}")
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 600):
        raise ValueError(f"timeout_s must be in (0, 600], got {timeout_s!r}")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    tm = time_model if time_model is not None else costmodel.TimeModel()
    prep = _check_trace(trace)
    jobs = _check_jobs(engine, spec, tp, rest, pts, cost, tm, prep)
    runners["timeout_s"] = float(timeout_s)
    rows, runner = _execute(prep, jobs, runners, fallback, progress)
    best, note = recommend(rows, objective, min_running)
    path = model_path or name
    cmd = None if best is None else launch_command(engine, path, tp, pts[best["point"]])
    return Sweep(
        engine,
        name,
        tp,
        rest,
        objective,
        min_running,
        prep.trace.name,
        len(prep.trace),
        rows,
        pareto(rows, objective),
        tuple(r["point"] for r in rows if r["status"] != "ok"),
        best,
        cmd,
        tuple(best["log_lines"]) if best else (),
        note,
        runner,
        time.perf_counter() - t0,
    )
