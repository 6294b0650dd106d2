"""vLLM 0.33's own ``Scheduler`` (and through it its ``KVCacheManager``) with speculative
decoding on, for a KDA hybrid, on CPU: ``schedule()`` / ``update_from_output()`` /
``update_draft_token_ids()`` step after step, as ``EngineCore`` calls them.

Real: ``VllmConfig`` (with real ``CacheConfig``, ``SchedulerConfig``, ``DeviceConfig``; its
properties ``num_hash_lookahead_tokens``, ``num_prefill_lookahead_tokens``,
``num_lookahead_tokens`` and ``_set_max_num_scheduled_tokens``), ``SpeculativeConfig``'s
methods (``use_eagle_block_drop``, ``use_multi_module_mtp``, ...), ``Scheduler.__init__`` and
everything it runs, the block hasher ``get_request_block_hasher`` (with the lookahead the
engine core passes it), ``StructuredOutputManager``.

Stand-ins (no model exists here): ``model_config`` is a namespace with the fields the
scheduler reads (``ModelConfig`` inspects the model's code in a subprocess, which cannot
import on this CPU); the ``SpeculativeConfig`` object is made without its ``__post_init__``
(which loads the draft model's config) and holds the dataclass defaults plus the flags, its
``draft_model_config.hf_config.num_nextn_predict_layers`` = ``n_predict``. The model runner
is this driver: a step that completes a request's known tokens samples one token (plus the
scheduled drafts when ``accept`` is "all"), and the drafter proposes ``k`` new tokens.

KV cache groups: one MLA group (``MLAAttentionSpec``; it holds the draft's layers, so it is
the ``is_eagle_group`` as ``kv_cache_planning`` marks it) and one KDA group (``MambaSpec``,
``mamba_cache_mode="align"``, ``num_speculative_blocks`` = k), block ``block_size`` each.

A stall (the scheduler gives the request 0 tokens while it is not finished, twice with
nothing else running, so nothing can change) is reported and the request aborted, never
looped on: at most ``max_steps`` steps per request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import torch
from vllm.config import CacheConfig, DeviceConfig, SchedulerConfig, VllmConfig
from vllm.config.speculative import SpeculativeConfig
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
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
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.structured_output import StructuredOutputManager

init_none_hash(sha256)
MAX_LEN = 1 << 20


def speculative_config(flags: dict) -> SpeculativeConfig:
    """A ``SpeculativeConfig`` holding the defaults and ``flags`` (see the module doc)."""
    spec = SpeculativeConfig.__new__(SpeculativeConfig)
    for name, field in SpeculativeConfig.__dataclass_fields__.items():
        if field.default is not dataclasses.MISSING:
            object.__setattr__(spec, name, field.default)
        elif field.default_factory is not dataclasses.MISSING:
            object.__setattr__(spec, name, field.default_factory())
    for name in ("method", "num_speculative_tokens"):
        object.__setattr__(spec, name, flags[name])
    for name in ("disable_lookahead_block_hashes", "disable_eagle_block_drop"):
        object.__setattr__(spec, name, flags.get(name, False))
    hf = SimpleNamespace(num_nextn_predict_layers=flags.get("n_predict", 1))
    draft = SimpleNamespace(hf_config=hf, architectures=[])  # no XPress refiner (is_xpress)
    object.__setattr__(spec, "draft_model_config", draft)
    return spec


def vllm_config(
    block_size: int,
    chunk: int,
    flags: dict | None,
    prefix_match_unit: int | None = None,
    num_blocks: int = 4096,
    kv_transfer: bool = False,
) -> VllmConfig:
    cfg = VllmConfig(
        cache_config=CacheConfig(
            block_size=block_size, enable_prefix_caching=True, mamba_cache_mode="align"
        ),
        device_config=DeviceConfig(device="cpu"),
        scheduler_config=SchedulerConfig(
            max_num_batched_tokens=chunk,
            max_model_len=MAX_LEN,
            is_encoder_decoder=False,
            enable_chunked_prefill=True,
            max_num_seqs=min(4, chunk),
        ),
    )
    model = SimpleNamespace(
        max_model_len=MAX_LEN,
        is_encoder_decoder=False,
        uses_mrope=False,
        runner_type="generate",
        is_diffusion=False,
        supports_multimodal_inputs=False,
        multimodal_config=None,
        return_sampling_mask=False,
        skip_tokenizer_init=True,
    )
    object.__setattr__(cfg, "model_config", model)
    if flags is not None:
        object.__setattr__(cfg, "speculative_config", speculative_config(flags))
        cfg._set_max_num_scheduled_tokens()
    if kv_transfer:
        from vllm.config import KVTransferConfig

        object.__setattr__(cfg, "kv_transfer_config", KVTransferConfig())
    cfg.cache_config.num_gpu_blocks = num_blocks
    cfg.cache_config.prefix_match_unit = prefix_match_unit
    return cfg


@dataclass
class Served:
    hit: int | None
    chunk_ends: list[int]
    stalled: bool


class RealSpecScheduler:
    """``Scheduler`` for one configuration; ``serve`` runs one prompt to its end."""

    def __init__(
        self,
        block_size: int,
        *,
        chunk: int,
        flags: dict | None = None,
        prefix_match_unit: int | None = None,
        retention: int | None = 0,
        num_blocks: int = 4096,
        log_stats: bool = False,
    ) -> None:
        U, u = block_size, prefix_match_unit or block_size
        cfg = vllm_config(U, chunk, flags, prefix_match_unit, num_blocks)
        self.k = flags["num_speculative_tokens"] if flags else 0
        groups = [
            KVCacheGroupSpec(
                ["mla", "mtp.mla"],
                MLAAttentionSpec(block_size=U, num_kv_heads=1, head_size=1, dtype=torch.float32),
                is_eagle_group=bool(flags) and cfg.speculative_config.use_eagle_block_drop(),
            ),
            KVCacheGroupSpec(
                ["kda"],
                MambaSpec(
                    block_size=U,
                    shapes=((1,),),
                    dtypes=(torch.float32,),
                    mamba_cache_mode="align",
                    num_speculative_blocks=self.k,
                ),
            ),
        ]
        kv = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=groups,
            prefix_cache_retention_interval=retention,
        )
        self.sched = Scheduler(
            cfg,
            kv,
            StructuredOutputManager(cfg),
            block_size=U,
            hash_block_size=u,
            log_stats=log_stats,
        )
        # EngineCore builds the hasher with the config's hash lookahead (engine/core.py)
        self.hasher = get_request_block_hasher(u, sha256, cfg.num_hash_lookahead_tokens)
        self.unit = u
        self.positions: dict = {}
        self.next_token = 1 << 20
        self.counted_hits = 0  # prefix_cache_stats.hits in the scheduler's stats (log_stats)

    def serve(
        self,
        rid: str,
        prompt: list[int],
        *,
        max_tokens: int = 6,
        accept: str = "all",
        max_steps: int = 400,
    ) -> Served:
        req = Request(
            rid,
            list(prompt),
            SamplingParams(max_tokens=max_tokens, ignore_eos=True),
            None,
            block_hasher=self.hasher,
        )
        self.sched.add_request(req)
        out = Served(None, [], False)
        idle = 0
        for _ in range(max_steps):
            step = self.sched.schedule()
            for new in step.scheduled_new_reqs:
                if new.req_id == rid:
                    out.hit = new.num_computed_tokens
            if rid not in step.num_scheduled_tokens:
                idle += 1
                if idle >= 2:  # nothing else runs: the next step is the same
                    self.sched.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
                    out.stalled = True
                    return out
                continue
            idle = 0
            if req.num_computed_tokens <= req.num_prompt_tokens:
                out.chunk_ends.append(req.num_computed_tokens)
            self._run(step, accept)
            self._remember(req)
            if req.is_finished():
                return out
        raise AssertionError(f"{rid} neither finished nor stalled in {max_steps} steps")

    def _run(self, step, accept: str) -> None:
        """The model runner's output for ``step`` and the drafter's proposals."""
        ids = list(step.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            req = self.sched.requests[rid]
            if req.num_computed_tokens < req.num_tokens:  # a partial prefill samples nothing
                sampled.append([])
                continue
            drafts = list(step.scheduled_spec_decode_tokens.get(rid, []))
            sampled.append((drafts if accept == "all" else []) + [self.next_token])
            self.next_token += 1
        index = {rid: i for i, rid in enumerate(ids)}
        outputs = self.sched.update_from_output(
            step, ModelRunnerOutput(req_ids=ids, req_id_to_index=index, sampled_token_ids=sampled)
        )
        for eco in outputs.values():  # what the engine core reports to the metrics loggers
            stats = eco.scheduler_stats
            if stats is not None and stats.prefix_cache_stats is not None:
                self.counted_hits += stats.prefix_cache_stats.hits
        reqs = self.sched.requests
        live = [r for r in ids if r in reqs and not reqs[r].is_finished()]
        if self.k and live:
            drafts = [[self.next_token + 7 + j for j in range(self.k)] for _ in live]
            self.sched.update_draft_token_ids(DraftTokenIds(live, drafts))

    def _remember(self, req: Request) -> None:
        for i, h in enumerate(req.block_hashes):
            self.positions.setdefault(h, (i + 1) * self.unit)

    def state_keys(self) -> set[tuple[int, int]]:
        """(group, tokens) of every cached key (group 1 = the KDA states)."""
        pool = self.sched.kv_cache_manager.block_pool
        return {
            (get_group_id(key), self.positions.get(get_block_hash(key), -1))
            for key in pool.cached_block_hash_to_block._cache
        }


def repeat(
    block_size: int, n: int, *, accept: str = "all", **kwargs
) -> tuple[tuple[int, ...], int | None, int | None, bool]:
    """A prompt of ``n`` tokens sent three times: (cold chunk ends, first and second repeat's
    cached tokens, stalled). After a stall the rest is not run (None, None)."""
    real = RealSpecScheduler(block_size, **kwargs)
    prompt = list(range(1000, 1000 + n))
    cold = real.serve("cold", prompt, accept=accept)
    if cold.stalled:
        return tuple(cold.chunk_ends), None, None, True
    first = real.serve("first", prompt, accept=accept)
    second = None if first.stalled else real.serve("second", prompt, accept=accept)
    if first.stalled or second.stalled:
        return tuple(cold.chunk_ends), None, None, True
    return tuple(cold.chunk_ends), first.hit, second.hit, False
