"""Workload replay through a unified two-ended pool vs static partitions (the unified_memory app).

Model (per GPU, one step = one scheduler iteration):

* A request needs ``slots_per_request`` state slots for its whole life (held slots: 1
  no_buffer, 3 extra_buffer, 2 extra_buffer_lazy) and MLA KV pages of ``page_tokens`` tokens
  that grow as it is processed: ``prefill_chunk`` prompt tokens per step, then
  ``decode_tokens_per_step`` output tokens per step. Every running request advances every step
  (memory is the only limit; there is no compute limit unless ``max_running`` is set).
* FIFO admission with a full reservation: the head of the queue is admitted iff the pool can
  hold its state slots *and* all the KV pages it will ever need, counting what running requests
  have reserved. Unified pool: reserved bytes <= total bytes (SGLang's unified admission,
  which charges ceil(S / P) KV entries per state). Static pool: each region separately. So
  allocations never fail mid-request; a *blocked* step is one where the head of the queue had
  arrived but did not fit: the moment the two ends meet (or a static region is full).
* Pages and slots are really allocated in the pool (``kda_core.memory``, accounting-only at GPU
  sizes); finished requests are freed at the end of the step (one batched free per side), the
  lazy pool flushes on idle at the end of every step. Compaction moves are counted.
* Left out: prefix caching and checkpoint slots in the radix tree (no reuse, no eviction),
  retraction, chunked-prefill token budgets shared by the batch, speculative decoding buffers.

Summary metrics: mean concurrency = mean running requests per step over the makespan (every
request needs a fixed number of running steps, so this is also total work / makespan), peak
concurrency, mean queueing delay (admission step - arrival step), tokens per step.

Measured (``shifting_mix()`` defaults: 3000 chat + 150 long-context requests, K3 per GPU at
TP8 bf16, 28 GiB, grid of 12 static ratios in [0.03, 5] plus the two phase-tuned ones; see
bench/bench_memory.py): mean concurrency unified 95.8; best static in hindsight (r = 0.78) 62.1
(unified x1.54); static tuned for the chat phase (r = 1.54) 51.9 (x1.84); static tuned for the
long-context phase (r = 0.047) 14.9 (x6.43). Compaction: eager 254,919 page/slot moves vs lazy
1,512 for the same admissions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core.memory import StaticPool, UnifiedPool

GIB = 1 << 30
MAX_REQUESTS = 200_000
MAX_STEPS = 1_000_000
MAX_TOKENS_PER_REQUEST = 4_000_000
POOL_KINDS: tuple[str, ...] = ("eager", "lazy", "static")


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
    return v


# ---------------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    """Requests in arrival order: ``arrival_step [N]`` (non-decreasing), ``input_len [N]`` >= 1,
    ``output_len [N]`` >= 0, ``phase [N]`` indexing ``phase_names``; all int64."""

    arrival_step: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    phase: np.ndarray
    phase_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.input_len.shape[0])


def from_lengths(
    input_len: Sequence[int] | np.ndarray,
    output_len: Sequence[int] | np.ndarray,
    arrival_step: Sequence[int] | np.ndarray | None = None,
    phase: Sequence[int] | np.ndarray | None = None,
    phase_names: tuple[str, ...] = ("all",),
) -> Workload:
    """Validate and package request lengths (all arrive at step 0 when ``arrival_step`` is None)."""
    i = np.asarray(input_len)
    o = np.asarray(output_len)
    if i.ndim != 1 or o.shape != i.shape or not 1 <= i.size <= MAX_REQUESTS:
        raise ValueError(
            f"input_len and output_len must be 1-D of equal length in [1, {MAX_REQUESTS}], "
            f"got shapes {i.shape} and {o.shape}"
        )
    a = np.zeros(i.size, np.int64) if arrival_step is None else np.asarray(arrival_step)
    ph = np.zeros(i.size, np.int64) if phase is None else np.asarray(phase)
    for name, x in (("input_len", i), ("output_len", o), ("arrival_step", a), ("phase", ph)):
        if x.shape != i.shape or not np.issubdtype(x.dtype, np.integer):
            raise ValueError(f"{name} must be an integer array of shape {i.shape}")
    if i.min() < 1 or o.min() < 0 or (i + o).max() > MAX_TOKENS_PER_REQUEST:
        raise ValueError(
            f"input_len must be >= 1, output_len >= 0, input + output <= {MAX_TOKENS_PER_REQUEST}"
        )
    if a.min() < 0 or a.max() > MAX_STEPS or (np.diff(a) < 0).any():
        raise ValueError(f"arrival_step must be non-decreasing in [0, {MAX_STEPS}]")
    if ph.min() < 0 or ph.max() >= len(phase_names):
        raise ValueError(f"phase must index phase_names (size {len(phase_names)})")
    return Workload(
        a.astype(np.int64),
        i.astype(np.int64),
        o.astype(np.int64),
        ph.astype(np.int64),
        tuple(phase_names),
    )


def shifting_mix(
    n_chat: int = 3000,
    n_long: int = 150,
    seed: int = 0,
    chat_rate: float = 15.0,
    long_rate: float = 0.6,
    chat_input_median: int = 1500,
    chat_output_median: int = 300,
    long_input_range: tuple[int, int] = (32_768, 98_304),
    long_output_median: int = 500,
) -> Workload:
    """A chat phase of short prompts, then a long-context phase (seeded, Poisson arrivals).

    Chat: input ~ lognormal(median ``chat_input_median``, sigma 0.5), output ~ lognormal(median
    ``chat_output_median``, sigma 0.5). Long: input ~ uniform ``long_input_range``, output ~
    lognormal(median ``long_output_median``, sigma 0.3). Arrivals per step are Poisson at
    ``chat_rate`` then ``long_rate`` (the long phase starts after the last chat arrival); the
    defaults overload a K3 GPU in both phases so that memory decides concurrency.
    """
    n_chat = _check_int("n_chat", n_chat, 0, MAX_REQUESTS)
    n_long = _check_int("n_long", n_long, 0, MAX_REQUESTS - n_chat)
    if n_chat + n_long == 0:
        raise ValueError("n_chat + n_long must be >= 1")
    for name, r in (("chat_rate", chat_rate), ("long_rate", long_rate)):
        if not 0.001 <= float(r) <= 1e6:
            raise ValueError(f"{name} must be in [0.001, 1e6], got {r}")
    lo, hi = (int(x) for x in long_input_range)
    if not 1 <= lo <= hi <= MAX_TOKENS_PER_REQUEST // 2:
        raise ValueError(f"long_input_range must satisfy 1 <= lo <= hi <= 2e6, got {(lo, hi)}")
    _check_int("chat_input_median", chat_input_median, 1, 1_000_000)
    _check_int("chat_output_median", chat_output_median, 1, 1_000_000)
    _check_int("long_output_median", long_output_median, 1, 1_000_000)
    rng = np.random.default_rng(seed)
    ci = np.maximum(1, np.round(chat_input_median * np.exp(0.5 * rng.standard_normal(n_chat))))
    co = np.maximum(1, np.round(chat_output_median * np.exp(0.5 * rng.standard_normal(n_chat))))
    li = rng.integers(lo, hi + 1, size=n_long)
    lout = np.maximum(1, np.round(long_output_median * np.exp(0.3 * rng.standard_normal(n_long))))

    def arrivals(n: int, rate: float, start: int) -> np.ndarray:
        gaps = rng.exponential(1.0 / rate, size=n)
        return start + np.floor(np.cumsum(gaps)).astype(np.int64)

    a_chat = arrivals(n_chat, chat_rate, 0)
    start = int(a_chat[-1]) + 1 if n_chat else 0
    a_long = arrivals(n_long, long_rate, start)
    return from_lengths(
        np.concatenate([ci, li]).astype(np.int64),
        np.concatenate([co, lout]).astype(np.int64),
        np.concatenate([a_chat, a_long]),
        np.concatenate([np.zeros(n_chat, np.int64), np.ones(n_long, np.int64)]),
        ("chat", "long-context"),
    )


def from_trace(
    trace: object, seconds_per_step: float = 1.0, max_requests: int = 20_000
) -> Workload:
    """Mooncake lengths and arrivals (any object with ``arrival_s``, ``input_len``,
    ``output_len``, e.g. ``kda_core.workloads.Trace``).

    Arrival step = floor(seconds since the first arrival / ``seconds_per_step``)."""
    if not 1e-6 <= float(seconds_per_step) <= 1e6:
        raise ValueError(f"seconds_per_step must be in [1e-6, 1e6], got {seconds_per_step}")
    n = _check_int("max_requests", max_requests, 1, MAX_REQUESTS)
    try:
        a = np.asarray(trace.arrival_s, dtype=np.float64)[:n]  # type: ignore[attr-defined]
        i = np.asarray(trace.input_len)[:n]  # type: ignore[attr-defined]
        o = np.asarray(trace.output_len)[:n]  # type: ignore[attr-defined]
    except AttributeError as e:
        raise ValueError("trace must have arrival_s, input_len and output_len arrays") from e
    steps = np.floor((a - a.min()) / float(seconds_per_step)).astype(np.int64)
    return from_lengths(i, o, steps)


# ---------------------------------------------------------------------------------------------
# Replay configuration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """Byte sizes and scheduler knobs of a replay (defaults: Kimi K3 per GPU at TP8, bf16).

    ``state_slot_bytes`` = SSM state + conv window of one slot (29,039,616 B for K3 TP8 bf16);
    ``kv_bytes_per_token`` = MLA latent cache per token (27,648 B bf16); the KV side allocates
    pages of ``page_tokens`` tokens.
    """

    total_bytes: int = 28 * GIB
    state_slot_bytes: int = sizing.slot_bytes("kimi-k3", 8)
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


def k3_config(
    model: str | sizing.ModelSpec = "kimi-k3",
    tp: int = 8,
    total_gib: float = 28.0,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    **knobs: object,
) -> ReplayConfig:
    """A ReplayConfig from real model sizes (``kda_core.sizing``); slots per request = held."""
    if not 0.001 <= float(total_gib) <= 16384:
        raise ValueError(f"total_gib must be in [0.001, 16384], got {total_gib}")
    return ReplayConfig(
        total_bytes=int(float(total_gib) * GIB),
        state_slot_bytes=sizing.slot_bytes(model, tp, ssm_dtype, conv_dtype),
        kv_bytes_per_token=sizing.mla_kv_bytes_per_token(model, kv_dtype),
        slots_per_request=sizing.slots_held_per_request(strategy, overlap),
        **knobs,  # type: ignore[arg-type]
    )


def tuned_ratio(workload: Workload, config: ReplayConfig, phase: int | None = None) -> float:
    """The static ratio r that balances (the given phase of) a workload under full reservation:
    ``r = spr * S / (mean_pages * P)``: both regions then run out at the same concurrency."""
    sel = np.ones(len(workload), bool) if phase is None else workload.phase == phase
    if not sel.any():
        raise ValueError(f"phase {phase} has no requests")
    pages = -(-(workload.input_len[sel] + workload.output_len[sel]) // config.page_tokens)
    state = config.slots_per_request * config.state_slot_bytes
    return float(state / (pages.mean() * config.page_bytes))


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------


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


def replay(
    workload: Workload,
    kind: str = "eager",
    ratio: float = 0.9,
    config: ReplayConfig | None = None,
) -> ReplayResult:
    """Replay ``workload`` through a unified pool (``kind`` "eager" / "lazy") or a static
    partition at ``ratio`` (``kind`` "static"); see the module docstring for the model."""
    cfg = ReplayConfig() if config is None else config
    if kind not in POOL_KINDS:
        raise ValueError(f"kind must be one of {list(POOL_KINDS)}, got {kind!r}")
    if not isinstance(workload, Workload):
        raise ValueError("workload must be a Workload (see shifting_mix / from_lengths)")
    T, S, P, spr = cfg.total_bytes, cfg.state_slot_bytes, cfg.page_bytes, cfg.slots_per_request
    if kind == "static":
        pool: UnifiedPool | StaticPool = StaticPool(T, P, S, ratio, store=False)
        st_cap, kv_cap = pool.state_capacity, pool.kv_capacity
    else:
        pool = UnifiedPool(T, P, S, mode=kind, store=False)
        st_cap = kv_cap = None

    n = len(workload)
    arr = workload.arrival_step
    inp = workload.input_len
    tot = inp + workload.output_len
    pages_total = -(-tot // cfg.page_tokens)
    need_bytes = spr * S + pages_total * P
    fits = (pages_total <= kv_cap) & (spr <= st_cap) if kind == "static" else need_bytes <= T
    done = np.zeros(n, np.int64)
    pages = np.zeros(n, np.int64)
    admit = np.full(n, -1, np.int64)
    finish = np.full(n, -1, np.int64)
    state_vids = np.zeros((n, spr), np.int64)
    page_lists: list[list[np.ndarray]] = [[] for _ in range(n)]
    run = np.zeros(0, np.int64)

    cap_steps = cfg.max_steps
    cols = {f: np.zeros(cap_steps, np.int64) for f in Timeline.__dataclass_fields__}
    reserved = 0  # unified: bytes; static: tracked per side below
    res_slots = 0
    res_pages = 0
    head = 0
    dropped = 0
    max_running = cfg.max_running if cfg.max_running is not None else n
    moves_seen = 0
    step = 0
    chunk, dec, pt = cfg.prefill_chunk, cfg.decode_tokens_per_step, cfg.page_tokens
    while step < cap_steps:
        if head >= n and run.size == 0:
            break
        # 1. admission (FIFO, full reservation)
        n_adm = 0
        blocked = 0
        admitted_now: list[int] = []
        while head < n and arr[head] <= step and run.size + len(admitted_now) < max_running:
            if not fits[head]:
                dropped += 1
                head += 1
                continue
            if kind == "static":
                ok = res_slots + spr <= st_cap and res_pages + pages_total[head] <= kv_cap
            else:
                ok = reserved + need_bytes[head] <= T
            if not ok:
                blocked = 1
                break
            v = pool.alloc("state", spr)
            if v is None:  # cannot happen under full reservation
                raise AssertionError("state alloc failed under reservation")
            state_vids[head] = v
            reserved += int(need_bytes[head])
            res_slots += spr
            res_pages += int(pages_total[head])
            admit[head] = step
            admitted_now.append(head)
            head += 1
            n_adm += 1
        if admitted_now:
            run = np.concatenate([run, np.asarray(admitted_now, np.int64)])
        if run.size == 0 and head < n and arr[head] > step:
            # idle until the next arrival: record the idle steps in one go
            nxt = min(int(arr[head]), cap_steps)
            cols["state_frontier"][step:nxt] = pool.state_frontier
            cols["kv_frontier"][step:nxt] = pool.kv_frontier
            step = nxt
            continue
        # 2. advance every running request
        d = done[run]
        remaining_prefill = inp[run] - d
        adv = np.where(
            remaining_prefill > 0,
            np.minimum(chunk, remaining_prefill),
            np.minimum(dec, tot[run] - d),
        )
        nd = d + adv
        done[run] = nd
        want = -(-nd // pt) - pages[run]
        k = int(want.sum())
        if k:
            vids = pool.alloc("kv", k)
            if vids is None:
                raise AssertionError("KV alloc failed under reservation")
            grow = np.flatnonzero(want)
            ends = np.cumsum(want[grow]).tolist()
            a = 0
            for r, b in zip(run[grow].tolist(), ends):
                page_lists[r].append(vids[a:b])
                a = b
            pages[run] += want
        # 3. finish: one batched free per side
        fin_mask = nd >= tot[run]
        n_fin = int(fin_mask.sum())
        if n_fin:
            fin = run[fin_mask]
            run = run[~fin_mask]
            finish[fin] = step
            kv_free = [p for r in fin.tolist() for p in page_lists[r]]
            if kv_free:
                pool.free("kv", np.concatenate(kv_free))
            pool.free("state", state_vids[fin].ravel())
            for r in fin.tolist():
                page_lists[r] = []
            reserved -= int(need_bytes[fin].sum())
            res_slots -= spr * n_fin
            res_pages -= int(pages_total[fin].sum())
        if run.size == 0:
            pool.on_idle()  # the scheduler is idle: the lazy pool compacts (capped)
        # 4. record
        stt = pool.stats()
        cols["state_frontier"][step] = stt.state_frontier
        cols["kv_frontier"][step] = stt.kv_frontier
        cols["state_bytes"][step] = stt.state_used_bytes
        cols["kv_bytes"][step] = stt.kv_used_bytes
        cols["reserved_bytes"][step] = (
            reserved if kind != "static" else res_slots * S + (res_pages * P)
        )
        cols["running"][step] = run.size + n_fin
        cols["queued"][step] = int(np.searchsorted(arr, step, side="right")) - head
        cols["admitted"][step] = n_adm
        cols["finished"][step] = n_fin
        cols["moves"][step] = stt.moves - moves_seen
        moves_seen = stt.moves
        cols["blocked"][step] = blocked
        cols["tokens"][step] = int(adv.sum())
        step += 1

    tl = Timeline(**{f: c[:step].copy() for f, c in cols.items()})
    ok = finish >= 0
    completed = bool(ok.sum() + dropped == n)
    adm = admit >= 0
    makespan = step
    running = tl.running
    return ReplayResult(
        kind=kind,
        ratio=float(ratio) if kind == "static" else None,
        total_bytes=T,
        timeline=tl,
        admit_step=admit,
        finish_step=finish,
        dropped=dropped,
        completed=completed,
        makespan=makespan,
        mean_concurrency=float(running.mean()) if step else 0.0,
        peak_concurrency=int(running.max()) if step else 0,
        mean_queue_delay=float((admit[adm] - arr[adm]).mean()) if adm.any() else 0.0,
        tokens_per_step=float(tl.tokens.sum() / step) if step else 0.0,
        total_moves=int(tl.moves.sum()),
        blocked_steps=int(tl.blocked.sum()),
        state_capacity=st_cap,
        kv_capacity=kv_cap,
    )


# ---------------------------------------------------------------------------------------------
# Unified vs static
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """Unified pool vs static partitions on one workload.

    ``ratios [R]`` and ``static_mean_concurrency [R]`` / ``static_queue_delay [R]`` /
    ``static_makespan [R]`` over the grid (which includes both phase-tuned ratios);
    ``best_ratio`` = the best static ratio in hindsight; ``phase_ratios`` the ratio tuned for
    each phase alone (``tuned_ratio``).
    """

    unified: ReplayResult
    ratios: np.ndarray
    static_mean_concurrency: np.ndarray
    static_queue_delay: np.ndarray
    static_makespan: np.ndarray
    best_ratio: float
    best_static: ReplayResult
    static: tuple[ReplayResult, ...]  # one per entry of ``ratios``
    phase_names: tuple[str, ...]
    phase_ratios: tuple[float, ...]
    phase_static: tuple[ReplayResult, ...]


def compare(
    workload: Workload,
    config: ReplayConfig | None = None,
    ratios: Sequence[float] | np.ndarray | None = None,
    mode: str = "eager",
) -> Comparison:
    """Replay the unified pool (``mode``) and static pools over a ratio grid plus each phase's
    tuned ratio. Default grid: 9 ratios log-spaced in [0.02, 5]."""
    cfg = ReplayConfig() if config is None else config
    if mode not in ("eager", "lazy"):
        raise ValueError(f"mode must be 'eager' or 'lazy', got {mode!r}")
    grid = np.geomspace(0.02, 5.0, 9) if ratios is None else np.asarray(ratios, np.float64)
    if grid.ndim != 1 or not 1 <= grid.size <= 64 or (grid <= 0).any() or (grid > 1e6).any():
        raise ValueError("ratios must be 1-D with 1..64 values in (0, 1e6]")
    n_phases = len(workload.phase_names)
    phase_r = tuple(
        tuned_ratio(workload, cfg, p) for p in range(n_phases) if (workload.phase == p).any()
    )
    all_r = np.unique(np.concatenate([grid, np.asarray(phase_r)]))
    uni = replay(workload, mode, config=cfg)
    res = {float(r): replay(workload, "static", float(r), cfg) for r in all_r}
    conc = np.array([res[float(r)].mean_concurrency for r in all_r])
    best_i = int(np.argmax(conc))
    return Comparison(
        unified=uni,
        ratios=all_r,
        static_mean_concurrency=conc,
        static_queue_delay=np.array([res[float(r)].mean_queue_delay for r in all_r]),
        static_makespan=np.array([res[float(r)].makespan for r in all_r]),
        best_ratio=float(all_r[best_i]),
        best_static=res[float(all_r[best_i])],
        static=tuple(res[float(r)] for r in all_r),
        phase_names=tuple(
            workload.phase_names[p] for p in range(n_phases) if (workload.phase == p).any()
        ),
        phase_ratios=phase_r,
        phase_static=tuple(res[float(r)] for r in phase_r),
    )


# ---------------------------------------------------------------------------------------------
# A small real pool's byte layout (for drawing holes, frontiers and moves)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Segments of a pool's buffer: ``start [M]``, ``end [M]`` (bytes), ``side [M]`` (0 state,
    1 kv, 2 hole), ``vid [M]`` (-1 for holes); plus the two frontiers and the total."""

    start: np.ndarray
    end: np.ndarray
    side: np.ndarray
    vid: np.ndarray
    state_frontier: int
    kv_frontier: int
    total_bytes: int


