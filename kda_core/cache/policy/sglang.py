"""``sglang``: SGLang 0.5.23 mamba state tracking (extra_buffer / no_buffer), per-path cap;
each rule cites the SGLang function it follows (docs/policies.md; checked against SGLang's own
code by tests/real/test_sglang_placement.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy._base import MAX_LEN, PlanContext, Policy, check_steps

__all__ = ["SGLangPolicy", "check_track_interval"]


def check_track_interval(
    mamba_track_interval: int,
    speculative_num_draft_tokens: int | None,
    page_size: int = 1,
    name: str = "mamba_track_interval",
) -> int:
    """``arg_groups/mamba_hook.validate_mamba_extra_buffer``'s spec rules (SGLang asserts
    them at startup): the interval at least the draft tokens, and a multiple of the page.
    ``name``: how the caller spells the interval in its messages. -> the interval. The lab's
    other SGLang speculative rules, used by tests only: tests/sglang_spec_rules.py
    (tests/real/test_spec_vs_sglang.py runs SGLang's own code against both)."""
    interval = check_int(name, mamba_track_interval, 1, MAX_LEN)
    page = check_int("page_size", page_size, 1, MAX_LEN)
    if speculative_num_draft_tokens is not None:
        d = check_int("speculative_num_draft_tokens", speculative_num_draft_tokens, 1, 1 << 10)
        if interval < d:
            raise ValueError(
                f"{name} must be >= speculative_num_draft_tokens={d} "
                f"(SGLang asserts it), got {interval}"
            )
    if interval % page:
        raise ValueError(f"{name} must be a multiple of page_size={page}, got {interval}")
    return interval


@dataclass(slots=True)
class SGLangPolicy(Policy):
    """SGLang mamba state tracking, per-path cap, LRU (see module doc)."""

    grid: int = 64
    chunked_prefill_size: int = 8192
    track_interval: int = 256
    branch: bool = True
    request_end: bool = False
    max_states_per_path: int | None = None
    lru: str = "node"
    buffer: str = "extra_buffer"
    speculative_num_draft_tokens: int | None = None
    name = "sglang"

    def __post_init__(self) -> None:
        self.grid = check_int("grid", self.grid, 1, MAX_LEN)
        self.chunked_prefill_size = check_int("chunked_prefill_size", self.chunked_prefill_size, 1)
        # speculative decoding: SGLang asserts the track interval holds a verify window; the
        # placement is the same with drafts (tests/sglang_spec_rules.py: no bigram keys on a
        # hybrid tree, a decode checkpoint at every boundary an accepted run crosses)
        self.track_interval = check_track_interval(
            self.track_interval, self.speculative_num_draft_tokens, name="track_interval"
        )
        self.branch = check_bool("branch", self.branch)
        self.request_end = check_bool("request_end", self.request_end)
        if self.max_states_per_path is not None:
            self.max_states_per_path = check_int("max_states_per_path", self.max_states_per_path, 1)
        if self.lru not in ("node", "path"):
            raise ValueError(f"lru must be 'node' or 'path', got {self.lru!r}")
        if self.buffer not in ("extra_buffer", "no_buffer"):
            raise ValueError(f"buffer must be 'extra_buffer' or 'no_buffer', got {self.buffer!r}")

    def cache_options(self) -> dict:
        return {"state_touch": self.lru, "max_states_per_path": self.max_states_per_path}

    def check_page(self, page: int) -> None:
        # MambaComponent.__init__ asserts page_size == 1 without the extra buffer
        if self.buffer == "no_buffer" and page != 1:
            raise ValueError(f"buffer='no_buffer' needs page_size=1 (SGLang), got {page}")

    def _steps(self, ctx: PlanContext) -> list[tuple[int, int]]:
        """Prefill scheduler steps ``(prefix_len, extend_end)`` from the restore point."""
        chunk = ctx.chunk or self.chunked_prefill_size
        check_steps((ctx.prompt_len - ctx.restore_at) // chunk, chunk)
        starts = range(ctx.restore_at, ctx.prompt_len, chunk)
        return [(a, min(a + chunk, ctx.prompt_len)) for a in starts]

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        if self.buffer == "no_buffer":
            assert ctx.page == 1, "check_page ran"
            # prepare_for_caching_req without the extra buffer: cache_len = the key length,
            # after every prefill step (checkpoint_kv_cache) and at the finished insert
            return [b for _, b in self._steps(ctx)] + [ctx.total_len]
        # mamba_cache_chunk_size = max(FLA chunk, page); checkpoint grid = lcm(that, page)
        cache_chunk = max(self.grid, ctx.page)
        g = math.lcm(cache_chunk, ctx.page)
        # MambaComponent.finalize_match_result_in_tree_core: the branching seqlen
        aligned = ctx.token_match // g * g
        br = aligned if (self.branch and aligned > ctx.restore_at) else None
        out = []
        for a, b in self._steps(ctx):
            # ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_extend
            ext = b - a
            if ext < g:
                continue
            track = a + ext // g * g
            fla = a + ext // self.grid * self.grid
            raw = b if fla == track else track + 1  # _force_track_h: read from h
            if br is not None and a < br < raw and (br - a) % cache_chunk == 0:
                track = br
            out.append(track)  # checkpoint_kv_cache inserts it after the step
        # decode: _mamba_prefix_cache_update records seq_len % lcm(grid, interval) == 0 and
        # only flips the ping-pong index; the finished insert keeps only the last one
        # (MambaComponent.prepare_for_caching_req / _select_finished_checkpoint)
        d = math.lcm(g, self.track_interval)
        last = ctx.total_len // d * d
        if last > ctx.prompt_len:
            out.append(last)
        if self.request_end:
            out.append(ctx.total_len // ctx.page * ctx.page)
        return out
