"""A host tier under the device checkpoint pool (SGLang HiCache style).

When the device tree drops a state (policy eviction, KV-budget eviction, per-path cap), the
host tier copies it first (``transfer.instance.Instance`` builds its engine with that as the
``before_drop`` hook) - the state, the conv window, the path's tokens and MLA KV, as one
model-state object - instead of losing it (HiCache's write-back on eviction; seed 004: "若存在
HiCache host backup, GPU 状态被删除后 host 副本仍保留, 但命中时需要重新加载"). A later request
whose longest restorable prefix is a host copy loads it back onto the device
(``Instance.serve``); the counts and bytes moved both ways are kept here.

Only persistent fields move (``objects.transferable_parts``): ReplaySSM rings and intermediate
conv windows stay on the device (SGLang ``MambaPool._NON_TRANSFER_STATE_FIELDS``).

The host tier is an LRU of objects under a byte capacity; an object that does not fit evicts
the least recently used ones (a host eviction drops the state for good).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.transfer._identity import Identity
from kda_core.transfer.objects import StateObject, transferable_parts

__all__ = ["HostTier", "state_object"]

_MAX_HOST_BYTES = 1 << 34


@dataclass(slots=True)
class _TierStats:
    offloads: int = 0  # device -> host copies
    offload_bytes: int = 0
    loads: int = 0  # host -> device (a hit on a host copy)
    load_bytes: int = 0
    host_evictions: int = 0
    too_big: int = 0  # objects larger than the whole tier


class HostTier:
    """An LRU of state objects in host memory, keyed by prefix hash, capped in bytes."""

    def __init__(self, capacity_bytes: int = 1 << 30) -> None:
        self.capacity_bytes = check_int("capacity_bytes", capacity_bytes, 1, _MAX_HOST_BYTES)
        self._objs: OrderedDict[str, StateObject] = OrderedDict()
        self.used_bytes = 0
        self.stats = _TierStats()

    def __len__(self) -> int:
        return len(self._objs)

    def __contains__(self, key: str) -> bool:
        return key in self._objs

    def offload(self, obj: StateObject) -> bool:
        """Keep a copy of ``obj``; False if it is larger than the tier."""
        n = obj.nbytes
        if n > self.capacity_bytes:
            self.stats.too_big += 1
            return False
        old = self._objs.pop(obj.key, None)
        if old is not None:
            self.used_bytes -= old.nbytes
        while self.used_bytes + n > self.capacity_bytes:
            _, victim = self._objs.popitem(last=False)
            self.used_bytes -= victim.nbytes
            self.stats.host_evictions += 1
        self._objs[obj.key] = obj
        self.used_bytes += n
        self.stats.offloads += 1
        self.stats.offload_bytes += n
        return True

    def peek(self, key: str) -> StateObject | None:
        return self._objs.get(key)

    def load(self, key: str) -> StateObject:
        """A hit: the host copy goes back to the device (it stays on the host too)."""
        obj = self._objs[key]
        self._objs.move_to_end(key)
        self.stats.loads += 1
        self.stats.load_bytes += obj.nbytes
        return obj


def state_object(
    tokens: tuple,
    kv: tuple,
    S: np.ndarray,
    conv: np.ndarray,
    identity: Identity,
    source: str,
    location: str = "device",
    parent: tuple[int, str] | None = None,
) -> StateObject:
    """The model-state object of a cached state: its path's tokens and KV payloads (root
    first), its KDA state and conv window (copies, nothing shared); ``location`` and
    ``parent`` are the cache entry's physical location and parent checkpoint."""
    mla_kv = np.concatenate(kv, axis=0) if kv else np.zeros((0, 0, 0))
    parts = transferable_parts({"mla_kv": mla_kv, "kda_state": S, "conv_window": conv})
    return StateObject(
        tuple(int(t) for t in tokens),
        np.array(parts["mla_kv"], dtype=np.float64),
        np.array(parts["kda_state"], dtype=np.float64),
        np.array(parts["conv_window"], dtype=np.float64),
        identity.model_fingerprint,
        identity.tokenizer_fingerprint,
        identity.layout.describe(identity.kda_heads),
        source,
        physical_location=location,
        parent_checkpoint=parent,
    )
