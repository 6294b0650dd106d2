"""``Engine``'s arguments, checked once where they enter: the default policy, the pool sizes,
prompts, ``generate``'s options and ``serve``'s requests (the caller's ``Request``, the contract
``kda_core.engine.Request``; inside ``serve`` a ``_state.RequestState``).

Each function raises ``ValueError`` naming the argument and its allowed range; the messages
are the engine's (tests match on them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_bool, check_int
from kda_core.cache import policy as policy_mod
from kda_core.cache.policy.sglang import SGLangPolicy, check_track_interval
from kda_core.cache.protocol import PrefixCache
from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.model import MAX_TOKENS, TinyHybrid, check_tokens, encode
from kda_core.serve._pools import StatePools
from kda_core.serve._slots import MAX_SLOTS, STRATEGIES
from kda_core.serve._state import RequestState
from kda_core.serve.spec import SpecConfig

MAX_NEW_TOKENS = 4096
MAX_REQUESTS = 4096
MAX_STEPS = 1 << 20  # arrivals beyond this are refused
RESTORE_MODES: tuple[str, ...] = ("exact", "inconsistent")
DEFAULT_POLICY = {"name": "sglang", "grid": 16, "track_interval": 32}
"""SGLang's placement scaled to the tiny model: grid 16 (instead of 64), decode every 32."""
DEFAULT_STATE_SLOTS = 256
"""The state pool when ``state_slots`` is None: 51 running requests (extra_buffer reserves 5
each, SGLang's ratio) and the rest for cached states; bounds a long app session's memory."""

PAGE_SIZE = 1
"""The lab's KV page in tokens: the tree keeps MLA KV per token (SGLang's page_size=1)."""
STRATEGY_CHOICES: tuple[str, ...] = ("auto", *STRATEGIES)
NO_BUFFER_OVERLAP = (
    "SGLang: no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."
)
NO_BUFFER_OVERLAP_OFF = (
    "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
    "try to use --disable-radix-cache if overlap schedule is necessary"
)
LAZY_OVERLAP = (
    "SGLang: Lazy extra buffer requires overlap schedule "
    "(--disable-overlap-schedule is incompatible)"
)


def make_policy(policy: Any) -> Any:
    """A fresh Policy from a Policy (copied: per-run state is never shared), a name or None."""
    if policy is None:
        params = dict(DEFAULT_POLICY)
        return policy_mod.make(params.pop("name"), **params)
    if isinstance(policy, str):
        return policy_mod.make(policy)
    if isinstance(policy, policy_mod.Policy):
        return replace(policy)
    raise ValueError(
        f"policy must be a Policy, one of {policy_mod.POLICY_NAMES} or None, "
        f"got {type(policy).__name__}"
    )


def check_block_cache(
    block_cache: Any, cache: bool, int8: bool, kv_budget: Any, unified: Any, restore: str
) -> VLLMBlockCache | None:
    """``block_cache``: None or a ``VLLMBlockCache``, with none of the radix cache's options
    (the block table holds its own states: no INT8 pool, KV budget or unified buffer)."""
    if block_cache is None:
        return None
    if not isinstance(block_cache, VLLMBlockCache):
        raise ValueError(f"block_cache must be a VLLMBlockCache, got {type(block_cache).__name__}")
    given = {
        "cache=False": not cache,
        "int8_checkpoints": int8,
        "kv_budget": kv_budget is not None,
        "unified_memory": unified is not None,
        "restore='inconsistent'": restore != "exact",
    }
    if any(given.values()):
        bad = ", ".join(k for k, v in given.items() if v)
        raise ValueError(f"block_cache: not with {bad} (the block table holds its own states)")
    return block_cache


