"""A SGLang 0.5.23 or vLLM 0.33 server's log read back against a model's config.

``read_log(text, spec)`` parses every line it knows (``parse``), infers the flags the log
implies, rebuilds each number from the config and those flags with the engine's own arithmetic
(``sglang`` / ``vllm``, one module per engine), marks each line ``reproduced``, ``different``
(with the logged and rebuilt numbers), ``input`` (only numbers the rebuild starts from),
``not understood`` or ``skipped``, and gives a verdict on what bounds concurrency with the flag
changes that lift it (``verdict``). Details: docs/sizing.md.
"""

from __future__ import annotations

from kda_core._checks import check_int
from kda_core.sizing.deployment import Deployment
from kda_core.sizing.logread._parse import engine_of, parse_log
from kda_core.sizing.logread._report import LineVerdict, LogReport
from kda_core.sizing.logread._sglang import read_sglang
from kda_core.sizing.logread._vllm import read_vllm
from kda_core.sizing.presets import ModelSpec, as_spec

__all__ = ["LineVerdict", "LogReport", "read_log"]


def read_log(
    text: str,
    spec: ModelSpec | str,
    *,
    tp: int | None = None,
    page_size: int | None = None,
    ratio: float | None = None,
    **vllm_kw: object,
) -> LogReport:
    """Read a SGLang or vLLM startup log (and per-batch lines, ``/metrics`` samples) back
    against ``spec``.

    ``tp`` is inferred when None (SGLang: from the state sizes; vLLM: from the non-default
    args, else 1). ``page_size`` is SGLang's ``--page-size`` (the KV line's padding rows) and
    ``ratio`` its ``--mamba-full-memory-ratio`` (SGLang's default is 0.9); None takes them from
    a ``server_args=`` line, else page 1 and an unknown ratio (the slot count is then an input).
    ``vllm_kw`` are ``Deployment`` knobs a vLLM log does not print (``kernel_block_size``,
    ``prefill_checkpoint_blocks``, ...). ValueError for a malformed log (``parse_log``).
    """
    spec = as_spec(spec)
    tp = None if tp is None else check_int("tp", tp, 1, 1 << 16)
    page_size = None if page_size is None else check_int("page_size", page_size, 1, 1 << 20)
    ratio = None if ratio is None else Deployment(0, ratio=ratio).ratio  # its one range
    lines = parse_log(text)
    if engine_of(lines) == "sglang":
        return read_sglang(spec, lines, tp, page_size, ratio)
    return read_vllm(spec, lines, tp, **vllm_kw)
