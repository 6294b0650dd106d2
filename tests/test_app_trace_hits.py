"""apps.panels.trace_hits (the trace panel of checkpoint_density and state_transfer): an uploaded
trace in two formats draws exactly what ``studies.hit_reasons`` / ``hit_requests`` /
``host_coverage`` return; a malformed file is refused naming its line (or its rows skipped and
reported); an oversize one is refused naming the cap, by the panel and by the server; a
lengths-only file says the reasons cannot be computed and draws no numbers; a clicked row
explains its request."""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import httpx
import numpy as np
import pytest

from apps import checkpoint_density, state_transfer, ui
from apps.panels import trace_hits as app
from kda_core.studies.hit_reasons import REASONS, hit_reasons
from kda_core.workloads import load_trace

# a Mooncake trace (512-token blocks): requests 1 and 3 share request 0's first two blocks,
# request 2 is new, request 3 repeats request 1's prompt
MOONCAKE = [
    {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
    {"timestamp": 5, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
    {"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]},
    {"timestamp": 12, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
]


def _write(tmp_path: Path, name: str, rows: list) -> str:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def _select(row: int, first_cell: object = None) -> gr.SelectData:
    return gr.SelectData(None, {"index": [row, 0], "value": first_cell, "row_value": None})


def test_mooncake_upload_draws_the_study(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.jsonl", MOONCAKE)
    md, f_r, c_r, table, why, f_c, c_c, study = app.analyse(path)
    r = hit_reasons(load_trace(path))
    np.testing.assert_array_equal(study["r"].sglang.cached, r.sglang.cached)
    assert r.token_match.tolist() == [0, 1024, 0, 1400]  # two shared blocks; the repeat whole
    assert "**`mine.jsonl`** (Mooncake / aiperf JSONL): 4 requests" in md
    req, tok = r.share_arrays()
    for trace in f_r.data:  # one bar trace per (reason, panel): engines on y
        k = [i for i, name in enumerate(REASONS) if app.HITS.text("en", f"r_{name}") == trace.name]
        shares = req if trace.xaxis == "x" else tok
        np.testing.assert_allclose(trace.x, shares[:, k[0]])
    # the table: every request (fewer than 30), the largest gap first
    gap = np.maximum(r.token_match - r.sglang.cached, r.token_match - r.vllm.cached)
    assert table.iloc[0, 0] == int(np.argmax(gap)) and len(table) == 4
    assert list(table.columns)[:3] == ["request", "input", "shared"]
    assert c_r["visible"] and c_c["visible"]
    np.testing.assert_allclose(f_c.data[0].y, study["cov"].any_share)
    np.testing.assert_allclose(f_c.data[2].y, study["cov"].device_share)
    assert why == app.HITS.text("en", "x_pick")
    # one click: the row's request explained for both engines
    i = app.pick_row(study, _select(0))
    assert i == table.iloc[0, 0]
    (text,) = app.explain_request(study, i)
    assert f"**Request {i}**" in text and "| SGLang | vLLM |" in text
    row = (
        f"| restored from a saved state (cached) | {r.sglang.cached[i]:,} | {r.vllm.cached[i]:,} |"
    )
    assert row in text
    match = f"{r.token_match[i]:,}"
    assert f"| = the shared prefix | **{match}** | **{match}** |" in text


def test_token_ids_upload_hashes_with_the_block_size(tmp_path: Path) -> None:
    shared = list(range(1000))
    rows = [{"token_ids": shared + list(range(5000 + 100 * i, 5050 + 100 * i))} for i in range(3)]
    path = _write(tmp_path, "tokens.jsonl", rows)
    md, *_, study = app.analyse(path, "token-ids", True, 64)
    assert study["trace"].block_size == 64 and "(token-id JSONL): 3 requests" in md
    # 1000 shared tokens = 15 full 64-token blocks (960), the 16th block differs
    assert study["r"].token_match.tolist() == [0, 960, 960]


def test_a_sorted_table_click_reads_the_row_itself(tmp_path: Path) -> None:
    study = app.analyse(_write(tmp_path, "mine.jsonl", MOONCAKE))[-1]
    assert app.pick_row(study, _select(0, None)) == study["worst"][0]
    sorted_row = gr.SelectData(None, {"index": [0, 1], "value": 1, "row_value": [2, 600]})
    assert app.pick_row(study, sorted_row) == 2
    assert isinstance(app.pick_row(study, _select(99)), type(gr.skip()))


def test_malformed_file_refused_naming_its_line(tmp_path: Path) -> None:
    bad = [*MOONCAKE[:2], {"timestamp": 7, "input_length": 0, "hash_ids": [9]}]
    path = _write(tmp_path, "broken.jsonl", bad)
    with pytest.raises(gr.Error) as e:
        app.analyse(path, "mooncake", False)
    msg = str(e.value.message)
    assert "broken.jsonl: line 3: 'input_length' must be in [1, " in msg
    assert str(tmp_path) not in msg  # the reader's file name, not the server's directory
    # the validator reads the file first: the page is left as it was, the message on the file
    checks = app.validator()(path, "mooncake", False, 512, 0, "English")
    assert [c["is_valid"] for c in checks] == [False, True, True, True, True, True]
    assert "broken.jsonl: line 3: 'input_length'" in checks[0]["message"]
    assert all(c["is_valid"] for c in app.validator()(path, "mooncake", True, 512, 0, "English"))
    # skipping: the rest is analysed and the skipped row reported with its reason
    md, *_, study = app.analyse(path, "auto", True)
    assert len(study["trace"]) == 2
    assert "**1 malformed row skipped**" in md and "line 3: 'input_length'" in md


def test_oversize_file_refused_naming_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.truncate(app.MAX_UPLOAD_BYTES + 1)  # sparse: no disk written
    with pytest.raises(gr.Error, match=r"the upload cap is 32 MiB"):
        app.analyse(str(path))
    checks = app.validator()(str(path), "auto", True, 512, 0, "中文")
    assert not checks[0]["is_valid"] and "上传上限是 32 MiB" in checks[0]["message"]
    assert all(c["is_valid"] for c in checks[1:])


def test_lengths_only_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "burst.csv"
    path.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "0,ChatGPT,100,10,110,Conversation log\n5,ChatGPT,300,20,320,Conversation log\n"
    )
    md, f_r, c_r, table, why, f_c, c_c, study = app.analyse(str(path), language="中文")
    assert "**这个文件只给出长度**" in md and "无法据此计算未命中原因" in md
    assert "平均输入 200 个 token" in md
    assert study["r"] is None and len(table) == 0
    assert not f_r.data and not f_c.data  # empty figures: no made-up numbers
    assert c_r == {"visible": False, "__type__": "update"} == c_c
    assert app.explain_request(study, 0, language="中文") == (app.HITS.text("zh", "x_pick"),)


def test_default_is_the_bundled_trace() -> None:
    md, *_, table, _why, _f, _c, study = app.analyse()
    assert "bundled Mooncake conversation trace, first 1,000 requests" in md
    assert len(table) == app.TABLE_ROWS and study["name"] is None


def test_bad_inputs_refused() -> None:
    checks = app.validator()(None, "parquet", True, 8, -1, "English")
    assert [c["is_valid"] for c in checks] == [True, False, True, False, False, True]
    with pytest.raises(gr.Error, match="block size"):
        app.analyse(None, "auto", True, 8)


@pytest.mark.parametrize("mod", [checkpoint_density, state_transfer])
def test_both_apps_carry_the_panel(mod) -> None:
    demo = mod.build()
    ids = {getattr(b, "elem_id", None) for b in demo.blocks.values()}
    assert {f"{mod.NAME}-hits-file", f"{mod.NAME}-hits-table", f"{mod.NAME}-hits-coverage"} <= ids
    names = {d.api_name for d in demo.fns.values()}
    assert {f"{mod.NAME}_hits", f"{mod.NAME}_hits_explain"} <= names


def test_server_refuses_an_upload_over_the_cap() -> None:
    assert ui.LAUNCH_KWARGS["max_file_size"] == app.MAX_UPLOAD_BYTES
    with gr.Blocks() as demo:
        gr.File()
    with ui.launched(demo) as url:
        small = httpx.post(f"{url}gradio_api/upload", files={"files": ("a.jsonl", b"{}\n")})
        assert small.status_code == 200
        big = b"x" * (app.MAX_UPLOAD_BYTES + 1)
        r = httpx.post(f"{url}gradio_api/upload", files={"files": ("b.jsonl", big)}, timeout=60)
        assert r.status_code == 413


def test_upload_through_the_api(tmp_path: Path) -> None:
    from gradio_client import Client, handle_file

    path = _write(tmp_path, "mine.jsonl", MOONCAKE)
    with ui.launched(state_transfer.build()) as url:
        c = Client(url, verbose=False, download_files=str(tmp_path / "dl"))
        out = c.predict(handle_file(path), "auto", True, 512, 0, api_name="/state_transfer_hits")
        assert "**`mine.jsonl`** (Mooncake / aiperf JSONL): 4 requests" in out[0]
        rows = out[3]["data"]
        # the study kept in the session: the API explains a request of the uploaded trace
        text = c.predict(rows[0][0], api_name="/state_transfer_hits_explain")  # one output
        assert f"**Request {rows[0][0]}**" in text
        with pytest.raises(Exception, match="block size"):
            c.predict(handle_file(path), "auto", True, 8, 0, api_name="/state_transfer_hits")


def test_an_explanation_names_its_facts(tmp_path: Path) -> None:
    # the hand-built prompts of tests/test_hit_explain.py (SGLang, 16-token blocks): request 2
    # restores 960 of its 2000 shared tokens from request 1's branch state, and request 0's
    # next state (2944) lies past what it shares; request 6 restores 512 and nobody saved a
    # state past it on its path
    def tok(start: int, n: int) -> list[int]:
        return list(range(start, start + n))

    a, s, v = tok(0, 3000), tok(100_000, 512), tok(200_000, 2500)
    prompts = [a, a[:1000] + tok(10_000, 2000), a[:2000] + tok(20_000, 500)]
    prompts += [a[:2500] + tok(30_000, 400), s + tok(300_000, 100), s + v]
    prompts.append(s + v[:2000] + tok(400_000, 300))
    rows = [{"token_ids": p, "timestamp": i} for i, p in enumerate(prompts)]
    study = app.analyse(_write(tmp_path, "t.jsonl", rows), "token-ids", True, 16)[-1]
    (en,) = app.explain_request(study, 2)
    assert "| restored from a saved state (cached) | 960 |" in en
    assert "| + no state up to the deepest reusable grid point | 1,024 |" in en
    assert "| + reusable, short of one grid unit | 16 |" in en
    assert "**SGLang**: restores 960 tokens from the state request 1 saved. No state in the " in en
    assert "at 2,944 (saved by request 0), lies past the 2,000 tokens this request shares" in en
    (zh,) = app.explain_request(study, 2, language="中文")
    assert "**SGLang**：从请求 1 保存的状态恢复 960 个 token。接下来共享的 1,024 个" in zh
    (en,) = app.explain_request(study, 6)
    assert "no earlier request saved a state on this path past 512 (request 5 was the " in en


def test_upload_messages_speak_of_the_file_format(tmp_path: Path) -> None:
    # one request: singular words; a chain break said without "follows -1"
    rows = [MOONCAKE[0], {**MOONCAKE[1], "hash_ids": [2, 9, 4]}]
    md = app.analyse(_write(tmp_path, "one.jsonl", rows))[0]
    assert "(Mooncake / aiperf JSONL): 1 request, block" in md
    assert "**1 malformed row skipped**" in md
    assert "id 2 opens this row but came after id 1 earlier" in md and "follows" not in md
    md = app.analyse(_write(tmp_path, "one.jsonl", rows), language="中文")[0]
    assert "：1 个请求，" in md and "**跳过了 1 个格式错误的行**" in md

    def refused(name: str, lines: list, fmt: str = "auto", lang: str = "English") -> str:
        checks = app.validator()(_write(tmp_path, name, lines), fmt, True, 512, 0, lang)
        assert [c["is_valid"] for c in checks] == [False, True, True, True, True, True]
        return checks[0]["message"]

    # a format that cannot be told: the File format dropdown, not an API argument
    msg = refused("x.jsonl", ['{"x": 1}'])
    assert msg == (
        "x.jsonl: line 1 looks like none of the formats this panel reads: choose the file's "
        "format in File format"
    )
    msg = refused("both.jsonl", ['{"token_ids": [1], "input_length": 1}'])
    assert msg == (
        "both.jsonl: line 1 fits more than one format (Mooncake / aiperf JSONL, token-id JSONL): "
        "choose one in File format"
    )
    assert "“文件格式”" in refused("x.jsonl", ['{"x": 1}'], lang="中文")
    # no readable row: one reason said once for its lines, and the format it was read as
    msg = refused("bad.jsonl", ['{"timestamp": 0'] * 6, "mooncake")
    assert msg == (
        "bad.jsonl: no row reads as Mooncake / aiperf JSONL (6 rows skipped: lines 1-6: "
        "invalid JSON (Expecting ',' delimiter)); is File format right?"
    )
