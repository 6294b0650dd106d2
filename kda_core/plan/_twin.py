"""The radix-tree replay of a point the fast pass does not cover: vLLM with a drafter.

``sim.fast.replay`` refuses vLLM's lookup with speculative decoding (``VLLMPolicy.
lookup_limit``: lookahead hashes or the trailing-block drop), and ``sim.simulate`` runs it on
the radix tree but sizes checkpoints and KV from its two presets only. The sweep's points carry
their own sizes, so this module drives the same sequential schedule (``sim._sequential.
run_sequential``: match, plan, lock the matched path, ``place`` under the budgets, unlock,
KV clean-up) through ``kda_core.sim``'s public steps (``RunCtx``, ``place``, ``release``,
``kv_cleanup``, ``request_keys``), as the fleet's replicas do. tests/test_plan_drafts.py checks
it equal to ``simulate(method="twin")`` request by request where the sizes are a preset's.

Cost: the radix tree in Python, a multiple of the fast pass per point (docs/plan.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kda_core.cache import policy as policy_mod
from kda_core.cache.radix import RadixStateCache
from kda_core.sim import RunCtx, kv_cleanup, place, release, request_keys, resolve_policy
from kda_core.workloads import Trace, ideal_prefix_tokens


def replay_twin(
    trace: Trace,
    policy: Any,
    *,
    checkpoint_bytes: int,
    kv_bytes_per_token: int,
    budgets: tuple,
    outputs: bool,
    cap_lookup: bool = True,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(token match, restore point, evictions) per request of ``trace`` under ``policy`` and
    ``budgets`` (state, KV, unified bytes; None = unlimited), sequential schedule."""
    pol = resolve_policy(policy)
    page = trace.block_size
    pol.check_page(page)
    cache = RadixStateCache(page, block_keys=True, **pol.cache_options())
    sb, kb, ub = budgets
    ctx = RunCtx(cache, pol, sb, kb, ub, checkpoint_bytes, kv_bytes_per_token, page)
    ctx.cap_last = cap_lookup
    if isinstance(pol, policy_mod.VLLMPolicy) and pol.speculative_config is not None:
        ctx.shared = ideal_prefix_tokens(trace).tolist()  # as simulate sets it
    n = len(trace)
    tm_out, ra_out = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    lens = trace.input_len.tolist()
    for i in range(n):
        key, ins_key, total = request_keys(trace, i, outputs)
        L = lens[i]
        m = ctx.lookup(key, L, i)
        tm = min(m.token_match, L)
        tm_out[i], ra_out[i] = tm, min(m.restore_at, tm)
        pos = pol.plan(L, m.token_match, m.restore_at, total, ctx.page)
        if pos:
            path = m.path
            tight = sb is not None and cache.state_bytes + len(pos) * ctx.ckpt > sb
            locked = path.cached_len > 0 and (tight or ub is not None or kb is not None)
            if locked:
                cache.lock_handle(path)
            place(ctx, ins_key, list(pos), path.cached_len)
            if locked:
                release(cache, path)
        kv_cleanup(ctx)
    return tm_out, ra_out, ctx.evictions
