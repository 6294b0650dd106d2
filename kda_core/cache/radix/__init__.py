"""The KDA-aware radix cache: ``RadixStateCache`` (``cache``) and what it hands out (``views``);
the tree is the package's own (``_tree``, ``_node``; ``_insert``, ``_evict``, ``_integrity``
work on it). Semantics and layout: docs/radix.md."""

from kda_core.cache.radix.cache import RadixStateCache
from kda_core.cache.radix.views import CacheStats, IntegrityError, NodeView, StateRows

__all__ = ["CacheStats", "IntegrityError", "NodeView", "RadixStateCache", "StateRows"]
