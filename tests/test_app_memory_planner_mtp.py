"""apps.memory_planner with an MTP drafter: the engines table shows each engine's draft share
as studies.planner computes it, in English and 中文, and a model the engines cannot draft for
is refused on the MTP checkbox (validator) and by the callback (gr.Error naming the field)."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from apps import memory_planner as mp
from apps.memory_planner.checks import plan_validator
from kda_core import sizing
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe

QWEN = "qwen3-next-80b-a3b-instruct"
NAMES = tuple(inspect.signature(mp.compute_plan).parameters)


def _values(**kw: object) -> list:
    """The Plan button's inputs (the callback's defaults with ``kw``), then the language."""
    sig = inspect.signature(mp.compute_plan).parameters
    return [kw.get(n, sig[n].default) for n in NAMES] + ["English"]


def test_engines_table_shows_the_drafters_share():
    out = mp.run_plan(QWEN, tp=4, draft=2, mtp=True)
    p = pl.plan(sizing.shipped_spec(QWEN), tp=4, draft_tokens=2, mtp=True)
    v = pe.vllm_side(p)
    table = out[13]
    assert "| draft tokens per step | 2 | 2 |" in table
    mib = f"{v.plan.draft_kv_bytes_per_request / sizing.MIB:.1f} MiB"
    assert (
        f"| MTP drafter's KV | 0 B/token in the cell | 1 attention layer(s), {mib} per request |"
        in (table)
    )
    alone = f"| {p.kv_tokens_without_draft:,} | {v.kv_tokens_without_draft:,} |"
    assert f"| KV tokens without the drafter {alone}" in table
    gib = f"{p.draft_unpriced_bytes / sizing.GIB:.2f} GiB"
    assert f"| draft KV pool beyond the budget | {gib} | none (in the blocks) |" in table
    assert f"| KV tokens | {p.kv_tokens:,} | {v.plan.kv_cache_tokens:,} |" in table
    zh = mp.run_plan(QWEN, tp=4, draft=2, mtp=True, language="中文")[13]
    assert f"| 超出预算的草稿 KV 池 | {gib} | 无（计入块中） |" in zh


def test_without_mtp_no_drafter_rows():
    table = mp.run_plan(QWEN, tp=4, draft=2)[13]
    assert "MTP drafter" not in table and "RecoverSSM" not in table


def test_recoverssm_row_with_replayssm_on_kda():
    out = mp.run_plan("kimi-linear-48b-a3b-instruct", tp=1, draft=2, replayssm=True)
    spec = sizing.shipped_spec("kimi-linear-48b-a3b-instruct")
    rec = pe.vllm_side(pl.plan(spec, tp=1, draft_tokens=2, replayssm=True)).plan
    assert rec.recoverssm_records_bytes > 0
    gib = f"{rec.recoverssm_records_bytes / sizing.GIB:.2f} GiB"
    assert f"| RecoverSSM verify records (outside the KV pool) | none | {gib} |" in out[13]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "kimi-k3", "mtp": True}, "mtp: SGLang 0.5.23 has no MTP draft model"),
        ({"model": "custom", "mtp": True}, "mtp: the lab models the MTP drafter of"),
        ({"mtp": "yes"}, "MTP drafter must be one of"),
    ],
)
def test_mtp_refused_by_the_callback(kwargs, message):
    with pytest.raises(gr.Error) as e:
        mp.run_plan(**kwargs)
    assert message in e.value.message


def test_validator_marks_the_mtp_checkbox():
    check = plan_validator(NAMES)
    i = NAMES.index("mtp")
    out = check(*_values(model="kimi-k3", mtp=True))
    assert [n for n, o in enumerate(out) if not o["is_valid"]] == [i]
    assert "mtp: SGLang 0.5.23 has no MTP draft model" in out[i]["message"]
    bad = check(*_values(mtp="yes"))
    assert not bad[i]["is_valid"] and "MTP drafter" in bad[i]["message"]
    assert all(o["is_valid"] for o in check(*_values(model=QWEN, tp=4, draft=2, mtp=True)))
