"""kda_core.plan.sweep with drafters: each point sized as ``sizing.size_sglang`` /
``sizing.size_vllm`` size the same ``Deployment`` (built here, not read off the sweep), vLLM's
drafts replayed on the radix tree equal to ``sim.simulate(method="twin")``, the launch command
spelling the drafter as the engines do, and bad drafter flags refused with the flag named."""

from __future__ import annotations

import copy
import json
import math
import shlex

import numpy as np
import pytest

from kda_core import plan, sim, sizing
from kda_core.plan import _flags as plan_flags
from kda_core.plan.cli import main
from kda_core.sim.fast import prepare_trace, replay
from kda_core.sizing.hf import shipped_configs
from kda_core.workloads import BUNDLED_TRACES, TRACES_DIR, bundled_trace

QN = "qwen3-next-80b-a3b-instruct"
DRAFT = "qwen3-next-80b-a3b-eagle3"  # the shipped EAGLE3 draft that pairs with Qwen3-Next
REST = 20 << 30
TP = 4


@pytest.fixture(scope="module")
def head():
    return bundled_trace("conversation").head(600)


@pytest.fixture(scope="module")
def spec():
    return sizing.shipped_spec(QN)


def _ctx(trace, spec) -> tuple[int, float]:
    return spec.context_len, float((trace.input_len + trace.output_len).mean())


def _sglang(spec, length: int, **kw) -> sizing.MemorySplit:
    d = sizing.Deployment(
        rest_bytes=REST,
        tp=TP,
        max_model_len=length,
        ratio=0.9,
        page_size=1,
        chunked_prefill_size=8192,
        kv_dtype="bfloat16",
        strategy=sizing.resolve_auto(True, 1),  # --mamba-radix-cache-strategy auto, overlap on
    )
    return sizing.size_sglang(spec, d.replace(**kw))


def _with_nextn(n: int) -> dict:
    """Qwen3-Next's shipped config with ``num_nextn_predict_layers`` (the hub's config names
    none, so SGLang prices no draft layer into its cell and allocates one beyond the budget)."""
    return {**shipped_configs()[QN]["config"], "num_nextn_predict_layers": n}


@pytest.mark.parametrize("nextn", [None, 1])
def test_sglang_drafter_points_are_sized_as_size_sglang(head, nextn):
    model = QN if nextn is None else _with_nextn(nextn)
    spec = sizing.shipped_spec(QN) if nextn is None else sizing.from_hf_config(model)
    grid = {"speculative_algorithm": [None, "NEXTN"], "speculative_num_draft_tokens": [4]}
    s = plan.sweep(model, head, tp=TP, rest_bytes=REST, grid=grid)
    assert [p["status"] for p in s.points] == ["ok", "ok"]
    length, _ = _ctx(head, spec)
    none, mtp = s.points
    plain = _sglang(spec, length, draft_tokens=4)
    drafted = _sglang(spec, length, draft_tokens=4, mtp=True)
    assert (none["state_slots"], none["kv_tokens"]) == (plain.max_mamba_cache_size, plain.kv_tokens)
    assert (mtp["state_slots"], mtp["kv_tokens"]) == (
        drafted.max_mamba_cache_size,
        drafted.kv_tokens,
    )
    assert mtp["draft_kv_bytes_per_token"] == drafted.draft_cell_bytes
    assert mtp["draft_kv_unpriced_bytes"] == drafted.draft_unpriced_bytes
    assert mtp["kv_tokens_without_draft"] == plain.kv_tokens
    if nextn is None:  # nothing priced, one module's pool allocated past the budget
        assert drafted.draft_cell_bytes == 0 < drafted.draft_unpriced_bytes
        assert mtp["kv_tokens"] == plain.kv_tokens
    else:  # the MTP layer's KV is priced into the cell: fewer KV tokens
        assert drafted.draft_cell_bytes > 0 and mtp["kv_tokens"] < plain.kv_tokens
    assert "kv_tokens_without_draft" not in none


