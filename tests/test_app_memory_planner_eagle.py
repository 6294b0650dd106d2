"""apps.memory_planner with the bundled EAGLE3 drafter: the engines table shows each engine's
drafter memory as kda_core.sizing computes it (SGLang's priced share, its own pool and what it
takes beyond the budget; vLLM's draft layers, group and block), in English and 中文; a bad
choice (MTP too, no draft tokens, a target the engines do not draft for, not a bool) is
refused on the EAGLE3 checkbox (validator) and by the callback (gr.Error)."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from apps import memory_planner as mp
from apps.memory_planner.checks import BUNDLED_DRAFT, plan_validator
from kda_core import sizing

QWEN, Q38 = "qwen3-next-80b-a3b-instruct", "qwen3.8-27b-fp8"
NAMES = tuple(inspect.signature(mp.compute_plan).parameters)


def _values(**kw: object) -> list:
    sig = inspect.signature(mp.compute_plan).parameters
    return [kw.get(n, sig[n].default) for n in NAMES] + ["English"]


def _sized(model: str, tp: int, k: int):
    """Both engines sized directly (the page's default budget 28 GiB, ratio 0.9, requests of
    16,000 + 3,000 tokens), with and without the draft."""
    d = sizing.Deployment(
        int(28 * sizing.GIB),
        tp=tp,
        draft_tokens=k,
        num_speculative_tokens=k,
        max_model_len=19_000,
        eagle=BUNDLED_DRAFT,
    )
    spec = sizing.shipped_spec(model)
    s, v = sizing.size_sglang(spec, d), sizing.size_vllm(spec, d)
    return (
        s,
        v,
        sizing.size_sglang(spec, d.replace(eagle=None)),
        sizing.size_vllm(spec, d.replace(eagle=None)),
    )


def test_a_draft_of_the_targets_shape_joins_its_groups():
    table = mp.run_plan(QWEN, tp=2, draft=3, eagle=True)[13]
    s, v, s0, v0 = _sized(QWEN, 2, 3)
    assert s.draft_cell_bytes == 1024 and v.draft_groups == 0
    assert f"| KV tokens | {s.kv_tokens:,} | {v.kv_cache_tokens:,} |" in table
    assert f"| KV tokens without the drafter | {s0.kv_tokens:,} | {v0.kv_cache_tokens:,} |" in table
    assert "| EAGLE3 drafter's KV | 1,024 B/token in the cell | 1 attention layer(s)," in table
    assert "the target's attention groups (same shape)" in table
    assert f"| {s.draft_unpriced_bytes:,} B beyond the budget |" in table  # the page row


def test_a_smaller_draft_gets_its_own_group_and_sglang_over_reserves():
    table = mp.run_plan(Q38, tp=2, draft=2, eagle=True)[13]
    s, v, _, _ = _sized(Q38, 2, 2)
    assert v.draft_groups == 1 and v.draft_block_size == 2 * v.block_size
    assert f"| drafter's block size (tokens) | none | {v.draft_block_size:,} |" in table
    attn = 16 * -(-19_000 // v.block_size) + -(-19_000 // v.draft_block_size)  # the draft's too
    assert f"| {48 * (2 + 2)} mamba + {attn} attention blocks |" in table
    assert "its own KV cache group (another shape)" in table
    assert s.draft_unpriced_bytes < 0
    over = f"{-s.draft_unpriced_bytes / sizing.MIB:.1f} MiB"
    assert f"none: the budget reserves {over} more than the pool takes" in table
    zh = mp.run_plan(Q38, tp=2, draft=2, eagle=True, language="中文")[13]
    assert f"无：预算比池多预留 {over}" in zh and "自己的 KV cache 组（形状不同）" in zh


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": QWEN, "tp": 2, "draft": 2, "eagle": True, "mtp": True}, "choose one drafter"),
        ({"model": QWEN, "tp": 2, "draft": 0, "eagle": True}, "draft tokens >= 1"),
        ({"model": "kimi-k3", "draft": 2, "eagle": True}, "eagle: the lab sizes an EAGLE draft"),
        ({"model": QWEN, "tp": 2, "eagle": "yes"}, "EAGLE3 drafter must be one of"),
    ],
)
def test_bad_drafter_choices_are_refused(kwargs, message):
    with pytest.raises(gr.Error) as e:
        mp.run_plan(**kwargs)
    assert message in e.value.message


def test_validator_marks_the_eagle_checkbox():
    check = plan_validator(NAMES)
    i = NAMES.index("eagle")
    out = check(*_values(model="kimi-k3", draft=2, eagle=True))
    assert [n for n, o in enumerate(out) if not o["is_valid"]] == [i]
    assert "eagle: the lab sizes an EAGLE draft" in out[i]["message"]
    zh = check(*[*_values(model=QWEN, tp=2, draft=0, eagle=True)[:-1], "中文"])
    assert "EAGLE3 草稿模型需要草稿 token 数 >= 1" in zh[i]["message"]
    assert all(o["is_valid"] for o in check(*_values(model=QWEN, tp=2, draft=2, eagle=True)))
