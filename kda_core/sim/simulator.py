"""Trace-driven simulator: a request trace through the KDA-aware radix cache, with byte budgets.

The simulator drives the SAME ``RadixStateCache`` and ``policy`` code as the real engine, with
no arrays: the tree is keyed by block ids (``block_keys=True``, page = the trace's block size);
KV payloads are ``None`` (bytes = tokens * MLA KV bytes per token); a checkpoint's payload is
its own position and its size is ``state_bytes`` (KDA state + conv window of all KDA layers on
one GPU, from ``kda_core.sizing``; Kimi K3 at TP8 in bf16: 29,039,616 B per checkpoint, 27,648
B of MLA KV per token).

Two schedules (``schedule=``): ``"sequential"`` (the default: one request at a time, inserted
whole, as Marconi's simulator; ``kda_core.sim._sequential``) and ``"inflight"`` (requests overlap
in time, checkpoints inserted as prefill reaches them, locks held while running, as the batched
engine; ``kda_core.sim._inflight``). Metrics, budget rules, the time model and what is left out:
docs/simulator.md.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_budget
from kda_core.cache import policy as policy_mod
from kda_core.sim import _fastpass, costmodel
from kda_core.sim._inflight import Timing, run_inflight
from kda_core.sim._pidtrace import PreparedTrace, prepare
from kda_core.sim._result import SimResult, series_from, summarise
from kda_core.sim._sequential import new_run, run_sequential
from kda_core.workloads import Trace, bundled_trace

_ProgressFn = Callable[[int, int], Any]
DEFAULT_TP = 8
_SCHEDULES = ("sequential", "inflight")
_METHODS = ("auto", "fast", "twin")


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


def _marconi_efficiency_fn(
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


@dataclass(frozen=True, slots=True)
class _Setup:
    """Validated arguments of one ``simulate`` call."""

    trace: Trace
    pol: policy_mod.Policy
    sb: int | None
    kb: int | None
    ub: int | None
    ckpt: int
    kvb: int
    cspec: costmodel.CostSpec
    time_model: costmodel.TimeModel
    servers: int | None
    schedule: str
    outputs: bool
    cap_last: bool = False  # lookups of at most input - 1 tokens
    prepared: PreparedTrace | None = None  # the caller's prepared trace (same ``outputs``)


def _check_servers(servers: Any) -> int | None:
    if servers is None:
        return None
    if (
        isinstance(servers, (bool, np.bool_))
        or not isinstance(servers, (int, np.integer))
        or not 1 <= int(servers) <= 4096
    ):
        raise ValueError(f"servers must be None or an integer in [1, 4096], got {servers!r}")
    return int(servers)


def _check_trace_lengths(trace: Trace) -> None:
    """The schedules plan through ``Policy.plan``, which trusts its lengths: check them here,
    once (a request's planned length is its input, or its full input blocks plus its output
    blocks)."""
    if not len(trace):
        return
    top = int(trace.input_len.max())
    if trace.out_offsets is not None and trace.out_blocks is not None:
        n_out = np.diff(trace.out_offsets)
        full = trace.input_len // trace.block_size + n_out
        top = max(top, int(full.max()) * trace.block_size)
    if int(trace.input_len.min()) < 1 or top > policy_mod.MAX_LEN:
        raise ValueError(
            f"trace request lengths must be in [1, {policy_mod.MAX_LEN}] tokens, got up to {top}"
        )


def _check_args(trace: Any, policy: Any, model: str, budgets: tuple, opts: dict) -> _Setup:
    """Validate ``simulate``'s arguments (ValueError naming the argument)."""
    if trace is None:
        trace = bundled_trace("conversation")
    prepared = trace if isinstance(trace, PreparedTrace) else None
    if prepared is not None:
        trace = prepared.trace
    if not isinstance(trace, Trace):
        raise ValueError(
            f"trace must be a workloads.Trace, a PreparedTrace or None, got {type(trace).__name__}"
        )
    _check_trace_lengths(trace)
    pol = resolve_policy(policy)
    names = ("state_budget_bytes", "kv_budget_bytes", "unified_budget_bytes")
    sb, kb, ub = (check_budget(k, v) for k, v in zip(names, budgets))
    if opts["progress"] is not None and not callable(opts["progress"]):
        raise ValueError("progress must be callable or None")
    servers = _check_servers(opts["servers"])
    tm = opts["time_model"] if opts["time_model"] is not None else costmodel.TimeModel()
    if not isinstance(tm, costmodel.TimeModel):
        raise ValueError("time_model must be a costmodel.TimeModel or None")
    if model not in sizing.PRESETS or model not in costmodel.COST_PRESETS:
        allowed = sorted(set(sizing.PRESETS) & set(costmodel.COST_PRESETS))
        raise ValueError(f"model must be one of {allowed}, got {model!r}")
    if opts["schedule"] not in _SCHEDULES:
        raise ValueError(f"schedule must be one of {_SCHEDULES}, got {opts['schedule']!r}")
    if opts["method"] not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {opts['method']!r}")
    for name in ("outputs", "cap_lookup"):
        if not isinstance(opts[name], bool):
            raise ValueError(f"{name} must be a bool, got {opts[name]!r}")
    cspec = costmodel.cost_spec(model)
    ckpt = checkpoint_bytes(model, opts["tp"], opts["state_dtype"], opts["conv_dtype"])
    kvb = sizing.mla_kv_bytes_per_token(sizing.preset(model), opts["kv_dtype"])
    if isinstance(pol, policy_mod.MarconiPolicy) and pol.efficiency_fn is None:
        pol = replace(pol, efficiency_fn=_marconi_efficiency_fn(cspec, kvb), kv_bytes_per_token=kvb)
    return _Setup(
        trace,
        pol,
        sb,
        kb,
        ub,
        ckpt,
        kvb,
        cspec,
        tm,
        servers,
        opts["schedule"],
        opts["outputs"],
        opts["cap_lookup"],
        prepared if prepared is not None and prepared.outputs == opts["outputs"] else None,
    )


