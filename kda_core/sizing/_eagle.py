"""An EAGLE / EAGLE3 drafter with a config of its own, and the KV each pinned engine gives it.

The drafter is a small Llama-shaped model (``LlamaForCausalLMEagle3``: ``num_hidden_layers``
decoder layers of GQA attention, ``num_key_value_heads`` x ``head_dim``). Its config is what
SGLang reads from ``--speculative-draft-model-path`` and vLLM from ``speculative_config=
{"method": "eagle3", "model": ...}``. docs/sizing.md ("EAGLE drafters with their own config")
has the sources; in short:

vLLM 0.33: the drafter's attention layers register their own ``FullAttentionSpec``
(``GPUModelRunner.get_kv_cache_spec``; heads ``max(1, kv_heads // tp)``, ``LlamaAttention``) at
the target's aligned block size, in the target's KV dtype. ``unify_kv_cache_spec_page_size``
makes every page the largest one (an attention layer with a smaller page that divides it
takes a larger block; one that does not is padded; mamba pages are padded), and
``_get_kv_cache_groups_uniform_page_size`` groups layers of equal spec: a drafter whose spec
equals the target's joins its bucket, else it is a bucket of its own, and the group size is
the smallest bucket unless the largest is under 1.5 x it.

SGLang 0.5.23: the target prices the draft into its per-token cell at the TARGET's per-layer
size, ``cell += int(cell * draft_layers / attention_layers)`` with ``draft_layers`` the draft
config's ``num_nextn_predict_layers`` when it names one (even 0), else ``max(num_hidden_layers,
num_attention_layers)`` (``_resolve_eagle_aux_hidden_state``, ``DefaultPoolConfigurator.
__init__``: "assumes the draft shares the target's per-layer KV size"); the draft worker then
allocates its own MHA pool at the target's token count with ITS shape: ``layer_num`` from
``_compute_model_num_layers`` (``num_nextn_predict_layers`` when > 0, else the max above),
heads ``get_num_kv_heads(tp)``, rows ``size + page_size`` (``MHATokenToKVPool``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kda_core._checks import check_int
from kda_core.sizing.hfconfig import read_config
from kda_core.sizing.presets import MAX_DIM, ModelSpec, dtype_bytes

_DRAFT_DIR = Path(__file__).with_name("drafts")
EAGLE_METHODS = ("eagle", "eagle3")
_SGLANG_FAMILIES = frozenset(("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe"))
_SGLANG_FAMILIES |= {"qwen3_5_moe_text"}
"""Targets whose SGLang 0.5.23 class captures EAGLE3 hidden states
(``set_eagle3_layers_to_capture``: ``models/qwen3_next.py``, ``models/qwen3_5.py``)."""
_VLLM_FAMILIES = _SGLANG_FAMILIES | {"nemotron_h"}
"""GQA targets whose vLLM 0.33 class is ``SupportsEagle3`` (``qwen3_next.py``, ``qwen3_5.py``,
``nemotron_h.py``); Kimi K3's is too, but an MLA target beside a GQA draft is not modelled."""


