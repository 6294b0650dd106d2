"""Executes one scheduler batch on TinyHybrid (nano-vllm's ``ModelRunner``): the decodes and
prefill chunks in one packed pass (``model.batch``), then each speculative verify and its
commit by replay. Request i's new state is the view ``S_new[:, i]`` of the step's layer-major
array, bound to its slot without a copy; a step running the last step's requests in the same
order reuses that array as its input, and in steady decoding the state writes are deferred in
a ``StateWindow`` until a step after which the loop reads a state (``_read_after``) or another
batch runs (``_write_pending``). Why, and what was measured: docs/serving.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kda_core.model import TinyHybrid
from kda_core.model.batch import (
    FusedWeights,
    StateWindow,
    decode_window,
    forward_packed,
    window_steps,
    write_matrix,
)
from kda_core.model.state import KDALayerState, ModelState
from kda_core.serve._graphs import graph_step, pad_rows, padded_size
from kda_core.serve._scheduler import Batch
from kda_core.serve._slots import ActivePool
from kda_core.serve._state import RequestState
from kda_core.serve.report import GraphStep


@dataclass(slots=True)
class _Bound:
    """The last step's requests, their slots, the state views bound to those slots and, after
    an all-decode step, the window those views are the base of (steps pending in it: the
    slots' states are that many steps behind, and ``conv`` holds their current windows)."""

    reqs: list[RequestState]
    slots: list[int]
    views: list[np.ndarray]
    S: np.ndarray
    conv: np.ndarray
    window: StateWindow | None
    sink_pasts: list[np.ndarray] | None = None  # fixed shapes: the sink rows' latents


def _read_after(r: RequestState) -> bool:
    """Whether the loop reads r's state after its next decode step: at a planned checkpoint
    (``Lifecycle.park``), at its last token (``Lifecycle.finish``), or every step (``stepwise``:
    a trace, a block table). Nothing else reads a running request's state (retraction releases it
    unread); pending steps are written out before any other batch runs."""
    nxt = r.pos + 1
    return nxt >= r.total or nxt in r.plan or r.stepwise


class Runner:
    def __init__(
        self,
        model: TinyHybrid,
        pool: ActivePool,
        defer: int | None = None,
        graph_bs: tuple[int, ...] | None = None,
    ) -> None:
        self.model = model
        self.graph_bs = graph_bs  # captured decode sizes (serve._graphs), None: eager
        self.graph: GraphStep | None = None  # the last step's fixed-shape decode
        # the packed passes are written for the k3 variant; another runs the model's own forward
        fused = model.config.variant == "k3"
        self.weights = FusedWeights.of(model) if fused else None
        self.pool = pool
        self.window_steps = window_steps(model.config.gate_lower_bound, defer) if fused else 1
        self.start()

    def start(self) -> None:
        """A new serve: nothing bound from the last one (a serve that raised leaves steps of
        released requests pending: dropped), the clock at zero."""
        self._bound: _Bound | None = None
        self.graph = None
        self.seconds = 0.0

    @property
    def pending(self) -> int:
        """Decode steps not yet written to the slots' states (0: every state is current)."""
        b = self._bound
        return 0 if b is None or b.window is None else b.window.r

    def _same(self, slots: list[int]) -> bool:
        """The batch is the last step's requests in the same order on buffers nobody rebound."""
        b = self._bound
        if b is None or b.slots != slots:
            return False
        return all(self.pool.buffers(s)[0] is v for s, v in zip(slots, b.views))

    def _write_pending(self) -> None:
        """Write the pending steps into the states of every last-step request still running
        on its slot (a retracted one's slot is gone: its state was released unread)."""
        b = self._bound
        assert b is not None and b.window is not None and b.window.r
        N, H, K = b.S.shape[1:4]
        S = b.window.write_pending(write_matrix(self.weights, N, H, K, b.window.R))
        for i, (r, s) in enumerate(zip(b.reqs, b.slots)):
            mine = r.slots is not None and r.slots.active == s
            if mine and self.pool.buffers(s)[0] is b.views[i]:
                self.pool.rebind(s, S[:, i], b.conv[:, i])
        self._bound = None

    def _gather(self, slots: list[int], same: bool) -> tuple[np.ndarray, np.ndarray]:
        if same:
            assert self._bound is not None
            return self._bound.S, self._bound.conv
        bufs = [self.pool.buffers(s) for s in slots]
        return np.stack([b[0] for b in bufs], axis=1), np.stack([b[1] for b in bufs], axis=1)

    def _pad_inputs(
        self, toks: list[int], pasts: list[np.ndarray], size: int, steady: bool
    ) -> tuple[list[int], list[np.ndarray]]:
        """The sink rows' inputs: token 0 (SGLang pads input ids with 0) and their own
        latents (the previous step's in steady decoding, else none)."""
        pad = size - len(toks)
        b = self._bound
        sink = b.sink_pasts if steady and b is not None else None
        if sink is None or len(sink) != pad:
            sink = [pasts[0][:0]] * pad
        return toks + [0] * pad, pasts + sink

    def run(self, batch: Batch) -> list[tuple[RequestState, int, np.ndarray]]:
        """-> (request, tokens consumed, logits [n, vocab]) for every request in the batch:
        one packed pass for the decodes and prefill chunks, then each speculative verify."""
        t0 = time.process_time()
        work: list[tuple[RequestState, list[int]]] = [(r, [r.gen[-1]]) for r in batch.decode]
        for r, n in batch.prefill:
            work.append((r, r.ids[r.pos : r.pos + n]))
        out = self._packed(batch, work) if work else []
        out += [self._speculate(r, n) for r, n in batch.verify]
        self.seconds += time.process_time() - t0
        return out

    def _speculate(self, r: RequestState, n: int) -> tuple[RequestState, int, np.ndarray]:
        """A speculative request's verify step and its commit by exact replay (ReplaySSM,
        ``serve.spec``): the pending token and n - 1 drafts from the state in its slot."""
        assert r.spec is not None
        assert not (self.pending and r in self._bound.reqs), "speculative requests never defer"  # type: ignore[union-attr]
        new, a, logits = r.spec.step(self._slot_state(r), r.gen[-1], n)
        self._store(r, new)
        return r, a, logits

    def _slot_state(self, r: RequestState) -> ModelState:
        """``r``'s running state with the KDA arrays of its slot, as the model's own type."""
        st, (S, conv) = r.state, self.pool.buffers(r.slots.active)  # type: ignore[union-attr]
        assert st is not None
        kda = [KDALayerState(S[i], conv[i]) for i in range(len(S))]
        return ModelState(kda, st.mla_kv, st.tokens, st.version, st.fingerprint)

    def _store(self, r: RequestState, new: ModelState) -> None:
        """Bind the model's new state to ``r``'s slot, its KV and tokens to ``r``'s state."""
        st = r.state
        assert st is not None and r.slots is not None
        S, conv = np.stack([x.S for x in new.kda]), np.stack([x.conv for x in new.kda])
        self.pool.rebind(r.slots.active, S, conv)
        st.mla_kv = new.mla_kv
        st.tokens.extend(new.tokens[len(st.tokens) :])

    def _packed(
        self, batch: Batch, work: list[tuple[RequestState, list[int]]]
    ) -> list[tuple[RequestState, int, np.ndarray]]:
        slots = [r.slots.active for r, _ in work]  # type: ignore[union-attr]
        if self.weights is None:
            return self._run_each(work)
        decoding, same = not batch.prefill, self._same(slots)
        if self.pending and not (decoding and same):
            self._write_pending()
            same = False
        pasts = [r.state.mla_kv for r, _ in work]  # type: ignore[union-attr]
        window, sink, self.graph = None, None, None
        if decoding:  # every request decodes: the fused one-token pass (all latents, as views)
            b = self._bound
            steady = same and b is not None and b.window is not None
            if steady:
                assert b is not None and b.window is not None
                window, W = b.window, b.conv
            else:  # a new batch writes its first step: its slots then hold the window's base
                S, W = self._gather(slots, same)
                if self.graph_bs:  # the sink's rows up to the captured size
                    S, W = pad_rows(S, W, padded_size(len(slots), self.graph_bs))
                window = StateWindow.of(S, self.window_steps)
            write = (
                not steady or window.r + 1 >= window.R or any(_read_after(r) for r in batch.decode)
            )
            toks = [s[0] for _, s in work]
            if self.graph_bs:
                toks, pasts = self._pad_inputs(toks, pasts, window.base.shape[1], steady)
            wts = self.weights
            assert wts is not None
            lg, S_new, W_new, lat, window = decode_window(wts, toks, window, W, pasts, write)
            logits = lg[: len(work), None]
            if self.graph_bs:
                sink, lat = lat[len(work) :], lat[: len(work)]
                self.graph = graph_step(slots, window.base.shape[1])
        else:
            S, W = self._gather(slots, same)
            seqs = [s for _, s in work]
            logits, S_new, W_new, kv = forward_packed(self.model, seqs, S, W, pasts, self.weights)
            lat = [np.concatenate([p, k], axis=0) for p, k in zip(pasts, kv)]
        out = []
        reqs = [r for r, _ in work]
        if S_new is not None:  # bind every request's new state (a view: no copy)
            views = [S_new[:, i] for i in range(len(work))]
            for i, v in enumerate(views):
                self.pool.rebind(slots[i], v, W_new[:, i])
            self._bound = _Bound(reqs, slots, views, S_new, W_new, window, sink)
        else:  # the step is pending in the window: the slots keep the base's views
            b = self._bound
            assert b is not None and window is not None
            self._bound = _Bound(reqs, slots, b.views, b.S, W_new, window, sink)
        for i, ((r, seq), lg) in enumerate(zip(work, logits)):
            st = r.state
            assert st is not None
            st.mla_kv = lat[i]
            st.tokens.extend(seq)
            out.append((r, len(seq), lg))
        return out

    def _run_each(
        self, work: list[tuple[RequestState, list[int]]]
    ) -> list[tuple[RequestState, int, np.ndarray]]:
        """Each request of the batch through the model's own ``forward`` from its slot's state
        (the variants the packed passes are not written for): the same tokens and states the
        model computes alone, without the batching."""
        out = []
        for r, seq in work:
            logits, new = self.model.forward(seq, self._slot_state(r))
            self._store(r, new)
            out.append((r, len(seq), logits))
        return out