def _run(
    s: _Setup,
    pol: policy_mod.Policy,
    timing: Timing,
    progress: _ProgressFn | None,
    check: bool,
    n_max: int | None = None,
) -> dict:
    """One run of ``schedule`` from an empty tree; per-request arrays and the final stats."""
    trace = s.trace
    ctx = new_run(trace, pol, (s.sb, s.kb, s.ub), (s.ckpt, s.kvb), s.cap_last)
    n = len(trace) if n_max is None else min(n_max, len(trace))
    tuner = None
    if isinstance(pol, policy_mod.MarconiPolicy) and pol.alpha == "auto":
        marconi = pol

        def tuner(n_seen: int) -> None:
            if not marconi.tuning_due():
                return
            # Marconi's bootstrap grid search (the artifact's ``config_tuner``): replay the
            # first ``n_seen`` requests from an empty tree for each alpha and keep the one
            # saving the most FLOPs over the last 500 of them
            last = min(500, n_seen)

            def evaluate(alpha: float) -> float:
                p = replace(marconi.with_alpha(alpha))
                r = _run(s, p, timing, None, False, n_seen)
                ra = r["restore_at"][-last:]
                return float(np.sum(costmodel.prefill_flops(s.cspec, np.zeros_like(ra), ra)))

            marconi.tune(evaluate)

    if s.schedule == "inflight":
        return run_inflight(ctx, trace, n, s.outputs, progress, check, tuner, timing)
    return run_sequential(ctx, trace, n, s.outputs, progress, check, tuner)


def _fast_prep(s: _Setup, method: str, check: bool) -> tuple[PreparedTrace | None, str | None]:
    """(the prepared trace the fast pass runs on, or None; why it cannot run, or None)."""
    if method == "twin":
        return None, None
    why = _fastpass.fast_reason(s.pol, s.schedule) or ("check_integrity" if check else None)
    if why is not None:
        return None, why
    prep = s.prepared or prepare(s.trace, s.outputs)
    if not prep.chained:
        return None, "a trace whose block ids break the chain rule"
    return prep, None


def _core(s: _Setup, prep: PreparedTrace | None, progress: _ProgressFn | None, check: bool) -> dict:
    """One run: the fast pass on ``prep``, else the radix tree."""
    # The tree is one long-lived object graph: generational GC passes while it grows only
    # rescan it (up to 2x the run time on dense placements). Collect afterwards instead.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if prep is not None:
            budgets, sizes = (s.sb, s.kb, s.ub), (s.ckpt, s.kvb)
            rep = _fastpass.run(prep, s.pol, budgets, sizes, s.cap_last, progress)
            return _fastpass.as_core(rep)
        timing = Timing(s.cspec, s.time_model, s.servers)
        return _run(s, s.pol, timing, progress, check)
    finally:
        if gc_was_on:
            gc.enable()


