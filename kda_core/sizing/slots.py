"""Slots per request, the concurrency cap and the request pool: SGLang's scheduler arithmetic.

``slots_per_request`` is what SGLang *reserves* per running request
(``KVCacheConfigurator._calculate_mamba_ratio``), ``slots_held_per_request`` what a request
actually holds; ``max_running_requests`` / ``resolve_max_num_reqs`` cap concurrency by the state
cache (SGLang 0.5.23, one DP worker). Sources and the strategy table: docs/sizing.md.
Left out: DP attention (several workers) and the DSpark draft model's own pools.
"""

from __future__ import annotations

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
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO: int = 3
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP: int = 2
MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP: int = 1
# KVCacheConfigurator.resolve_max_num_reqs: request-pool estimate tokens / ctx * 512,
# clamped to [2048, 4096]
REQ_POOL_PER_CONTEXT: int = 512
REQ_POOL_MIN: int = 2048
REQ_POOL_MAX: int = 4096


def _check_strategy(strategy: str, overlap: bool, skip_decode_lock: bool = False) -> str:
    """The strategy ("auto" resolved) after checking it and the two flags."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    for name, flag in (("overlap", overlap), ("skip_decode_lock", skip_decode_lock)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    return "extra_buffer" if strategy == "auto" else strategy


def slots_per_request(
    strategy: str = "extra_buffer", overlap: bool = True, skip_decode_lock: bool = False
) -> int:
    """Slots SGLang *reserves* per running request (``_calculate_mamba_ratio``).

    radix_off 1; no_buffer 3; extra_buffer 3 + 2 with the overlap scheduler, 3 + 1 without;
    extra_buffer_lazy 3 + 1 (requires overlap). ``skip_decode_lock``
    (SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1) takes one off the base of the extra-buffer
    strategies; no_buffer stays at 3 (SGLang adds the drop back: its prefill->decode peak
    needs 3 slots). "auto" = extra_buffer. (``KVCacheConfigurator._calculate_mamba_ratio``.)
    """
    s = _check_strategy(strategy, overlap, skip_decode_lock)
    if s == "radix_off":
        return 1
    if s == "no_buffer":
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
    elif s == "extra_buffer":
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + (
            MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP if overlap else 1
        )
    else:  # extra_buffer_lazy
        if not overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + 1
    if skip_decode_lock and s != "no_buffer":
        ratio -= MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP
    return max(ratio, 1)


def slots_held_per_request(strategy: str = "extra_buffer", overlap: bool = True) -> int:
    """Slots a running request actually *holds* (SGLang ``memory_pool.py``
    ``HybridReqToTokenPool``: one active slot plus ``mamba_ping_pong_track_buffer_size``).

    no_buffer / radix_off 1 (the live state); extra_buffer 1 live + ping-pong track slots
    (2 with overlap, 1 without); extra_buffer_lazy 1 live + 1 track.
    """
    s = _check_strategy(strategy, overlap)
    if s in ("radix_off", "no_buffer"):
        return 1
    if s == "extra_buffer":
        return 1 + (2 if overlap else 1)
    if not overlap:
        raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
    return 2


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
    return max(min(int(t / c * REQ_POOL_PER_CONTEXT), REQ_POOL_MAX), REQ_POOL_MIN)


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
