"""Checkpoint placement (where states are saved) and retention (which are evicted) policies.

One interface (``base.Policy``), driven identically by the engine and the trace simulator;
policies ``interval``, ``sglang``, ``marconi``, ``vllm`` (one module each), built by
``make(name, **params)`` (``registry``). Parameters, defaults and sources: docs/policies.md.
"""

from kda_core.cache.policy.base import MAX_LEN, Policy
from kda_core.cache.policy.interval import IntervalPolicy
from kda_core.cache.policy.marconi import MarconiPolicy
from kda_core.cache.policy.registry import POLICY_NAMES, make
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