def _result(s: _Setup, core: dict, model: str, elapsed_s: float) -> SimResult:
    """The ``SimResult`` of one run: series from the cost model, then the summary."""
    series = series_from(s.trace, core, s.cspec, s.time_model, s.servers, s.kvb)
    return summarise(
        series,
        core,
        s.cspec,
        policy=s.pol.name,
        policy_params=_policy_params(s.pol),
        model=model,
        schedule=s.schedule,
        state_budget_bytes=s.sb,
        kv_budget_bytes=s.kb,
        unified_budget_bytes=s.ub,
        state_bytes_per_checkpoint=s.ckpt,
        kv_bytes_per_token=s.kvb,
        elapsed_s=elapsed_s,
        prefix_info=s.trace.has_prefix_info,
    )


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
    schedule: str = "sequential",
    progress: _ProgressFn | None = None,
    check_integrity: bool = False,
    outputs: bool = True,
    cap_lookup: bool = False,
    method: str = "auto",
) -> SimResult:
    """Run ``trace`` (default: the bundled Mooncake conversation trace) through the radix
    cache under ``policy`` and the byte budgets (``None`` = unlimited).

    ``policy``: a name (``"interval"``, ``"sglang"``, ``"marconi"``, ``"vllm"``), a ``(name,
    params)`` pair or a ``Policy`` (copied; Marconi gets this lab's cost model for ``model``).
    Budgets: ``state_budget_bytes`` (checkpoints on one GPU), ``kv_budget_bytes`` (MLA KV,
    LRU leaves), ``unified_budget_bytes`` (both together). ``model`` ``"kimi-k3"`` or
    ``"kimi-linear-48b"`` at tensor parallel ``tp`` with the given dtypes. ``time_model``:
    TTFT = overhead + FLOPs / throughput (and the in-flight schedule's clock); ``servers``: FCFS
    queueing over that many prefill servers. ``progress(done, total)`` every 1000 requests and
    at the end; ``check_integrity`` after every request (slow; tests). ``outputs``: insert a
    synthetic trace's output blocks (decode-time checkpoints); Mooncake traces have none.
    ``cap_lookup``: the lookup matches at most ``input - 1`` tokens, as SGLang and vLLM do (the
    last prompt token is recomputed for its logits): a state at the prompt's very end is then
    no hit (False keeps the simulator's published figures).

    ``schedule``: ``"sequential"`` (default) serves one request at a time and inserts it whole
    (Marconi's simulator; a property of the trace and the policy alone, so the policy
    comparisons and the request-by-request Marconi agreement checks stay like for like);
    ``"inflight"`` lets requests overlap on the trace's clock and inserts checkpoints as
    prefill reaches them, with running requests' paths locked, as ``Engine.serve`` does: the
    more faithful number, but it depends on the assumed time model. The two agree when no
    requests overlap and budgets are unlimited. Deterministic. See docs/simulator.md.

    ``method``: ``"auto"`` runs the fast pass (``kda_core.sim.fast``, equal request by request)
    where it covers the call, else the radix tree (the naive twin); ``"fast"`` refuses what it
    does not cover; ``"twin"``: the radix tree. ``trace`` may be a ``sim.fast.PreparedTrace``.
    """
    t0 = time.perf_counter()
    budgets = (state_budget_bytes, kv_budget_bytes, unified_budget_bytes)
    opts = dict(
        progress=progress,
        servers=servers,
        time_model=time_model,
        schedule=schedule,
        outputs=outputs,
        tp=tp,
        state_dtype=state_dtype,
        conv_dtype=conv_dtype,
        kv_dtype=kv_dtype,
        cap_lookup=cap_lookup,
        method=method,
    )
    s = _check_args(trace, policy, model, budgets, opts)
    prep, why = _fast_prep(s, method, check_integrity)
    if why is not None and method == "fast":
        raise ValueError(f"method='fast' does not cover {why}: use 'auto' or 'twin'")
    core = _core(s, prep, progress, check_integrity)
    return _result(s, core, model, time.perf_counter() - t0)
