"""The KDA-aware radix cache (re-exports; the class is ``cache.RadixStateCache``).

Modules: ``nodes`` (node and result types), ``base`` (tree state, shared mutations),
``table`` (numpy state table), ``ops`` (match, locks, eviction), ``insert``, ``views``,
``integrity``, ``cache`` (the class and the cache protocol). Semantics: docs/radix.md.
"""

from kda_core.cache.protocol import Evicted
from kda_core.cache.radix.cache import RadixHandle, RadixStateCache
from kda_core.cache.radix.nodes import (
    MAX_KEY_LEN,
    STATE_TOUCH_MODES,
    CacheStats,
    InsertResult,
    IntegrityError,
    MatchResult,
    Node,
    NodeView,
    StateTable,
)

__all__ = [
    "MAX_KEY_LEN",
    "STATE_TOUCH_MODES",
    "CacheStats",
    "Evicted",
    "InsertResult",
    "IntegrityError",
    "MatchResult",
    "Node",
    "NodeView",
    "RadixHandle",
    "RadixStateCache",
    "StateTable",
]
