"""One serving instance beyond itself: an engine, an identity, a store and an optional host tier.

``publish(report)`` puts a model-state object into the store at every checkpoint boundary the
request parked (prefill side). ``serve(prompt, n)`` (decode side) finds the *longest jointly
restorable prefix* of ``prompt[:-1]`` across the device tree, the host tier and the store
(seed 000 §9.3: not the longest token match - a boundary where MLA KV, KDA state and conv
window all exist, from this model, tokenizer and layout), loads it onto the device when it is
not there already, then runs the request. An object that fails validation is refused (the
refusal is recorded with the field it names) and the next shorter candidate is tried; the
request is served either way.

The engine is reached through one seam, ``_run`` (``Engine.generate`` today); moving to the
batched ``Engine.serve`` changes that method only. Restoring goes through
``Engine.adopt_checkpoint``: the object becomes a checkpoint of the local tree, and the
engine's own restore path (copy-on-write into the request's active slot) takes it from there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kda_core.cache.protocol import DroppedState
from kda_core.model import TOKENIZER_FINGERPRINT, check_tokens, encode
from kda_core.serve.engine import Engine, GenerateReport
from kda_core.transfer._identity import Identity, Layout, prefix_hash, prefix_hashes
from kda_core.transfer._tiers import HostTier, state_object
from kda_core.transfer.objects import StateObject, StateObjectError, decode_object

__all__ = ["Event", "Instance", "Lookup"]


@dataclass(slots=True, frozen=True)
class _Refusal:
    key: str
    boundary: int
    field: str
    message: str


@dataclass(slots=True, frozen=True)
class Event:
    """One step of the transfer timeline (``t`` seconds since the instance started)."""

    t: float
    instance: str
    kind: str  # publish | lookup | fetch | refuse | restore | host_load | offload | serve
    boundary: int
    nbytes: int = 0
    detail: str = ""


@dataclass(slots=True)
class Lookup:
    """Where the longest jointly restorable prefix of a prompt is."""

    device: int  # the local tree's restore point
    host: int  # longest host copy (0: none)
    store: int  # longest valid store object (0: none)
    source: str  # "device" | "host" | "store" | "none"
    boundary: int
    refusals: list[_Refusal] = field(default_factory=list)
    obj: StateObject | None = None


class Instance:
    """An engine with an identity, a store (may be None) and a host tier (may be None).

    With a host tier the instance builds its engine itself (``Engine(**engine_args)``, the
    tier as its ``before_drop`` hook: every state the device tree drops is copied to the host
    first); without one it takes ``engine`` (default ``Engine()``)."""

    def __init__(
        self,
        name: str,
        *,
        engine: Engine | None = None,
        store: Any = None,
        layout: Layout | None = None,
        tokenizer_fingerprint: str = TOKENIZER_FINGERPRINT,
        host: HostTier | None = None,
        allow_splice: bool = False,
        engine_args: dict | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty str")
        if host is not None and not isinstance(host, HostTier):
            raise ValueError(f"host must be a HostTier, got {type(host).__name__}")
        if engine is not None and (host is not None or engine_args is not None):
            raise ValueError("engine must be None with a host tier or engine_args (built here)")
        self.name = name
        self.store = store
        self.host = host
        self.allow_splice = allow_splice
        self.events: list[Event] = []
        self.refusals: list[_Refusal] = []
        self._t0 = time.perf_counter()
        if engine is None:
            hook = None if host is None else self._offload
            engine = Engine(**(engine_args or {}), before_drop=hook)
        self.engine = engine
        self.identity = Identity.of(self.engine.model, layout, tokenizer_fingerprint)

    # -- timeline --------------------------------------------------------------------------------
    def _event(self, kind: str, boundary: int, nbytes: int = 0, detail: str = "") -> None:
        t = time.perf_counter() - self._t0
        self.events.append(Event(t, self.name, kind, boundary, nbytes, detail))

    def _offload(self, d: DroppedState) -> None:
        """The engine's ``before_drop`` hook: the dropped state goes to the host tier."""
        assert self.host is not None
        obj = state_object(d.tokens, d.kv, *d.state, self.identity, self.name, "host")
        n0 = self.host.stats.offload_bytes
        self.host.offload(obj)
        self._event("offload", len(d.tokens), self.host.stats.offload_bytes - n0)

    # -- prefill side ----------------------------------------------------------------------------
    def export(self, tokens: list[int]) -> StateObject | None:
        """The object at boundary ``len(tokens)`` if the local tree holds a state exactly there:
        located at its device checkpoint slot, its parent the deepest state before it."""
        ck = self.engine.cached_checkpoint(list(tokens)) if tokens else None
        if ck is None:
            return None
        up = ck.parent
        parent = (up, prefix_hash(tuple(tokens[:up]))) if up else None
        return state_object(
            tuple(tokens),
            ck.mla_kv,
            ck.kda_state,
            ck.conv,
            self.identity,
            self.name,
            f"device:{ck.slot}",
            parent,
        )

    def publish(self, report: GenerateReport) -> list[int]:
        """Store an object at every boundary the request parked; returns the boundaries."""
        if self.store is None:
            raise ValueError("publish: this instance has no store")
        consumed = list(report.prompt) + list(report.tokens[:-1])
        done = []
        for p in sorted(set(report.checkpoints)):
            obj = self.export(consumed[:p])
            if obj is None:  # evicted again before the request finished
                continue
            data = obj.to_bytes()
            self.store.put(obj.key, data)
            self._event("publish", p, len(data), obj.key[:12])
            done.append(p)
        return done

    # -- decode side -----------------------------------------------------------------------------
    def lookup(self, ids: list[int]) -> Lookup:
        """Longest jointly restorable prefix of ``ids[:-1]`` over device, host and store."""
        key_ids = ids[:-1]
        device = self.engine.restore_point(key_ids)
        hashes = prefix_hashes(key_ids)
        host = 0
        if self.host is not None:
            host = next((p for p in range(len(key_ids), device, -1) if hashes[p] in self.host), 0)
        best = max(device, host)
        store, obj, refusals = 0, None, []
        if self.store is not None and len(key_ids) > best:
            cands = list(range(len(key_ids), best, -1))
            present = self.store.contains_many([hashes[p] for p in cands])
            for p, ok in zip(cands, present):
                if not ok:
                    continue
                data = self.store.get(hashes[p])
                if data is None:
                    continue
                try:
                    cand = decode_object(data, self.identity, allow_splice=self.allow_splice)
                except StateObjectError as e:
                    r = _Refusal(hashes[p], p, e.field, str(e))
                    refusals.append(r)
                    self.refusals.append(r)
                    self._event("refuse", p, len(data), e.field)
                    continue
                if cand.tokens != tuple(key_ids[:p]):  # a hash collision: not this prefix
                    continue
                store, obj = p, cand
                self._event("fetch", p, len(data), hashes[p][:12])
                break
        if store > best:
            return Lookup(device, host, store, "store", store, refusals, obj)
        if host > device:
            return Lookup(device, host, store, "host", host, refusals, self.host.peek(hashes[host]))  # type: ignore[union-attr]
        src = "device" if device else "none"
        return Lookup(device, host, store, src, device, refusals, None)

    def serve(
        self, prompt: Any, max_new_tokens: int = 8, **kw: Any
    ) -> tuple[GenerateReport, Lookup]:
        """Restore the longest jointly restorable prefix (loading it if needed), then run."""
        ids = encode(prompt) if isinstance(prompt, str) else check_tokens(prompt, name="prompt")
        lk = self.lookup(ids)
        self._event("lookup", lk.boundary, 0, lk.source)
        if lk.source in ("host", "store") and lk.obj is not None:
            if lk.source == "host":
                self.host.load(lk.obj.key)  # type: ignore[union-attr]
                self._event("host_load", lk.boundary, lk.obj.nbytes)
            o = lk.obj
            ok = self.engine.adopt_checkpoint(list(o.tokens), o.mla_kv, o.kda_state, o.conv_window)
            if ok:
                self._event("restore", lk.boundary, o.nbytes, lk.source)
        report = self._run(ids, max_new_tokens, **kw)
        self._event("serve", report.consumed, 0, f"restore_at={report.restore_at}")
        return report, lk

    def _run(self, ids: list[int], max_new_tokens: int, **kw: Any) -> GenerateReport:
        """The seam to the engine: one request through ``Engine.generate``."""
        return self.engine.generate(ids, max_new_tokens, **kw)
