"""Checkpoint placement (where states are saved) and retention (which are evicted) policies.

One interface (``Policy``), driven identically by the engine and the trace simulator;
policies ``interval``, ``sglang``, ``marconi``, ``vllm`` (one module each), built by
``make(name, **params)`` (unknown names or parameters raise). Parameters, defaults and
sources: docs/policies.md.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from kda_core.cache.policy._base import MAX_LEN, Policy
from kda_core.cache.policy.interval import IntervalPolicy
from kda_core.cache.policy.marconi import MarconiPolicy
from kda_core.cache.policy.sglang import SGLangPolicy
from kda_core.cache.policy.vllm import VLLMPolicy

__all__ = [
    "MAX_LEN",
    "POLICY_NAMES",
    "IntervalPolicy",
    "MarconiPolicy",
    "Policy",
    "SGLangPolicy",
    "VLLMPolicy",
    "make",
]

_POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (IntervalPolicy, SGLangPolicy, MarconiPolicy, VLLMPolicy)
}
POLICY_NAMES = tuple(_POLICIES)


def make(name: str, **params: Any) -> Policy:
    """Build a policy by name (parameters and defaults: docs/policies.md)."""
    if name not in _POLICIES:
        raise ValueError(f"name must be one of {POLICY_NAMES}, got {name!r}")
    cls = _POLICIES[name]
    allowed = {f.name for f in fields(cls) if f.init}
    for key in params:
        if key not in allowed:
            raise ValueError(f"{key} is not a parameter of policy {name!r}; use {sorted(allowed)}")
    return cls(**params)
