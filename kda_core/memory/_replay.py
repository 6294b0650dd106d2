"""A scheduler replay of a workload through one pool: unified (eager / lazy) or static.

Per GPU, one step = one scheduler iteration. A request holds ``slots_per_request`` state slots
for its whole life and MLA KV pages of ``page_tokens`` tokens that grow as it is processed
(``prefill_chunk`` prompt tokens per step, then ``decode_tokens_per_step``); every running
request advances every step. FIFO admission with a full reservation (state slots and every KV
page it will ever need), so allocations never fail mid-request; a *blocked* step is one where
the arrived head of the queue did not fit. Pages and slots are really allocated in the pool
(accounting-only at GPU sizes); finished requests are freed at the end of the step, and an idle
lazy pool flushes. docs/memory.md has the model in full.

Left out: prefix caching and checkpoint slots (no reuse, no eviction), retraction, a shared
chunked-prefill token budget, speculative decoding buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int as _check_int
from kda_core.memory._pools import StaticPool, UnifiedPool
from kda_core.memory._workload import MAX_REQUESTS, MAX_STEPS, MAX_TOKENS_PER_REQUEST, Workload
from kda_core.sizing import GIB

_POOL_KINDS: tuple[str, ...] = ("eager", "lazy", "static")


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """Byte sizes and scheduler knobs of a replay (defaults: Kimi K3 per GPU at TP8, bf16).

    ``state_slot_bytes`` = SSM state + conv window of one slot (29,039,616 B for K3 TP8 bf16);
    ``kv_bytes_per_token`` = MLA latent cache per token (27,648 B bf16); the KV side allocates
    pages of ``page_tokens`` tokens.
    """

    total_bytes: int = 28 * GIB
    state_slot_bytes: int = sizing.slot_bytes("kimi-k3", 8, "bfloat16")
    kv_bytes_per_token: int = sizing.mla_kv_bytes_per_token("kimi-k3")
    page_tokens: int = 64
    slots_per_request: int = 3
    prefill_chunk: int = 8192
    decode_tokens_per_step: int = 16
    max_running: int | None = None
    max_steps: int = 200_000

    def __post_init__(self) -> None:
        _check_int("total_bytes", self.total_bytes, 1, 1 << 44)
        _check_int("state_slot_bytes", self.state_slot_bytes, 1, self.total_bytes)
        _check_int("kv_bytes_per_token", self.kv_bytes_per_token, 1, self.total_bytes)
        _check_int("page_tokens", self.page_tokens, 1, 1 << 20)
        if self.page_bytes > self.total_bytes:
            raise ValueError("page_tokens * kv_bytes_per_token must be <= total_bytes")
        _check_int("slots_per_request", self.slots_per_request, 1, 64)
        _check_int("prefill_chunk", self.prefill_chunk, 1, MAX_TOKENS_PER_REQUEST)
        _check_int("decode_tokens_per_step", self.decode_tokens_per_step, 1, 1 << 20)
        if self.max_running is not None:
            _check_int("max_running", self.max_running, 1, MAX_REQUESTS)
        _check_int("max_steps", self.max_steps, 1, MAX_STEPS)

    @property
    def page_bytes(self) -> int:
        return self.page_tokens * self.kv_bytes_per_token


def tuned_ratio(workload: Workload, config: ReplayConfig, phase: int | None = None) -> float:
    """The static ratio r that balances (the given phase of) a workload under full reservation:
    ``r = spr * S / (mean_pages * P)``: both regions then run out at the same concurrency."""
    sel = np.ones(len(workload), bool) if phase is None else workload.phase == phase
    if not sel.any():
        raise ValueError(f"phase {phase} has no requests")
    pages = -(-(workload.input_len[sel] + workload.output_len[sel]) // config.page_tokens)
    state = config.slots_per_request * config.state_slot_bytes
    return float(state / (pages.mean() * config.page_bytes))


@dataclass(frozen=True, slots=True)
class Timeline:
    """Per-step series ``[n_steps]`` (int64). Bytes are per GPU.

    ``state_frontier`` / ``kv_frontier``: byte offsets of the two frontiers (the state side owns
    ``[0, state_frontier)``, the KV side ``[kv_frontier, total)``; for a static pool the regions'
    fill levels); ``state_bytes`` / ``kv_bytes``: live bytes; ``reserved_bytes``: admission
    reservations; ``moves``: compaction moves this step; ``blocked``: 1 when the arrived head of
    the queue did not fit (ends met / region full); ``tokens``: tokens processed this step.
    """

    state_frontier: np.ndarray
    kv_frontier: np.ndarray
    state_bytes: np.ndarray
    kv_bytes: np.ndarray
    reserved_bytes: np.ndarray
    running: np.ndarray
    queued: np.ndarray
    admitted: np.ndarray
    finished: np.ndarray
    moves: np.ndarray
    blocked: np.ndarray
    tokens: np.ndarray


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """One replay: the timeline, per-request admission / finish steps and summary metrics."""

    kind: str  # "eager" | "lazy" | "static"
    ratio: float | None  # static ratio (None for unified)
    total_bytes: int
    timeline: Timeline
    admit_step: np.ndarray  # [N], -1 if never admitted (dropped or not reached)
    finish_step: np.ndarray  # [N], -1 if not finished
    dropped: int  # requests larger than the pool (or region) can ever hold
    completed: bool  # all non-dropped requests finished within max_steps
    makespan: int
    mean_concurrency: float
    peak_concurrency: int
    mean_queue_delay: float
    tokens_per_step: float
    total_moves: int
    blocked_steps: int
    state_capacity: int | None  # static: state slots region; unified: None
    kv_capacity: int | None  # static: KV pages region; unified: None


class _Replay:
    """The mutable bookkeeping of one `replay` (one instance per call)."""

    def __init__(self, workload: Workload, kind: str, ratio: float, cfg: ReplayConfig) -> None:
        self.kind, self.cfg = kind, cfg
        T, S, P = cfg.total_bytes, cfg.state_slot_bytes, cfg.page_bytes
        spr = cfg.slots_per_request
        if kind == "static":
            self.pool: UnifiedPool | StaticPool = StaticPool(T, P, S, ratio, store=False)
            self.st_cap, self.kv_cap = self.pool.state_capacity, self.pool.kv_capacity
        else:
            self.pool = UnifiedPool(T, P, S, mode=kind, store=False)
            self.st_cap = self.kv_cap = None
        n = self.n = len(workload)
        self.arr = workload.arrival_step
        self.inp = workload.input_len
        self.tot = self.inp + workload.output_len
        self.pages_total = -(-self.tot // cfg.page_tokens)
        self.need_bytes = spr * S + self.pages_total * P
        if kind == "static":
            self.fits = (self.pages_total <= self.kv_cap) & (spr <= self.st_cap)
        else:
            self.fits = self.need_bytes <= T
        self.done = np.zeros(n, np.int64)
        self.pages = np.zeros(n, np.int64)
        self.admit = np.full(n, -1, np.int64)
        self.finish = np.full(n, -1, np.int64)
        self.state_vids = np.zeros((n, spr), np.int64)
        self.page_lists: list[list[np.ndarray]] = [[] for _ in range(n)]
        self.run = np.zeros(0, np.int64)
        self.cols = {f: np.zeros(cfg.max_steps, np.int64) for f in Timeline.__dataclass_fields__}
        self.reserved = 0  # unified: bytes; static: tracked per side below
        self.res_slots = self.res_pages = 0
        self.head = self.dropped = self.moves_seen = 0
        self.max_running = cfg.max_running if cfg.max_running is not None else n

    def admit_arrived(self, step: int) -> tuple[int, int]:
        """FIFO admission with a full reservation. -> (admitted, blocked 0/1)."""
        spr, n = self.cfg.slots_per_request, self.n
        admitted_now: list[int] = []
        blocked = 0
        while (
            self.head < n
            and self.arr[self.head] <= step
            and self.run.size + len(admitted_now) < self.max_running
        ):
            h = self.head
            if not self.fits[h]:
                self.dropped += 1
                self.head += 1
                continue
            if self.kind == "static":
                ok = (
                    self.res_slots + spr <= self.st_cap
                    and self.res_pages + self.pages_total[h] <= self.kv_cap
                )
            else:
                ok = self.reserved + self.need_bytes[h] <= self.cfg.total_bytes
            if not ok:
                blocked = 1
                break
            v = self.pool.alloc("state", spr)
            assert v is not None, "state alloc failed under reservation"
            self.state_vids[h] = v
            self.reserved += int(self.need_bytes[h])
            self.res_slots += spr
            self.res_pages += int(self.pages_total[h])
            self.admit[h] = step
            admitted_now.append(h)
            self.head += 1
        if admitted_now:
            self.run = np.concatenate([self.run, np.asarray(admitted_now, np.int64)])
        return len(admitted_now), blocked

    def advance(self) -> tuple[np.ndarray, np.ndarray]:
        """Every running request takes one step; new KV pages are allocated. -> (adv, done)."""
        run, cfg = self.run, self.cfg
        d = self.done[run]
        remaining_prefill = self.inp[run] - d
        adv = np.where(
            remaining_prefill > 0,
            np.minimum(cfg.prefill_chunk, remaining_prefill),
            np.minimum(cfg.decode_tokens_per_step, self.tot[run] - d),
        )
        nd = d + adv
        self.done[run] = nd
        want = -(-nd // cfg.page_tokens) - self.pages[run]
        k = int(want.sum())
        if k:
            vids = self.pool.alloc("kv", k)
            assert vids is not None, "KV alloc failed under reservation"
            grow = np.flatnonzero(want)
            ends = np.cumsum(want[grow]).tolist()
            a = 0
            for r, b in zip(run[grow].tolist(), ends):
                self.page_lists[r].append(vids[a:b])
                a = b
            self.pages[run] += want
        return adv, nd

    def finish_done(self, step: int, nd: np.ndarray) -> int:
        """Free the requests that finished this step (one batched free per side). -> count."""
        fin_mask = nd >= self.tot[self.run]
        n_fin = int(fin_mask.sum())
        if n_fin:
            fin = self.run[fin_mask]
            self.run = self.run[~fin_mask]
            self.finish[fin] = step
            kv_free = [p for r in fin.tolist() for p in self.page_lists[r]]
            if kv_free:
                self.pool.free("kv", np.concatenate(kv_free))
            self.pool.free("state", self.state_vids[fin].ravel())
            for r in fin.tolist():
                self.page_lists[r] = []
            self.reserved -= int(self.need_bytes[fin].sum())
            self.res_slots -= self.cfg.slots_per_request * n_fin
            self.res_pages -= int(self.pages_total[fin].sum())
        if self.run.size == 0:
            self.pool.on_idle()  # the scheduler is idle: the lazy pool compacts (capped)
        return n_fin

    def record(self, step: int, n_adm: int, blocked: int, n_fin: int, adv: np.ndarray) -> None:
        cols, stt, cfg = self.cols, self.pool.stats(), self.cfg
        cols["state_frontier"][step] = stt.state_frontier
        cols["kv_frontier"][step] = stt.kv_frontier
        cols["state_bytes"][step] = stt.state_used_bytes
        cols["kv_bytes"][step] = stt.kv_used_bytes
        cols["reserved_bytes"][step] = (
            self.reserved
            if self.kind != "static"
            else self.res_slots * cfg.state_slot_bytes + (self.res_pages * cfg.page_bytes)
        )
        cols["running"][step] = self.run.size + n_fin
        cols["queued"][step] = int(np.searchsorted(self.arr, step, side="right")) - self.head
        cols["admitted"][step] = n_adm
        cols["finished"][step] = n_fin
        cols["moves"][step] = stt.moves - self.moves_seen
        self.moves_seen = stt.moves
        cols["blocked"][step] = blocked
        cols["tokens"][step] = int(adv.sum())

    def run_steps(self) -> int:
        """Step until every request is done (or max_steps). -> steps taken."""
        step, cap_steps = 0, self.cfg.max_steps
        while step < cap_steps:
            if self.head >= self.n and self.run.size == 0:
                break
            n_adm, blocked = self.admit_arrived(step)
            if self.run.size == 0 and self.head < self.n and self.arr[self.head] > step:
                # idle until the next arrival: record the idle steps in one go
                nxt = min(int(self.arr[self.head]), cap_steps)
                self.cols["state_frontier"][step:nxt] = self.pool.state_frontier
                self.cols["kv_frontier"][step:nxt] = self.pool.kv_frontier
                step = nxt
                continue
            adv, nd = self.advance()
            n_fin = self.finish_done(step, nd)
            self.record(step, n_adm, blocked, n_fin, adv)
            step += 1
        return step

    def result(self, step: int, ratio: float) -> ReplayResult:
        tl = Timeline(**{f: c[:step].copy() for f, c in self.cols.items()})
        admit, arr = self.admit, self.arr
        adm = admit >= 0
        running = tl.running
        return ReplayResult(
            kind=self.kind,
            ratio=float(ratio) if self.kind == "static" else None,
            total_bytes=self.cfg.total_bytes,
            timeline=tl,
            admit_step=admit,
            finish_step=self.finish,
            dropped=self.dropped,
            completed=bool((self.finish >= 0).sum() + self.dropped == self.n),
            makespan=step,
            mean_concurrency=float(running.mean()) if step else 0.0,
            peak_concurrency=int(running.max()) if step else 0,
            mean_queue_delay=float((admit[adm] - arr[adm]).mean()) if adm.any() else 0.0,
            tokens_per_step=float(tl.tokens.sum() / step) if step else 0.0,
            total_moves=int(tl.moves.sum()),
            blocked_steps=int(tl.blocked.sum()),
            state_capacity=self.st_cap,
            kv_capacity=self.kv_cap,
        )


def replay(
    workload: Workload,
    kind: str = "eager",
    ratio: float = 0.9,
    config: ReplayConfig | None = None,
) -> ReplayResult:
    """Replay ``workload`` through a unified pool (``kind`` "eager" / "lazy") or a static
    partition at ``ratio`` (``kind`` "static"); see the module docstring for the model."""
    cfg = ReplayConfig() if config is None else config
    if kind not in _POOL_KINDS:
        raise ValueError(f"kind must be one of {list(_POOL_KINDS)}, got {kind!r}")
    if not isinstance(workload, Workload):
        raise ValueError("workload must be a Workload (see shifting_mix / from_lengths)")
    r = _Replay(workload, kind, ratio, cfg)
    return r.result(r.run_steps(), ratio)


__all__ = ["ReplayConfig", "ReplayResult", "replay", "tuned_ratio"]
