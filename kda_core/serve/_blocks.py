"""Serving through vLLM's block table (``Engine(block_cache=VLLMBlockCache(...))``).

The prefix cache is ``kda_core.cache.vllm_blocks.VLLMBlockCache`` and the memory is its
physical blocks: here every block id owns the data vLLM would keep in it, the MLA latent KV of
its ``block_size`` tokens (KV group) or ONE KDA state with its conv windows (state group). Each
step follows the block model's ``Step``: the queued block copies run first (copy-on-write of a
partial hit, a producer's partial key moved to a copy: ``take_kv_cache_block_copies``), then
the chunk ``[start, end)`` the aligned split cut is computed from the state read out of the
request's state block at ``start`` and the KV read out of its KV blocks, and its KV rows and
the state after ``end`` are written into the blocks the step names (vLLM's align mode keeps
the running state in the block table, ``MambaManager``). Nothing is kept outside the blocks
between steps, so a wrong block, a missed copy or a stale state shows up as a wrong logit.

The block model schedules one request at a time (a synchronous scheduler): requests are
served in arrival order, each to its end. Greedy decoding, as the engine's; the last token
is not consumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core.cache.vllm_blocks import BlockHit, PoolSnapshot, Step, VLLMBlockCache
from kda_core.model import TinyHybrid
from kda_core.model.state import KDALayerState, ModelState

__all__ = ["BlockServeReport", "BlockServer", "BlockStepRow"]


@dataclass(frozen=True, slots=True)
class BlockStepRow:
    """One step of a serve through vLLM's block table.

    request: its index in the input; phase: "prefill" or "decode"; step: the block model's
    ``Step`` (tokens ``[start, end)``, the lookup on the first step, the state block written,
    the prefix keys registered, the block copies run, the blocks taken); read_block: the state
    block the step's starting state was read from (None: a zero state at 0); kv_table /
    state_table: the request's block tables after the step (physical ids; 0 is the null
    block, the state entries vLLM no longer needs).
    """

    request: int
    phase: str
    step: Step
    read_block: int | None
    kv_table: tuple[int, ...]
    state_table: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BlockServeReport:
    """What a serve through vLLM's block table did: per request (input order) its tokens,
    logits [n, vocab] and lookup; every step; the pool at the end (``VLLMBlockCache.export``:
    ``PhysicalBlock.key_tokens`` lists the logical prefixes one physical block serves)."""

    tokens: list[list[int]]
    logits: list[np.ndarray]
    hits: list[BlockHit]
    steps: list[BlockStepRow]
    pool: PoolSnapshot


class BlockServer:
    """The model over a ``VLLMBlockCache``'s physical blocks (see the module docstring)."""

    def __init__(self, model: TinyHybrid, cache: VLLMBlockCache) -> None:
        if not isinstance(cache, VLLMBlockCache):
            raise ValueError(f"block_cache must be a VLLMBlockCache, got {type(cache).__name__}")
        self.model = model
        self.cache = cache
        self.kv: dict[int, np.ndarray] = {}  # block id -> [B, n_mla, C] latent KV rows
        self.states: dict[int, tuple[int, list[KDALayerState]]] = {}  # id -> (boundary, S)
        self.served = 0

    def _tables(self, rid: str) -> tuple[list[int], list[int]]:
        """The request's block tables (KV, state) as physical ids."""
        c = self.cache
        return (
            [b.block_id for b in c.kv.req_blocks.get(rid, ())],
            [b.block_id for b in c.state.req_blocks.get(rid, ())],
        )

    def _copy(self, src: int, dst: int) -> None:
        if src in self.kv:
            self.kv[dst] = self.kv[src].copy()
        if src in self.states:
            pos, kda = self.states[src]
            self.states[dst] = (pos, [s.copy() for s in kda])

    def _read(self, rid: str, tokens: list[int], start: int) -> tuple[ModelState, int | None]:
        """The request's model state at ``start``, read out of its blocks."""
        state = self.model.new_state()
        if start == 0:
            return state, None
        B = self.cache.block_size
        kv_table, st_table = self._tables(rid)
        block = st_table[-(-start // B) - 1]
        pos, kda = self.states.get(block, (-1, []))
        if pos != start:
            raise AssertionError(f"state block {block} holds the state after {pos}, not {start}")
        rows = np.concatenate([self.kv[b] for b in kv_table[: -(-start // B)]])[:start]
        state.kda = [s.copy() for s in kda]
        state.mla_kv = rows
        state.tokens = tokens[:start]
        return state, block

    def _write(self, rid: str, new: ModelState, start: int, end: int, state_block: int) -> None:
        B = self.cache.block_size
        kv_table, _ = self._tables(rid)
        for t in range(start, end):
            block = kv_table[t // B]
            if block not in self.kv:
                self.kv[block] = np.zeros((B, *new.mla_kv.shape[1:]))
            self.kv[block][t % B] = new.mla_kv[t]
        self.states[state_block] = (end, [s.copy() for s in new.kda])

    def _request(self, index: int, prompt: list[int], n_new: int, rows: list[BlockStepRow]):
        """Serve one request to its end. -> (tokens, logits [n_new, V], its hit)."""
        c = self.cache
        self.served += 1
        rid = f"request-{self.served}"
        c.add(rid, prompt)
        tokens, out, logits, hit = list(prompt), [], [], None
        try:
            while len(out) < n_new:
                st = c.step(rid)
                hit = st.hit or hit
                for src, dst in st.copies:
                    self._copy(src, dst)
                state, read = self._read(rid, tokens, st.start)
                step_logits, new = self.model.forward(tokens[st.start : st.end], state)
                self._write(rid, new, st.start, st.end, st.state_block)
                kv_table, st_table = self._tables(rid)
                phase = "prefill" if st.end <= len(prompt) else "decode"
                rows.append(BlockStepRow(index, phase, st, read, tuple(kv_table), tuple(st_table)))
                if st.end < len(tokens):
                    continue
                logits.append(step_logits[-1])
                out.append(int(np.argmax(step_logits[-1])))
                if len(out) < n_new:
                    tokens.append(out[-1])
                    c.append(rid, out[-1])
        finally:
            c.finish(rid)
        assert hit is not None, "the first step carries the lookup"
        return out, np.array(logits), hit

    def serve(self, requests: list[Any]) -> BlockServeReport:
        """Serve ``(index, prompt ids, max_new_tokens, arrival)`` in arrival order."""
        rows: list[BlockStepRow] = []
        order = sorted(requests, key=lambda r: (r[3], r[0]))
        done = {i: self._request(i, ids, n, rows) for i, ids, n, _ in order}
        idx = [r[0] for r in requests]
        return BlockServeReport(
            tokens=[done[i][0] for i in idx],
            logits=[done[i][1] for i in idx],
            hits=[done[i][2] for i in idx],
            steps=rows,
            pool=self.cache.export(),
        )
