"""kda_core.studies.planner / planner_engines with an MTP drafter: each engine's share equals
kda_core.sizing's for the same deployment built here by hand, and the bytes are re-derived from
the config's shape (one draft layer = one target attention layer's KV)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe

QWEN = "qwen3-next-80b-a3b-instruct"
GIB28 = 28 * sizing.GIB
LENGTH = 16_000 + 3_000  # the planner's default request: input + output


def _layer_bytes(spec: sizing.ModelSpec, tp: int) -> int:
    """One attention layer's bf16 KV per token on one GPU: K and V, the KV heads TP splits
    (replicated below one per GPU), the head dim."""
    heads = max(spec.attn_kv_heads // tp, 1)
    return 2 * heads * spec.attn_head_dim * 2


def test_qwen3_next_tp4_draft2_is_sizings_mtp_split():
    spec = pe.model_spec(QWEN, mtp=True, draft=2)
    p = pl.plan(spec, tp=4, draft_tokens=2, mtp=True)
    d = sizing.Deployment(rest_bytes=GIB28, tp=4, draft_tokens=2, mtp=True)
    s = sizing.size_sglang(spec, d)
    alone = sizing.size_sglang(spec, d.replace(mtp=False))
    assert p.mtp and p.kv_tokens == s.kv_tokens and p.state_slots == s.max_mamba_cache_size
    assert p.max_running == min(s.max_running, s.kv_tokens // LENGTH)
    assert p.kv_tokens_without_draft == alone.kv_tokens
    # the shipped config names mtp_num_hidden_layers only: SGLang prices no draft layer into
    # the cell (same tokens) and allocates the one module's pool beyond the budget
    assert p.draft_kv_bytes_per_token == s.draft_cell_bytes == 0
    assert p.kv_tokens == p.kv_tokens_without_draft
    one = _layer_bytes(spec, 4)
    assert one == 1024 and one * spec.n_attn_layers == sizing.kv_bytes_per_token(spec, 4)
    assert p.draft_unpriced_bytes == s.draft_unpriced_bytes == one * p.kv_tokens

    v = pe.vllm_side(p)
    kw = {"max_model_len": LENGTH, "num_speculative_tokens": 2}
    want = sizing.size_vllm(spec, d.replace(**kw))
    assert v.plan == want and v.plan.draft_attn_layers == 1
    bs = want.block_size
    assert v.plan.draft_kv_bytes_per_request == -(-LENGTH // bs) * bs * one
    no_draft = sizing.size_vllm(spec, d.replace(mtp=False, **kw))
    assert v.kv_tokens_without_draft == no_draft.kv_cache_tokens > v.plan.kv_cache_tokens
    assert v.plan.num_speculative_tokens == 2 and v.plan.recoverssm_records_bytes == 0


def test_a_config_naming_the_nextn_layer_is_priced_into_sglangs_cell():
    spec = dataclasses.replace(sizing.shipped_spec(QWEN), nextn_predict_layers=1)
    p = pl.plan(spec, tp=4, draft_tokens=2, mtp=True)
    cell = sizing.kv_bytes_per_token(spec, 4)
    assert p.draft_kv_bytes_per_token == cell // spec.n_attn_layers == 1024
    assert p.draft_unpriced_bytes == 0
    d = sizing.Deployment(rest_bytes=GIB28, tp=4, draft_tokens=2, mtp=True)
    assert p.kv_tokens == sizing.size_sglang(spec, d).kv_tokens < p.kv_tokens_without_draft


def test_without_mtp_nothing_of_the_drafter():
    p = pl.plan(sizing.shipped_spec(QWEN), tp=4, draft_tokens=2)
    v = pe.vllm_side(p)
    assert not p.mtp and p.draft_unpriced_bytes == p.draft_kv_bytes_per_token == 0
    assert p.kv_tokens_without_draft == p.kv_tokens
    assert v.plan.draft_attn_layers == 0 and v.kv_tokens_without_draft == v.plan.kv_cache_tokens


def test_recoverssm_records_with_replayssm_on_kda():
    spec = sizing.shipped_spec("kimi-linear-48b-a3b-instruct")
    p = pl.plan(spec, tp=1, draft_tokens=2, replayssm=True)
    v = pe.vllm_side(p, max_num_seqs=64)
    # per KDA layer: max_num_seqs x heads x (1 + k) rows of a float32 [V] and bf16 [2K]
    rows = 64 * spec.linear_heads * (1 + 2)
    per_row = 4 * spec.linear_v_dim + 2 * 2 * spec.linear_k_dim
    assert v.plan.recoverssm_records_bytes == spec.n_linear_layers * rows * per_row
    # no draft tokens: vLLM would refuse --use-replayssm on KDA, so the page leaves it off
    assert pe.vllm_side(pl.plan(spec, tp=1, replayssm=True)).plan.recoverssm_records_bytes == 0


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("kimi-k3", "mtp: SGLang 0.5.23 has no MTP draft model for Kimi K3"),
        ("nvidia-nemotron-nano-9b-v2", "mtp: the lab models the MTP drafter of"),
    ],
)
def test_mtp_refused_by_name(model, message):
    assert pe.model_spec(model).name  # without MTP it reads
    with pytest.raises(ValueError, match=message):
        pe.model_spec(model, mtp=True)


def test_pasted_config_refused_without_n_predict_and_draft_tokens():
    """vLLM: a Qwen3.5 config naming no mtp_num_hidden_layers has no n_predict, so
    num_speculative_tokens must be given (``SpeculativeConfig.hf_config_override``)."""
    name = next(n for n in shipped_configs() if n.startswith("qwen3.6"))
    cfg = dict(shipped_configs()[name]["config"])
    text = cfg.get("text_config", cfg)
    text.pop("mtp_num_hidden_layers", None)
    pasted = json.dumps(cfg)
    with pytest.raises(ValueError, match="mtp: num_speculative_tokens must be given"):
        pe.model_spec("config.json", pasted, mtp=True)
    assert pe.model_spec("config.json", pasted, mtp=True, draft=2).name
