"""Trace-driven simulator: a request trace through the KDA-aware radix cache, with byte budgets.

The simulator drives the SAME ``RadixStateCache`` and ``policy`` code as the real engine, with
no arrays: the tree is keyed by block ids (``block_keys=True``, page = the trace's block
size); KV payloads are ``None`` (the tree counts an edge's KV in tokens from its key; bytes =
tokens * MLA KV bytes per token); a checkpoint's payload is its own position (a label only)
and its size is passed as ``state_bytes`` (KDA state + conv window of all KDA layers on one
GPU, from ``kda_core.sizing``; Kimi K3 at TP8 in bf16 by default: 29,039,616 B per checkpoint,
27,648 B of MLA KV per token).

Per request, in arrival order (strictly sequential: no batching, no concurrency, as Marconi's
simulator):

1. ``m = cache.match(block_ids)``: token match and restore point (tree lengths are whole
   blocks; both are clipped to the request's input length);
2. ``positions = policy.checkpoint_positions(input_len, m, page_size=block)``: where this
   request saves states (all lie in ``(restore_at, input_len]``, so all are new);
3. make room: the path of the match is KV-locked, states are evicted through the policy
   (``policy.evict_states``: LRU or Marconi's FLOP-aware choice) until the new states fit the
   state budget (a unified budget also counts the new KV and falls back to KV-leaf eviction);
   positions that still do not fit are dropped, deepest first;
4. with a KV budget, evict LRU KV leaves (the matched path stays locked) so that the tree's
   KV plus this request's new KV fit the budget;
5. ``cache.insert(block_ids, None, [(p, p) for p in positions], state_bytes=ckpt)`` (the tree
   cuts the key at the
   deepest position: KV beyond the last checkpoint can never be restored), sample the KV held
   now (the request's high-water mark), unlock, and if the KV budget is still exceeded (the
   request's own path alone is larger than the budget) evict LRU KV leaves down to it.

Metrics (all over input tokens): token hit rate ``sum(token_match) / sum(input)``, state hit
rate ``sum(restore_at) / sum(input)`` (<= token hit rate by construction), replayed tokens
``sum(token_match - restore_at)``, prefill tokens saved ``sum(restore_at)``, FLOPs
(``kda_core.costmodel``: computing ``[restore_at, input_len)`` costs
``prefill_flops(restore_at, input_len)``, replay included; saved = ``prefill_flops(0,
restore_at)``), TTFT = ``TimeModel`` seconds of those FLOPs (optionally through a FCFS queue of
``servers`` prefill servers), checkpoints stored (new states inserted), peak state bytes
(after each request's evictions; states are evicted before insert), peak KV bytes (right
after each insert, before any clean-up eviction: with a KV budget it exceeds the budget only
when one request's KV alone does), evictions, and per-request time series for plots.

Output tokens: Mooncake has no output hashes, so there the "last" state of a request is the last
full input block (as in retention.md §4); synthetic traces carry output block ids and the
simulator inserts them, so decode-time checkpoints (Marconi's last decoded token, SGLang's track
interval) are placed and hit by the next turn. Left out: the partial last block's
state (its id only matches an identical prompt; dropping it costs 0.02 points of hit rate on
the conversation trace), restore copy time, KV of a partial last block counted as a whole block.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kda_core import costmodel, sizing
from kda_core.cache import policy as policy_mod
from kda_core.workloads import Trace, bundled_trace

ProgressFn = Callable[[int, int], Any]
DEFAULT_TP = 8
_PROGRESS_EVERY = 1000
MAX_BUDGET = 1 << 60


@dataclass(frozen=True, slots=True, eq=False)
class SimSeries:
    """Per-request arrays ``[N]`` in arrival order (int64 unless noted)."""

    arrival_s: np.ndarray  # float64
    input_len: np.ndarray
    token_match: np.ndarray
    restore_at: np.ndarray
    replayed: np.ndarray
    flops: np.ndarray  # float64, FLOPs spent on this request's prefill (replay included)
    flops_saved: np.ndarray  # float64
    ttft_s: np.ndarray  # float64
    ttft_nocache_s: np.ndarray  # float64, same request with no cache (same queue model)
    state_bytes: np.ndarray  # after the request (and its evictions)
    kv_bytes: np.ndarray  # after the request (and its evictions)
    n_states: np.ndarray
    checkpoints_new: np.ndarray
    evicted_states: np.ndarray  # cumulative
    kv_peak_bytes: np.ndarray  # KV held right after the request's insert (before clean-up)


@dataclass(frozen=True, slots=True, eq=False)
class SimResult:
    """Summary of one simulation (see the module docstring for definitions)."""

    policy: str
    policy_params: dict
    model: str
    state_budget_bytes: int | None
    kv_budget_bytes: int | None
    unified_budget_bytes: int | None
    n_requests: int
    input_tokens: int
    state_bytes_per_checkpoint: int
    kv_bytes_per_token: int
    token_hit_rate: float
    state_hit_rate: float
    request_token_hit_rate: float  # share of requests with token_match > 0
    request_state_hit_rate: float  # share of requests with restore_at > 0
    replayed_tokens: int
    mean_replay_per_hit: float  # replayed tokens / requests with token_match > 0
    prefill_tokens_saved: int
    prefill_tokens: int  # tokens computed (replay + fresh prefill)
    flops_total: float  # FLOPs with no cache
    flops_spent: float
    flops_saved: float
    flops_replayed: float  # FLOPs spent on replayed tokens
    ttft_p50_s: float
    ttft_p95_s: float
    ttft_mean_s: float
    ttft_nocache_p50_s: float
    ttft_nocache_p95_s: float
    checkpoints_stored: int
    checkpoints_dropped: int  # positions skipped because nothing more could be evicted
    peak_state_bytes: int
    peak_kv_bytes: int
    final_state_bytes: int
    final_kv_bytes: int
    evictions: int  # states evicted (tombstoned or deleted)
    evicted_state_bytes: int
    evicted_kv_tokens: int
    tombstoned: int
    tree_steps: int  # key elements walked by match + insert
    elapsed_s: float
    series: SimSeries

    @property
    def requests_per_s(self) -> float:
        return self.n_requests / max(self.elapsed_s, 1e-12)

    @property
    def tree_steps_per_s(self) -> float:
        return self.tree_steps / max(self.elapsed_s, 1e-12)

    def summary(self) -> dict:
        """Scalar fields only (no series), for tables and JSON."""
        return {
            k: getattr(self, k)
            for k in self.__slots__  # type: ignore[attr-defined]
            if k != "series"
        }


def _budget(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be None or a number of bytes in [0, 2**60], got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0 <= v <= MAX_BUDGET):
        raise ValueError(f"{name} must be None or a number of bytes in [0, 2**60], got {value!r}")
    return int(v)


def resolve_policy(policy: Any) -> policy_mod.Policy:
    """A fresh policy object from a name, a ``(name, params)`` pair or a Policy (copied, so
    per-run state such as Marconi's tuning never leaks between runs)."""
    try:
        if isinstance(policy, str):
            return policy_mod.make(policy)
        if isinstance(policy, tuple) and len(policy) == 2 and isinstance(policy[0], str):
            return policy_mod.make(policy[0], **dict(policy[1]))
    except ValueError as e:
        raise ValueError(f"policy: {e}") from None
    if isinstance(policy, policy_mod.Policy):
        return replace(policy)
    raise ValueError(
        f"policy must be a name in {policy_mod.POLICY_NAMES}, a (name, params) pair or a Policy, "
        f"got {type(policy).__name__}"
    )


def checkpoint_bytes(
    model: str = "kimi-k3",
    tp: int = DEFAULT_TP,
    state_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
) -> int:
    """Bytes of one checkpoint on one GPU: KDA state + conv window of every KDA layer."""
    spec = sizing.preset(model)
    return sizing.kda_state_bytes(spec, tp, state_dtype) + sizing.conv_state_bytes(
        spec, tp, conv_dtype
    )


def marconi_efficiency_fn(
    model: str | costmodel.CostSpec, kv_bytes_per_token: int
) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Marconi's FLOP efficiency with this lab's cost model: FLOPs a hit at ``length`` saves
    over restoring at the nearest checkpointed ancestor, per byte held (state + KV of the whole
    prefix, as in the paper)."""
    spec = costmodel.cost_spec(model)
    kvb = float(kv_bytes_per_token)
    per_tok = spec.per_token_flops
    pair = spec.n_attn_layers * spec.attn_pair_flops
    causal = spec.causal

    def eff(length: np.ndarray, anc: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        # costmodel.prefill_flops(spec, anc, length) inlined (called once per eviction; the
        # agreement is tested)
        L = np.asarray(length, dtype=np.float64)
        P = np.asarray(anc, dtype=np.float64)
        pairs = (L * (L + 1.0) - P * (P + 1.0)) / 2.0 if causal else L * L - P * P
        fl = (L - P) * per_tok + pair * pairs
        return fl / np.maximum(np.asarray(nbytes, dtype=np.float64) + kvb * L, 1.0)

    return eff


def _policy_params(pol: policy_mod.Policy) -> dict:
    out = {k: v for k, v in pol.params().items() if k != "efficiency_fn"}
    if isinstance(pol, policy_mod.MarconiPolicy):
        out["alpha_value"] = pol.alpha_value  # the alpha in use at the end (tuned if "auto")
    return out


def _percentile(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else 0.0


def simulate(
    trace: Trace | None = None,
    policy: Any = "sglang",
    state_budget_bytes: float | None = None,
    model: str = "kimi-k3",
    *,
    kv_budget_bytes: float | None = None,
    unified_budget_bytes: float | None = None,
    tp: int = DEFAULT_TP,
    state_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    time_model: costmodel.TimeModel | None = None,
    servers: int | None = None,
    progress: ProgressFn | None = None,
    check_integrity: bool = False,
    outputs: bool = True,
) -> SimResult:
    """Run ``trace`` (default: the bundled Mooncake conversation trace) through the radix
    cache under ``policy`` and the byte budgets (``None`` = unlimited).

    Args:
        policy: a policy name (``"interval"``, ``"sglang"``, ``"marconi"``, ``"vllm"``), a
            ``(name, params)`` pair or a ``Policy`` (copied). A Marconi policy without its own
            ``efficiency_fn`` gets this lab's cost model for ``model``.
        state_budget_bytes: bytes of checkpoints the cache may hold (on one GPU).
        kv_budget_bytes: bytes of MLA KV the tree may hold (LRU leaf eviction).
        unified_budget_bytes: one budget for state + KV together.
        model: ``"kimi-k3"`` or ``"kimi-linear-48b"`` (sizes from ``sizing``, FLOPs from
            ``costmodel``), at tensor parallel ``tp`` with the given dtypes.
        time_model: TTFT = overhead + FLOPs / throughput (default ``TimeModel()``).
        servers: if set, TTFT includes FCFS queueing over this many prefill servers.
        progress: called as ``progress(done, total)`` every 1000 requests and at the end.
        check_integrity: run ``cache.check_integrity()`` after every request (slow; tests).
        outputs: when the trace has output blocks (synthetic workloads), insert them and let
            the policy place decode-time checkpoints (``total_len`` = input + decoded full
            blocks): Marconi's "state after the last decoded token". Mooncake traces have none.

    Deterministic: the same trace, policy and budgets give the same metrics.
    """
    t0 = time.perf_counter()
    if trace is None:
        trace = bundled_trace("conversation")
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace or None, got {type(trace).__name__}")
    pol = resolve_policy(policy)
    sb = _budget(state_budget_bytes, "state_budget_bytes")
    kb = _budget(kv_budget_bytes, "kv_budget_bytes")
    ub = _budget(unified_budget_bytes, "unified_budget_bytes")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    if servers is not None:
        if (
            isinstance(servers, (bool, np.bool_))
            or not isinstance(servers, (int, np.integer))
            or not 1 <= int(servers) <= 4096
        ):
            raise ValueError(f"servers must be None or an integer in [1, 4096], got {servers!r}")
        servers = int(servers)
    tm = time_model if time_model is not None else costmodel.TimeModel()
    if not isinstance(tm, costmodel.TimeModel):
        raise ValueError("time_model must be a costmodel.TimeModel or None")
    if model not in sizing.PRESETS or model not in costmodel.COST_PRESETS:
        allowed = sorted(set(sizing.PRESETS) & set(costmodel.COST_PRESETS))
        raise ValueError(f"model must be one of {allowed}, got {model!r}")
    cspec = costmodel.cost_spec(model)
    ckpt = checkpoint_bytes(model, tp, state_dtype, conv_dtype)
    kvb = sizing.mla_kv_bytes_per_token(sizing.preset(model), kv_dtype)
    if isinstance(pol, policy_mod.MarconiPolicy) and pol.efficiency_fn is None:
        pol = replace(pol, efficiency_fn=marconi_efficiency_fn(cspec, kvb), kv_bytes_per_token=kvb)

    if not isinstance(outputs, bool):
        raise ValueError(f"outputs must be a bool, got {outputs!r}")
    # The tree is one long-lived object graph: generational GC passes while it grows only
    # rescan it (up to 2x the run time on dense placements). Collect afterwards instead.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        core = _run(
            trace,
            pol,
            sb,
            kb,
            ub,
            ckpt,
            kvb,
            progress,
            check_integrity,
            outputs=outputs,
            cspec=cspec,
        )
    finally:
        if gc_was_on:
            gc.enable()
    tm_arr, ra_arr = core["token_match"], core["restore_at"]
    L = trace.input_len
    flops_full = np.asarray(costmodel.prefill_flops(cspec, np.zeros_like(L), L), dtype=np.float64)
    flops = np.asarray(costmodel.prefill_flops(cspec, ra_arr, L), dtype=np.float64)
    flops_replay = np.asarray(costmodel.prefill_flops(cspec, ra_arr, tm_arr), dtype=np.float64)
    saved = flops_full - flops
    service = np.asarray(tm.seconds(flops), dtype=np.float64)
    service0 = np.asarray(tm.seconds(flops_full), dtype=np.float64)
    if servers is not None:
        _, fin = costmodel.fcfs_queue(trace.arrival_s, service, servers)
        _, fin0 = costmodel.fcfs_queue(trace.arrival_s, service0, servers)
        ttft = fin - trace.arrival_s
        ttft0 = fin0 - trace.arrival_s
    else:
        ttft, ttft0 = service, service0
    replayed = tm_arr - ra_arr
    n = len(trace)
    tot_in = int(L.sum())
    hits = int((tm_arr > 0).sum())
    series = SimSeries(
        arrival_s=trace.arrival_s,
        input_len=trace.input_len,
        token_match=tm_arr,
        restore_at=ra_arr,
        replayed=replayed,
        flops=flops,
        flops_saved=saved,
        ttft_s=ttft,
        ttft_nocache_s=ttft0,
        state_bytes=core["state_bytes"],
        kv_bytes=core["kv_tokens"] * kvb,
        n_states=core["n_states"],
        checkpoints_new=core["new"],
        evicted_states=core["evicted_cum"],
        kv_peak_bytes=core["kv_peak"] * kvb,
    )
    st = core["stats"]
    return SimResult(
        policy=pol.name,
        policy_params=_policy_params(pol),
        model=model,
        state_budget_bytes=sb,
        kv_budget_bytes=kb,
        unified_budget_bytes=ub,
        n_requests=n,
        input_tokens=tot_in,
        state_bytes_per_checkpoint=ckpt,
        kv_bytes_per_token=kvb,
        token_hit_rate=float(tm_arr.sum() / tot_in) if tot_in else 0.0,
        state_hit_rate=float(ra_arr.sum() / tot_in) if tot_in else 0.0,
        request_token_hit_rate=hits / n if n else 0.0,
        request_state_hit_rate=float((ra_arr > 0).sum() / n) if n else 0.0,
        replayed_tokens=int(replayed.sum()),
        mean_replay_per_hit=float(replayed.sum() / hits) if hits else 0.0,
        prefill_tokens_saved=int(ra_arr.sum()),
        prefill_tokens=int((L - ra_arr).sum()),
        flops_total=float(flops_full.sum()),
        flops_spent=float(flops.sum()),
        flops_saved=float(saved.sum()),
        flops_replayed=float(flops_replay.sum()),
        ttft_p50_s=_percentile(ttft, 50),
        ttft_p95_s=_percentile(ttft, 95),
        ttft_mean_s=float(ttft.mean()) if n else 0.0,
        ttft_nocache_p50_s=_percentile(ttft0, 50),
        ttft_nocache_p95_s=_percentile(ttft0, 95),
        checkpoints_stored=int(core["new"].sum()),
        checkpoints_dropped=core["dropped"],
        peak_state_bytes=int(core["state_bytes"].max()) if n else 0,
        peak_kv_bytes=int(core["kv_peak"].max()) * kvb if n else 0,
        final_state_bytes=int(core["state_bytes"][-1]) if n else 0,
        final_kv_bytes=int(core["kv_tokens"][-1]) * kvb if n else 0,
        evictions=st.evicted_states,
        evicted_state_bytes=st.evicted_state_bytes,
        evicted_kv_tokens=st.evicted_kv_tokens,
        tombstoned=st.tombstoned,
        tree_steps=core["steps"],
        elapsed_s=time.perf_counter() - t0,
        series=series,
    )


def _run(
    trace: Trace,
    pol: policy_mod.Policy,
    sb: int | None,
    kb: int | None,
    ub: int | None,
    ckpt: int,
    kvb: int,
    progress: ProgressFn | None,
    check: bool,
    n_max: int | None = None,
    outputs: bool = True,
    cspec: costmodel.CostSpec | None = None,
) -> dict:
    """The request loop; returns per-request arrays and the cache's final stats."""
    page = trace.block_size
    cache = pol.make_cache(page, block_keys=True)
    n = len(trace) if n_max is None else min(n_max, len(trace))
    blocks = trace.blocks.tolist()
    offs = trace.offsets.tolist()
    lens = trace.input_len.tolist()
    has_out = outputs and trace.out_offsets is not None and trace.out_blocks is not None
    oblocks = trace.out_blocks.tolist() if has_out else []
    ooffs = trace.out_offsets.tolist() if has_out else []
    tm_out = np.zeros(n, dtype=np.int64)
    ra_out = np.zeros(n, dtype=np.int64)
    sbytes = np.zeros(n, dtype=np.int64)
    kvtok = np.zeros(n, dtype=np.int64)
    kvpeak = np.zeros(n, dtype=np.int64)
    nstates = np.zeros(n, dtype=np.int64)
    new_out = np.zeros(n, dtype=np.int64)
    ev_cum = np.zeros(n, dtype=np.int64)
    dropped = 0
    steps = 0
    ev = 0
    marconi = pol if isinstance(pol, policy_mod.MarconiPolicy) else None
    auto = marconi is not None and marconi.alpha == "auto"
    positions_fn = pol.checkpoint_positions
    evict = pol.evict_states
    match = cache.match
    insert = cache.insert
    root = cache.root
    for i in range(n):
        key = blocks[offs[i] : offs[i + 1]]
        L = lens[i]
        if marconi is not None:
            marconi.note_request()  # on arrival: N0 counts the request that first evicts
        m = match(key)
        tm = m.token_match if m.token_match < L else L
        ra = m.restore_at if m.restore_at < tm else tm
        tm_out[i] = tm
        ra_out[i] = ra
        total = None
        ins_key = key
        if has_out and ooffs[i + 1] > ooffs[i]:
            ins_key = key[: L // page] + oblocks[ooffs[i] : ooffs[i + 1]]
            total = len(ins_key) * page
        pos = positions_fn(L, m, total_len=total, page_size=page)
        steps += len(key)
        if pos:
            need = len(pos) * ckpt
            last = m.last_node
            # protect the matched path while making room (only when eviction may happen)
            locked = last is not root and (
                (sb is not None and cache.state_bytes + need > sb)
                or ub is not None
                or kb is not None
            )
            if locked:
                cache.lock_kv(last)
            if sb is not None and cache.state_bytes + need > sb:
                ev += evict(cache, nbytes=cache.state_bytes + need - sb).states
                room = sb - cache.state_bytes
                if room < need:
                    keep = max(room, 0) // ckpt
                    dropped += len(pos) - keep
                    pos = pos[:keep]
                    need = keep * ckpt
            if ub is not None and pos:
                # new KV: tokens beyond the locked matched path up to the deepest position
                # (a partly matched edge below it may be evicted and re-inserted)
                held = last.plen * page
                new_kv = max(pos[-1] - held, 0) * kvb
                while pos:
                    over = cache.state_bytes + need + cache.kv_tokens * kvb + new_kv - ub
                    if over <= 0:
                        break
                    r = evict(cache, num=1)
                    ev += r.states
                    if r.states == 0:
                        r = cache.evict_kv(max(1, -(-over // kvb)))
                        ev += r.states
                        if r.kv_tokens == 0:
                            dropped += 1
                            pos = pos[:-1]
                            need -= ckpt
                            new_kv = max((pos[-1] if pos else 0) - held, 0) * kvb
            if kb is not None and pos:
                # make room for the new KV first (beyond the locked matched path)
                new_tok = max(pos[-1] - last.plen * page, 0)
                over = (cache.kv_tokens + new_tok) * kvb - kb
                if over > 0:
                    ev += cache.evict_kv(-(-over // kvb)).states
            if pos:
                r = insert(ins_key, None, [(p, p) for p in pos], state_bytes=ckpt)
                new_out[i] = len(r.new)
                steps += r.inserted_len // page
            if locked and last.alive:
                cache.unlock_kv(last)
        kvpeak[i] = cache.kv_tokens  # sampled before the clean-up eviction below
        if kb is not None and cache.kv_tokens * kvb > kb:
            ev += cache.evict_kv(-(-(cache.kv_tokens * kvb - kb) // kvb)).states
        if auto and marconi.tuning_due():  # type: ignore[union-attr]
            _tune_marconi(trace, marconi, i + 1, sb, kb, ub, ckpt, kvb, outputs, cspec)
        sbytes[i] = cache.state_bytes
        kvtok[i] = cache.kv_tokens
        nstates[i] = cache.n_states
        ev_cum[i] = ev
        if check:
            cache.check_integrity()
        if progress is not None and (i + 1) % _PROGRESS_EVERY == 0:
            progress(i + 1, n)
    if progress is not None:
        progress(n, n)
    return {
        "token_match": tm_out,
        "restore_at": ra_out,
        "state_bytes": sbytes,
        "kv_tokens": kvtok,
        "kv_peak": kvpeak,
        "n_states": nstates,
        "new": new_out,
        "evicted_cum": ev_cum,
        "dropped": dropped,
        "steps": steps,
        "stats": cache.stats(),
    }


def _tune_marconi(
    trace: Trace,
    marconi: policy_mod.MarconiPolicy,
    n_seen: int,
    sb: int | None,
    kb: int | None,
    ub: int | None,
    ckpt: int,
    kvb: int,
    outputs: bool,
    cspec: costmodel.CostSpec | None,
) -> None:
    """Marconi's bootstrap grid search (the artifact's ``config_tuner``): replay the first
    ``n_seen`` requests from an empty tree for each alpha and keep the one saving the most
    FLOPs over the last 500 of them."""
    last = min(500, n_seen)
    spec = cspec if cspec is not None else costmodel.cost_spec("kimi-k3")

    def evaluate(alpha: float) -> float:
        p = replace(marconi.with_alpha(alpha))
        r = _run(trace, p, sb, kb, ub, ckpt, kvb, None, False, n_max=n_seen, outputs=outputs)
        ra = r["restore_at"][-last:]
        return float(np.sum(costmodel.prefill_flops(spec, np.zeros_like(ra), ra)))

    marconi.tune(evaluate)
