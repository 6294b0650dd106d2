"""Public API entry: ``kda_core.policy.make(name, **params)`` builds a policy.

The implementation is ``kda_core.cache.policy``; internal code imports it from there.
"""

from kda_core.cache.policy import make

__all__ = ["make"]
