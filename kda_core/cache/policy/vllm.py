"""``vllm``: vLLM 0.33 V1 Mamba prefix caching (align / all, retention, partial hits), and the
vLLM rules the policy and ``kda_core.cache.vllm_blocks`` share: the chunk cut
(``aligned_split``) and, from ``_vllm_drafts``, the prompt's checkpoint boundary
(``checkpoint_position``), the replay boundaries and sparse retention (``retained``).
docs/policies.md; checked against vLLM's own code by tests/real/test_vllm_placement.py and
tests/real/test_vllm_blocks.py.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy._base import MAX_LEN, PlanContext, Policy, check_steps
from kda_core.cache.policy._vllm_drafts import (
    Drafts,
    SpecStallWarning,
    checkpoint_position,
    derive,
    parse_speculative_config,
    replay_boundaries,
    retained,
    stall_message,
)

__all__ = ["VLLMPolicy", "aligned_split"]


def aligned_split(
    start: int,
    want: int,
    num_tokens: int,
    prompt_len: int,
    block: int,
    unit: int,
    fine: bool,
    chunk: int,
    junction: int,
    extra_stop: int = 0,
    *,
    drop: bool = False,
    hash_lookahead: int = 0,
    prefill_lookahead: int = 0,
) -> int:
    """``Scheduler._mamba_block_aligned_split`` (align mode, no internal prefill checkpoint,
    no shared-prefix checkpoint), then ``Scheduler._reserve_prefill_lookahead``: how many of
    ``want`` tokens from ``start`` the chunk computes, so that it ends where a state must
    exist. A chunk that does not end the prompt is cut to whole blocks (unless a block is wider
    than the ``chunk`` budget: then it advances within the block); it also stops at the next
    block boundary when it starts mid-block, at the last cacheable boundary
    (``checkpoint_position(num_tokens, block, ...)``), at the prompt's checkpoint boundary on
    the hash grid (``fine``: fine-grained hits) and at the shared-prefix ``junction`` floored
    to the block grid counted from ``start``. ``extra_stop``: a stop of the lab's own
    (``VLLMPolicy(partial_hits=True)``: the junction on the unit grid), 0: none. ``drop``
    (``use_eagle_block_drop``) and ``hash_lookahead`` (``num_hash_lookahead_tokens``) move the
    checkpoint boundaries; a chunk never ends within ``prefill_lookahead`` tokens of the end
    (multi-module MTP): it is cut back, possibly to 0 (the request is skipped this step; a
    prompt whose every step is 0 stalls)."""
    new, prefill_end = want, max(prompt_len, num_tokens - 1)
    if start < prefill_end:
        end = start + want
        if end < prefill_end:
            aligned = end // block * block
            if aligned > start or block <= chunk:
                end = aligned
        # the nearest stop in (start, end), else end (one pass, no tuple: a hot path)
        last_cache = checkpoint_position(num_tokens, block, drop, hash_lookahead)
        stop = last_cache if start < last_cache < end else end
        if start % block:
            stop = min(stop, (start // block + 1) * block)
        if fine:
            tail = checkpoint_position(prompt_len, unit, drop, hash_lookahead)
            if last_cache < tail < prompt_len and start < tail < stop:
                stop = tail
        if start < junction < end:
            s = start + (junction - start) // block * block
            if start < s < stop:
                stop = s
        if start < extra_stop < stop:
            stop = extra_stop
        new = max(stop - start, 0)
    remaining = num_tokens - start - new  # Scheduler._reserve_prefill_lookahead
    if 0 < remaining < prefill_lookahead:
        new -= prefill_lookahead - remaining
    return max(new, 0)


@dataclass(slots=True)
class VLLMPolicy(Policy):
    """vLLM V1 Mamba prefix caching (see module doc). ``speculative_config``: vLLM's dict
    (``_vllm_drafts.parse_speculative_config``), align mode only; ``kv_transfer_config``: True
    when a KV connector is configured (it keeps the legacy hashes, so EAGLE / MTP drop the
    last block)."""

    mode: str = "align"
    block_size: int | None = None
    max_num_batched_tokens: int = 2048
    retention: int | None = None
    shared_prefix: bool = True
    partial_hits: bool = False
    match_unit: int = 16
    speculative_config: dict | None = None
    kv_transfer_config: bool = False
    drafts: Drafts = field(init=False, repr=False, compare=False)
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
        kv = check_bool("kv_transfer_config", self.kv_transfer_config)
        self.speculative_config = parse_speculative_config(self.speculative_config)
        self.drafts = derive(self.speculative_config, kv)
        if self.mode == "all" and (self.partial_hits or self.speculative_config):
            # kv_cache_utils.partial_hash_hits_enabled: align-mode Mamba groups only; and
            # vLLM 0.33 caches Mamba prefixes in align mode only (MambaManager.__init__)
            what = "partial_hits" if self.partial_hits else "speculative_config"
            raise ValueError(f"{what} needs mode='align' (vLLM 0.33: align-mode Mamba only)")
        C, L = self.max_num_batched_tokens, self.drafts.lookahead
        if L >= C:  # VllmConfig._set_max_num_scheduled_tokens
            raise ValueError(
                f"max_num_batched_tokens must be > num_speculative_tokens={L}, got {C}"
            )

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
        k = self.drafts.prefill_lookahead
        if k > B:  # KVCacheCoordinator.__init__: multi-module MTP with prefix caching
            raise ValueError(
                f"block_size={B} must be >= num_speculative_tokens={k} with multi-module MTP "
                "(n_predict > 1) and prefix caching (vLLM refuses it)"
            )

    def lookup_limit(self, input_len: int, shared: int, page: int = 1) -> int:
        """The attention (draft) group's hit, on the hit grid, for a request of ``input_len``
        tokens sharing ``shared`` tokens with earlier requests' KV (``HybridKVCacheCoordinator.
        find_longest_cache_hit``): a KDA state at or below it restores; it is the shared-prefix
        junction when the state lies below. With partial hits the lab assumes every unit
        boundary inside the shared tokens is keyed (vLLM keys one tail a block)."""
        n = check_int("input_len", input_len, 1, MAX_LEN)
        s = min(check_int("shared", shared, 0, MAX_LEN), n)
        a = self._units(check_int("page", page, 1, 1 << 16))[1]
        d = self.drafts
        if d.drop:  # eagle_proof_margin, then FullAttentionManager drops one unit
            return max(min(s, n // a * a) // a * a - a, 0)
        return max(min(n - 1, s - d.hash_lookahead) // a * a, 0)  # a hash needs L tokens past it

    def _positions(self, ctx: PlanContext) -> Iterable[int]:
        B, u = self._units(ctx.page)
        P, T, d = ctx.prompt_len, ctx.total_len, self.drafts
        # KVCacheManager.get_computed_blocks: the hit is capped at P - 1 tokens; the
        # shared-prefix junction (request.shared_prefix_boundary) is the KV hit beyond it
        junction = min(ctx.token_match, P - 1) // u * u
        if not self.shared_prefix or junction <= ctx.restore_at:
            junction = 0
        if self.mode == "all":  # lab idealisation: a state at every block boundary
            keep = ((P - 1) // B * B, junction)
            every = ctx.multiples(B, ctx.restore_at, T, "block_size")
            return [p for p in every if retained(p, B, self.retention, keep)]
        # the prompt's checkpoint boundary on the hit grid (the block without partial hits),
        # keyed whatever the retention (MambaManager._cache_partial_tail_block); the junction
        # stop likewise
        tail = checkpoint_position(P, u, d.drop, d.hash_lookahead)
        ends = self._chunk_ends(ctx, B, u, junction)
        # a block's state is keyed once its hash exists (lookahead: L tokens past it)
        hashed = (P - d.hash_lookahead) // u * u
        base = [p for p in ends if p % B == 0 and p <= hashed]
        # decode: the block a prompt's last chunk left is advanced to each boundary
        base += [p for p in ctx.multiples(B, P, T, "block_size") if p <= T - d.hash_lookahead]
        # replay_boundaries (kv_cache_coordinator.py) and the junction, on the block grid
        keep = {t // B * B for t in (*replay_boundaries(P, B, d.drop), junction)}  # u divides B
        kept = [p for p in base if retained(p, B, self.retention, keep)]
        return kept + [p for p in ends if p and p in (tail, junction)]

    def _chunk_ends(self, ctx: PlanContext, B: int, u: int, junction: int) -> list[int]:
        """The prefill chunk ends from the restore point: ``aligned_split`` in the scheduler's
        loop. With partial hits the junction on the unit grid is a stop of its own (the lab's
        approximation: vLLM floors it to the block grid counted from the chunk start). A step
        of 0 tokens (multi-module MTP) repeats forever: ``SpecStallWarning``, and the ends so
        far."""
        chunk, fine, d = ctx.chunk or self.max_num_batched_tokens, self.partial_hits, self.drafts
        P, at, out = ctx.prompt_len, ctx.restore_at, []
        junc, extra = (0, junction) if fine else (junction, 0)
        kw = {f: getattr(d, f) for f in ("drop", "hash_lookahead", "prefill_lookahead")}
        # at most 2 * ceil(span / chunk) + 8 steps (a step advances a chunk or reaches a block
        # boundary; the fixed stops add 2 steps each)
        bound = 2 * -(-(P - at) // chunk) + 8
        check_steps(bound, chunk)
        while at < P:
            n = aligned_split(at, min(chunk, P - at), P, P, B, u, fine, chunk, junc, extra, **kw)
            if n == 0:
                assert d.prefill_lookahead > 1, "without a prefill lookahead a chunk progresses"
                warnings.warn(stall_message(d, B, chunk, u), SpecStallWarning, stacklevel=4)
                break
            at += n
            out.append(at)
        assert len(out) <= bound, "the step bound above"
        return out
