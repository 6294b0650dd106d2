"""The lab's closed-form rules for vLLM 0.33 with speculative decoding (EAGLE / EAGLE3 / MTP) on a
KDA hybrid in align mode: where one prompt's prefill chunks end, which KDA states it keys and
what a repeat of the prompt then hits (the flags: ``kda_core.cache.policy._vllm_drafts``).
Each rule names the vLLM function it follows (the laws with line numbers: docs/hit_reasons.md).

Not an independent oracle: it reuses the lab's ``aligned_split``, ``checkpoint_position``,
``replay_boundaries`` and ``retained``, so against the simulator (tests/test_spec_sim.py) it
checks the replay around them. The independent check is tests/real/test_spec_hits_vs_vllm.py:
vLLM's own ``Scheduler`` and ``KVCacheManager`` over a grid against ``repeat_hits``.

Modelled: one MLA group (it holds the draft's layers, ``is_eagle_group``) and one KDA group
(``MambaSpec``, align mode, no internal prefill checkpoint), block ``U``, hash unit ``u``
(``prefix_match_unit``), no KV connector on the request path (``kv_transfer_config`` only
switches the hashes), prompts served one at a time to the end."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy._vllm_drafts import (
    Drafts,
    SpecStallWarning,
    checkpoint_position,
    replay_boundaries,
    retained,
    stall_message,
)
from kda_core.cache.policy.vllm import VLLMPolicy, aligned_split

MAX_TOKENS = 1 << 24


@dataclass(frozen=True, slots=True)
class VLLMSpec(Drafts):
    """``Drafts`` (the flags as vLLM spells them and what vLLM 0.33 derives from them) with the
    sizes; ``prefix_match_unit`` is the hit grid (``u`` with partial hits, else ``U``);
    ``speculative_blocks``: ``MambaSpec.num_speculative_blocks`` (0 with ReplaySSM)."""

    block_size: int = 1
    max_num_batched_tokens: int = 2048
    prefix_match_unit: int = 1
    retention: int | None = 0
    speculative_blocks: int = 0

    @property
    def align(self) -> int:
        return self.prefix_match_unit


def vllm_spec(
    block_size: int,
    *,
    max_num_batched_tokens: int = 2048,
    speculative_config: Mapping[str, Any] | None = None,
    prefix_match_unit: int | None = None,
    prefix_cache_retention_interval: int | None = 0,
    kv_transfer_config: bool = False,
    replayssm: bool = False,
) -> VLLMSpec:
    """The derived rules, refusing what vLLM 0.33 refuses (ValueError naming the flag): the
    checks of ``VLLMPolicy`` (align mode, partial hits below the block) on vLLM's flag names.

    Retention defaults to 0, ``CacheConfig.prefix_cache_retention_interval``'s default."""
    U = check_int("block_size", block_size, 1, MAX_TOKENS)
    u = U if prefix_match_unit is None else check_int("prefix_match_unit", prefix_match_unit, 1, U)
    if U % u:
        # kv_cache_utils.resolve_kv_cache_block_sizes: every group's block divides by it
        raise ValueError(f"prefix_match_unit must divide block_size={U}, got {u}")
    r = prefix_cache_retention_interval
    if r is not None:
        r = check_int("prefix_cache_retention_interval", r, 0, MAX_TOKENS)
        if r % U:
            # kv_cache_coordinator._validate_prefix_cache_retention_interval
            raise ValueError(
                f"prefix_cache_retention_interval must be a multiple of block_size={U}, got {r}"
            )
    policy = VLLMPolicy(
        block_size=U,
        max_num_batched_tokens=max_num_batched_tokens,
        retention=r,
        partial_hits=u < U,
        match_unit=u,
        speculative_config=speculative_config,
        kv_transfer_config=kv_transfer_config,
    )
    policy.check_page(1)
    d = policy.drafts
    k = 0 if check_bool("replayssm", replayssm) else d.num_speculative_tokens
    derived = {f.name: getattr(d, f.name) for f in fields(d)}
    return VLLMSpec(
        **derived,
        block_size=U,
        max_num_batched_tokens=policy.max_num_batched_tokens,
        prefix_match_unit=u,
        retention=r,
        speculative_blocks=k,
    )


def partial_hits_enabled(mamba_cache_mode: str, block_size: int, prefix_match_unit: int) -> bool:
    """``kv_cache_utils.partial_hash_hits_enabled`` (one KDA group, no decode context
    parallelism): sub-block hits only for an align-mode Mamba group whose block is wider than
    the hash unit. In "all" mode (a state per block) vLLM matches on whole blocks."""
    if mamba_cache_mode not in ("align", "all"):
        raise ValueError(f"mamba_cache_mode must be 'align' or 'all', got {mamba_cache_mode!r}")
    U = check_int("block_size", block_size, 1, MAX_TOKENS)
    u = check_int("prefix_match_unit", prefix_match_unit, 1, U)
    return mamba_cache_mode == "align" and u < U


def prefill_chunks(
    s: VLLMSpec, prompt_len: int, hit: int = 0, junction: int = 0
) -> tuple[tuple[int, ...], bool]:
    """The chunk ends of one prompt's prefill from ``hit`` and whether the scheduler stalls
    (a step of 0 tokens: nothing changes, so every later step is 0 too)."""
    n = check_int("prompt_len", prompt_len, 1, MAX_TOKENS)
    start = check_int("hit", hit, 0, n - 1)
    ends: list[int] = []
    while start < n:
        new = aligned_split(
            start,
            min(n - start, s.max_num_batched_tokens),
            n,
            n,
            s.block_size,
            s.prefix_match_unit,
            s.align < s.block_size,
            s.max_num_batched_tokens,
            junction,
            drop=s.drop,
            hash_lookahead=s.hash_lookahead,
            prefill_lookahead=s.prefill_lookahead,
        )
        if new == 0:
            return tuple(ends), True
        start += new
        ends.append(start)
    return tuple(ends), False


