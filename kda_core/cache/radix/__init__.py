"""The KDA-aware radix cache: ``RadixStateCache`` (``cache``) and what it hands out (defined
with the tree's records in ``_node``); the tree is the package's own (``_tree``; ``_insert``,
``_evict``, ``_integrity`` work on it). Semantics and layout: docs/radix.md."""

from kda_core.cache.radix._node import CacheStats, IntegrityError, NodeView, StateRows
from kda_core.cache.radix.cache import RadixStateCache

__all__ = ["CacheStats", "IntegrityError", "NodeView", "RadixStateCache", "StateRows"]
