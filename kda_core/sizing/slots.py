"""Slots per request, the concurrency cap and the request pool: SGLang's scheduler arithmetic.

``request_slots`` is the one table of state slots per request, two named quantities: what
SGLang *reserves* per running request at admission (``KVCacheConfigurator.
_calculate_mamba_ratio``: ``max_running_requests`` divides the pool by it) and the most a
running request *holds* at once; ``slots_per_request`` / ``slots_held_per_request`` read it.
``max_running_requests`` / ``resolve_max_num_reqs`` cap concurrency by the state cache (SGLang
0.5.23, one DP worker). The serving engine sizes its pool and ring from the same table.
Sources and the strategy table: docs/sizing.md.
Left out: DP attention (several workers) and the DSpark draft model's own pools.
"""

from __future__ import annotations

from typing import NamedTuple

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import MAX_COUNT

STRATEGIES: tuple[str, ...] = (
    "auto",
    "no_buffer",
    "extra_buffer",
    "extra_buffer_lazy",
    "radix_off",
)

# SGLang constants (kv_cache_configurator.py).
_MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO: int = 3
_MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP: int = 1
# KVCacheConfigurator.resolve_max_num_reqs: request-pool estimate tokens / ctx * 512,
# clamped to [2048, 4096]
_REQ_POOL_PER_CONTEXT: int = 512
_REQ_POOL_MIN: int = 2048
_REQ_POOL_MAX: int = 4096


def resolve_auto(overlap: bool, page_size: int | None) -> str:
    """SGLang's ``auto`` for a model that supports extra_buffer (``arg_groups/overrides.py``
    ``_mamba_radix_cache_resolution``): extra_buffer when the overlap scheduler or paging (page
    size > 1) wants it, else no_buffer (and SGLang turns overlap off)."""
    paged = page_size is not None and page_size > 1
    return "extra_buffer" if overlap or paged else "no_buffer"


def _check_strategy(
    strategy: str, overlap: bool, skip_decode_lock: bool = False, page_size: int = 1
) -> str:
    """The strategy ("auto" resolved as SGLang does) after checking it and the flags."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    for name, flag in (("overlap", overlap), ("skip_decode_lock", skip_decode_lock)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    if strategy != "auto":
        return strategy
    return resolve_auto(overlap, _check_int("page_size", page_size, 1, 1 << 20))


class SlotsPerRequest(NamedTuple):
    """State slots per running request: ``reserved`` at admission (SGLang's ratio), ``held``
    at most at once."""

    reserved: int
    held: int


def request_slots(
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    page_size: int = 1,
) -> SlotsPerRequest:
    """The slots-per-request table (SGLang 0.5.23, ``python/sglang/srt/mem_cache/``).

    reserved (``kv_cache_configurator.py`` ``_calculate_mamba_ratio``: 3 + the tracking slots
    ``allocation_sizing.py`` ``get_mamba_tracking_slots`` gives): radix_off 1; no_buffer 3;
    extra_buffer 3 + 2 with the overlap scheduler, 3 + 1 without; extra_buffer_lazy 3 + 1
    (requires overlap). ``skip_decode_lock`` (SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1) takes one
    off the base of the extra-buffer strategies; no_buffer stays at 3 (SGLang adds the drop
    back: its prefill->decode peak needs 3 slots). "auto" is ``resolve_auto(overlap,
    page_size)``: extra_buffer, or no_buffer with overlap off and pages of one token.

    held (``memory_pool.py`` ``HybridReqToTokenPool``: one live slot,
    ``_alloc_ping_pong_buffer`` the tracking slots): no_buffer / radix_off 1; extra_buffer
    1 + 2 with overlap, 1 + 1 without; extra_buffer_lazy 1 + 1 up front and a second track
    slot taken at a track boundary (``schedule_batch.py``
    ``mamba_lazy_prealloc_at_boundary``): 3 at most.
    """
    s = _check_strategy(strategy, overlap, skip_decode_lock, page_size)
    if s == "extra_buffer_lazy" and not overlap:
        raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
    if s == "radix_off":
        return SlotsPerRequest(1, 1)
    tracks = {"no_buffer": 0, "extra_buffer": 2 if overlap else 1, "extra_buffer_lazy": 1}[s]
    reserved = _MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + tracks
    if skip_decode_lock and s != "no_buffer":
        reserved -= _MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP
    held = 3 if s == "extra_buffer_lazy" else 1 + tracks
    return SlotsPerRequest(max(reserved, 1), held)


def slots_per_request(
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    page_size: int = 1,
) -> int:
    """Slots SGLang *reserves* per running request: ``request_slots(...).reserved``."""
    return request_slots(strategy, overlap, skip_decode_lock, page_size).reserved


def slots_held_per_request(strategy: str = "extra_buffer", overlap: bool = True) -> int:
    """The most slots a running request holds at once: ``request_slots(...).held``."""
    return request_slots(strategy, overlap).held


def max_running_requests(
    state_slots: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    *,
    cuda_graph_max_bs: int | None = None,
    token_capacity: int | None = None,
) -> int:
    """Concurrency cap from the state cache: ``state_slots // slots_per_request(...)``.

    Optionally also capped by ``cuda_graph_max_bs`` and ``token_capacity // 2``; SGLang's
    full rule (also the request-pool estimate) is ``resolve_max_num_reqs``. 80 slots,
    extra_buffer + overlap (5 per request) -> 16.
    """
    state_slots = _check_int("state_slots", state_slots, 0, MAX_COUNT)
    n = state_slots // slots_per_request(strategy, overlap, skip_decode_lock)
    if cuda_graph_max_bs is not None:
        n = min(n, _check_int("cuda_graph_max_bs", cuda_graph_max_bs, 1, MAX_COUNT))
    if token_capacity is not None:
        n = min(n, _check_int("token_capacity", token_capacity, 0, MAX_COUNT) // 2)
    return n


def request_pool_estimate(token_capacity: int, context_len: int) -> int:
    """SGLang's request-pool size: ``max(min(int(tokens / context_len * 512), 4096), 2048)``."""
    t = _check_int("token_capacity", token_capacity, 0, MAX_COUNT)
    c = _check_int("context_len", context_len, 1, MAX_COUNT)
    return max(min(int(t / c * _REQ_POOL_PER_CONTEXT), _REQ_POOL_MAX), _REQ_POOL_MIN)


def resolve_max_num_reqs(
    state_slots: int,
    token_capacity: int,
    context_len: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    requested: int | None = None,
) -> int:
    """``KVCacheConfigurator.resolve_max_num_reqs`` (SGLang 0.5.23, one DP worker): the
    requested ``--max-running-requests`` (or the request-pool estimate when None), capped by
    ``token_capacity // 2`` and by the state cache ``state_slots // slots_per_request``.

    ``ValueError`` where SGLang raises (the state cache cannot serve one request).
    """
    cap_tokens = _check_int("token_capacity", token_capacity, 0, MAX_COUNT) // 2
    if requested is None:
        n = min(request_pool_estimate(token_capacity, context_len), cap_tokens)
    else:
        n = min(max(1, _check_int("requested", requested, 0, MAX_COUNT)), cap_tokens)
        _check_int("context_len", context_len, 1, MAX_COUNT)
    n = min(n, max_running_requests(state_slots, strategy, overlap, skip_decode_lock))
    if n <= 0:
        raise ValueError(
            f"state_slots={state_slots} (or token_capacity={token_capacity}) serves no "
            "request: SGLang refuses to start"
        )
    return n
