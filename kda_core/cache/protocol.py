"""The prefix-cache protocol: mini-sglang's ``BasePrefixCache`` (python/minisgl/kvcache/base.py:
``match_prefix``, ``insert_prefix``, ``lock_handle``, ``evict``, ``reset``, ``size_info``,
``check_integrity``) widened for KDA, where a token match is not a state hit: a match returns
the restore point's handle and the matched path's, sizes keep KV tokens and state bytes apart,
and what happens when a state or KV goes is a constructor hook, never patched in later.
Implementations: ``cache.radix.RadixStateCache`` (docs/radix.md), ``cache.vllm_blocks``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = [
    "CacheHandle",
    "DroppedState",
    "Evicted",
    "HandleError",
    "PrefixCache",
    "PrefixInsert",
    "PrefixMatch",
    "SizeInfo",
]


class HandleError(ValueError):
    """A handle passed to ``lock_handle`` is foreign, stale, or unlocked twice."""


class CacheHandle:
    """Opaque reference to a cached prefix; only ``cached_len`` (tokens) is public."""

    __slots__ = ("cached_len",)

    def __init__(self, cached_len: int) -> None:
        self.cached_len = cached_len

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cached_len={self.cached_len})"


class DroppedState(NamedTuple):
    """A state about to leave the cache (the ``before_drop`` hook): the key up to its
    boundary, the KV payloads covering exactly those tokens, the state and its size."""

    tokens: tuple
    kv: tuple
    state: Any
    state_bytes: int


class Evicted(NamedTuple):
    """What one eviction call freed."""

    states: int
    state_bytes: int
    kv_tokens: int
    nodes: int
    tombstoned: int


class SizeInfo(NamedTuple):
    """Evictable and protected (locked) sizes: KV in tokens, states in bytes."""

    kv_evictable: int
    kv_protected: int
    state_bytes_evictable: int
    state_bytes_protected: int


class PrefixMatch(NamedTuple):
    """Result of ``match_prefix``; lengths in tokens, ``token_match >= restore_at``. restore:
    the restore point's handle (``cached_len == restore_at``); lock it while ``state`` and
    ``kv`` (payloads covering ``[0, restore_at)``) are in use. path: the deepest fully matched
    prefix's handle (``cached_len <= token_match``); lock it to keep the KV."""

    token_match: int
    restore_at: int
    state: Any
    state_bytes: int
    kv: tuple
    branch: int | None
    mid_edge: bool
    restore: CacheHandle
    path: CacheHandle


class PrefixInsert(NamedTuple):
    """Result of ``insert_prefix``; lengths in tokens. cached_len: tokens of the key cached
    before (mini-sglang's name); new / existed: checkpoint positions stored now / already
    present (free your copy); handle: the deepest checkpoint's (None without one)."""

    cached_len: int
    inserted_len: int
    new: tuple[int, ...]
    existed: tuple[int, ...]
    capped: int
    handle: CacheHandle | None


@runtime_checkable
class PrefixCache(Protocol):
    """What the engine, the simulator, the transfer tiers and the apps need from a cache."""

    def match_prefix(self, key: Any, *, touch: bool = True, split: bool = False) -> PrefixMatch:
        """Longest match and restore point of ``key``; ``split`` cuts the edge it ends in."""

    def insert_prefix(
        self, key: Any, kv: Any = None, states: Any = (), *, state_bytes: int = 0
    ) -> PrefixInsert:
        """Insert ``key`` with its KV and checkpoints ``(position, payload[, nbytes])``."""

    def lock_handle(self, handle: CacheHandle, unlock: bool = False) -> None:
        """Lock (or unlock) what a handle refers to; locked prefixes are never evicted."""

    def evict(self, kv_tokens: int = 0, *, states: int = 0, state_bytes: int = 0) -> Evicted:
        """Free states (``states`` / ``state_bytes``), then LRU KV (``kv_tokens``)."""

    def read_kv(self, key: Any, length: int) -> tuple:
        """The KV payloads covering ``key[:length]`` (a matched prefix), root first."""

    def reset(self) -> int:
        """Drop everything (each state through the free hook); -> states dropped."""

    @property
    def size_info(self) -> SizeInfo: ...

    @property
    def kv_tokens(self) -> int: ...

    @property
    def state_bytes(self) -> int: ...

    @property
    def n_states(self) -> int: ...

    @property
    def n_nodes(self) -> int: ...

    def check_integrity(self) -> None:
        """Raise if an invariant is broken."""

    def export(self) -> Any:
        """A read-only view of everything cached (for drawing)."""

    def stats(self) -> Any:
        """Sizes and event counters, read-only."""