def pool_layout(pool: UnifiedPool | StaticPool) -> Layout:
    """Where every live entry and hole of ``pool`` sits (at most 100k segments)."""
    starts, ends, sides, vids = [], [], [], []
    for code, side in enumerate(("state", "kv")):
        wm = pool.watermark(side)
        if wm > 100_000:
            raise ValueError("pool has more than 100k positions on a side; too many to draw")
        e = pool.entry_bytes(side)
        p = np.arange(wm, dtype=np.int64)
        v = pool._sides[side].p2v[:wm]  # noqa: SLF001 - read-only view for drawing
        off = p * e if side == "state" else pool.total_bytes - (p + 1) * e
        starts.append(off)
        ends.append(off + e)
        sides.append(np.where(v >= 0, code, 2))
        vids.append(v.copy())
    return Layout(
        np.concatenate(starts),
        np.concatenate(ends),
        np.concatenate(sides),
        np.concatenate(vids),
        pool.state_frontier,
        pool.kv_frontier,
        pool.total_bytes,
    )


def k3_ratio_hint(config: ReplayConfig | None = None) -> float:
    """KV tokens one state slot weighs: ``S / kv_bytes_per_token`` (~1050 for K3 TP8 bf16)."""
    cfg = ReplayConfig() if config is None else config
    return cfg.state_slot_bytes / cfg.kv_bytes_per_token


