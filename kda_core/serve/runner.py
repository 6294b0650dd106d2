"""Executes one scheduler batch on TinyHybrid: one packed forward for every request in it.

Decodes feed their last generated token, prefill chunks the next slice of their prompt; all of
it goes through ``serve.batch.forward_packed`` in one call (varlen packed prefill + batched
decode), each request from the state in its active slot.

Memory layout (why this is fast): the step's states are one layer-major array
``S [L, N, H, K, V]`` (and conv windows likewise); request i's new state is the *view*
``S_new[:, i]``, bound to its active slot without a copy (``ActivePool._swap``: the kernel
"writing into the slot"). When the next step runs the same requests in the same order and no
slot was rebound in between, ``S_new`` is that step's input as is: steady decoding gathers
nothing. Otherwise the slots' buffers are stacked (one copy). Nothing writes into these states
later (the next one-token pass writes only its buffer's scratch row K, outside every state
view: ``serve.decode``): tracks, snapshots and restores copy, and a state donated to the
checkpoint pool is compacted first (``Lifecycle.finish``) so a cached checkpoint never pins a
batch array. MLA latents likewise: after an all-decode step, request i's ``mla_kv`` is a
read-only view of that step's padded latents array (``decode_packed``); the radix tree copies
what it keeps (``cache_ops.kv_slice``) and a finished request's latents get their own memory.
"""

from __future__ import annotations

import time

import numpy as np

from kda_core.cache.pool import ActivePool
from kda_core.model import TinyHybrid
from kda_core.serve.batch import forward_packed
from kda_core.serve.decode import decode_packed
from kda_core.serve.fused import FusedWeights
from kda_core.serve.request import RequestState
from kda_core.serve.scheduler import Batch

__all__ = ["Runner"]


class Runner:
    def __init__(self, model: TinyHybrid, pool: ActivePool) -> None:
        self.model = model
        self.weights = FusedWeights.of(model)
        self.pool = pool
        self.seconds = 0.0
        self._prev: tuple[list[int], list[np.ndarray], np.ndarray, np.ndarray] | None = None

    def _gather(self, slots: list[int]) -> tuple[np.ndarray, np.ndarray]:
        bufs = [self.pool.buffers(s) for s in slots]
        if self._prev is not None:
            p_slots, p_views, p_S, p_W = self._prev
            if p_slots == slots and all(b[0] is v for b, v in zip(bufs, p_views)):
                return p_S, p_W
        return np.stack([b[0] for b in bufs], axis=1), np.stack([b[1] for b in bufs], axis=1)

    def run(self, batch: Batch) -> list[tuple[RequestState, int, np.ndarray]]:
        """-> (request, tokens consumed, logits [n, vocab]) for every request in the batch."""
        t0 = time.process_time()
        work: list[tuple[RequestState, list[int]]] = [(r, [r.gen[-1]]) for r in batch.decode]
        for r, n in batch.prefill:
            work.append((r, r.ids[r.pos : r.pos + n]))
        slots = [r.slots.active for r, _ in work]  # type: ignore[union-attr]
        S, W = self._gather(slots)
        pasts = [r.state.mla_kv for r, _ in work]  # type: ignore[union-attr]
        if batch.prefill:
            seqs = [s for _, s in work]
            logits, S_new, W_new, kv = forward_packed(self.model, seqs, S, W, pasts, self.weights)
            lat = [np.concatenate([p, k], axis=0) for p, k in zip(pasts, kv)]
        else:  # every request decodes: the fused one-token pass (all latents, as views)
            toks = [s[0] for _, s in work]
            lg, S_new, W_new, lat = decode_packed(self.weights, toks, S, W, pasts)
            logits = lg[:, None]
        out, views = [], []
        for i, ((r, seq), lg) in enumerate(zip(work, logits)):
            view = S_new[:, i]
            self.pool.rebind(slots[i], view, W_new[:, i])
            views.append(view)
            st = r.state
            assert st is not None
            st.mla_kv = lat[i]
            st.tokens.extend(seq)
            out.append((r, len(seq), lg))
        self._prev = (slots, views, S_new, W_new)
        self.seconds += time.process_time() - t0
        return out
