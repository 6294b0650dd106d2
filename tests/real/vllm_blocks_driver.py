"""vLLM 0.33's own KVCacheManager for a KDA hybrid on CPU, driven like a synchronous scheduler.

``RealBlockCache`` has the request API of ``kda_core.cache.vllm_blocks.VLLMBlockCache``
(``add`` / ``step`` / ``append`` / ``finish`` / ``lookup``) and runs vLLM's real code:
``KVCacheManager`` over a ``KVCacheConfig`` of one MLA group (``MLAAttentionSpec``, served by
``FullAttentionManager``) and one KDA state group (``MambaSpec``, ``mamba_cache_mode="align"``),
both of ``block_size`` tokens (vLLM sets ``mamba_block_size = block_size`` in align mode), hashes
every ``prefix_match_unit`` tokens. Each step does what ``Scheduler.schedule`` does for one
running request (no EAGLE, no connector, no async scheduling): ``new_step_starts``; on the first
step ``get_computed_blocks`` and ``request.shared_prefix_boundary``; the chunk
``min(max_num_batched_tokens, remaining)`` cut by the real ``Scheduler._mamba_block_aligned_split``;
``allocate_slots``; ``take_kv_cache_block_copies`` and the release of the copies' blocks
(``_free_cow_retained_blocks`` when nothing is deferred). ``schedule`` does the same for several
requests in one step: the copies are taken and released once, after the last request.

``snapshot`` reads the pool back in the model's terms: entries as (group, prefix tokens, block
id, primary), reference counts, the free queue order, request tables.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import (
    get_block_hash,
    get_group_id,
    get_request_block_hasher,
    init_none_hash,
)
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import (
    KVCacheConfig,
    KVCacheGroupSpec,
    MambaSpec,
    MLAAttentionSpec,
)
from vllm.v1.request import Request

init_none_hash(sha256)


class RealBlockCache:
    def __init__(
        self,
        block_size: int,
        prefix_match_unit: int | None = None,
        *,
        num_blocks: int = 512,
        max_num_batched_tokens: int = 2048,
        retention: int | None = None,
    ) -> None:
        B = block_size
        u = prefix_match_unit or B
        groups = [
            KVCacheGroupSpec(
                ["mla"],
                MLAAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32),
            ),
            KVCacheGroupSpec(
                ["kda"],
                MambaSpec(
                    block_size=B,
                    shapes=((1,),),
                    dtypes=(torch.float32,),
                    mamba_cache_mode="align",
                ),
            ),
        ]
        config = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=groups,
            prefix_cache_retention_interval=retention,
        )
        self.mgr = KVCacheManager(
            config,
            max_model_len=1 << 21,
            scheduler_block_size=B,
            hash_block_size=u,
            enable_caching=True,
        )
        self.block_size, self.unit = B, u
        fine = u < B and self.mgr.coordinator.enable_partial_hash_hits
        self.sched = SimpleNamespace(
            block_size=B,
            cache_config=SimpleNamespace(block_size=B),
            hash_block_size=u,
            mamba_partial_cache_hit=fine,
            use_eagle_block_drop=False,
            num_hash_lookahead_tokens=0,
            mamba_has_prefill_checkpoint_blocks=False,
            mamba_prefill_checkpoint_alignment=None,
            mamba_shared_prefix_checkpoint=False,
            max_num_scheduled_tokens=max_num_batched_tokens,
            scheduler_config=SimpleNamespace(long_prefill_token_threshold=0),
        )
        self.chunk = max_num_batched_tokens
        self.reqs: dict[str, Request] = {}
        self.started: set[str] = set()
        self.prefix_of: dict[bytes, tuple[int, ...]] = {}

    def _remember(self, req: Request) -> None:
        toks = req.all_token_ids
        for i, h in enumerate(req.block_hashes):
            self.prefix_of.setdefault(h, tuple(toks[: (i + 1) * self.unit]))

    def add(self, rid: str, prompt: list[int]) -> None:
        hasher = get_request_block_hasher(self.unit, sha256)
        req = Request(
            rid, list(prompt), SamplingParams(max_tokens=1 << 20), None, block_hasher=hasher
        )
        self.reqs[rid] = req
        self._remember(req)

    def lookup(self, tokens: list[int]) -> dict:
        req = Request(
            "lookup",
            list(tokens),
            SamplingParams(max_tokens=1),
            None,
            block_hasher=get_request_block_hasher(self.unit, sha256),
        )
        blocks, hit, spb = self.mgr.get_computed_blocks(req)
        kv, st = blocks.blocks
        return {
            "tokens": hit,
            "kv_blocks": tuple(b.block_id for b in kv),
            "state_block": st[-1].block_id if st else None,
            "table_index": len(st) - 1,
            "shared_prefix_boundary": spb,
        }

    def deferred(self, tokens: list[int]) -> bool:
        """Whether a new request with these tokens waits a step: its state hit's block hash
        is in the Mamba manager's ``cached_blocks_this_step`` (``get_num_blocks_to_allocate``)."""
        req = Request(
            "probe",
            list(tokens),
            SamplingParams(max_tokens=1),
            None,
            block_hasher=get_request_block_hasher(self.unit, sha256),
        )
        st = self.mgr.get_computed_blocks(req)[0].blocks[1]
        mamba = self.mgr.coordinator.single_type_managers[1]
        return bool(st) and st[-1].block_hash in mamba.cached_blocks_this_step

    def step(self, rid: str) -> dict:
        """One scheduler step for one request (the copies: the step's)."""
        (step,), copies = self.schedule([rid])
        return step | {"copies": copies}

    def schedule(self, rids: list[str]) -> tuple[list[dict], tuple]:
        """One ``Scheduler.schedule`` over ``rids`` in order: ``new_step_starts``, each
        request's chunk and ``allocate_slots``, then, once every request is scheduled,
        ``take_kv_cache_block_copies`` and the release of the copies' blocks. -> the steps
        (without copies) and the step's copies."""
        self.mgr.new_step_starts()
        steps = [self._allocate(rid) for rid in rids]
        copies, retained = self.mgr.take_kv_cache_block_copies()
        self.mgr.block_pool.free_blocks(retained)
        return steps, tuple((c.src_block_id, c.dst_block_id) for c in copies)

    def _allocate(self, rid: str) -> dict | None:
        """The request's chunk and ``allocate_slots``; None: not scheduled, its state hit was
        keyed in this step (``cached_blocks_this_step``)."""
        req = self.reqs[rid]
        blocks, hits, hit = None, 0, None
        if rid not in self.started:
            self.started.add(rid)
            blocks, hits, req.shared_prefix_boundary = self.mgr.get_computed_blocks(req)
            kv, st = blocks.blocks
            hit = {
                "tokens": hits,
                "kv_blocks": tuple(b.block_id for b in kv),
                "state_block": st[-1].block_id if st else None,
                "table_index": len(st) - 1,
                "shared_prefix_boundary": req.shared_prefix_boundary,
            }
        start = req.num_computed_tokens + hits
        want = min(self.chunk, req.num_tokens - start)
        n = Scheduler._mamba_block_aligned_split(self.sched, req, want, hits, 0)
        assert n > 0, "the real split made no progress"
        new = self.mgr.allocate_slots(req, n, hits, blocks)
        mamba = self.mgr.coordinator.single_type_managers[1]
        if new is None and hit is not None and hit["state_block"] is not None:
            st = blocks.blocks[1][-1]  # type: ignore[union-attr]
            assert st.block_hash in mamba.cached_blocks_this_step, "the pool is too small"
            self.started.discard(rid)  # not scheduled: it waits (Scheduler.schedule)
            return None
        assert new is not None, "vLLM could not allocate: the pool is too small"
        req.num_computed_tokens = start + n
        table = self.mgr.coordinator.single_type_managers[1].req_to_blocks[rid]
        return {
            "start": start,
            "end": start + n,
            "hit": hit,
            "state_block": table[-(-(start + n) // self.block_size) - 1].block_id,
            "new_blocks": tuple(tuple(ids) for ids in new.get_block_ids()),
        }

    def append(self, rid: str, token: int) -> None:
        req = self.reqs[rid]
        req.append_output_token_ids(token)
        self._remember(req)

    def finish(self, rid: str) -> None:
        self.mgr.free(self.reqs.pop(rid))
        self.started.discard(rid)

    def snapshot(self) -> dict:
        pool = self.mgr.block_pool
        entries = set()
        for key, held in pool.cached_block_hash_to_block._cache.items():
            held = held if isinstance(held, dict) else {held.block_id: held}
            for bid, blk in held.items():
                prefix = self.prefix_of[get_block_hash(key)]
                entries.add((get_group_id(key), prefix, bid, blk.block_hash == key))
        tables = {
            rid: tuple(
                tuple(b.block_id for b in m.req_to_blocks.get(rid, ()))
                for m in self.mgr.coordinator.single_type_managers
            )
            for rid in self.reqs
        }
        return {
            "entries": entries,
            "refs": tuple(b.ref_cnt for b in pool.blocks[1:]),
            "free": tuple(b.block_id for b in pool.free_block_queue.get_all_free_blocks()),
            "tables": tables,
        }
