"""The sequential schedule: requests one at a time in arrival order, each inserted whole.

Marconi's simulator works this way (no batching, no concurrency): request ``i`` is matched,
its checkpoint positions are planned, room is made (its matched path KV-locked) and all its
states are inserted before request ``i + 1`` is matched. So a request always sees every earlier
request complete, even one that arrived a millisecond before it. The in-flight schedule
(``kda_core.sim._inflight``) is what the batched engine does instead. Steps: docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kda_core.cache import policy as policy_mod
from kda_core.cache.radix import RadixStateCache
from kda_core.sim._placement import RequestLog, RunCtx, kv_cleanup, place, release
from kda_core.workloads import Trace, ideal_prefix_tokens

PROGRESS_EVERY = 1000
Tuner = Callable[[int], None]  # called with the number of requests seen so far


def new_run(
    trace: Trace, pol: policy_mod.Policy, budgets: tuple, sizes: tuple[int, int], cap_last: bool
) -> RunCtx:
    """A run of ``trace`` from an empty radix tree under ``pol``, the byte ``budgets`` (state,
    KV, unified) and ``sizes`` (checkpoint bytes, KV bytes per token)."""
    page = trace.block_size
    pol.check_page(page)  # once per run: the schedules plan through pol.plan
    cache = RadixStateCache(page, block_keys=True, **pol.cache_options())
    ctx = RunCtx(cache, pol, *budgets, *sizes, page)
    ctx.cap_last = cap_last
    if isinstance(pol, policy_mod.VLLMPolicy) and pol.speculative_config is not None:
        # the draft lookup limit reads the prefix each request shares (RunCtx.lookup)
        shared = ideal_prefix_tokens(trace) if trace.has_prefix_info else trace.input_len * 0
        ctx.shared = shared.tolist()
    return ctx


def request_keys(trace: Trace, i: int, outputs: bool) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(input block ids, the key to insert, ``total_len`` for the policy) of request ``i``.

    With output blocks (synthetic traces) the insert key is the input's full blocks followed
    by the output blocks, so decode-time checkpoints can be placed and hit by the next turn."""
    offs, page = trace.offsets, trace.block_size
    # a view: the cache checks an int64 array by its dtype, a list element by element
    key = trace.blocks[offs[i] : offs[i + 1]]
    has_out = outputs and trace.out_offsets is not None and trace.out_blocks is not None
    if has_out and trace.out_offsets[i + 1] > trace.out_offsets[i]:
        oo = trace.out_offsets
        out = trace.out_blocks[oo[i] : oo[i + 1]]  # type: ignore[index]
        ins_key = np.concatenate([key[: int(trace.input_len[i]) // page], out])
        return key, ins_key, len(ins_key) * page
    return key, key, None


def run_sequential(
    ctx: RunCtx,
    trace: Trace,
    n: int,
    outputs: bool,
    progress: Callable[[int, int], Any] | None,
    check: bool,
    tuner: Tuner | None,
) -> dict:
    """The request loop; returns the per-request arrays and the cache's final stats."""
    cache, pol = ctx.cache, ctx.pol
    log = RequestLog(n)
    marconi = pol if isinstance(pol, policy_mod.MarconiPolicy) else None
    lens = trace.input_len.tolist()
    for i in range(n):
        key, ins_key, total = request_keys(trace, i, outputs)
        L = lens[i]
        if marconi is not None:
            marconi.note_request()  # on arrival: N0 counts the request that first evicts
        m = ctx.lookup(key, L, i)
        tm = min(m.token_match, L)
        log.token_match[i] = tm
        log.restore_at[i] = min(m.restore_at, tm)
        pos = pol.plan(L, m.token_match, m.restore_at, total, ctx.page)  # validated values
        ctx.steps += len(key)
        if pos:
            path = m.path  # the matched path's handle (locks its KV only)
            # protect the matched path while making room (only when eviction may happen)
            sb = ctx.sb
            tight = sb is not None and cache.state_bytes + len(pos) * ctx.ckpt > sb
            locked = path.cached_len > 0 and (tight or ctx.ub is not None or ctx.kb is not None)
            if locked:
                cache.lock_handle(path)
            log.new[i], _ = place(ctx, ins_key, list(pos), path.cached_len)
            if locked:
                release(cache, path)
        log.kv_peak[i] = cache.kv_tokens  # sampled before the clean-up eviction below
        kv_cleanup(ctx)
        if tuner is not None:
            tuner(i + 1)
        log.sample(i, ctx)
        if check:
            cache.check_integrity()
        if progress is not None and (i + 1) % PROGRESS_EVERY == 0:
            progress(i + 1, n)
    if progress is not None:
        progress(n, n)
    return log.as_dict(ctx)
