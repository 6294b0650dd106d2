"""The fast simulator pass: the sequential schedule on prefix ids, equal to the naive twin.

``run`` follows ``_sequential.run_sequential`` and ``_placement`` (match, plan, make room under
the budgets, insert, clean up) step for step on the pid-space tree of ``_fasttree`` over a
trace prepared once (``_pidtrace``), and returns the same per-request arrays and counters as
the twin's radix tree. What it covers (``fast_reason``): ``kda_core.sim.fast``.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from kda_core.cache import policy as policy_mod
from kda_core.sim._fasttree import ROOT, FastTree
from kda_core.sim._pidtrace import PreparedTrace

PROGRESS_EVERY = 1000
_PLAN_MEMO_MAX = 1 << 20
_SERIES = ("token_match", "restore_at", "state_bytes", "kv_tokens", "kv_peak", "n_states", "new")


def fast_reason(policy: policy_mod.Policy, schedule: str = "sequential") -> str | None:
    """Why the fast pass cannot run ``policy`` under ``schedule`` (None: it can)."""
    if schedule != "sequential":
        return f"the {schedule} schedule"
    if isinstance(policy, policy_mod.MarconiPolicy):
        return "Marconi's own eviction order"
    if isinstance(policy, policy_mod.VLLMPolicy) and policy.speculative_config is not None:
        return "vLLM's lookup with speculative decoding (the radix tree runs it)"
    opts = policy.cache_options()
    if opts.get("max_states_per_path") is not None:
        return "a per-path state cap"
    if opts.get("victim") is not None or set(opts) - {"state_touch", "max_states_per_path"}:
        return "cache options other than the LRU orders"
    return None


@dataclass(frozen=True, slots=True, eq=False)
class Replay:
    """One pass: per-request arrays ``[N]`` (int64, tokens or bytes as the twin's) and the
    run's counters (``as_core`` gives the dict ``simulate`` builds its result from)."""

    token_match: np.ndarray
    restore_at: np.ndarray
    state_bytes: np.ndarray
    kv_tokens: np.ndarray
    kv_peak: np.ndarray
    n_states: np.ndarray
    new: np.ndarray
    evicted_cum: np.ndarray
    dropped: int
    steps: int
    counts: dict


def as_core(rep: Replay) -> dict:
    """The dict ``simulate`` builds its result from (the twin's ``RequestLog.as_dict``)."""
    out = {f: getattr(rep, f) for f in (*_SERIES, "evicted_cum")}
    out.update(dropped=rep.dropped, steps=rep.steps, stats=_Stats(**rep.counts))
    return out


def from_core(core: dict) -> Replay:
    """The ``Replay`` of the twin's dict (``as_core``'s inverse, counters from its stats)."""
    counts = {f.name: getattr(core["stats"], f.name) for f in fields(_Stats)}
    series = {f: np.asarray(core[f], dtype=np.int64) for f in (*_SERIES, "evicted_cum")}
    return Replay(**series, dropped=core["dropped"], steps=core["steps"], counts=counts)


@dataclass(frozen=True, slots=True)
class _Stats:
    """The twin's ``CacheStats`` fields a pass can be compared on (tokens and bytes)."""

    nodes: int
    tombstones: int
    kv_tokens: int
    states: int
    state_bytes: int
    matches: int
    state_hits: int
    token_hits: int
    states_inserted: int
    states_existed: int
    evicted_states: int
    evicted_state_bytes: int
    evicted_kv_tokens: int
    tombstoned: int
    splits: int


class _Run:
    """One pass's tree, budgets (bytes; None = unlimited) and counters (``_placement.RunCtx``)."""

    def __init__(self, prep: PreparedTrace, pol: policy_mod.Policy, budgets: tuple, sizes: tuple):
        self.sb, self.kb, self.ub = budgets
        self.ckpt, self.kvb = sizes
        self.page = prep.trace.block_size
        touch = pol.cache_options().get("state_touch", "node")
        self.t = FastTree(prep, self.kb is not None or self.ub is not None, touch)
        self.evictions = self.dropped = self.steps = 0
        self.plan = pol.plan
        self.memo: dict[tuple, tuple] = {}
        self.flat = memoryview(prep.flat).cast("B").cast("i")
        self.la, self.lb = prep.look_start.tolist(), prep.look_end.tolist()
        self.ia, self.ib = prep.ins_start.tolist(), prep.ins_end.tolist()
        self.lens, self.totals = prep.trace.input_len.tolist(), prep.total_len.tolist()

    def planned(self, L: int, tm: int, ra: int, total: int) -> tuple:
        """``pol.plan`` (a pure function of its arguments), memoised -> (positions in tokens,
        the same in blocks)."""
        mkey = (L, tm, ra, total)
        got = self.memo.get(mkey)
        if got is None:
            pos = self.plan(L, tm, ra, None if total < 0 else total, self.page)
            got = (pos, tuple(p // self.page for p in pos))
            if len(self.memo) >= _PLAN_MEMO_MAX:
                self.memo.clear()
            self.memo[mkey] = got
        return got

    def step(self, i: int, out: dict, cap_last: bool) -> None:
        """Request ``i`` (``run_sequential``'s loop body): match, plan, place, clean up, log."""
        t, page = self.t, self.page
        key = self.flat[self.la[i] : self.lb[i]]
        L = self.lens[i]
        tm_b, ra_b, last = t.match(key)  # RunCtx.lookup
        if cap_last and ra_b * page >= L:
            tm_b, ra_b, last = t.match(key[:-1])
        tm_tok, ra_tok = tm_b * page, ra_b * page
        tm = tm_tok if tm_tok < L else L
        out["token_match"][i] = tm
        out["restore_at"][i] = ra_tok if ra_tok < tm else tm
        pos, blocks = self.planned(L, tm_tok, ra_tok, self.totals[i])
        self.steps += len(key)
        if pos:
            held = t.dep[last] * page if last != ROOT else 0
            sb = self.sb
            tight = sb is not None and (t.n_states + len(pos)) * self.ckpt > sb
            if held and (tight or self.kb is not None or self.ub is not None):
                t.locked = last
            ia = self.ia[i]
            row = key if ia == self.la[i] else self.flat[ia : self.ib[i]]
            out["new"][i] = self.place(row, pos, blocks, held, tm_b)
            t.locked = ROOT
        kv_held = t.n_held * page
        out["kv_peak"][i] = kv_held
        if self.kb is not None and kv_held * self.kvb > self.kb:
            self.kv_cleanup()
            kv_held = t.n_held * page
        out["state_bytes"][i] = t.n_states * self.ckpt
        out["kv_tokens"][i] = kv_held
        out["n_states"][i] = t.n_states
        out["evicted_cum"][i] = self.evictions

    def kv_tokens(self) -> int:
        return self.t.n_held * self.page

    def evict_kv_tokens(self, tokens: int) -> int:
        """``cache.evict(kv_tokens=tokens)`` -> tokens freed."""
        states, blocks = self.t.evict_kv(-(-tokens // self.page))
        self.evictions += states
        return blocks * self.page

    def room_unified(self, pos: list[int], held: int) -> list[int]:
        """``_placement._room_unified``: states first, then KV leaves, else drop the deepest."""
        ckpt, kvb, ub = self.ckpt, self.kvb, self.ub
        need = len(pos) * ckpt
        new_kv = max(pos[-1] - held, 0) * kvb
        while pos:
            over = self.t.n_states * ckpt + need + self.kv_tokens() * kvb + new_kv - ub
            if over <= 0:
                break
            got = self.t.evict_states(1)
            self.evictions += got
            if got == 0 and self.evict_kv_tokens(max(1, -(-over // kvb))) == 0:
                self.dropped += 1
                pos = pos[:-1]
                need -= ckpt
                new_kv = max((pos[-1] if pos else 0) - held, 0) * kvb
        return pos

    def place(self, row: memoryview, pos: tuple, blocks: tuple, held: int, hint: int) -> int:
        """``_placement.place`` -> states new: ``pos`` in tokens (``blocks`` the same in blocks,
        ascending), ``held`` the locked path's tokens, ``hint`` the match in blocks."""
        t, ckpt, sb = self.t, self.ckpt, self.sb
        need = len(pos) * ckpt
        if sb is not None and t.n_states * ckpt + need > sb:  # placement._room_for_states
            over = t.n_states * ckpt + need - sb
            self.evictions += t.evict_states(-(-over // ckpt))
            room = sb - t.n_states * ckpt
            if room < need:
                keep = max(room, 0) // ckpt
                self.dropped += len(pos) - keep
                pos, blocks = pos[:keep], blocks[:keep]
        if self.ub is not None and pos:
            pos = self.room_unified(list(pos), held)
            blocks = blocks[: len(pos)]
        if self.kb is not None and pos:
            new_tok = max(pos[-1] - held, 0)
            over = (self.kv_tokens() + new_tok) * self.kvb - self.kb
            if over > 0:
                self.evict_kv_tokens(-(-over // self.kvb))
        if not pos:
            return 0
        self.steps += blocks[-1]
        return t.insert(row, blocks, hint)

    def kv_cleanup(self) -> None:
        kb, kvb = self.kb, self.kvb
        if kb is not None and self.kv_tokens() * kvb > kb:
            self.evict_kv_tokens(-(-(self.kv_tokens() * kvb - kb) // kvb))


def run(
    prep: PreparedTrace,
    pol: policy_mod.Policy,
    budgets: tuple,
    sizes: tuple,
    cap_last: bool,
    progress: Callable[[int, int], Any] | None,
) -> Replay:
    """The sequential schedule on the fast tree (``run_sequential``), checked arguments."""
    trace = prep.trace
    pol.check_page(trace.block_size)
    r = _Run(prep, pol, budgets, sizes)
    n = len(trace)
    out = {f: _zeros(n) for f in (*_SERIES, "evicted_cum")}
    step = r.step
    for i in range(n):
        step(i, out, cap_last)
        if progress is not None and (i + 1) % PROGRESS_EVERY == 0:
            progress(i + 1, n)
    if progress is not None:
        progress(n, n)
    arrays = {k: np.frombuffer(v, dtype=np.int64).copy() for k, v in out.items()}
    return Replay(**arrays, dropped=r.dropped, steps=r.steps, counts=_counts(r))


def _zeros(n: int) -> array:
    a = array("q")
    a.frombytes(bytes(8 * n))
    return a


def _counts(r: _Run) -> dict:
    t = r.t
    c = t.c
    return dict(
        nodes=t.n_nodes,
        tombstones=t.n_nodes - t.n_states,
        kv_tokens=r.kv_tokens(),
        states=t.n_states,
        state_bytes=t.n_states * r.ckpt,
        matches=c["matches"],
        state_hits=c["state_hits"],
        token_hits=c["token_hits"],
        states_inserted=c["states_inserted"],
        states_existed=c["states_existed"],
        evicted_states=c["evicted_states"],
        evicted_state_bytes=c["evicted_states"] * r.ckpt,
        evicted_kv_tokens=c["evicted_kv_blocks"] * r.page,
        tombstoned=c["tombstoned"],
        splits=c["splits"],
    )
