"""The drafter's rows of a sized deployment: what ``python -m kda_core.sizing --json`` prints
per engine and the plan sweep adds to a point (one place for both)."""

from __future__ import annotations

from kda_core.sizing.deployment import Deployment
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sglang import MemorySplit, size_sglang
from kda_core.sizing.vllm import VllmPlan, size_vllm


def drafter_rows(spec: ModelSpec, d: Deployment, sized: MemorySplit | VllmPlan) -> dict[str, int]:
    """The drafter's share of ``sized`` (``size_sglang`` or ``size_vllm`` of ``spec`` and
    ``d``), with the KV tokens the same deployment would have without the drafter; vLLM's
    RecoverSSM records whenever they take memory. ``{}``: nothing to add."""
    out: dict[str, int] = {}
    drafter = d.mtp or d.eagle is not None
    plain = d.replace(mtp=False, eagle=None)
    if isinstance(sized, VllmPlan):
        if drafter:
            out = {
                "num_speculative_tokens": sized.num_speculative_tokens,
                "draft_attn_layers": sized.draft_attn_layers,
                "draft_kv_bytes_per_request": sized.draft_kv_bytes_per_request,
                "kv_tokens_without_draft": size_vllm(spec, plain).kv_cache_tokens,
            }
        if d.eagle is not None:
            out["draft_block_size"] = sized.draft_block_size
        if sized.recoverssm_records_bytes:
            out["recoverssm_records_bytes"] = sized.recoverssm_records_bytes
        return out
    if drafter:
        out = {
            "draft_kv_bytes_per_token": sized.draft_cell_bytes,
            "draft_kv_unpriced_bytes": sized.draft_unpriced_bytes,
            "kv_tokens_without_draft": size_sglang(spec, plain).kv_tokens,
        }
    if d.eagle is not None:
        out["draft_kv_pool_bytes"] = sized.draft_pool_bytes
    return out
