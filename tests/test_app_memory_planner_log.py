"""apps.memory_planner's pasted config, refusals by the Plan button, and the log panel on the
logs users paste (junk folded, fragments, another model questioned), in English and 中文."""

from __future__ import annotations

import re
import string

import gradio as gr

from apps import memory_planner as mp
from apps.memory_planner.figures import draw_check
from apps.memory_planner.inputs import pasted
from apps.memory_planner.log_view import draw_log_check
from kda_core.sizing.logread import REASONS
from kda_core.studies import planner_engines as pe
from words.memory_planner import MSG
from words.memory_planner_reasons import REASON_MSG

EN, ZH = MSG.lang("English"), MSG.lang("中文")
K3, VLLM, FRAGMENT = pe.EXAMPLE_LOGS[0], pe.EXAMPLE_LOGS[2], pe.EXAMPLE_LOGS[4]


def _deps(demo: gr.Blocks, trigger: str) -> list[dict]:
    cfg = demo.get_config_file()
    return [d for d in cfg["dependencies"] if any(t[1] == trigger for t in d["targets"])]


def test_pasting_a_config_switches_the_model_to_config_json():
    assert pasted('{"model_type": "qwen3_next"}') == mp.CONFIG
    assert pasted("  ") == gr.skip()  # clearing the editor leaves the model alone
    demo = mp.build()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in demo.get_config_file()["components"]}
    (dep,) = _deps(demo, "input")  # the editor's input event, private
    assert [ids[i] for i in dep["inputs"]] == ["memory_planner-config"]
    assert [ids[i] for i in dep["outputs"]] == ["memory_planner-model"]


def test_a_refused_config_is_said_by_the_plan_button_and_nothing_looks_planned():
    assert mp.check_model("kimi-k3", "") is None
    err = mp.check_model("config.json", '{"model_type": "qwen3_next", "num_hidden_layers": 4}')
    assert isinstance(err, ValueError)
    status, summary, logs, f1, f2, f3, live, f4, engines, vlogs = draw_check(err, EN)
    assert status.startswith("**Not planned** — the model was refused: ")
    assert "missing field 'layer_types'" in status and summary == engines == status
    assert logs == vlogs == live == "" and "not planned" in str(f4.to_dict())
    zh = draw_check(err, ZH)[0]
    assert zh.startswith("**未规划**——模型被拒绝：") and "missing field 'layer_types'" in zh
    assert draw_check(None, EN) == ("", *[gr.skip()] * 9)  # a plan that reads redraws all
    # the API keeps refusing the call itself
    demo = mp.build()
    (plan,) = [
        d for d in demo.get_config_file()["dependencies"] if d["api_name"] == "memory_planner_plan"
    ]
    assert plan["trigger_after"] is not None  # runs after the check, by the button


def test_a_vllm_log_naming_another_model_is_questioned():
    report, _ = mp.read_log("kimi-k3", "", log=VLLM.text)
    assert "**Verdict: is it this model?**" in report
    assert (
        "the log names the model ~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4, not kimi-k3" in report
    )
    report, _ = mp.read_log(VLLM.model, "", log=VLLM.text)  # its own model: no question
    assert "is it this model?" not in report


def test_junk_lines_are_counted_and_folded():
    junk = "\n".join(f"INFO 07-06 23:00:{i % 60:02d} request {i} done" for i in range(12_400))
    report, lines = mp.read_log(K3.model, "", log=junk + "\n" + K3.text, log_ratio=0.9)
    assert lines.count("\n| ") == 2  # the two known lines, then one sentence
    assert lines.endswith("12,400 lines skipped: not lines the reader knows (not listed)")
    assert "12400 skipped" in report


def test_a_rejected_log_replaces_the_earlier_verdict():
    """A model the reader refuses (a config.json that does not read) replaces the verdict;
    a field's own refusal (empty log, custom model) is marked on the field instead."""
    bad = '{"model_type": "qwen3_next", "num_hidden_layers": 4}'
    report, lines = draw_log_check(mp.check_log("config.json", bad, K3.text, 0, 0, 0, 0, 0), EN)
    assert report.startswith("**Not read:** ") and "missing field 'layer_types'" in report
    assert lines == ""
    report, _ = draw_log_check(mp.check_log("config.json", bad, K3.text, 0, 0, 0, 0, 0), ZH)
    assert report.startswith("**未读取**：")
    for model, log in ((K3.model, K3.text), (K3.model, ""), ("custom", K3.text)):
        assert draw_log_check(mp.check_log(model, "", log, 0.9, 0, 0, 0, 0), EN) == (
            gr.skip(),
            gr.skip(),
        )


