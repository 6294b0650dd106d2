"""``python -m kda_core.sizing plan CONFIG --trace FILE [...]``: the engine's flags on a trace.

CONFIG as ``python -m kda_core.sizing`` takes it (a ``config.json`` or its folder, a shipped
config's name or a preset); ``--gpu-mem`` the cache budget per GPU in GiB; ``--grid
FLAG=V1,V2,...`` one swept flag (repeat it), ``--set FLAG=V`` one fixed flag, flags spelled as
the engine's arguments (dashes or underscores: ``--grid mamba-full-memory-ratio=0.3,0.9``; a
drafter: ``--grid speculative-algorithm=none,NEXTN``, vLLM's ``--grid
speculative-config.method=none,mtp``, ``--set use-replayssm=true``);
``--objective`` and ``--min-running`` choose the recommendation; ``--workers N`` runs on a local
Dask cluster, ``--scheduler tcp://HOST:8786`` on the user's (``--fallback serial`` when it cannot
be reached). A progress bar on the terminal (stderr); the points, the Pareto front, the
recommended launch command and what the engine prints at start-up on stdout (``--json``: one
JSON object; ``--csv FILE``: the points). Bad input exits with status 2 and one line naming the
argument, as ``python -m kda_core.sizing`` does. docs/plan.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from kda_core.plan._flags import FLAGS, MAX_POINTS
from kda_core.plan._sweep import Sweep, sweep
from kda_core.sizing.deployment import gib_bytes

_SHOWN = ("status", "max_running", "cached_tokens", "state_hit_rate", "ttft_p99_s", "queued")
_DRAFT_SHOWN = (
    "kv_tokens",
    "kv_tokens_without_draft",
    "draft_kv_unpriced_bytes",
    "draft_kv_pool_bytes",
    "draft_kv_bytes_per_request",
)
"""Shown when a point has a drafter: the KV the engine's pool keeps, and without the drafter."""
_BAR = 30


class _ArgError(Exception):
    """A bad argument: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise _ArgError(message)


def _parser() -> _Parser:
    p = _Parser(prog="python -m kda_core.sizing plan", description=__doc__.split("\n\n")[0])
    p.add_argument("config", help="config.json, its folder, a shipped config or a preset")
    p.add_argument("--trace", required=True, type=Path, help="a request trace (JSONL, CSV)")
    p.add_argument("--engine", choices=("sglang", "vllm"), default="sglang")
    p.add_argument("--gpu-mem", type=float, default=40.0, help="cache budget per GPU, GiB")
    p.add_argument("--tp", "--tp-size", "--tensor-parallel-size", type=int, default=8, dest="tp")
    p.add_argument("--grid", action="append", default=[], metavar="FLAG=V1,V2")
    p.add_argument("--set", action="append", default=[], metavar="FLAG=V", dest="fixed")
    p.add_argument("--objective", default="cached_tokens")
    p.add_argument("--min-running", type=int, default=None)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT")
    p.add_argument("--fallback", choices=("serial",), default=None)
    p.add_argument("--max-points", type=int, default=MAX_POINTS)
    p.add_argument("--csv", type=Path, default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    return p


def _value(engine: str, flag: str, text: str) -> Any:
    kind = FLAGS[engine][flag][0]
    if text.lower() == "none" and kind in ("choice", "text"):
        return None  # no drafter (a grid value like any other)
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise _ArgError(f"{flag}: {text!r} is not true or false")
        return text.lower() == "true"
    try:
        return int(text) if kind == "int" else float(text) if kind == "float" else text
    except ValueError:
        raise _ArgError(f"{flag}: {text!r} is not a {kind}") from None


def _pairs(engine: str, items: list[str], many: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        flag = name.strip().lstrip("-").replace("-", "_")
        if not sep or not text:
            raise _ArgError(f"{'--grid' if many else '--set'}: expected FLAG=VALUE, got {item!r}")
        if flag not in FLAGS[engine]:
            raise _ArgError(f"{flag}: not a {engine} flag (one of {sorted(FLAGS[engine])})")
        vals = [_value(engine, flag, v.strip()) for v in text.split(",")]
        out[flag] = vals if many else vals[0]
    return out


class _Bar:
    """A progress bar on ``stream``: redrawn in place on a terminal, a line per point elsewhere."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.t0 = stream, time.perf_counter()
        self.tty = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        fill = _BAR * done // max(total, 1)
        s = time.perf_counter() - self.t0
        line = f"[{'#' * fill}{'-' * (_BAR - fill)}] {done}/{total} points {s:.0f} s"
        end = "\n" if done == total or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line + end)
        self.stream.flush()


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _text(s: Sweep, swept: list[str]) -> str:
    head = f"{s.model} on {s.engine}, TP {s.tp}, {s.rest_bytes / (1 << 30):g} GiB per GPU"
    lines = [head, f"  trace {s.trace_name}: {s.n_requests} requests; {s.runner}"]
    drafter = any("kv_tokens_without_draft" in p for p in s.points)
    drafts = [c for c in _DRAFT_SHOWN if drafter and any(c in p for p in s.points)]
    cols = list(dict.fromkeys(["point", *swept, *_SHOWN, *drafts]))
    rows = [[_cell(p.get(c, "")) for c in cols] for p in s.points]
    width = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(cols, width)))
    for p, row in zip(s.points, rows):
        mark = " *" if s.best is not None and p["point"] == s.best["point"] else ""
        why = f"  ({p['reason']})" if p["reason"] else ""
        lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(row, width)) + mark + why)
    lines.append(f"Pareto front ({s.objective}, max_running): points {list(s.pareto)}")
    lines.append(f"recommended: {s.note}")
    if s.launch_command:
        lines += [f"  {s.launch_command}", "  would print:", *[f"    {x}" for x in s.log_lines]]
    return "\n".join(lines)


def _run(argv: Sequence[str], progress: Any = None) -> tuple[Sweep, list[str], argparse.Namespace]:
    """The sweep of ``argv``, the swept flags and the parsed arguments; ``_ArgError`` /
    ValueError for bad input."""
    a = _parser().parse_args(list(argv))
    grid, fixed = _pairs(a.engine, a.grid, True), _pairs(a.engine, a.fixed, False)
    s = sweep(
        a.config,
        str(a.trace),
        engine=a.engine,
        tp=a.tp,
        rest_bytes=gib_bytes("--gpu-mem", a.gpu_mem),
        grid=grid,
        flags=fixed,
        objective=a.objective,
        min_running=a.min_running,
        workers=a.workers,
        scheduler=a.scheduler,
        fallback=a.fallback,
        max_points=a.max_points,
        progress=progress,
    )
    if a.csv is not None:
        a.csv.write_text(s.to_csv(), encoding="utf-8")
    return s, list(grid), a


def main(argv: Sequence[str] | None = None) -> int:
    """The subcommand (``argv``: what follows ``plan``); exit status 0, or 2 for bad input."""
    argv = list(sys.argv[2:] if argv is None else argv)
    bar = None if "--no-progress" in argv else _Bar(sys.stderr)
    try:
        s, swept, a = _run(argv, bar)
    except (_ArgError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        keys = ("points", "pareto", "failed", "best", "launch_command", "log_lines", "note")
        out = {"runner": s.runner, **{k: getattr(s, k) for k in keys}}
        print(json.dumps(out, indent=1))
    else:
        print(_text(s, swept))
    return 0