def check_spec(
    speculative: Any, policy: Any, strategy: str, cache: bool, blocks: bool
) -> SpecConfig | None:
    """``speculative`` as a ``SpecConfig`` (None: off); not with the block table. With the radix
    cache and an extra-buffer strategy the track interval must hold a verify window, as SGLang
    asserts at start-up (``arg_groups/mamba_hook.py`` ``validate_mamba_extra_buffer``)."""
    spec = SpecConfig.of(speculative)
    if spec is not None and blocks:
        raise ValueError("speculative: not with block_cache (vLLM's spec blocks: not modelled)")
    if spec is not None and cache and strategy != "no_buffer" and isinstance(policy, SGLangPolicy):
        check_track_interval(policy.track_interval, spec.draft_tokens, name="track_interval")
    return spec


def check_model(model: Any, before_drop: Any) -> TinyHybrid:
    """The model to serve (None: ``TinyHybrid()``); ``before_drop`` callable or None."""
    if model is not None and not isinstance(model, TinyHybrid):
        raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
    if before_drop is not None and not callable(before_drop):
        raise ValueError("before_drop must be callable or None")
    return model or TinyHybrid()


def check_policy_chunk(policy: Any, chunk_size: int) -> None:
    """Place checkpoints once for the longest prompt: a policy that cannot work with this
    ``chunk_size`` fails here, not on every request."""
    P = MAX_TOKENS - MAX_NEW_TOKENS
    try:
        policy.checkpoint_positions(
            P, None, total_len=MAX_TOKENS - 1, chunk_size=chunk_size, page_size=1
        )
    except ValueError as e:
        raise ValueError(
            f"chunk_size={chunk_size} does not suit policy {policy.name!r}: {e}"
        ) from None


def check_modes(
    strategy: Any, overlap: Any, restore: Any, cache: bool = True
) -> tuple[str, bool, str, tuple[str, ...]]:
    """(strategy, overlap, restore mode, notes), checked and resolved as SGLang 0.5.23 does.

    With the radix cache (SGLang skips these rules when the radix cache is off):

    * ``"auto"`` (``arg_groups/overrides.py`` ``_mamba_radix_cache_resolution``): extra_buffer
      when the overlap scheduler or a page size > 1 wants it, else no_buffer with overlap off.
      The lab's KV page is one token (``PAGE_SIZE``), so here auto follows ``overlap``.
    * no_buffer cannot overlap (``arg_groups/mamba_hook.py`` ``validate_mamba_no_buffer``
      asserts it): ``overlap=True`` raises with the assertion's message. ``overlap=None``
      differs by choice: 0.5.23 turns overlap off only for ``auto`` (an explicit no_buffer
      keeps it on and the assertion fires); the lab turns it off as earlier releases did
      (``server_args.py`` ``ServerArgs._handle_mamba_radix_cache``, its log line
      ``NO_BUFFER_OVERLAP_OFF``), so that ``strategy="no_buffer"`` alone is a working engine.
    * extra_buffer_lazy requires overlap (``mem_cache/kv_cache_configurator.py``
      ``_calculate_mamba_ratio``); the lab checks it with the cache off too (its pools size
      lazy tracks only with overlap), where SGLang returns before the assertion.

    ``overlap=None`` is SGLang's default (on) unless a rule turns it off; ``notes`` are the
    lines SGLang logs for what it changed.
    """
    if strategy not in STRATEGY_CHOICES:
        raise ValueError(f"strategy must be one of {STRATEGY_CHOICES}, got {strategy!r}")
    if overlap is not None:
        overlap = check_bool("overlap", overlap)
    if restore not in RESTORE_MODES:
        raise ValueError(f"restore must be one of {RESTORE_MODES}, got {restore!r}")
    notes: tuple[str, ...] = ()
    if strategy == "auto":
        strategy = sizing.resolve_auto(overlap is not False, PAGE_SIZE)
    if strategy == "no_buffer" and cache:
        if overlap:
            raise ValueError(
                f"strategy 'no_buffer' does not allow overlap=True ({NO_BUFFER_OVERLAP})"
            )
        if overlap is None:
            notes = (NO_BUFFER_OVERLAP_OFF,)
        overlap = False
    overlap = True if overlap is None else overlap
    if strategy == "extra_buffer_lazy" and not overlap:
        raise ValueError(f"strategy 'extra_buffer_lazy' requires overlap=True ({LAZY_OVERLAP})")
    return strategy, overlap, restore, notes