@dataclass(frozen=True, slots=True, eq=False)
class BufferSnapshot:
    """Every pool's byte buffer at one scheduler step (the unified_memory app's buffer bars).

    Pools ``P`` = the unified pool then every static pool of ``Comparison.static`` (in order).
    Bytes ``[P]`` int64 from offset 0: ``state_live`` | ``state_holes`` (freed slots below the
    state frontier) | ``free`` (between the frontiers) | ``kv_holes`` | ``kv_live`` (at the top
    end); the five sum to the buffer size at every step before a pool finishes (a finished pool
    is all free). ``running`` / ``queued`` / ``blocked`` ``[P]`` at the step; ``state_edge [P]``
    float64: a static pool's border (state region bytes), NaN for the unified pool.
    """

    step: int
    kinds: tuple[str, ...]
    ratios: tuple[float | None, ...]
    state_live: np.ndarray
    state_holes: np.ndarray
    free: np.ndarray
    kv_holes: np.ndarray
    kv_live: np.ndarray
    running: np.ndarray
    queued: np.ndarray
    blocked: np.ndarray
    state_edge: np.ndarray


def busiest_step(c: Comparison) -> int:
    """The first step with the most running requests in the unified pool."""
    return int(np.argmax(c.unified.timeline.running))


def buffer_at(c: Comparison, step: int, state_slot_bytes: int) -> BufferSnapshot:
    """The buffers of ``c``'s pools at ``step`` (0 <= step < the unified makespan + 10**6)."""
    st = _check_int("step", step, 0, max(int(c.unified.makespan), 0) + 1_000_000)
    slot = _check_int("state_slot_bytes", state_slot_bytes, 1, 1 << 40)
    pools = (c.unified, *c.static)
    n = len(pools)
    cols = {
        k: np.zeros(n, np.int64)
        for k in ("state_live", "state_holes", "free", "kv_holes", "kv_live")
    }
    running, queued, blocked = (np.zeros(n, np.int64) for _ in range(3))
    edge = np.full(n, np.nan)
    for i, res in enumerate(pools):
        tl = res.timeline
        total = int(res.total_bytes)
        if st < tl.running.shape[0]:
            sf, kf = int(tl.state_frontier[st]), int(tl.kv_frontier[st])
            sb, kb = int(tl.state_bytes[st]), int(tl.kv_bytes[st])
            running[i], queued[i] = int(tl.running[st]), int(tl.queued[st])
            blocked[i] = int(tl.blocked[st])
        else:  # this pool has finished: all free
            sf, kf, sb, kb = 0, total, 0, 0
        cols["state_live"][i] = sb
        cols["state_holes"][i] = max(sf - sb, 0)
        cols["free"][i] = max(kf - sf, 0)
        cols["kv_holes"][i] = max(total - kf - kb, 0)
        cols["kv_live"][i] = kb
        if res.state_capacity is not None:
            edge[i] = float(res.state_capacity) * slot
    return BufferSnapshot(
        step=st,
        kinds=tuple(r.kind for r in pools),
        ratios=tuple(r.ratio for r in pools),
        running=running,
        queued=queued,
        blocked=blocked,
        state_edge=edge,
        **cols,
    )


__all__ = [
    "BufferSnapshot",
    "buffer_at",
    "busiest_step",
    "Workload",
    "from_lengths",
    "shifting_mix",
    "from_trace",
    "ReplayConfig",
    "k3_config",
    "tuned_ratio",
    "Timeline",
    "ReplayResult",
    "replay",
    "Comparison",
    "compare",
    "Layout",
    "pool_layout",
    "k3_ratio_hint",
]
