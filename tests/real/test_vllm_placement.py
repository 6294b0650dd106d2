"""Differential: vLLM 0.33's own placement and retention code against ``policy.VLLMPolicy``.

Runs in the real-engine venv (tests/real/, vllm==0.33.0 importable on CPU); skipped elsewhere.
The real functions are called directly:

* ``vllm.v1.core.sched.scheduler.Scheduler._mamba_block_aligned_split`` cuts every prefill
  chunk of one request (align mode, no EAGLE, no internal prefill checkpoint, no
  partial-hash hits), driven by the scheduler's loop for one request: ask for
  ``min(max_num_batched_tokens, remaining)`` tokens, advance by what the split returns. A
  Mamba state exists where a chunk ends on a block boundary, then at every decode block
  boundary (the prompt's last block is advanced by decode: the split's docstring).
* ``MambaManager.reachable_block_mask`` with ``kv_cache_coordinator.replay_boundaries``
  and the shared-prefix junction decides which of those blocks are cached (retention).

The lab's request inputs map onto vLLM's as follows (the harness's assumptions, not vLLM's
code): ``restore_at`` = ``num_computed_tokens`` (the Mamba hit); the junction
``request.shared_prefix_boundary`` = the KV hit beyond it, ``floor(min(token_match, P - 1) /
B) * B`` (``KVCacheManager.get_computed_blocks``), or 0 when it is not beyond the Mamba hit.

Where the lab differs on purpose (not claimed here): ``mode="all"`` (vLLM 0.33 asserts
``mamba_cache_mode == "align"`` for prefix caching), ``shared_prefix=False`` (an ablation:
no vLLM setting turns the junction off), ``partial_hits=True`` (approximated).
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from kda_core.cache import policy as P

sched_mod = pytest.importorskip("vllm.v1.core.sched.scheduler")
stkm = pytest.importorskip("vllm.v1.core.single_type_kv_cache_manager")
coord = pytest.importorskip("vllm.v1.core.kv_cache_coordinator")
kvi = pytest.importorskip("vllm.v1.kv_cache_interface")
torch = pytest.importorskip("torch")


def _scheduler(block: int, chunk: int) -> SimpleNamespace:
    """The attributes ``_mamba_block_aligned_split`` reads, for one plain align-mode run."""
    return SimpleNamespace(
        block_size=block,
        hash_block_size=block,
        mamba_partial_cache_hit=False,
        use_eagle_block_drop=False,
        num_hash_lookahead_tokens=0,
        mamba_has_prefill_checkpoint_blocks=False,
        mamba_prefill_checkpoint_alignment=None,
        mamba_shared_prefix_checkpoint=True,
        max_num_scheduled_tokens=chunk,
        scheduler_config=SimpleNamespace(long_prefill_token_threshold=0),
        cache_config=SimpleNamespace(block_size=block),
    )


def _junction(restore: int, token_match: int, prompt: int, block: int) -> int:
    j = min(token_match, prompt - 1) // block * block
    return j if j > restore else 0


def vllm_positions(
    prompt: int, restore: int, token_match: int, block: int, chunk: int, retention, total: int
) -> tuple[int, ...]:
    """The state positions vLLM caches for one request, from vLLM's own functions."""
    sched = _scheduler(block, chunk)
    junction = _junction(restore, token_match, prompt, block)
    req = SimpleNamespace(
        num_computed_tokens=restore,
        num_prompt_tokens=prompt,
        num_tokens=prompt,
        shared_prefix_boundary=junction,
    )
    ends = []
    while req.num_computed_tokens < prompt:
        want = min(chunk, prompt - req.num_computed_tokens)
        n = sched_mod.Scheduler._mamba_block_aligned_split(sched, req, want)
        assert n > 0, "the real split made no progress"
        req.num_computed_tokens += n
        ends.append(req.num_computed_tokens)
    states = [e for e in ends if e % block == 0]
    states += list(range((prompt // block + 1) * block, total + 1, block))
    if retention is not None:
        spec = kvi.MambaSpec(
            block_size=block,
            shapes=((1,),),
            dtypes=(torch.float32,),
            mamba_cache_mode="align",
        )
        reach = list(coord.replay_boundaries(prompt, block, False))
        if junction:
            reach.append(junction)
        start_block = restore // block
        mask = stkm.MambaManager.reachable_block_mask(
            start_block,
            total // block,
            block,
            spec,
            False,
            retention_interval=retention,
            reachable_boundaries=reach,
        )
        if mask is not None:
            states = [p for p in states if mask[p // block - 1 - start_block]]
    return tuple(sorted(p for p in set(states) if p > restore))


GRID = list(
    itertools.product(
        (1, 63, 64, 100, 256, 300, 1000, 1024),  # prompt
        (0, 1, 2),  # restore, in blocks
        (0, 10, 70, 200),  # token match beyond the restore point
        (16, 64),  # block
        (16, 48, 64, 256, 2048),  # chunk (max_num_batched_tokens)
        (None, 0, 2, 4),  # retention: None, 0, or that many blocks
        (0, 1, 100),  # output tokens consumed
    )
)


def test_align_placement_and_retention_agree_with_vllm_everywhere():
    bad = []
    for prompt, rb, extra, block, chunk, ret, out in GRID:
        restore = min(rb * block, (prompt - 1) // block * block)
        tm = min(restore + extra, prompt - 1)
        retention = None if ret is None else ret * block
        total = prompt + out
        want = vllm_positions(prompt, restore, tm, block, chunk, retention, total)
        pol = P.make("vllm", block_size=block, max_num_batched_tokens=chunk, retention=retention)
        hit = SimpleNamespace(token_match=tm, restore_at=restore)
        got = pol.checkpoint_positions(prompt, hit, total_len=total)
        if got != want:
            bad.append((prompt, restore, tm, block, chunk, retention, total, got, want))
    assert not bad, f"{len(bad)} of {len(GRID)} cases differ, e.g. {bad[:5]}"
    assert len(GRID) == 11_520


def test_the_issue_examples_come_from_vllm():
    # P = 300, 500 consumed, B = 64, retention 0: vLLM keeps the replay boundary 256
    assert vllm_positions(300, 0, 0, 64, 2048, 0, 500) == (256,)
    # a block-aligned prompt also stops a chunk at P - B
    assert vllm_positions(256, 0, 0, 64, 2048, None, 256) == (192, 256)
    # a chunk smaller than a block advances within the block
    assert vllm_positions(200, 0, 0, 64, 48, None, 200) == (64, 128, 192)
