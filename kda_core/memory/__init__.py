"""The unified two-ended byte pool (MLA KV pages from the top, KDA state slots from the bottom)
and the static partition it is compared with.

``make_pool(kind, ...)`` builds one (``TwoEndedPool``: "eager" / "lazy" unified, "static"
split); ``workload`` and ``replay`` replay request lengths through a pool (the unified_memory
study packages it). The machinery is the package's own (``_two_ended``, ``_pools``,
``_side``). See docs/memory.md.
"""

from kda_core.memory._pools import make_pool

__all__ = ["make_pool"]
