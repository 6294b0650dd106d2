"""Cached tokens of a resent prompt per engine, with speculative decoding and without: the
speculative_replay app's hits panel and ``plots/plot_spec_hits.py``.

Each prompt length is one prompt sent twice (the prompts of different lengths share nothing);
``hit_reasons`` serves them under SGLang 0.5.23 and vLLM 0.33 with drafts on
(``policy.make("vllm", speculative_config=...)``: the trailing-block drop, lookahead block
hashes and the prefill lookahead as vLLM derives them; ``policy.make("sglang",
speculative_num_draft_tokens=...)``) and reports the second request's cached tokens with drafts
and with drafts off, and its reason. The vLLM rules were run against vLLM's own ``Scheduler``
(tests/real/test_spec_hits_vs_vllm.py) and the simulator against those rules
(tests/test_spec_sim.py). Rules and laws: docs/hit_reasons.md, "Speculative decoding".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.sim.simulator import DEFAULT_TP
from kda_core.studies.hit_reasons import REASONS, hit_reasons
from kda_core.workloads.traces import make_trace

__all__ = ["SpecHits", "spec_hits"]

_MAX_LENGTHS = 64
_MAX_PROMPT = 1 << 17
_SGLANG_GRID = 64  # SGLangPolicy's default checkpoint grid: the trace's blocks divide it


@dataclass(frozen=True, slots=True, eq=False)
class SpecHits:
    """Per prompt length ``[N]``: the cached tokens of its resend with drafts (``vllm``,
    ``sglang``) and with drafts off (``*_no_drafts``), and vLLM's reason with drafts (a
    ``hit_reasons.REASONS`` name). ``speculative_config``: vLLM's flags as given;
    ``sglang_draft_tokens``: SGLang's ``speculative_num_draft_tokens`` (the chain of
    ``num_speculative_tokens`` drafts plus the verified token, as SGLang sets it for
    ``speculative_eagle_topk=1``: ``arg_groups/speculative_hook.py:_handle_eagle_family``)."""

    prompt_len: np.ndarray
    block_size: int
    speculative_config: dict
    sglang_draft_tokens: int
    vllm: np.ndarray
    vllm_no_drafts: np.ndarray
    vllm_reason: tuple[str, ...]
    sglang: np.ndarray
    sglang_no_drafts: np.ndarray


def _default_lengths(block: int, blocks: int = 4) -> tuple[int, ...]:
    """Prompt lengths around the block multiples (``U - 1, U, U + 1, 2U - 1, ...``)."""
    U = check_int("block", block, 1, _MAX_PROMPT)
    n = check_int("blocks", blocks, 1, _MAX_LENGTHS // 3)
    return tuple(k * U + d for k in range(1, n + 1) for d in (-1, 0, 1))


def _repeats(lengths: Sequence[int], g: int):
    """A trace of each length sent twice, blocks of ``g`` tokens (disjoint ids per length)."""
    per = [-(-L // g) for L in lengths]
    blocks, lens = [], []
    for j, (L, b) in enumerate(zip(lengths, per, strict=True)):
        ids = np.arange(b, dtype=np.int64) + j * (_MAX_PROMPT + 1)
        blocks += [ids, ids]
        lens += [L, L]
    n = len(lens)
    offsets = np.concatenate(([0], np.cumsum([len(b) for b in blocks])))
    zeros = np.zeros(n, dtype=np.int64)
    arrival = np.arange(n, dtype=np.float64)
    return make_trace(
        "spec_repeats",
        g,
        arrival,
        np.array(lens, dtype=np.int64),
        zeros + 1,
        offsets,
        np.concatenate(blocks),
        zeros - 1,
        zeros,
        ("repeat",),
    )


def spec_hits(
    prompt_lens: Sequence[int] | None = None,
    *,
    speculative_config: Mapping[str, Any],
    block_size: int | None = None,
    model: str = "kimi-k3",
    tp: int = DEFAULT_TP,
) -> SpecHits:
    """The cached tokens of a resent prompt of each length in ``prompt_lens`` (None: around
    the first 4 block multiples, ``U - 1, U, U + 1, 2U - 1, ...``; at most 64 lengths of 1 ..
    2**17 tokens) under vLLM's ``speculative_config`` (``VLLMPolicy``'s checks) and SGLang
    with the same draft count.
    ``block_size``: vLLM's block (None: ``sizing.vllm_plan(model, tp=tp)``'s, 768 tokens for
    Kimi K3 at TP8). ``ValueError`` naming the argument for bad input."""
    if not isinstance(speculative_config, Mapping):
        raise ValueError(f"speculative_config must be a dict, got {speculative_config!r}")
    if block_size is None:
        block_size = sizing.vllm_plan(model, 1 << 34, tp=tp, max_model_len=1 << 17).block_size
    U = check_int("block_size", block_size, 1, _MAX_PROMPT)
    lengths = _default_lengths(U) if prompt_lens is None else tuple(prompt_lens)
    if not 1 <= len(lengths) <= _MAX_LENGTHS:
        raise ValueError(f"prompt_lens must hold 1 to {_MAX_LENGTHS} lengths, got {len(lengths)}")
    lengths = tuple(check_int("prompt_lens", L, 1, _MAX_PROMPT) for L in lengths)
    k = check_int(
        "speculative_config.num_speculative_tokens",
        speculative_config.get("num_speculative_tokens"),
        1,
        64,
    )
    trace = _repeats(lengths, math.gcd(U, _SGLANG_GRID))
    vllm = {"block_size": U, "speculative_config": dict(speculative_config)}
    r = hit_reasons(
        trace, model=model, tp=tp, vllm=vllm, sglang={"speculative_num_draft_tokens": k + 1}
    )
    second = slice(1, None, 2)
    v, s = r.vllm, r.sglang
    assert v.cached_no_drafts is not None and s.cached_no_drafts is not None
    return SpecHits(
        np.array(lengths, dtype=np.int64),
        U,
        dict(speculative_config),
        k + 1,
        v.cached[second],
        v.cached_no_drafts[second],
        tuple(REASONS[c] for c in v.reason[second]),
        s.cached[second],
        s.cached_no_drafts[second],
    )
