"""The KDA-aware radix cache: ``RadixStateCache`` and the views it hands out.

``cache`` is the class (behind the cache protocol) and ``views`` what it hands out; the tree
itself is the package's own business (``_tree``: nodes, sizes, LRU orders; ``_insert``,
``_evict``, ``_integrity`` work on it; ``_node``: the node record and the state table).
Semantics: docs/radix.md.
"""

from kda_core.cache.radix.cache import RadixStateCache
from kda_core.cache.radix.views import CacheStats, IntegrityError, NodeView, StateRows

__all__ = ["CacheStats", "IntegrityError", "NodeView", "RadixStateCache", "StateRows"]