@dataclass(frozen=True, slots=True)
class EagleDraft:
    """The fields of a draft ``config.json`` that size its KV (``read_eagle_draft``).
    ``nextn_predict_layers`` is None when the config names no ``num_nextn_predict_layers``."""

    name: str
    architecture: str
    num_hidden_layers: int
    num_kv_heads: int
    head_dim: int
    nextn_predict_layers: int | None = None

    def kv_heads(self, tp: int) -> int:
        """KV heads one GPU keeps (both engines: ``max(1, kv_heads // tp)``)."""
        return max(1, self.num_kv_heads // tp)

    def bytes_per_token_per_layer(self, tp: int, kv_dtype: str) -> int:
        """K and V of one draft layer for one token on one GPU."""
        return self.kv_heads(tp) * 2 * self.head_dim * dtype_bytes(kv_dtype, "kv_dtype")


def _check_count(c: dict[str, Any], key: str, lo: int = 1) -> int:
    v = c.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= MAX_DIM:
        raise ValueError(f"draft config.json: {key} must be an integer in [{lo}, {MAX_DIM}]")
    return v


def read_eagle_draft(cfg: object, name: str | None = None) -> EagleDraft:
    """An EAGLE draft's ``config.json`` (a dict, a file or a folder; a shipped one by name:
    ``shipped_drafts``). ValueError naming the field for what the lab does not size: an MLA
    draft (``kv_lora_rank``), sliding-window layers, a config with no layers or heads."""
    if isinstance(cfg, str) and cfg in shipped_drafts():
        name, cfg = name or cfg, shipped_drafts()[cfg]["config"]
    c = read_config(cfg)
    if c.get("kv_lora_rank"):
        raise ValueError("draft config.json: an MLA draft (kv_lora_rank) is not sized")
    layer_types = c.get("layer_types") or []
    if c.get("use_sliding_window") or "sliding_attention" in layer_types:
        raise ValueError("draft config.json: sliding-window draft layers are not sized")
    layers = _check_count(c, "num_hidden_layers")
    heads = _check_count(c, "num_attention_heads")
    kv = _check_count(c, "num_key_value_heads") if "num_key_value_heads" in c else heads
    head_dim = c.get("head_dim") or _check_count(c, "hidden_size") // heads
    head_dim = check_int("draft config.json: head_dim", head_dim, 1, MAX_DIM)
    nextn = c.get("num_nextn_predict_layers")
    if nextn is not None:
        nextn = _check_count(c, "num_nextn_predict_layers", 0)
    archs = c.get("architectures") or [""]
    label = name or str(c.get("model_type") or "draft")
    return EagleDraft(label, str(archs[0]), layers, kv, head_dim, nextn)


def shipped_drafts() -> dict[str, dict[str, Any]]:
    """The shipped draft configs by name, ``{"source": {...}, "pairs_with": ..., "config"}``."""
    return {
        p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(_DRAFT_DIR.glob("*.json"))
    }


def eagle_refusal(spec: ModelSpec, engine: str) -> str:
    """ "" when the lab sizes an EAGLE draft beside ``spec`` in ``engine``, else why not."""
    fams = _VLLM_FAMILIES if engine == "vllm" else _SGLANG_FAMILIES
    if spec.family in fams and spec.attn_kind == "gqa":
        return ""
    if engine == "sglang" and spec.family in _VLLM_FAMILIES:
        return f"eagle: SGLang 0.5.23's {spec.family} class captures no EAGLE3 hidden states"
    name = spec.name if spec.family is None else f"{spec.name} ({spec.family})"
    return (
        f"eagle: the lab sizes an EAGLE draft beside {', '.join(sorted(fams))} (GQA targets) "
        f"only, not {name} in {engine}"
    )


def check_eagle(spec: ModelSpec, engine: str) -> None:
    why = eagle_refusal(spec, engine)
    if why:
        raise ValueError(why)


def sglang_eagle_layers(draft: EagleDraft) -> tuple[int, int]:
    """(layers SGLang prices, layers its draft pool allocates): ``num_nextn_predict_layers``
    when named (priced even when 0; allocated only when > 0), else ``max(num_hidden_layers,
    num_attention_layers)`` (a Llama draft's attention layers are its hidden layers)."""
    n, full = draft.nextn_predict_layers, draft.num_hidden_layers
    return (full if n is None else n), (n if n else full)


def sglang_eagle_cells(
    spec: ModelSpec, draft: EagleDraft, cell: int, tp: int, kv_dtype: str
) -> tuple[int, int]:
    """(the draft's share SGLang prices into the per-token cell, the bytes per token its pool
    allocates): ``int(cell * priced / attention_layers)`` and ``layers x the draft's own
    per-layer K+V``."""
    check_eagle(spec, "sglang")
    priced, alloc = sglang_eagle_layers(draft)
    share = int(cell * priced / spec.n_attn_layers) if priced else 0
    return share, alloc * draft.bytes_per_token_per_layer(tp, kv_dtype)


@dataclass(frozen=True, slots=True)
class VllmEagleGroups:
    """vLLM 0.33's KV cache groups with an EAGLE drafter: every page ``page`` bytes; the
    target's attention block ``target_block`` and the draft's ``draft_block`` tokens (a page
    that does not divide the largest is padded: its block stays); ``merged`` when the draft's
    spec equals the target's; ``group_size`` and the groups of each bucket."""

    page: int
    target_block: int
    draft_block: int
    merged: bool
    group_size: int
    attn_groups: int
    draft_groups: int
    mamba_groups: int


def _unified_block(bs: int, page: int, biggest: int) -> int:
    """``unify_kv_cache_spec_page_size`` for a non-MLA attention page: a page that divides the
    largest takes ``biggest // page`` times the block; one that does not keeps it (padded)."""
    return bs * (biggest // page) if biggest % page == 0 else bs


def vllm_eagle_groups(
    spec: ModelSpec, draft: EagleDraft, bs: int, attn_page: int, tp: int, kv_dtype: str
) -> VllmEagleGroups:
    """The groups of ``spec``'s attention and linear layers plus the draft's, at the target's
    aligned block ``bs`` whose attention page is ``attn_page`` (the mamba page is padded to it,
    ``Platform._align_hybrid_block_size``)."""
    check_eagle(spec, "vllm")
    d_heads, d_dim = draft.kv_heads(tp), draft.head_dim
    t_heads = max(1, spec.attn_kv_heads // tp)
    d_page = bs * draft.bytes_per_token_per_layer(tp, kv_dtype)
    page = max(attn_page, d_page)
    t_block = _unified_block(bs, attn_page, page)
    d_block = _unified_block(bs, d_page, page)
    # equal specs (heads, head size; the dtype is the target's) share one bucket
    merged = (d_heads, d_dim) == (t_heads, spec.attn_head_dim)
    n_a, n_d, n_m = spec.n_attn_layers, draft.num_hidden_layers, spec.n_linear_layers
    buckets = [n_a + n_d, n_m] if merged else [n_a, n_m, n_d]
    lo, hi = min(buckets), max(buckets)
    g = hi if hi < lo * 1.5 else lo
    return VllmEagleGroups(
        page=page,
        target_block=t_block,
        draft_block=d_block,
        merged=merged,
        group_size=g,
        attn_groups=math.ceil(buckets[0] / g),
        draft_groups=0 if merged else math.ceil(n_d / g),
        mamba_groups=math.ceil(n_m / g),
    )
