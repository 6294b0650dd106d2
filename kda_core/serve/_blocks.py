"""Serving through vLLM's block table (``Engine(block_cache=VLLMBlockCache(...))``): the one
loop's request lifecycle when the prefix cache is vLLM's. Each chunk is the table's ``step``;
its copies run, the state and KV are read out of the request's blocks and written back after
the forward, so a wrong block or a missed copy shows up as a wrong logit. A request hitting a
state keyed in the same step waits a step (vLLM's ``cached_blocks_this_step``). Not vLLM's:
admission reserves a request's most blocks (KV pages plus 5) instead of preempting.
docs/policies.md."""

from __future__ import annotations

import numpy as np

from kda_core.cache.vllm_blocks import Step, VLLMBlockCache
from kda_core.model import TOKENIZER_FINGERPRINT, ModelState
from kda_core.serve._args import Parts
from kda_core.serve._lifecycle import Lifecycle
from kda_core.serve._pools import RequestSlots
from kda_core.serve._state import RequestState
from kda_core.serve.report import BlockStepRow, GenerateReport

SPARE_BLOCKS = 5  # beyond a request's KV pages: copy-on-write targets and live state blocks


class BlockLifecycle(Lifecycle):
    """A request's life on vLLM's block table (see the module docstring)."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        assert isinstance(self.cache, VLLMBlockCache)
        self.blocks: VLLMBlockCache = self.cache
        self.kv: dict[int, np.ndarray] = {}  # block id -> [B, n_mla, C] latent KV rows
        self.states: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}  # id -> (pos, S, conv)
        self.reserved: dict[RequestState, int] = {}
        self.running: dict[RequestState, tuple[Step, int | None]] = {}  # this step's chunk

    def start(self) -> None:
        super().start()
        self.rows = []

    def need(self, r: RequestState) -> int:
        """The most blocks the request holds at once (the module docstring)."""
        return -(-r.total // self.blocks.block_size) + SPARE_BLOCKS

    # -- admit -----------------------------------------------------------------------------
    def match(self, r: RequestState) -> None:
        return None  # the block table looks the prompt up at the request's first step

    def make_room(self, r: RequestState) -> bool:
        usable = len(self.blocks.pool.blocks) - 1  # the null block holds nothing
        need = self.need(r)
        if need > usable:
            raise ValueError(
                f"num_blocks={usable + 1} is too small: a request of {r.total} tokens can "
                f"hold {need} blocks at once"
            )
        room = sum(self.reserved.values()) + need <= usable
        return room and self.pools.active.can_allocate(1) and not self.blocks.deferred(r.ids)

    def admit(self, r: RequestState, m: object) -> None:
        """Open the working slot and the block table's request; plan nothing (the block
        table keys its own states)."""
        self._open(r)
        r.phase = "prefill"
        self.blocks.add(r.rid, r.ids)
        self.reserved[r] = self.need(r)
        r.slots = RequestSlots(r.rid, self.pools.active.allocate(r.rid), [], [])
        r.stepwise = True  # every step's state is written into the blocks
        r.planned, r.plan, r.cuts = (), frozenset(), (r.P,)
        self._load(r, 0)
        r.observe("restored")

    def begin_step(self) -> None:
        self.blocks.new_step()

    def prepare(self, r: RequestState, n: int) -> int:
        """The block table's chunk of at most ``n`` tokens: its copies run, the request's
        state and KV are read out of its blocks. -> tokens the chunk computes."""
        st = self.blocks.step(r.rid, min(n, self.blocks.chunk), new_step=False)
        if st is None:  # less budget than a block left, or a state keyed in this step: wait
            return 0
        for src, dst in st.copies:
            self._copy(src, dst)
        if st.hit is not None:  # the first step: vLLM resumes where KV and state agree
            r.token_match = r.restore_at = st.hit.tokens
            if st.hit.tokens:
                r.step_log.append((st.hit.tokens, 0, r.ids[st.hit.tokens - 1], "restore"))
        self.running[r] = (st, self._load(r, st.start))
        return st.end - st.start

    def _copy(self, src: int, dst: int) -> None:
        if src in self.kv:
            self.kv[dst] = self.kv[src].copy()
        if src in self.states:
            self.states[dst] = self.states[src]  # read-only arrays: shared, never written

    def _load(self, r: RequestState, start: int) -> int | None:
        """Bind the request's state at ``start`` (read out of its blocks) to its working
        slot. -> the state block it was read from (None: the zero state at 0)."""
        assert r.slots is not None
        model, B, a = self.model, self.blocks.block_size, r.slots.active
        kv = np.zeros((0, len(model.mla_layers), model.config.mla_latent))
        block = None
        if start:
            kv_table, st_table = self.blocks.tables(r.rid)
            block = st_table[-(-start // B) - 1]
            pos, S, conv = self.states.get(block, (-1, None, None))
            if pos != start:
                raise AssertionError(f"state block {block} holds the state at {pos}, not {start}")
            self.pools.active.rebind(a, S.copy(), conv.copy())
            kv = np.concatenate([self.kv[b] for b in kv_table[: -(-start // B)]])[:start]
        tokens = (r.ids + r.gen)[:start]
        S = self.pools.active.layer_states(a)
        r.state = ModelState(S, kv, tokens, model.version, TOKENIZER_FINGERPRINT)
        return block

    # -- advance ---------------------------------------------------------------------------
    def advanced(self, r: RequestState, n: int, logits: np.ndarray) -> bool:
        """The lifecycle's bookkeeping, then the chunk's KV rows and the state after it go
        into the blocks its step names; a decoded token goes back to the block table."""
        st, read = self.running.pop(r)
        finished = super().advanced(r, n, logits)
        assert r.state is not None and r.slots is not None and r.state.boundary == st.end
        B = self.blocks.block_size
        kv_table, st_table = self.blocks.tables(r.rid)
        for t in range(st.start, st.end):
            block = kv_table[t // B]
            if block not in self.kv:
                self.kv[block] = np.zeros((B, *r.state.mla_kv.shape[1:]))
            self.kv[block][t % B] = r.state.mla_kv[t]
        S, conv = (x.copy() for x in self.pools.active.buffers(r.slots.active))
        S.flags.writeable = conv.flags.writeable = False
        self.states[st.state_block] = (st.end, S, conv)
        phase = "prefill" if st.end <= r.P else "decode"
        self.rows.append(BlockStepRow(r.idx, phase, st, read, tuple(kv_table), tuple(st_table)))
        if r.phase == "decode" and not finished:
            self.blocks.append(r.rid, r.gen[-1])
        return finished

    # -- finish / retract ------------------------------------------------------------------
    def finish(self, r: RequestState) -> GenerateReport:
        self.release(r)
        return self._done(r)

    def release(self, r: RequestState) -> None:
        """Free the request's blocks (``KVCacheManager.free``) and its working slot."""
        if r.slots is not None:
            self.blocks.finish(r.rid)
            self.pools.active.free(r.slots.active)
            r.slots = None
        self.reserved.pop(r, None)
        self.running.pop(r, None)