def _state_keys(s: VLLMSpec, n: int, ends: tuple[int, ...], junction: int) -> set[int]:
    """The KDA states a prompt's prefill keys at or below ``n - 1`` (``MambaManager.
    cache_blocks``): a chunk end on the block grid whose hash exists (lookahead hashes need
    ``hash_lookahead`` tokens after it) and that retention keeps; and the chunk end at the
    prompt's checkpoint boundary (``_cache_partial_tail_block``, kept whatever retention)."""
    U = s.block_size
    hashed = (n - s.hash_lookahead) // s.prefix_match_unit * s.prefix_match_unit
    tail = checkpoint_position(n, s.prefix_match_unit, s.drop, s.hash_lookahead)
    # MambaManager.reachable_block_mask: the replay boundaries and the junction, floored to
    # the hit grid, then to the block grid
    reach = (*replay_boundaries(n, U, s.drop), *([junction] if junction else []))
    keep = {b // s.align * s.align // U * U for b in reach}
    out = set()
    for e in ends:
        if e >= n:
            continue
        if e % U == 0 and e <= hashed and retained(e, U, s.retention, keep):
            out.add(e)
        if e == tail:
            out.add(e)
    return out


def _lookup(s: VLLMSpec, n: int, states: set[int]) -> tuple[int, int]:
    """``HybridKVCacheCoordinator.find_longest_cache_hit`` for a resend of the ``n``-token
    prompt: (hit, ``shared_prefix_boundary``). The MLA group matches first (every whole block
    of the prompt, plus with partial hits the prompt's tail key of ``FullAttentionManager.
    _cache_partial_tail_block``), with the drop one unit further then one unit back; the KDA
    group then takes its highest state at or below that."""
    U, u, a = s.block_size, s.prefix_match_unit, s.align
    units = (n - s.hash_lookahead) // u  # Request.block_hashes of the resend
    cap = n - 1
    if s.drop:
        cap = min(cap + (u if a < U else U), units * u)  # coordinator: eagle_proof_margin
    reach = min(cap, units * u)
    hit = reach // U * U
    tail = min((n if s.drop else n - 1) // u, units) * u
    if a < U and hit < tail <= reach and _mla_tail_kept(s, n, tail):
        hit = tail
    if s.drop and hit:
        hit -= min(a, U)
        hit -= hit % a
    below = [p for p in states if 0 < p <= hit and p % a == 0 and p <= units * u]
    state = max(below, default=0)
    return state, hit if hit > state else 0


def _mla_tail_kept(s: VLLMSpec, n: int, tail: int) -> bool:
    """Whether the MLA group still keys the sub-block boundary ``tail`` (the resend's highest
    unit below its limit) after the producer finished: ``FullAttentionManager.
    _cache_partial_tail_block`` keys ``min(limit // u, len(block_hashes)) * u`` (limit ``n``
    with the drop, else ``n - 1``) at every step, and one block holds one such key, so a later,
    higher unit of the same block (the hashes grow as output tokens arrive, ``hash_lookahead``
    of them per unit) replaces it. The lab assumes the producer decodes at least
    ``hash_lookahead - 1`` tokens and keys each unit in turn (exact when a block boundary or
    at most one unit lies between ``tail`` and the limit: always for ``u >= hash_lookahead``)."""
    U, u = s.block_size, s.prefix_match_unit
    if tail <= 0 or tail % U == 0:
        return False  # no unit, or a whole block (keyed as a full block instead)
    last = (n if s.drop else n - 1) // u * u
    return min(last, (tail // U + 1) * U - u) == tail


@dataclass(frozen=True, slots=True)
class RepeatHits:
    """A prompt sent three times: the chunk ends of the cold prefill, the cached tokens of
    the first and the second repeat (None when the scheduler stalls) and the stall flag."""

    prompt_len: int
    cold_chunks: tuple[int, ...]
    first: int | None
    second: int | None
    stalled: bool


def repeat_hits(s: VLLMSpec, prompt_len: int, *, warn: bool = True) -> RepeatHits:
    """The cached tokens of the first and second resend of a ``prompt_len``-token prompt.

    A stall (vLLM schedules 0 tokens forever: the aligned split stops at a block boundary
    that ``_reserve_prefill_lookahead`` then refuses) returns ``first = second = None`` and
    warns ``SpecStallWarning`` unless ``warn=False``."""
    n = check_int("prompt_len", prompt_len, 1, MAX_TOKENS)
    cold, stalled = prefill_chunks(s, n)
    hits: list[int] = []
    states = _state_keys(s, n, cold, 0) if not stalled else set()
    while not stalled and len(hits) < 2:
        hit, junction = _lookup(s, n, states)
        hits.append(hit)
        ends, stalled = prefill_chunks(s, n, hit, junction)
        states |= _state_keys(s, n, ends, junction)
    if stalled:
        if warn:
            msg = stall_message(s, s.block_size, s.max_num_batched_tokens, s.prefix_match_unit, n)
            warnings.warn(msg, SpecStallWarning, stacklevel=2)
        return RepeatHits(n, cold, None, None, True)
    return RepeatHits(n, cold, hits[0], hits[1], False)
