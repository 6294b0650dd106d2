"""Checkpoint placement (where states are saved) and retention (which are evicted) policies.

One small interface, driven identically by the real engine and by the trace simulator:

* ``policy.checkpoint_positions(prompt_len, match, *, total_len=None, chunk_size=None,
  page_size=1) -> tuple[int, ...]``: sorted token positions ``p`` (the state after consuming
  tokens ``[0, p)``) at which the caller saves a checkpoint during this request's replay,
  prefill and decode, then hands them to ``RadixStateCache.insert``. ``match`` is the
  ``MatchResult`` of the request's lookup (or anything with ``token_match`` and
  ``restore_at``, clipped to ``prompt_len``; ``None`` = no hit). Every position is a
  multiple of ``page_size`` and lies in ``(restore_at, total_len]`` (``total_len`` defaults
  to ``prompt_len``: the simulator knows no output tokens); the result is deterministic.
* ``policy.cache_options() -> dict``: constructor options for ``RadixStateCache``
  (``state_touch``, ``max_states_per_path``), so the tree refreshes and caps as the policy
  prescribes: ``RadixStateCache(page_size, **policy.cache_options())``.
* ``policy.choose_victim(cache) -> Node | None`` and ``policy.evict_states(cache, num=0,
  nbytes=0) -> Evicted``: the owner calls ``evict_states`` when over its state budget.

Policies (``make(name, **params)``; unknown names or parameters raise ``ValueError``):

``interval`` - ``every`` (256): a checkpoint at every multiple of ``every`` tokens;
    ``request_end`` (False): also at the request end. LRU eviction, refresh the restore node.
``sglang`` - SGLang 0.5.23 mamba tracking (engines.md §1.9). ``buffer`` "extra_buffer":
    in each prefill step from ``prefix_len`` (``chunked_prefill_size`` 8192, overridden by
    ``chunk_size``) that extends ``E >= G`` tokens, the state at ``prefix_len + floor(E/G)*G``
    (``G = lcm(max(grid, page), page)``, ``grid`` 64 = the FLA chunk; counted from the step
    start, as ``ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_extend``), or the branch
    hint ``floor(token_match/G)*G`` instead when it lies inside the step on the step's chunk
    grid; each step's state is inserted after the step (``checkpoint_kv_cache``). Decode
    (``_mamba_prefix_cache_update``) only flips the ping-pong index at ``seq_len %
    lcm(G, track_interval) == 0`` (``track_interval`` 256) and records the length: the
    finished insert keeps only the last decode boundary, no request-end state. "no_buffer"
    (page 1 only): a state at every prefill step end (the prompt end included) and the
    finished length. ``request_end`` (False; a lab extension, not SGLang: also the request
    end in extra_buffer); ``max_states_per_path`` (None); ``lru`` ("node": refresh only the
    consumed state, PRs #31643/#31648; "path": legacy whole-path refresh, ancestors first).
``marconi`` - Marconi (retention.md §1.3-1.5): speculative insertion keeps only the branch
    point discovered by the lookup (``token_match`` when it exceeds ``restore_at``: the insert
    splits an edge or reaches a tombstone there) and the last token of the request. Eviction
    is FLOP-aware over unlocked nodes with at most one child: ``score = minmax(recency) +
    alpha * minmax(flop_efficiency)``, recency = 1 / (1 + now - last_access), efficiency =
    FLOPs a hit saves relative to the nearest checkpointed ancestor / (state bytes + KV bytes
    of the whole prefix); lowest score evicted, recomputed after every victim. ``alpha``
    ("auto", the artifact's default: 0 until ``tuning_due()``, then ``tune(evaluate)``
    grid-searches ``alpha_grid`` 0.0..2.0 step 0.1; or a fixed float); ``bootstrap`` (5):
    tuning after ``bootstrap * N0`` requests, N0 = requests seen at the first eviction, the
    evicting request included (call ``note_request`` when a request arrives, before it
    evicts). FLOP model (Marconi Table 1, its MLP-parent quirk fixed): ``d_model``
    4096, ``d_state`` 128, ``n_ssm_layers`` 24, ``n_attn_layers`` 4, ``n_mlp_layers`` 28,
    ``kv_bytes_per_token`` (default ``n_attn_layers * 4 * d_model``, fp16 K and V), or
    ``efficiency_fn(length, anc_length, state_bytes) -> array`` to plug in another model.
``vllm`` - vLLM 0.33 V1 (engines.md §2): ``mode`` "align" (prefill chunks of
    ``max_num_batched_tokens`` 2048 (or ``chunk_size``) split as
    ``Scheduler._mamba_block_aligned_split`` does: cut to whole blocks, stopped at the last
    cacheable boundary ``floor((P-1)/B)*B`` (so a block-aligned prompt also stops at P - B),
    at the shared-prefix junction and, from a mid-block start, at the next boundary; a block
    wider than the chunk advances within the block; a state where a chunk ends on a block
    boundary, then at every decode block boundary) or "all" (a lab idealisation: every block
    boundary); ``block_size`` (None: ``lcm(64, page)``); ``shared_prefix`` (True: the junction
    ``floor(min(token_match, P-1)/u)*u`` is a chunk stop and is retained; False = before
    #37898, an ablation); ``partial_hits`` (False: fine-grained hits, the unit ``u`` becomes
    ``match_unit`` (16, rounded to a page multiple, must divide the block) and the prompt's
    tail boundary ``floor((P-1)/u)*u`` is a stop too); ``retention``
    (``MambaManager.reachable_block_mask``: None = dense; 0 = only the reachable boundaries,
    the replay point ``floor((P-1)/u)*u`` and the junction; k > 0, a multiple of the block:
    multiples of k plus those, dense when k == B). LRU eviction with a request's blocks freed
    tail-first.

Checked against the engines' own code by ``tests/real/`` (SGLang 0.5.23, vLLM 0.33.0, README
"Fidelity"). Left out: EAGLE lookahead blocks, DCP, lazy / speculative tracking, vLLM's
internal prefill checkpoints, SegLen, Marconi's one-pool KV+state budget (the simulator owns
budgets), periodic re-tuning.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from kda_core._checks import check_integral as _int
from kda_core.radix import Evicted, Node, RadixStateCache

MAX_LEN = 1 << 24
"""Longest prompt / total length (tokens) a policy plans for."""
MAX_POSITIONS = 1 << 18
"""Most checkpoint positions one call may return (caps memory)."""
ALPHA_GRID = tuple(round(0.1 * i, 1) for i in range(21))
SGLANG_BUFFERS = ("extra_buffer", "no_buffer")

__all__ = [
    "ALPHA_GRID",
    "POLICY_NAMES",
    "IntervalPolicy",
    "MarconiPolicy",
    "Policy",
    "SGLangPolicy",
    "VLLMPolicy",
    "make",
    "marconi_flops",
]


def _opt_int(value: Any, name: str, lo: int, hi: int | None = None) -> int | None:
    return None if value is None else _int(value, name, lo, hi)


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {type(value).__name__}")
    return value


class _Ctx:
    """Validated arguments of one ``checkpoint_positions`` call."""

    __slots__ = ("prompt_len", "total_len", "token_match", "restore_at", "chunk", "page")

    def __init__(
        self, prompt_len: Any, match: Any, total_len: Any, chunk_size: Any, page_size: Any
    ) -> None:
        self.prompt_len = _int(prompt_len, "prompt_len", 1, MAX_LEN)
        self.total_len = (
            self.prompt_len
            if total_len is None
            else _int(total_len, "total_len", self.prompt_len, MAX_LEN)
        )
        self.page = _int(page_size, "page_size", 1, 1 << 16)
        self.chunk = _opt_int(chunk_size, "chunk_size", 1, MAX_LEN)
        if match is None:
            tm, ra = 0, 0
        else:
            try:
                tm, ra = match.token_match, match.restore_at
            except AttributeError:
                raise ValueError(
                    "match must have token_match and restore_at (or be None)"
                ) from None
            tm = _int(tm, "match.token_match", 0, MAX_LEN)
            ra = _int(ra, "match.restore_at", 0, tm)
            # a block-key match may cover the prompt's partial last block: clip to the prompt
            tm = min(tm, self.prompt_len)
            ra = min(ra, tm)
        self.token_match = tm
        self.restore_at = ra

    def down(self, x: int, unit: int) -> int:
        return x // unit * unit

    def finish(self, positions: Iterable[int]) -> tuple[int, ...]:
        lo, hi, page = self.restore_at, self.total_len, self.page
        return tuple(sorted({p for p in positions if lo < p <= hi and p % page == 0}))

    def multiples(self, unit: int, lo: int, hi: int, name: str) -> range:
        first = (lo // unit + 1) * unit
        if hi >= first and (hi - first) // unit + 1 > MAX_POSITIONS:
            raise ValueError(
                f"{name}={unit} gives more than {MAX_POSITIONS} positions up to {hi} tokens"
            )
        return range(first, hi + 1, unit)


@dataclass(slots=True)
class Policy:
    """Base: LRU eviction through the cache, placement left to subclasses."""

    name = "base"

    def cache_options(self) -> dict:
        """Keyword options for ``RadixStateCache`` that this policy prescribes."""
        return {"state_touch": "node", "max_states_per_path": None}

    def make_cache(self, page_size: int = 1, **kwargs: Any) -> RadixStateCache:
        """``RadixStateCache(page_size, **cache_options(), **kwargs)``."""
        opts = self.cache_options()
        opts.update(kwargs)
        return RadixStateCache(page_size, **opts)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    def checkpoint_positions(
        self,
        prompt_len: int,
        match: Any = None,
        *,
        total_len: int | None = None,
        chunk_size: int | None = None,
        page_size: int = 1,
    ) -> tuple[int, ...]:
        """Sorted positions in ``(restore_at, total_len]``, multiples of ``page_size``."""
        ctx = _Ctx(prompt_len, match, total_len, chunk_size, page_size)
        return ctx.finish(self._positions(ctx))

    def _positions(self, ctx: _Ctx) -> Iterable[int]:
        return ()

    def choose_victim(self, cache: RadixStateCache) -> Node | None:
        """The state node to evict next (None when nothing is evictable)."""
        return cache.lru_state_victim()

    def evict_states(self, cache: RadixStateCache, num: int = 0, nbytes: int = 0) -> Evicted:
        """Evict states chosen by ``choose_victim`` until ``num`` states and ``nbytes``
        bytes are freed (or nothing is evictable)."""
        if not isinstance(cache, RadixStateCache):
            raise ValueError("cache must be a RadixStateCache")
        num = _int(num, "num", 0)
        nbytes = _int(nbytes, "nbytes", 0)
        if type(self).choose_victim is Policy.choose_victim:
            return cache.evict_states(num, nbytes)
        tot = [0, 0, 0, 0, 0]
        while tot[0] < num or tot[1] < nbytes:
            victim = self.choose_victim(cache)
            if victim is None:
                break
            r = cache.evict_state_node(victim)
            for i, v in enumerate(r):
                tot[i] += v
        return Evicted(*tot)


@dataclass(slots=True)
class IntervalPolicy(Policy):
    """A checkpoint every ``every`` tokens (plus the request end if ``request_end``)."""

    every: int = 256
    request_end: bool = False
    name = "interval"

    def __post_init__(self) -> None:
        self.every = _int(self.every, "every", 1, MAX_LEN)
        self.request_end = _bool(self.request_end, "request_end")

    def _positions(self, ctx: _Ctx) -> Iterable[int]:
        if self.every % ctx.page:
            raise ValueError(
                f"every must be a multiple of page_size={ctx.page}, got every={self.every}"
            )
        out = list(ctx.multiples(self.every, ctx.restore_at, ctx.total_len, "every"))
        if self.request_end:
            out.append(ctx.down(ctx.total_len, ctx.page))
        return out


@dataclass(slots=True)
class SGLangPolicy(Policy):
    """SGLang mamba state tracking (extra_buffer or no_buffer), per-path cap, LRU.

    See the module doc; each rule cites the SGLang 0.5.23 function it follows.
    """

    grid: int = 64
    chunked_prefill_size: int = 8192
    track_interval: int = 256
    branch: bool = True
    request_end: bool = False
    max_states_per_path: int | None = None
    lru: str = "node"
    buffer: str = "extra_buffer"
    name = "sglang"

    def __post_init__(self) -> None:
        self.grid = _int(self.grid, "grid", 1, MAX_LEN)
        self.chunked_prefill_size = _int(self.chunked_prefill_size, "chunked_prefill_size", 1)
        self.track_interval = _int(self.track_interval, "track_interval", 1, MAX_LEN)
        self.branch = _bool(self.branch, "branch")
        self.request_end = _bool(self.request_end, "request_end")
        self.max_states_per_path = _opt_int(self.max_states_per_path, "max_states_per_path", 1)
        if self.lru not in ("node", "path"):
            raise ValueError(f"lru must be 'node' or 'path', got {self.lru!r}")
        if self.buffer not in SGLANG_BUFFERS:
            raise ValueError(f"buffer must be one of {SGLANG_BUFFERS}, got {self.buffer!r}")

    def cache_options(self) -> dict:
        return {"state_touch": self.lru, "max_states_per_path": self.max_states_per_path}

    def _steps(self, ctx: _Ctx) -> list[tuple[int, int]]:
        """Prefill scheduler steps ``(prefix_len, extend_end)`` from the restore point."""
        chunk = ctx.chunk or self.chunked_prefill_size
        if (ctx.prompt_len - ctx.restore_at) // chunk > MAX_POSITIONS:
            raise ValueError(f"chunk_size={chunk} gives more than {MAX_POSITIONS} steps")
        starts = range(ctx.restore_at, ctx.prompt_len, chunk)
        return [(a, min(a + chunk, ctx.prompt_len)) for a in starts]

    def _positions(self, ctx: _Ctx) -> Iterable[int]:
        if self.buffer == "no_buffer":
            return self._no_buffer_positions(ctx)
        # mamba_cache_chunk_size = max(FLA chunk, page); checkpoint grid = lcm(that, page)
        cache_chunk = max(self.grid, ctx.page)
        g = math.lcm(cache_chunk, ctx.page)
        # MambaComponent.finalize_match_result_in_tree_core: the branching seqlen
        aligned = ctx.down(ctx.token_match, g)
        br = aligned if (self.branch and aligned > ctx.restore_at) else None
        out = []
        for a, b in self._steps(ctx):
            # ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_extend
            ext = b - a
            if ext < g:
                continue
            track = a + ext // g * g
            fla = a + ext // self.grid * self.grid
            raw = b if fla == track else track + 1  # _force_track_h: read from h
            if br is not None and a < br < raw and (br - a) % cache_chunk == 0:
                track = br
            out.append(track)  # checkpoint_kv_cache inserts it after the step
        # decode: _mamba_prefix_cache_update records seq_len % lcm(grid, interval) == 0 and
        # only flips the ping-pong index; the finished insert keeps only the last one
        # (MambaComponent.prepare_for_caching_req / _select_finished_checkpoint)
        d = math.lcm(g, self.track_interval)
        last = ctx.down(ctx.total_len, d)
        if last > ctx.prompt_len:
            out.append(last)
        if self.request_end:
            out.append(ctx.down(ctx.total_len, ctx.page))
        return out

    def _no_buffer_positions(self, ctx: _Ctx) -> list[int]:
        # MambaComponent.__init__ asserts page_size == 1 without the extra buffer
        if ctx.page != 1:
            raise ValueError(f"buffer='no_buffer' needs page_size=1 (SGLang), got {ctx.page}")
        # prepare_for_caching_req without the extra buffer: cache_len = the key length,
        # after every prefill step (checkpoint_kv_cache) and at the finished insert
        return [b for _, b in self._steps(ctx)] + [ctx.total_len]


def marconi_flops(
    length: np.ndarray,
    anc_length: np.ndarray,
    *,
    d_model: int = 4096,
    d_state: int = 128,
    n_ssm_layers: int = 24,
    n_attn_layers: int = 4,
    n_mlp_layers: int = 28,
) -> np.ndarray:
    """FLOPs a hit at ``length`` saves over restoring at ``anc_length`` (Marconi Table 1).

    attention 8*L*D^2 + 4*L^2*D, MLP 16*L*D^2, SSM 12*L*D^2 + 16*L*D*N + 10*L*D; SSM counted
    on the own segment, attention and MLP as prefix differences (the artifact subtracts the
    parent's attention FLOPs in the MLP term; fixed here).
    """
    L = np.asarray(length, dtype=np.float64)
    P = np.asarray(anc_length, dtype=np.float64)
    D, N = float(d_model), float(d_state)

    def attn(x: np.ndarray) -> np.ndarray:
        return 8.0 * x * D * D + 4.0 * x * x * D

    own = L - P
    ssm = 12.0 * own * D * D + 16.0 * own * D * N + 10.0 * own * D
    return (
        n_ssm_layers * ssm
        + n_attn_layers * (attn(L) - attn(P))
        + n_mlp_layers * 16.0 * (L - P) * D * D
    )


def _minmax(x: np.ndarray) -> np.ndarray:
    if x.size <= 1:
        return np.ones_like(x)
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        return np.ones_like(x)
    return (x - lo) / (hi - lo)


@dataclass(slots=True)
class MarconiPolicy(Policy):
    """Marconi: branch + last admission, FLOP-aware eviction (see module doc)."""

    alpha: Any = "auto"
    bootstrap: int = 5
    alpha_grid: tuple = ALPHA_GRID
    d_model: int = 4096
    d_state: int = 128
    n_ssm_layers: int = 24
    n_attn_layers: int = 4
    n_mlp_layers: int = 28
    kv_bytes_per_token: int | None = None
    efficiency_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    _alpha_value: float = field(default=0.0, init=False, repr=False)
    _tuned: bool = field(default=False, init=False, repr=False)
    _requests: int = field(default=0, init=False, repr=False)
    _first_eviction: int | None = field(default=None, init=False, repr=False)
    _eff_owner: int = field(default=-1, init=False, repr=False)
    _eff: np.ndarray = field(default_factory=lambda: np.zeros(0), init=False, repr=False)
    _eff_ver: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64), init=False, repr=False
    )
    name = "marconi"

    def __post_init__(self) -> None:
        if self.alpha == "auto":
            self._alpha_value = 0.0
        elif (
            isinstance(self.alpha, numbers.Real)
            and not isinstance(self.alpha, bool)
            and 0.0 <= float(self.alpha) <= 100.0
        ):
            self.alpha = float(self.alpha)
            self._alpha_value = self.alpha
        else:
            raise ValueError(f"alpha must be a float in [0, 100] or 'auto', got {self.alpha!r}")
        self.bootstrap = _int(self.bootstrap, "bootstrap", 1, 1000)
        grid = tuple(self.alpha_grid)
        if not grid or not all(
            isinstance(a, numbers.Real) and not isinstance(a, bool) and 0 <= a <= 100 for a in grid
        ):
            raise ValueError("alpha_grid must be a non-empty sequence of floats in [0, 100]")
        self.alpha_grid = tuple(float(a) for a in grid)
        self.d_model = _int(self.d_model, "d_model", 1, 1 << 20)
        self.d_state = _int(self.d_state, "d_state", 1, 1 << 20)
        self.n_ssm_layers = _int(self.n_ssm_layers, "n_ssm_layers", 0, 10000)
        self.n_attn_layers = _int(self.n_attn_layers, "n_attn_layers", 0, 10000)
        self.n_mlp_layers = _int(self.n_mlp_layers, "n_mlp_layers", 0, 10000)
        if self.kv_bytes_per_token is None:
            self.kv_bytes_per_token = self.n_attn_layers * 4 * self.d_model
        self.kv_bytes_per_token = _int(self.kv_bytes_per_token, "kv_bytes_per_token", 0)
        if self.efficiency_fn is not None and not callable(self.efficiency_fn):
            raise ValueError("efficiency_fn must be callable or None")

    @property
    def alpha_value(self) -> float:
        """The alpha in use now (0 before tuning when alpha='auto')."""
        return self._alpha_value

    def _positions(self, ctx: _Ctx) -> Iterable[int]:
        out = [ctx.down(ctx.total_len, ctx.page)]
        if ctx.token_match > ctx.restore_at:
            out.append(ctx.down(ctx.token_match, ctx.page))
        return out

    def efficiency(
        self, length: np.ndarray, anc_length: np.ndarray, state_bytes: np.ndarray
    ) -> np.ndarray:
        """FLOPs saved per byte held, per candidate."""
        if self.efficiency_fn is not None:
            return np.asarray(self.efficiency_fn(length, anc_length, state_bytes), np.float64)
        fl = marconi_flops(
            length,
            anc_length,
            d_model=self.d_model,
            d_state=self.d_state,
            n_ssm_layers=self.n_ssm_layers,
            n_attn_layers=self.n_attn_layers,
            n_mlp_layers=self.n_mlp_layers,
        )
        mem = np.asarray(state_bytes, np.float64) + float(self.kv_bytes_per_token) * np.asarray(
            length, np.float64
        )
        return fl / np.maximum(mem, 1.0)

    def _row_efficiency(self, cache: RadixStateCache, t: Any, rows: np.ndarray) -> np.ndarray:
        """Efficiency of ``rows``, cached per row and recomputed when its version changes."""
        cap = t.version.shape[0]
        if self._eff_owner != cache._owner or self._eff.shape[0] != cap:
            old_eff, old_ver = self._eff, self._eff_ver
            self._eff = np.zeros(cap)
            self._eff_ver = np.full(cap, -1, np.int64)
            if self._eff_owner == cache._owner:
                n = min(cap, old_eff.shape[0])
                self._eff[:n] = old_eff[:n]
                self._eff_ver[:n] = old_ver[:n]
            self._eff_owner = cache._owner
        stale = rows[self._eff_ver[rows] != t.version[rows]]
        if stale.size > 16 or (stale.size and self.efficiency_fn is not None):
            self._eff[stale] = self.efficiency(
                t.length[stale], t.anc_length[stale], t.nbytes[stale]
            )
            self._eff_ver[stale] = t.version[stale]
        elif stale.size:  # a few new rows: scalar twin of efficiency() (numpy call overhead)
            for r in stale.tolist():
                self._eff[r] = self._scalar_efficiency(
                    float(t.length[r]), float(t.anc_length[r]), float(t.nbytes[r])
                )
                self._eff_ver[r] = t.version[r]
        return self._eff[rows]

    def _scalar_efficiency(self, L: float, P: float, nbytes: float) -> float:
        """Same operations, in the same order, as ``marconi_flops`` + ``efficiency``."""
        D, N = float(self.d_model), float(self.d_state)
        own = L - P
        ssm = 12.0 * own * D * D + 16.0 * own * D * N + 10.0 * own * D
        attn_l = 8.0 * L * D * D + 4.0 * L * L * D
        attn_p = 8.0 * P * D * D + 4.0 * P * P * D
        fl = (
            self.n_ssm_layers * ssm
            + self.n_attn_layers * (attn_l - attn_p)
            + self.n_mlp_layers * 16.0 * (L - P) * D * D
        )
        mem = nbytes + float(self.kv_bytes_per_token) * L
        return fl / max(mem, 1.0)

    def scores(self, cache: RadixStateCache) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the current eviction candidates (for the apps)."""
        t = cache.state_table()
        rows = np.flatnonzero(t.evictable & (t.nchild <= 1))
        if rows.size == 0:
            return rows, np.zeros(0)
        rec = 1.0 / (1.0 + (cache.clock - t.time[rows]))
        if self._alpha_value == 0.0:
            return rows, _minmax(rec)
        eff = self._row_efficiency(cache, t, rows)
        return rows, _minmax(rec) + self._alpha_value * _minmax(eff)

    def choose_victim(self, cache: RadixStateCache) -> Node | None:
        rows, score = self.scores(cache)
        if rows.size == 0:
            return None
        lowest = rows[score <= score.min()]
        t = cache.state_table().time
        return cache.node_at_row(int(lowest[np.argmin(t[lowest])]))

    def evict_states(self, cache: RadixStateCache, num: int = 0, nbytes: int = 0) -> Evicted:
        r = Policy.evict_states(self, cache, num, nbytes)
        if r.states and self._first_eviction is None:
            self._first_eviction = self._requests
        return r

    def note_request(self) -> None:
        """Count one served request (drives the bootstrap window when alpha='auto')."""
        self._requests += 1

    def tuning_due(self) -> bool:
        """True once, when alpha='auto' and ``bootstrap * N0`` requests have been seen."""
        if self.alpha != "auto" or self._tuned or self._first_eviction is None:
            return False
        return self._requests >= self.bootstrap * max(self._first_eviction, 1)

    def tune(self, evaluate: Callable[[float], float]) -> float:
        """Adopt the grid alpha maximising ``evaluate(alpha)`` (the artifact: FLOPs saved over
        the last 500 requests of a replay from an empty tree); ties keep the smaller alpha."""
        if not callable(evaluate):
            raise ValueError("evaluate must be callable")
        best_a, best_v = self.alpha_grid[0], -math.inf
        for a in self.alpha_grid:
            v = float(evaluate(a))
            if v > best_v:
                best_a, best_v = a, v
        self._alpha_value = best_a
        self._tuned = True
        return best_a

    def with_alpha(self, alpha: float) -> MarconiPolicy:
        """A fresh copy with a fixed alpha (for tuning replays)."""
        return replace(self, alpha=alpha)


@dataclass(slots=True)
class VLLMPolicy(Policy):
    """vLLM V1 Mamba prefix caching: align / all, retention, partial hits (see module doc)."""

    mode: str = "align"
    block_size: int | None = None
    max_num_batched_tokens: int = 2048
    retention: int | None = None
    shared_prefix: bool = True
    partial_hits: bool = False
    match_unit: int = 16
    name = "vllm"

    def __post_init__(self) -> None:
        if self.mode not in ("align", "all"):
            raise ValueError(f"mode must be 'align' or 'all', got {self.mode!r}")
        self.block_size = _opt_int(self.block_size, "block_size", 1, MAX_LEN)
        self.max_num_batched_tokens = _int(
            self.max_num_batched_tokens, "max_num_batched_tokens", 1, MAX_LEN
        )
        self.retention = _opt_int(self.retention, "retention", 0, MAX_LEN)
        self.shared_prefix = _bool(self.shared_prefix, "shared_prefix")
        self.partial_hits = _bool(self.partial_hits, "partial_hits")
        self.match_unit = _int(self.match_unit, "match_unit", 1, MAX_LEN)

    def cache_options(self) -> dict:
        return {"state_touch": "path_tail_first", "max_states_per_path": None}

    def _units(self, ctx: _Ctx) -> tuple[int, int]:
        """(block B, hit unit u): u = B, or the fine-grained match unit with partial hits."""
        page = ctx.page
        B = self.block_size if self.block_size is not None else math.lcm(64, page)
        if B % page:
            raise ValueError(f"block_size must be a multiple of page_size={page}, got {B}")
        u = B
        if self.partial_hits:
            u = math.lcm(self.match_unit, page)
            if B % u:
                raise ValueError(
                    f"match_unit={self.match_unit} (rounded to page {page}: {u}) must divide "
                    f"block_size={B}"
                )
        if self.retention is not None and self.retention % B:
            raise ValueError(
                f"retention must be a multiple of block_size={B}, got {self.retention}"
            )
        return B, u

    def _positions(self, ctx: _Ctx) -> Iterable[int]:
        B, u = self._units(ctx)
        P, T = ctx.prompt_len, ctx.total_len
        # KVCacheManager.get_computed_blocks: the hit is capped at P - 1 tokens; the
        # shared-prefix junction (request.shared_prefix_boundary) is the KV hit beyond it
        tm = min(ctx.token_match, P - 1)
        junction = ctx.down(tm, u) if self.shared_prefix else 0
        if junction <= ctx.restore_at:
            junction = 0
        # replay_boundaries (kv_cache_coordinator.py): a resend resumes at P - 1
        replay = ctx.down(P - 1, u)
        tail = replay if self.partial_hits else 0
        if self.mode == "all":  # lab idealisation: a state at every block boundary
            base = list(ctx.multiples(B, ctx.restore_at, T, "block_size"))
            base += [p for p in (junction, tail) if p % B]
        else:
            chunk = ctx.chunk or self.max_num_batched_tokens
            base = _vllm_align_chunk_ends(ctx.restore_at, P, B, chunk, junction, tail)
            base = [p for p in base if p % B == 0 or p in (junction, tail)]
            # decode: the block a prompt's last chunk left is advanced to each boundary
            base += list(ctx.multiples(B, P, T, "block_size"))
        if self.retention is None:
            return base
        # MambaManager.reachable_block_mask: segment ends every `retention` tokens (dense
        # when retention <= B) plus the reachable boundaries (replay point and junction)
        if 0 < self.retention <= B:
            return base
        keep = {replay, junction}
        return [p for p in base if p in keep or (self.retention and p % self.retention == 0)]


def _vllm_align_chunk_ends(
    start: int, prompt_len: int, block: int, chunk: int, junction: int, tail: int
) -> list[int]:
    """Prefill chunk ends of ``Scheduler._mamba_block_aligned_split`` (vLLM 0.33, align mode,
    one request, no EAGLE, no internal prefill checkpoint), from ``start`` to the prompt end.

    A chunk is cut to whole blocks unless it ends the prompt (or a block is wider than the
    chunk: then it advances within the block); it also stops at the next block boundary
    when it starts mid-block, at the last cacheable boundary ``floor((P - 1) / B) * B``, at
    the partial-hit tail boundary and at the shared-prefix junction.
    """
    last_cache = max((prompt_len - 1) // block * block, 0)
    out = []
    steps = 0
    while start < prompt_len:
        end = min(start + chunk, prompt_len)
        if end < prompt_len:
            aligned_end = end // block * block
            if aligned_end > start or block <= chunk:
                end = aligned_end
        stops = (
            (start // block + 1) * block if start % block else 0,
            last_cache,
            tail if last_cache < tail < prompt_len else 0,
            junction,
        )
        end = min((s for s in stops if start < s < end), default=end)
        if end <= start:  # cannot happen for chunk >= 1; guards the loop
            raise ValueError(f"chunk_size={chunk} makes no progress at {start}")
        out.append(end)
        start = end
        steps += 1
        if steps > MAX_POSITIONS:
            raise ValueError(f"chunk_size={chunk} gives more than {MAX_POSITIONS} steps")
    return out


_POLICIES: dict[str, type[Policy]] = {
    "interval": IntervalPolicy,
    "sglang": SGLangPolicy,
    "marconi": MarconiPolicy,
    "vllm": VLLMPolicy,
}
POLICY_NAMES = tuple(_POLICIES)


def make(name: str, **params: Any) -> Policy:
    """Build a policy by name (see the module docstring for parameters and defaults)."""
    if name not in _POLICIES:
        raise ValueError(f"name must be one of {POLICY_NAMES}, got {name!r}")
    cls = _POLICIES[name]
    allowed = {f.name for f in fields(cls) if not f.name.startswith("_")}
    for key in params:
        if key not in allowed:
            raise ValueError(f"{key} is not a parameter of policy {name!r}; use {sorted(allowed)}")
    return cls(**params)
