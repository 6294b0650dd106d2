"""Differential: SGLang 0.5.23's own mamba tracking code against ``policy.SGLangPolicy``.

Runs in the real-engine venv (tests/real/, sglang==0.5.23 importable on CPU); skipped elsewhere.
One request is driven through the real functions, unbound on stand-in objects that hold only
what they read (the module's server-args accessors are replaced for the call):

* every prefill step: ``ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_extend`` (the
  tracked length), then the tree insert ``MambaComponent.prepare_for_caching_req`` (the
  position inserted) and ``cleanup_after_caching_req`` (which resets the tracked length), as
  ``checkpoint_kv_cache`` does after each step;
* every decode step: ``SchedulerBatchResultProcessor._mamba_prefix_cache_update`` (with its
  ``_mamba_check_track_boundary``), the ping-pong flip;
* the finished insert: ``MambaComponent.prepare_for_caching_req(is_finished=True)``.

The scheduler loop itself is the harness's (not SGLang's code): steps of ``chunk`` tokens from
the restore point (``PrefillAdder``'s truncation for one request), ``kv_committed_len``
advanced by one per decode step, the finished key length = tokens consumed (prompt + output -
1, ``release_kv_cache``'s ``owned_kv_len`` without overallocation), the branching seqlen as
``MambaComponent.finalize_match_result_in_tree_core`` computes it from the token match.
Not claimed: ``request_end=True`` (a lab extension), EAGLE / DCP / lazy / spec decoding.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import pytest

from kda_core.cache import policy as P

sb = pytest.importorskip("sglang.srt.managers.schedule_batch")
brp = pytest.importorskip("sglang.srt.managers.scheduler_components.batch_result_processor")
mc = pytest.importorskip("sglang.srt.mem_cache.unified_cache.components.mamba")
mp = pytest.importorskip("sglang.srt.mem_cache.memory_pool")
torch = pytest.importorskip("torch")

GRID_FLA = 64  # the FLA chunk (mamba_chunk_size)


def _pool() -> SimpleNamespace:
    pool = SimpleNamespace(mamba_ping_pong_track_buffer_size=2)
    pool.get_mamba_ping_pong_other_idx = lambda i: (
        mp.HybridReqToTokenPool.get_mamba_ping_pong_other_idx(pool, i)
    )
    pool.get_mamba_ping_pong_keep_idx = lambda r: (
        mp.HybridReqToTokenPool.get_mamba_ping_pong_keep_idx(pool, r)
    )
    pool.donate_mamba_ping_pong_slot = lambda req, new_slot: torch.tensor([7])
    pool.mamba_pool = SimpleNamespace(replayssm_write_pos=None, copy_from=lambda *a: None)
    pool.translate_mamba_indices = lambda x: x
    return pool


def _sglang_objects(
    restore: int, token_match: int, extra_buffer: bool, track_interval: int, grid: int
) -> SimpleNamespace:
    """The request, batch, cache component and result processor SGLang's methods read (only
    the fields they touch), for one request restored at ``restore``."""
    page = 1
    pool = _pool()
    mamba = SimpleNamespace(
        enable_mamba_extra_buffer=extra_buffer,
        enable_mamba_extra_buffer_lazy=False,
        mamba_track_interval=track_interval,
    )
    aligned = token_match // grid * grid
    kv = SimpleNamespace(
        mamba_next_track_idx=0,
        mamba_last_track_idx=0,
        mamba_last_track_seqlen=None,
        mamba_prev_track_seqlen=None,
        mamba_ping_pong_track_buffer=torch.tensor([1, 2]),
        mamba_pool_idx=torch.tensor(3),
        kv_committed_len=0,
    )
    req = SimpleNamespace(
        kv=kv,
        prefix_len=restore,
        extend_end=restore,
        mamba_branching_seqlen=aligned if aligned > restore else None,
        decode_batch_idx=0,
        finished=lambda: False,
    )
    batch = SimpleNamespace(
        model_config=SimpleNamespace(hf_text_config=SimpleNamespace(mamba_chunk_size=GRID_FLA)),
        tree_cache=SimpleNamespace(page_size=page),
        req_to_token_pool=pool,
        spec_algorithm=SimpleNamespace(is_none=lambda: True),
        mamba_decode_batch_idx_cpu=[0],
        mamba_track_buffer_indices=None,
    )
    comp = SimpleNamespace(
        cache=SimpleNamespace(enable_mamba_extra_buffer=extra_buffer, req_to_token_pool=pool),
        int8_ckpt_pool=None,
        _alloc_mamba_slot=lambda req=None: torch.tensor([9]),
        _free_mamba_value=lambda v: None,
    )
    comp._select_finished_checkpoint = lambda r, n: mc.MambaComponent._select_finished_checkpoint(
        comp, r, n
    )
    proc = SimpleNamespace(tree_cache=SimpleNamespace(page_size=page))
    proc._mamba_check_track_boundary = lambda *a: (
        brp.SchedulerBatchResultProcessor._mamba_check_track_boundary(proc, *a)
    )
    exec_ctx = SimpleNamespace(mamba=mamba)
    return SimpleNamespace(mamba=mamba, kv=kv, req=req, batch=batch, comp=comp, proc=proc,
                           exec_ctx=exec_ctx)  # fmt: skip


def sglang_positions(
    prompt: int,
    restore: int,
    token_match: int,
    chunk: int,
    total: int,
    extra_buffer: bool,
    track_interval: int,
    monkeypatch,
) -> tuple[int, ...]:
    page = 1
    cache_chunk = max(GRID_FLA, page)
    grid = cache_chunk  # lcm(cache_chunk, page) at page 1
    o = _sglang_objects(restore, token_match, extra_buffer, track_interval, grid)
    kv, req, batch, comp, proc, exec_ctx = o.kv, o.req, o.batch, o.comp, o.proc, o.exec_ctx
    out = []
    with monkeypatch.context() as m:
        for mod in (sb, brp, mc):
            if hasattr(mod, "get_exec"):
                m.setattr(mod, "get_exec", lambda: exec_ctx)
        m.setattr(sb, "get_parallel", lambda: SimpleNamespace(dcp_enabled=False))
        m.setattr(sb, "mamba_cache_chunk_size", lambda: cache_chunk)
        m.setattr(sb, "mamba_checkpoint_grid", lambda p: grid)
        m.setattr(brp, "mamba_track_grid", lambda p: math.lcm(grid, track_interval))
        # prefill steps, each followed by the tree insert of checkpoint_kv_cache
        a = restore
        while a < prompt:
            req.prefix_len, req.extend_end = a, min(a + chunk, prompt)
            req.extend_len = req.extend_end - req.prefix_len
            if extra_buffer:
                sb.ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_extend(batch, req)
            params = SimpleNamespace(mamba_value=None, mamba_keep_idx=None)
            n = mc.MambaComponent.prepare_for_caching_req(comp, req, params, req.extend_end, False)
            if n:
                out.append(n)
            mc.MambaComponent.cleanup_after_caching_req(comp, req, False, None, params)
            a = req.extend_end
        # decode: each step commits one more token
        kv.kv_committed_len = prompt
        while kv.kv_committed_len < total:
            kv.kv_committed_len += 1
            if extra_buffer:
                brp.SchedulerBatchResultProcessor._mamba_prefix_cache_update(
                    proc, req, batch, SimpleNamespace(), 0
                )
        if total > prompt or not extra_buffer:
            params = SimpleNamespace(mamba_value=None, mamba_keep_idx=None)
            n = mc.MambaComponent.prepare_for_caching_req(comp, req, params, total, True)
            if n:
                out.append(n)
    return tuple(sorted(p for p in set(out) if p > restore))


GRID = list(
    itertools.product(
        (1, 63, 64, 100, 150, 300, 1000),  # prompt
        (0, 37, 64, 128),  # restore
        (0, 10, 70, 300),  # token match beyond the restore point
        (16, 64, 100, 512, 8192),  # chunk
        (0, 1, 80, 400),  # output tokens consumed
        (64, 256),  # track interval
    )
)


@pytest.mark.parametrize("buffer", ["extra_buffer", "no_buffer"])
def test_placement_agrees_with_sglang_everywhere(monkeypatch, buffer):
    bad = []
    n = 0
    for prompt, restore, extra, chunk, out, interval in GRID:
        if restore >= prompt:
            continue
        tm = min(restore + extra, prompt)
        total = prompt + out
        want = sglang_positions(
            prompt, restore, tm, chunk, total, buffer == "extra_buffer", interval, monkeypatch
        )
        pol = P.make("sglang", buffer=buffer, track_interval=interval)
        hit = SimpleNamespace(token_match=tm, restore_at=restore)
        got = pol.checkpoint_positions(prompt, hit, total_len=total, chunk_size=chunk)
        n += 1
        if got != want:
            bad.append((prompt, restore, tm, chunk, total, interval, got, want))
    assert n > 1000
    assert not bad, f"{len(bad)} of {n} cases differ, e.g. {bad[:5]}"


def test_the_issue_examples_come_from_sglang(monkeypatch):
    assert sglang_positions(13600, 0, 0, 6144, 14111, True, 256, monkeypatch) == (
        6144,
        12288,
        13568,
        14080,
    )
    assert sglang_positions(150, 0, 0, 64, 229, False, 256, monkeypatch) == (64, 128, 150, 229)