def test_sglang_eagle3_point_is_sized_with_the_draft_pool(head, spec):
    flags = {"speculative_draft_model_path": DRAFT, "speculative_num_draft_tokens": 4}
    s = plan.sweep(
        QN, head, tp=TP, rest_bytes=REST, grid={"speculative_algorithm": ["EAGLE3"]}, flags=flags
    )
    (p,) = s.points
    length, _ = _ctx(head, spec)
    want = _sglang(spec, length, draft_tokens=4, eagle=DRAFT)
    assert (p["state_slots"], p["kv_tokens"]) == (want.max_mamba_cache_size, want.kv_tokens)
    assert p["draft_kv_pool_bytes"] == want.draft_pool_bytes > 0
    words = shlex.split(s.launch_command)
    at = words.index("--speculative-algorithm")
    assert words[at : at + 10] == [
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        DRAFT,
        "--speculative-num-steps",
        "3",  # SGLang's chain: draft tokens = steps + 1 at topk 1 (_handle_eagle_family)
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]


def _vllm(spec, length: int, tp: int = TP, **kw) -> sizing.VllmPlan:
    return sizing.size_vllm(
        spec, sizing.Deployment(rest_bytes=REST, tp=tp, max_model_len=length, **kw)
    )


@pytest.mark.parametrize(
    "cfg, kw, nextn",
    [
        (
            {"method": "mtp", "num_speculative_tokens": 2},
            dict(mtp=True, num_speculative_tokens=2),
            None,
        ),
        ({"method": "mtp", "num_speculative_tokens": 0}, dict(mtp=True), 2),  # vLLM's n_predict
        (
            {"method": "eagle3", "num_speculative_tokens": 3, "model": DRAFT},
            dict(eagle=DRAFT, num_speculative_tokens=3),
            None,
        ),
    ],
)
def test_vllm_drafter_points_are_sized_as_size_vllm(head, cfg, kw, nextn):
    model = QN if nextn is None else _with_nextn(nextn)
    spec = sizing.shipped_spec(QN) if nextn is None else sizing.from_hf_config(model)
    flags = {f"speculative_config.{k}": v for k, v in cfg.items()}
    s = plan.sweep(model, head, engine="vllm", tp=TP, rest_bytes=REST, flags=flags)
    (p,) = s.points
    assert p["status"] == "ok", p["reason"]
    length, mean = _ctx(head, spec)
    want = _vllm(spec, length, **kw)
    assert (p["state_slots"], p["kv_tokens"]) == (want.num_blocks, want.kv_cache_tokens)
    assert p["num_speculative_tokens"] == want.num_speculative_tokens >= 1
    assert p["draft_kv_bytes_per_request"] == want.draft_kv_bytes_per_request > 0
    # without the drafter's KV (the speculative tokens' state blocks stay, as the sizing CLI's)
    k = kw.get("num_speculative_tokens", 0)
    if nextn:
        assert p["num_speculative_tokens"] == nextn  # n_predict: the MTP module count
    plain = _vllm(spec, length, num_speculative_tokens=k).kv_cache_tokens
    assert p["kv_tokens_without_draft"] == plain > p["kv_tokens"]
    # a running request holds what vLLM gives one of the trace's mean length
    per_req = _vllm(spec, math.ceil(mean), **kw).blocks_per_request
    assert p["max_running"] == min(256, want.num_blocks // per_req)
    words = shlex.split(s.launch_command)
    got = json.loads(words[words.index("--speculative-config") + 1])
    assert got == {k: v for k, v in cfg.items() if v}


def test_vllm_replayssm_point_prices_the_recoverssm_records(head):
    # Kimi K3 with one MTP module named (the shipped text config names none) and RecoverSSM
    cfg = copy.deepcopy(shipped_configs()["kimi-k3"]["config"])
    cfg["text_config"]["num_nextn_predict_layers"] = 1
    flags = {
        "speculative_config.method": "mtp",
        "speculative_config.num_speculative_tokens": 2,
    }
    grid = {"use_replayssm": [False, True]}
    s = plan.sweep(cfg, head, engine="vllm", tp=8, rest_bytes=REST, grid=grid, flags=flags)
    spec = sizing.from_hf_config(cfg)
    length = spec.context_len
    for p, rssm in zip(s.points, (False, True)):
        assert p["status"] == "ok", p["reason"]
        want = _vllm(spec, length, 8, mtp=True, num_speculative_tokens=2, use_replayssm=rssm)
        assert (p["state_slots"], p["kv_tokens"]) == (want.num_blocks, want.kv_cache_tokens)
        assert p.get("recoverssm_records_bytes", 0) == want.recoverssm_records_bytes
    assert s.points[1]["recoverssm_records_bytes"] > 0  # RecoverSSM: no speculative blocks
    assert "--use-replayssm" in shlex.split(plan_flags.launch_command("vllm", "m", 8, s.points[1]))


def replay_twin(trace, pol, *, checkpoint_bytes, kv_bytes_per_token, budgets, outputs):
    """``sim.fast.replay`` on the radix tree: (token match, restore point, evictions)."""
    sb, kb, ub = budgets
    r = replay(
        prepare_trace(trace, outputs),
        pol,
        checkpoint_bytes=checkpoint_bytes,
        kv_bytes_per_token=kv_bytes_per_token,
        state_budget_bytes=sb,
        kv_budget_bytes=kb,
        unified_budget_bytes=ub,
        cap_lookup=True,
        method="twin",
    )
    return r.token_match, r.restore_at, int(r.evicted_cum[-1]) if len(r.new) else 0


def _k3_budgets(trace) -> tuple[int, int]:
    return sim.checkpoint_bytes("kimi-k3"), sizing.mla_kv_bytes_per_token(
        sizing.preset("kimi-k3"), "bfloat16"
    )


@pytest.mark.parametrize("method", ["mtp", "eagle3"])
def test_the_drafts_replay_equals_simulate_twin(head, method):
    # plumbing: where the sizes are a preset's, the sweep's radix-tree replay is simulate's
    # twin request by request (both run sim's one sequential loop), under a budget that evicts;
    # the drafts rules themselves are checked against vLLM in tests/real/test_spec_hits_vs_vllm
    ckpt, kvb = _k3_budgets(head)
    pol = (
        "vllm",
        {"block_size": 512, "speculative_config": {"method": method, "num_speculative_tokens": 2}},
    )
    budget = 40 * ckpt
    tm, ra, ev = replay_twin(
        head,
        pol,
        checkpoint_bytes=ckpt,
        kv_bytes_per_token=kvb,
        budgets=(None, None, budget),
        outputs=True,
    )
    r = sim.simulate(head, pol, method="twin", unified_budget_bytes=budget, cap_lookup=True)
    assert np.array_equal(ra, r.series.restore_at) and np.array_equal(tm, r.series.token_match)
    assert ev > 0 and int(ra.sum()) > 0  # the budget bites and something is hit


def test_the_twin_loop_equals_the_fast_pass_without_drafts(head):
    ckpt, kvb = _k3_budgets(head)
    pol = ("vllm", {"block_size": 512})
    tm, ra, _ = replay_twin(
        head,
        pol,
        checkpoint_bytes=ckpt,
        kv_bytes_per_token=kvb,
        budgets=(None, None, 30 * ckpt),
        outputs=True,
    )
    rep = replay(
        prepare_trace(head),
        pol,
        checkpoint_bytes=ckpt,
        kv_bytes_per_token=kvb,
        unified_budget_bytes=30 * ckpt,
        cap_lookup=True,
    )
    assert np.array_equal(ra, rep.restore_at) and np.array_equal(tm, rep.token_match)


@pytest.mark.parametrize(
    "engine, flags, named",
    [
        ("sglang", {"speculative_algorithm": "MEDUSA"}, "speculative_algorithm"),
        ("sglang", {"speculative_num_draft_tokens": 65}, "speculative_num_draft_tokens"),
        ("sglang", {"speculative_draft_model_path": 7}, "speculative_draft_model_path"),
        ("vllm", {"speculative_config.method": "medusa"}, "speculative_config.method"),
        ("vllm", {"speculative_config.num_speculative_tokens": -1}, "num_speculative_tokens"),
        ("vllm", {"speculative_config.model": ""}, "speculative_config.model"),
        ("vllm", {"use_replayssm": "yes"}, "use_replayssm"),
    ],
)
def test_bad_drafter_values_are_refused_naming_the_flag(head, engine, flags, named):
    with pytest.raises(ValueError, match=named):
        plan.sweep(QN, head, engine=engine, tp=TP, rest_bytes=REST, flags=flags)


@pytest.mark.parametrize(
    "engine, flags, named",
    [
        ("sglang", {"speculative_algorithm": "NEXTN"}, "speculative_num_draft_tokens"),
        ("vllm", {"speculative_config.method": "eagle3"}, "speculative_config.model"),
        ("vllm", {"speculative_config.method": "mtp", "speculative_config.model": DRAFT}, "model"),
        (
            "vllm",
            {"speculative_config.method": "eagle3", "speculative_config.model": "nope"},
            "model",
        ),
    ],
)
def test_drafter_flags_that_do_not_go_together_fail_the_point(head, engine, flags, named):
    grid = {"kv_cache_dtype": ["auto", "bfloat16"]}
    ok = {"speculative_num_draft_tokens": 4} if "speculative_algorithm" in flags else {}
    with pytest.raises(ValueError, match=named):  # every point fails: refused with the reason
        plan.sweep(QN, head, engine=engine, tp=TP, rest_bytes=REST, grid=grid, flags=flags)
    if ok:  # with the draft tokens given, the same flags size
        s = plan.sweep(QN, head, tp=TP, rest_bytes=REST, flags={**flags, **ok})
        assert s.points[0]["status"] == "ok"


def test_sglang_refuses_an_mtp_draft_for_kimi_as_the_sizing_does(head):
    grid = {"speculative_algorithm": [None, "NEXTN"], "speculative_num_draft_tokens": [4]}
    s = plan.sweep("kimi-k3", head, tp=8, rest_bytes=29_497 << 20, grid=grid)
    assert s.points[0]["status"] == "ok" and s.failed == (1,)
    assert "no MTP draft model for Kimi" in s.points[1]["reason"]


def test_the_cli_prints_the_drafter_rows_and_flags(capsys):
    trace = str(TRACES_DIR / BUNDLED_TRACES["conversation"])
    args = [QN, "--trace", trace, "--engine", "vllm", "--tp", "4", "--gpu-mem", "20"]
    args += ["--grid", "speculative-config.method=none,mtp", "--no-progress"]
    args += ["--set", "speculative-config.num-speculative-tokens=2", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    none, mtp = out["points"]
    assert none["speculative_config.method"] is None and mtp["speculative_config.method"] == "mtp"
    assert mtp["kv_tokens"] < mtp["kv_tokens_without_draft"] and "draft_attn_layers" not in none
    assert main([*args[:-1], "--grid", "use-replayssm=maybe"]) == 2
    assert "use_replayssm" in capsys.readouterr().err


def test_a_vllm_drafts_point_replays_its_own_pools_under_the_drafts_rules(head):
    # the pools from size_vllm directly (the lab's rule: what max_running mean requests leave),
    # the trace on the gcd of the blocks, the policy with vLLM's resolved speculative_config
    flags = {"speculative_config.method": "mtp", "speculative_config.num_speculative_tokens": 2}
    s = plan.sweep(QN, head, engine="vllm", tp=TP, rest_bytes=REST, flags=flags)
    (p,) = s.points
    spec = sizing.shipped_spec(QN)
    length, mean = _ctx(head, spec)
    want = _vllm(spec, length, mtp=True, num_speculative_tokens=2)
    per_req = _vllm(spec, math.ceil(mean), mtp=True, num_speculative_tokens=2).blocks_per_request
    running = min(256, want.num_blocks // per_req)
    left = want.num_blocks - running * per_req
    B = want.block_size
    trace = head.refined(math.gcd(head.block_size, B))
    base = {"block_size": B, "max_num_batched_tokens": 2048}
    drafts = {"method": "mtp", "num_speculative_tokens": 2, "n_predict": 1}
    sizes = dict(
        checkpoint_bytes=want.mamba_groups * want.bytes_per_block,
        kv_bytes_per_token=want.attn_groups * want.group_size * want.attn_page_per_token,
        budgets=(None, None, left * want.bytes_per_block),
        outputs=True,
    )
    _, ra, _ = replay_twin(trace, ("vllm", {**base, "speculative_config": drafts}), **sizes)
    assert p["cached_tokens"] == int(ra.sum()) > 0
    _, plain, _ = replay_twin(trace, ("vllm", base), **sizes)
    # the drafts rules change the replay (the lookup limit and the aligned split with drafts)
    assert int(plain.sum()) != p["cached_tokens"]