def pool_sizes(
    state_slots: Any, checkpoint_slots: Any, strategy: str, overlap: bool, int8: bool
) -> tuple[int, int]:
    """(state pool, checkpoint table): the pool holds at least what one request reserves
    (``sizing.request_slots``); the checkpoint table defaults to the whole shared pool, or to
    SGLang's INT8 pool of ``2 * state_slots`` (capped at ``MAX_SLOTS``)."""
    reserved = sizing.request_slots(strategy, overlap).reserved
    n = DEFAULT_STATE_SLOTS if state_slots is None else state_slots
    n = check_int("state_slots", n, reserved, MAX_SLOTS)
    if checkpoint_slots is not None:
        return n, check_int("checkpoint_slots", checkpoint_slots, 1, MAX_SLOTS)
    return n, min(2 * n, MAX_SLOTS) if int8 else n


@dataclass(slots=True, frozen=True)
class Request:
    """One request to ``Engine.serve``: prompt (text or token ids), greedy tokens to generate
    in [1, 4096], and the scheduler step it arrives at (>= 0)."""

    prompt: Any
    max_new_tokens: int = 8
    arrival: int = 0


def request_state(
    idx: int, prompt: Any, max_new_tokens: Any, arrival: Any = 0, name: str = ""
) -> RequestState:
    """A request checked (``name``: its place in ``serve``'s list): text (UTF-8 bytes) or token
    ids, at most ``MAX_TOKENS - MAX_NEW_TOKENS`` of them, and its arrival step."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt must not be empty")
        ids = encode(prompt)
    elif isinstance(prompt, (list, tuple, np.ndarray)):
        ids = check_tokens(prompt, name="prompt")
    else:
        raise ValueError(
            f"prompt must be a str or a list of token ids, got {type(prompt).__name__}"
        )
    if len(ids) > MAX_TOKENS - MAX_NEW_TOKENS:
        raise ValueError(f"prompt: at most {MAX_TOKENS - MAX_NEW_TOKENS} tokens, got {len(ids)}")
    n_new = check_int(f"{name}max_new_tokens", max_new_tokens, 1, MAX_NEW_TOKENS)
    check_int(f"{name}arrival", arrival, 0, MAX_STEPS)  # steps from the start
    return RequestState(idx, ids, n_new, arrival)


def check_requests(requests: Any) -> list[RequestState]:
    """``serve``'s requests as the scheduler's states (ids in input order)."""
    if isinstance(requests, (str, bytes, Request)) or not hasattr(requests, "__len__"):
        raise ValueError("requests must be a sequence of kda_core.engine.Request")
    if not 1 <= len(requests) <= MAX_REQUESTS:
        raise ValueError(f"requests must hold between 1 and {MAX_REQUESTS}, got {len(requests)}")
    out = []
    for i, rq in enumerate(requests):
        if not isinstance(rq, Request):
            raise ValueError(f"requests[{i}] must be a Request, got {type(rq).__name__}")
        out.append(request_state(i, rq.prompt, rq.max_new_tokens, rq.arrival, f"requests[{i}]."))
    return out


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """The engine's settings the lifecycle needs (checked by ``Engine``)."""

    cache_on: bool
    strategy: str
    int8: bool
    overlap: bool
    chunk_size: int
    kv_budget: int | None  # most MLA KV tokens the tree keeps after a request (None: no cap)
    graph_bs: tuple[int, ...] | None = None  # captured decode batch sizes (serve._graphs)
    blocks: bool = False  # the prefix cache is vLLM's block table (``serve._blocks``)
    spec: SpecConfig | None = None  # speculative decoding (``serve.spec``), None: off


@dataclass(frozen=True, slots=True)
class Parts:
    """The engine's parts a serve works with, handed down: never the engine itself."""

    model: TinyHybrid
    pools: StatePools
    cache: PrefixCache
    policy: Any
    config: ServeConfig
