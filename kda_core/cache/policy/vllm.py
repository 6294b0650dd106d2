"""``vllm``: vLLM 0.33 V1 Mamba prefix caching (align / all, retention, partial hits).

``_vllm_align_chunk_ends`` follows ``Scheduler._mamba_block_aligned_split``; retention follows
``MambaManager.reachable_block_mask`` (docs/policies.md; checked against vLLM's own code by
tests/real/test_vllm_placement.py). LRU eviction with a request's blocks freed tail-first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy._context import MAX_LEN, MAX_POSITIONS, PlanContext
from kda_core.cache.policy.base import Policy

__all__ = ["VLLMPolicy"]


@dataclass(slots=True)
class VLLMPolicy(Policy):
    """vLLM V1 Mamba prefix caching: align / all, retention, partial hits (see module doc)."""

    mode: str = "align"
    block_size: int | None = None
    max_num_batched_tokens: int = 2048
    retention: int | None = None
    shared_prefix: bool = True
    partial_hits: bool = False
    match_unit: int = 16
    name = "vllm"

    def __post_init__(self) -> None:
        if self.mode not in ("align", "all"):
            raise ValueError(f"mode must be 'align' or 'all', got {self.mode!r}")
        if self.block_size is not None:
            self.block_size = check_int("block_size", self.block_size, 1, MAX_LEN)
        self.max_num_batched_tokens = check_int(
            "max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_LEN
        )
        if self.retention is not None:
            self.retention = check_int("retention", self.retention, 0, MAX_LEN)
        self.shared_prefix = check_bool("shared_prefix", self.shared_prefix)
        self.partial_hits = check_bool("partial_hits", self.partial_hits)
        self.match_unit = check_int("match_unit", self.match_unit, 1, MAX_LEN)

    def cache_options(self) -> dict:
        return {"state_touch": "path_tail_first", "max_states_per_path": None}

    def _units(self, page: int) -> tuple[int, int]:
        """(block B, hit unit u): u = B, or the fine-grained match unit with partial hits."""
        B = self.block_size if self.block_size is not None else math.lcm(64, page)
        u = math.lcm(self.match_unit, page) if self.partial_hits else B
        return B, u

    def check_page(self, page: int) -> None:
        B, u = self._units(page)
        if B % page:
            raise ValueError(f"block_size must be a multiple of page_size={page}, got {B}")
        if self.partial_hits and B % u:
            raise ValueError(
                f"match_unit={self.match_unit} (rounded to page {page}: {u}) must divide "
                f"block_size={B}"
            )
        if self.retention is not None and self.retention % B:
            raise ValueError(
                f"retention must be a multiple of block_size={B}, got {self.retention}"
            )

    def _check_sizes(self, ctx: PlanContext) -> None:
        if self.mode != "align":
            return  # "all" plans through ctx.multiples, which bounds itself
        # _vllm_align_chunk_ends takes at most 2 * ceil(span / chunk) + 8 steps (a step
        # advances a chunk or reaches a block boundary; the 3 fixed stops add 2 steps each)
        chunk = ctx.chunk or self.max_num_batched_tokens
        span = max(ctx.prompt_len - ctx.restore_at, 0)
        if 2 * -(-span // chunk) + 8 > MAX_POSITIONS:
            raise ValueError(f"chunk_size={chunk} gives more than {MAX_POSITIONS} steps")

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        B, u = self._units(ctx.page)
        P, T = ctx.prompt_len, ctx.total_len
        # KVCacheManager.get_computed_blocks: the hit is capped at P - 1 tokens; the
        # shared-prefix junction (request.shared_prefix_boundary) is the KV hit beyond it
        tm = min(ctx.token_match, P - 1)
        junction = ctx.down(tm, u) if self.shared_prefix else 0
        if junction <= ctx.restore_at:
            junction = 0
        # replay_boundaries (kv_cache_coordinator.py): a resend resumes at P - 1
        replay = ctx.down(P - 1, u)
        tail = replay if self.partial_hits else 0
        if self.mode == "all":  # lab idealisation: a state at every block boundary
            base = list(ctx.multiples(B, ctx.restore_at, T, "block_size"))
            base += [p for p in (junction, tail) if p % B]
        else:
            chunk = ctx.chunk or self.max_num_batched_tokens
            base = _vllm_align_chunk_ends(ctx.restore_at, P, B, chunk, junction, tail)
            base = [p for p in base if p % B == 0 or p in (junction, tail)]
            # decode: the block a prompt's last chunk left is advanced to each boundary
            base += list(ctx.multiples(B, P, T, "block_size"))
        if self.retention is None:
            return base
        # MambaManager.reachable_block_mask: segment ends every `retention` tokens (dense
        # when retention <= B) plus the reachable boundaries (replay point and junction)
        if 0 < self.retention <= B:
            return base
        keep = {replay, junction}
        return [p for p in base if p in keep or (self.retention and p % self.retention == 0)]


def _vllm_align_chunk_ends(
    start: int, prompt_len: int, block: int, chunk: int, junction: int, tail: int
) -> list[int]:
    """Prefill chunk ends of ``Scheduler._mamba_block_aligned_split`` (vLLM 0.33, align mode,
    one request, no EAGLE, no internal prefill checkpoint), from ``start`` to the prompt end.

    A chunk is cut to whole blocks unless it ends the prompt (or a block is wider than the
    chunk: then it advances within the block); it also stops at the next block boundary
    when it starts mid-block, at the last cacheable boundary ``floor((P - 1) / B) * B``, at
    the partial-hit tail boundary and at the shared-prefix junction.
    """
    last_cache = max((prompt_len - 1) // block * block, 0)
    start0 = start
    out = []
    steps = 0
    while start < prompt_len:
        end = min(start + chunk, prompt_len)
        if end < prompt_len:
            aligned_end = end // block * block
            if aligned_end > start or block <= chunk:
                end = aligned_end
        stops = (
            (start // block + 1) * block if start % block else 0,
            last_cache,
            tail if last_cache < tail < prompt_len else 0,
            junction,
        )
        end = min((s for s in stops if start < s < end), default=end)
        assert end > start, "chunk >= 1 always progresses"
        out.append(end)
        start = end
        steps += 1
    assert steps <= 2 * -(-(prompt_len - start0) // chunk) + 8, "VLLMPolicy._check_sizes' bound"
    return out