def test_inferred_flags_are_written_for_a_reader():
    report, _ = mp.read_log(K3.model, "", log=K3.text)  # no ratio: a range
    flags = report.split("Inferred flags:")[1]
    assert "`ratio_range=0.8955 .. 0.9031`" in flags or "ratio_range=0.89" in flags
    assert "(" not in flags and "True" not in flags and "_known" not in flags


def test_fragments_read_in_the_panel_with_fixes_toward_the_target():
    report, lines = mp.read_log(FRAGMENT.model, "", log=FRAGMENT.text, log_requested=32)
    assert "requested 32, effective 9" in report
    assert "| `--disable-radix-cache` | 32 slots -> cap 32," in report
    assert "| 1 | reproduced | `max_running_requests is capped to 9" in lines
    zh, _ = mp.read_log(FRAGMENT.model, "", log=FRAGMENT.text, log_requested=32, language="中文")
    assert "请求 32，实际 9" in zh and "| 是 |" in zh and "上限 32" in zh
    assert "完全没有前缀缓存" in zh  # the cost column in 中文
    assert "47 个状态槽 / 每请求预留 5 个 = 最多 9 个并发请求" in zh


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_every_reason_of_the_reader_has_its_chinese():
    pairs = REASON_MSG.messages()
    assert set(pairs) == {f"r_{k}" for k in REASONS}
    for k, en in REASONS.items():
        assert pairs[f"r_{k}"][0] == en and _fields(pairs[f"r_{k}"][1]) == _fields(en), k
        assert re.search(r"[\u4e00-\u9fff]", pairs[f"r_{k}"][1]), k


def test_the_custom_model_covers_gqa_mamba2_and_short_conv():
    kinds = {"linear_kind": "mamba2", "attn_kind": "gqa", "value_dim": 8}
    m2 = mp.run_plan("custom", "", 4, 1, 8, 16, 4, 2, 64, tp=1, **kinds)
    kinds = {"linear_kind": "short_conv", "attn_kind": "gqa"}
    conv = mp.run_plan("custom", "", 10, 6, 2048, 1, 3, 8, 64, tp=1, **kinds)
    assert "| recurrent state / slot | 0.0 MiB | 4 layers |" in m2[0]
    assert "| recurrent state / slot |" in conv[0] and m2[13] != conv[13]
    gqa = {"attn_kind": "gqa", "attn_kv_heads": 8, "attn_head_dim": 64}
    spec = pe.custom_spec("custom", 10, 6, 2048, 1, 3, linear_kind="short_conv", **gqa)
    assert spec.linear_k_dim == 0 and spec.attn_kv_heads == 8


def test_an_empty_log_is_marked_on_its_field_not_in_a_toast():
    """Read with nothing pasted: the validator marks the log field (in the page's language)
    and the reading is not run; the pre-check draws nothing (the verdict stays as it was)."""
    demo = mp.build()
    deps = demo.get_config_file()["dependencies"]
    (dep,) = [d for d in deps if d["api_name"] == "memory_planner_read_log"]
    assert demo.fns[dep["id"]].validator is not None
    from apps.memory_planner.log import log_validator

    v = log_validator()
    marks = v("kimi-k3", "", "  ", 0, 0, 0, 0, 0, "中文")
    assert [m["is_valid"] for m in marks] == [True, True, False, *[True] * 6]
    assert marks[2]["message"] == "请先粘贴日志"
    assert v("kimi-k3", "", K3.text, 0, 0, 0, 0, 0, "English") == [gr.validate(True, "")] * 9
    assert v("kimi-k3", "", K3.text, 11, 0, 0, 0, 0, "English")[3]["message"].endswith("got 11")
    assert not v("custom", "", K3.text, 0, 0, 0, 0, 0, "English")[0]["is_valid"]
    assert mp.check_log("kimi-k3", "", "") is None
    assert draw_log_check(mp.check_log("kimi-k3", "", ""), EN) == (gr.skip(), gr.skip())
