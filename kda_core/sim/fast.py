"""The fast simulator pass: the sequential schedule on prefix ids, equal to the naive twin.

``simulate`` (``kda_core.sim.simulator``) drives the radix tree of ``kda_core.cache`` request
by request; that tree is the naive twin. The fast pass (``_fastpass``, ``_fasttree``) runs the
same schedule on flags over the trace's static trie of prefix ids (``_pidtrace``: a chained
trace's block id names its whole prefix) and returns the same per-request arrays and counters;
tests/test_sim_fast.py checks them equal, request by request, on the bundled trace, synthetic
traces with output blocks and under state, KV and unified budgets. ``simulate(method="auto")``
(the default) takes it wherever it covers the call.

Covered: the sequential schedule; a policy that evicts in LRU order
(``interval``, ``sglang``, ``vllm``: any ``Policy`` but Marconi) with no per-path cap
(``max_states_per_path=None``); state, KV and unified budgets; ``cap_lookup``; output blocks;
a trace whose ids obey the chain rule (every valid trace). Not covered, so ``simulate`` runs
the twin: Marconi (its own victims and alpha tuning), a per-path cap, the in-flight schedule,
``check_integrity``, ids that break the chain rule.

``replay`` is the pass without the cost model, for callers that size a model the presets do not
cover (``kda_core.plan``): the checkpoint and KV sizes are arguments; ``method="auto"`` runs the
twin (``_sequential.run_sequential``, as ``simulate``) where the pass does not cover the policy
(vLLM with drafts). Speed and memory: docs/simulator.md ("The fast pass") and
bench/bench_plan.py.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from kda_core._checks import check_budget, check_int
from kda_core.cache import policy as policy_mod
from kda_core.sim._fastpass import Replay, fast_reason, from_core, run
from kda_core.sim._pidtrace import PreparedTrace, prepare
from kda_core.sim._sequential import new_run, run_sequential
from kda_core.sim.simulator import resolve_policy
from kda_core.workloads import Trace

__all__ = ["PreparedTrace", "prepare_trace", "replay"]


def prepare_trace(trace: Trace, outputs: bool = True) -> PreparedTrace:
    """``trace``'s prefix-id layout (numpy, one pass; picklable, so a sweep prepares a trace
    once and sends it to its workers once). ``outputs``: insert a synthetic trace's output
    blocks, as ``simulate``'s ``outputs``."""
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace, got {type(trace).__name__}")
    if not isinstance(outputs, bool):
        raise ValueError(f"outputs must be a bool, got {outputs!r}")
    return prepare(trace, outputs)


def replay(
    prepared: PreparedTrace,
    policy: Any = "sglang",
    *,
    checkpoint_bytes: int,
    kv_bytes_per_token: int,
    state_budget_bytes: float | None = None,
    kv_budget_bytes: float | None = None,
    unified_budget_bytes: float | None = None,
    cap_lookup: bool = False,
    progress: Callable[[int, int], Any] | None = None,
    method: str = "fast",
) -> Replay:
    """One sequential pass of a prepared trace under ``policy`` (as ``simulate``'s) and byte
    budgets (None = unlimited), one checkpoint weighing ``checkpoint_bytes`` and a token of KV
    ``kv_bytes_per_token`` -> per-request arrays and counters (``Replay``; equal to
    ``simulate(..., method="twin")``'s). ``method``: ``"fast"`` (``ValueError`` for a policy
    or trace the fast pass does not cover, module docstring), ``"twin"`` (the radix tree) or
    ``"auto"`` (the fast pass where it covers the call). Marconi needs ``simulate``'s cost
    model and is refused."""
    if not isinstance(prepared, PreparedTrace):
        raise ValueError(f"prepared must be a PreparedTrace, got {type(prepared).__name__}")
    if method not in ("fast", "auto", "twin"):
        raise ValueError(f"method must be one of ('fast', 'auto', 'twin'), got {method!r}")
    pol = resolve_policy(policy)
    if isinstance(pol, policy_mod.MarconiPolicy):
        raise ValueError("policy: Marconi needs simulate's cost model (its efficiency)")
    why = fast_reason(pol)
    if why is not None and method == "fast":
        raise ValueError(f"policy: the fast pass does not cover {why}")
    if not prepared.chained:
        if method == "fast":
            raise ValueError("prepared: its block ids break the chain rule (the fast pass)")
        why = "a trace breaking the chain rule"
    ckpt = check_int("checkpoint_bytes", checkpoint_bytes, 1, 1 << 40)
    kvb = check_int("kv_bytes_per_token", kv_bytes_per_token, 1, 1 << 40)
    names = ("state_budget_bytes", "kv_budget_bytes", "unified_budget_bytes")
    given = (state_budget_bytes, kv_budget_bytes, unified_budget_bytes)
    budgets = tuple(check_budget(k, v) for k, v in zip(names, given, strict=True))
    if not isinstance(cap_lookup, bool):
        raise ValueError(f"cap_lookup must be a bool, got {cap_lookup!r}")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable or None")
    top = int(prepared.trace.input_len.max()) if len(prepared.trace) else 1
    tot = int(prepared.total_len.max(initial=1))  # empty when the ids break the chain rule
    if int(prepared.trace.input_len.min(initial=1)) < 1 or max(top, tot) > 1 << 24:
        raise ValueError("prepared: request lengths must be in [1, 2**24] tokens")
    gc_was_on = gc.isenabled()
    gc.disable()  # one long-lived graph (the tree or the pass's arrays): collect afterwards
    try:
        if method == "twin" or why is not None:
            trace, sizes = prepared.trace, (ckpt, kvb)
            ctx = new_run(trace, pol, budgets, sizes, cap_lookup)
            core = run_sequential(ctx, trace, len(trace), prepared.outputs, progress, False, None)
            return from_core(core)
        return run(prepared, pol, budgets, (ckpt, kvb), cap_lookup, progress)
    finally:
        if gc_was_on:
            gc.enable()
