"""A SGLang 0.5.23 or vLLM 0.33 server's log read back against a model's config.

``read_log(text, spec)`` parses every line it knows (``parse``), infers the flags the log
implies, rebuilds each number from the config and those flags with the engine's own arithmetic
(``sglang`` / ``vllm``, one module per engine), marks each line ``reproduced``, ``different``
(with the logged and rebuilt numbers), ``input`` (only numbers the rebuild starts from),
``not understood`` (a line cut short) or ``skipped`` (another engine's line; unknown lines are
only counted), and gives a verdict on what bounds concurrency, the requested and effective
``max_running_requests`` with the bound that won, held vs reserved state slots, and per lever
the change that reaches a target concurrency (``fixes``). A fragment is read for what it pins;
what it cannot pin is named (``missing``). Details: docs/sizing.md.
"""

from __future__ import annotations

from kda_core._checks import check_int
from kda_core.sizing.deployment import KNOBS, Deployment
from kda_core.sizing.logread._parse import engine_of, parse_log
from kda_core.sizing.logread._report import (
    REASONS,
    LogReport,
    Reason,
    join_reasons,
)
from kda_core.sizing.logread._sglang import read_sglang
from kda_core.sizing.logread._vllm import read_vllm
from kda_core.sizing.presets import ModelSpec, as_spec

__all__ = ["REASONS", "LogReport", "Reason", "join_reasons", "read_log"]


def read_log(
    text: str,
    spec: ModelSpec | str,
    *,
    tp: int | None = None,
    page_size: int | None = None,
    ratio: float | None = None,
    requested: int | None = None,
    target: int | None = None,
    **vllm_kw: object,
) -> LogReport:
    """Read a SGLang or vLLM log, or any fragment of one (startup lines, per-batch lines,
    ``/metrics`` samples), back against ``spec``.

    ``tp`` is inferred when None (SGLang: from the state sizes, else the ``server_args`` echo,
    else 1 and said so; vLLM: from the non-default args, else 1). ``page_size`` is SGLang's
    ``--page-size`` and ``ratio`` its ``--mamba-full-memory-ratio``; None takes them from a
    ``server_args=`` line, else page 1 and an unknown ratio. ``requested`` is the
    ``--max-running-requests`` given when the paste has no echo of it; ``target`` the
    concurrency the fixes aim at (default: the requested count when the cap falls short of it,
    else twice the cap). ``vllm_kw`` are ``Deployment`` knobs a vLLM log does not print
    (``kernel_block_size``, ``prefill_checkpoint_blocks``, ...). ValueError for a non-string,
    an over-long log or an out-of-range argument only: a paste with no known line gives the
    ``"nothing_known"`` verdict.
    """
    spec = as_spec(spec)
    tp = None if tp is None else check_int("tp", tp, 1, 1 << 16)
    page_size = None if page_size is None else check_int("page_size", page_size, 1, 1 << 20)
    ratio = None if ratio is None else Deployment(0, ratio=ratio).ratio  # its one range
    lo, hi = KNOBS["max_running_requests"]
    requested = None if requested is None else check_int("requested", requested, lo, hi)
    target = None if target is None else check_int("target", target, lo, hi)
    lines = parse_log(text)
    engine = engine_of(lines)
    if not engine:
        why = (Reason("nothing_known", {"skipped": len(lines)}),)
        return LogReport("", spec.name, (), {}, "nothing_known", why, skipped=len(lines))
    if engine == "sglang":
        return read_sglang(spec, lines, tp, page_size, ratio, requested, target)
    return read_vllm(spec, lines, tp, **vllm_kw)
