"""apps.ui: validation messages, CSV of figure data, figure style, registry, language switch,
offline defaults of the apps package, client plot decoding."""

from __future__ import annotations

import csv
import inspect
import os
import subprocess
import sys
from pathlib import Path

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import pytest

from apps import ui as common
from apps.ui import fonts

ROOT = Path(__file__).resolve().parent.parent


def _rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize(
    ("value", "expected"), [(3, 3), (3.0, 3), ("7", 7), (np.int64(1), 1), (10, 10)]
)
def test_check_int_accepts(value, expected):
    assert common.check_int("K", value, 1, 10) == expected


@pytest.mark.parametrize("value", [0, 11, 2.5, None, "", "abc", True, float("nan"), float("inf")])
def test_check_int_rejects_with_range(value):
    with pytest.raises(gr.Error) as e:
        common.check_int("interval K", value, 1, 10)
    assert "interval K must be an integer in [1, 10]" in e.value.message


@pytest.mark.parametrize("value", [None, ""])  # what a cleared Number / Textbox sends
def test_an_empty_field_is_named_as_such(value):
    for check in (common.check_int, common.check_float):
        with pytest.raises(gr.Error) as e:
            check("interval K", value, 1, 10)
        assert e.value.message.endswith("in [1, 10], got an empty field")


def test_check_float_and_choice():
    assert common.check_float("ratio", "0.5", 0.01, 10) == 0.5
    with pytest.raises(gr.Error, match=r"ratio must be a number in \[0.01, 10\], got 11"):
        common.check_float("ratio", 11, 0.01, 10)
    assert common.check_choice("mode", "lazy", ("eager", "lazy")) == "lazy"
    with pytest.raises(gr.Error, match=r"mode must be one of \['eager', 'lazy'\], got 'x'"):
        common.check_choice("mode", "x", ("eager", "lazy"))


def test_study_errors_maps_value_error_and_keeps_signature():
    @common.study_errors
    def f(a: int, progress: gr.Progress = gr.Progress()):  # noqa: B008
        if a < 0:
            raise ValueError("a must be in [0, 5], got -1")
        return a * 2

    assert f(2) == 4
    with pytest.raises(gr.Error, match=r"a must be in \[0, 5\], got -1"):
        f(-1)
    assert list(inspect.signature(f).parameters) == ["a", "progress"]


def test_write_csv_roundtrip_and_dedup():
    p1 = common.write_csv("fig a/b", {"x": np.array([1, 2, 3]), "y": [0.5, 0.25, 1e-20]})
    assert Path(p1).name.startswith("fig_a_b-") and p1.endswith(".csv")
    assert _rows(p1) == [["x", "y"], ["1", "0.5"], ["2", "0.25"], ["3", "1e-20"]]
    p2 = common.write_csv("fig a/b", {"x": [1, 2, 3], "y": np.array([0.5, 0.25, 1e-20])})
    assert p1 == p2  # same content, same file
    p3 = common.write_csv("fig a/b", {"x": [1, 2, 4], "y": [0.5, 0.25, 1e-20]})
    assert p3 != p1
    with pytest.raises(ValueError, match="equal lengths"):
        common.write_csv("bad", {"x": [1, 2], "y": [1]})


def test_float_cells_are_exact():
    x = 0.1 + 0.2
    p = common.write_csv("exact", {"v": np.array([x])})
    assert float(_rows(p)[1][0]) == x


def test_series_csv_long_format():
    p = common.series_csv(
        "s", {"a": ([1, 2], [10, 20]), "b": (np.array([5]), np.array([7.5]))}, "step", "bytes"
    )
    assert _rows(p) == [
        ["series", "step", "bytes"],
        ["a", "1", "10"],
        ["a", "2", "20"],
        ["b", "5", "7.5"],
    ]
    with pytest.raises(ValueError, match="'a' has 2 x and 1 y"):
        common.series_csv("s", {"a": ([1, 2], [1])})


def test_style_sets_titles_font_and_legend():
    fig = common.style(go.Figure(go.Scatter(x=[1], y=[2])), "T", "x (tokens)", "y (GiB)")
    assert fig.layout.title.text == "T"
    assert fig.layout.xaxis.title.text == "x (tokens)"
    assert fig.layout.yaxis.title.text == "y (GiB)"
    assert fig.layout.font.family == common.FONT
    assert fig.layout.showlegend is True and fig.layout.legend.orientation == "h"
    e = common.empty_figure("nothing", "run first")
    assert e.layout.annotations[0].text == "run first"


def test_palette_is_the_core_palette():
    from kda_core import palette

    assert common.COLORS is palette.COLORS and common.SERIES is palette.SERIES
    for key in ("kv", "state", "conv", "replay", "prefill", "decode", "hit", "free", "checkpoint"):
        assert common.COLORS[key].startswith("#")


def test_registry_lists_every_app():
    names = [a.name for a in common.APPS]
    assert names == [
        "prefix_replay",
        "int8_checkpoint",
        "checkpoint_density",
        "unified_memory",
        "chunk_scan",
        "speculative_replay",
        "memory_planner",
        "state_transfer",
        "context_parallel",
        "fleet_routing",
    ]
    for a in common.APPS:
        assert a.title and a.title_zh and a.blurb and a.blurb_zh
        assert len(a.blurb) <= 100
        assert common.app_info(a.name) is a
    with pytest.raises(KeyError):
        common.app_info("nope")


def test_load_app_skips_missing_module(caplog):
    with caplog.at_level("WARNING", logger="apps"):
        assert common.load_app("does_not_exist_yet") is None
    assert "does_not_exist_yet skipped" in caplog.text
    m = common.load_app("memory_planner")
    assert m is not None and callable(m.build)


@pytest.mark.parametrize("name", ["fleet_routing", "speculative_replay"])  # a folder, a module
def test_an_app_alone_names_its_command(name: str) -> None:
    """``python -m apps.<name> --help`` says the command that runs it, not ``__main__.py``."""
    run = [sys.executable, "-m", f"apps.{name}", "--help"]
    out = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.startswith(f"usage: python -m apps.{name} [-h] [--host HOST]")


def test_plot_from_client_decodes_typed_arrays():
    import base64

    arr = np.array([1.5, 2.5])
    value = {
        "type": "plotly",
        "plot": '{"data": [{"y": {"dtype": "f8", "bdata": "'
        + base64.b64encode(arr.tobytes()).decode()
        + '"}, "x": [1, 2]}], "layout": {}}',
    }
    fig = common.plot_from_client(value)
    assert fig["data"][0]["y"] == [1.5, 2.5] and fig["data"][0]["x"] == [1, 2]
    m = np.arange(6, dtype=np.int32).reshape(2, 3)
    two = {"dtype": "i4", "bdata": base64.b64encode(m.tobytes()).decode(), "shape": "2, 3"}
    assert common.plot_from_client({"plot": {"z": two}})["z"] == m.tolist()


def test_package_sets_offline_defaults_before_numpy():
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GRADIO_ANALYTICS_ENABLED",
            "HF_HUB_OFFLINE",
            "HF_HUB_DISABLE_TELEMETRY",
            "OPENBLAS_NUM_THREADS",
        )
    }
    code = (
        "import sys, os, apps; assert 'numpy' not in sys.modules; "
        "print(os.environ['GRADIO_ANALYTICS_ENABLED'], os.environ['HF_HUB_OFFLINE'], "
        "os.environ['HF_HUB_DISABLE_TELEMETRY'], os.environ['OPENBLAS_NUM_THREADS'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "1", "1", "1"]
    env["OPENBLAS_NUM_THREADS"] = "2"  # setdefault: the caller's value wins
    code2 = "import os, apps; print(os.environ['OPENBLAS_NUM_THREADS'])"
    out = subprocess.run(
        [sys.executable, "-c", code2], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "2"


def test_clip_text_cuts_long_values():
    assert common.clip_text("abc") == "'abc'"
    long = list(range(2000))
    out = common.clip_text(long)
    assert len(out) < 70 and out.startswith("[0, 1, 2") and f"({len(repr(long)):,} chars)" in out
    with pytest.raises(gr.Error) as e:
        common.check_float("ratio", "9" * 5000, 0.01, 10)
    assert len(e.value.message) < 120


def test_study_errors_cuts_long_messages():
    @common.study_errors
    def f() -> None:
        raise ValueError("x must be small, got " + "1, " * 3000)

    with pytest.raises(gr.Error) as e:
        f()
    assert len(e.value.message) == 300 and e.value.message.endswith("…")


def test_log_axis_decades_or_given_ticks():
    fig = go.Figure(go.Scatter(x=[1, 10, 1000], y=[1, 2, 3]))
    common.log_axis(fig, "x")
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.dtick == 1
    common.log_axis(fig, "y", [16, 64, 1024, 64, 2_000_000])
    assert fig.layout.yaxis.tickvals == (16.0, 64.0, 1024.0, 2_000_000.0)
    assert fig.layout.yaxis.ticktext == ("16", "64", "1.02k", "2M")
    with pytest.raises(ValueError, match="axis must be"):
        common.log_axis(fig, "z")


def test_vline_and_hline_labels_sit_on_their_lines():
    from plotly.subplots import make_subplots

    fig = go.Figure(go.Scatter(x=[1, 1000], y=[1e-18, 1e-10]))
    fig.update_xaxes(type="log")
    common.vline(fig, 250.0, "balanced", log=True)
    common.hline(fig, 2.2e-16, "eps", log=True)
    v, h = fig.layout.annotations
    assert v.text == "balanced" and v.x == pytest.approx(np.log10(250.0), abs=1e-12)
    assert v.xref == "x" and v.yref == "paper" and v.y == 1.0
    assert h.y == pytest.approx(np.log10(2.2e-16), abs=1e-12) and h.xref == "paper"
    assert [s.x0 for s in fig.layout.shapes][0] == 250.0
    sub = make_subplots(rows=1, cols=2)
    common.vline(sub, 3.0, "lin", row=1, col=2)
    assert sub.layout.annotations[0].xref == "x2" and sub.layout.annotations[0].x == 3.0
    with pytest.raises(ValueError, match="x must be > 0"):
        common.vline(fig, 0.0, "bad", log=True)


def test_css_headers_and_bold_weight():
    assert ".kda-metrics th" in common.CSS and "word-break: normal" in common.CSS
    assert "font-weight: 600" in common.CSS


def test_messages_are_plain_and_ranges_exact():
    """No literal quotes around a message that passed through
    ``study_errors`` (gr.Error is a ValueError), and integer bounds printed exactly."""
    import gradio as gr

    from apps import ui as c

    @c.study_errors
    def f(x: object) -> int:
        return c.check_int("seed", x, 0, 2**31 - 1)

    with pytest.raises(gr.Error) as e:
        f(-1)
    assert e.value.message == "seed must be an integer in [0, 2147483647], got -1"


def test_font_stack_is_served_and_covers_chinese():
    """The theme names KDA Sans first (served by the app itself, from matplotlib's own DejaVu
    Sans: every Latin glyph in regular and bold), then system CJK faces; no network font
    (Gradio's IBM Plex SemiBold has 55 glyphs)."""
    css = common.THEME._get_theme_css()
    assert "--font: KDA Sans, DejaVu Sans, WenQuanYi Zen Hei" in css
    assert "IBM Plex" not in css and "@import" not in css
    assert "url(http" not in css  # only inline data: icons
    faces = common.CSS[: common.CSS.index(".gradio-container")]
    assert faces.count("@font-face") == 2 and "http" not in faces
    for path in fonts.FILES.values():
        assert f"url('gradio_api/file={path}')" in faces and path.is_file()


def _switch(demo: gr.Blocks, radio_id: str):  # noqa: ANN202
    """The page's language switch (the private change event of its radio)."""
    cfg = demo.get_config_file()
    radio = next(c["id"] for c in cfg["components"] if c["props"].get("elem_id") == radio_id)
    dep = next(d for d in cfg["dependencies"] if d["targets"][0][0] == radio)
    return demo.fns[dep["id"]].fn


def test_page_switches_labels_options_csv_buttons_and_redraws():
    """One switch: the title, the explanation, every label, button text, option, CSV button
    (naming its figure) and the last drawn outputs, in the chosen language, without computing
    anything again (``compute`` runs once)."""
    from apps.ui.catalog import Catalog
    from apps.ui.page import Page

    cat = Catalog("t", {
        "title": ("Title", "标题"), "intro": ("hello", "你好"), "f_k": ("interval K", "间隔 K"),
        "b_run": ("Run", "运行"), "o_a": ("alpha", "甲"), "o_b": ("beta", "乙"),
        "n_fig": ("token timeline", "token 时间线"), "md": ("{n} runs", "运行 {n} 次"),
    }, common.Catalog("c", {}))  # fmt: skip
    calls = []

    def compute(k: float = 1) -> int:
        calls.append(k)
        return int(k)

    def draw(n: int, t) -> tuple:  # noqa: ANN001
        return (t("md", n=n),)

    with gr.Blocks() as demo:
        page = Page("t", cat)
        box = page.label(gr.Number(1), "f_k")
        run = page.label(gr.Button(), "b_run")
        radio = page.choices(gr.Radio(["a", "b"], value="a"), [("o_a", "a"), ("o_b", "b")])
        slot = page.figure_slot("t-fig", "n_fig")
        md = gr.Markdown()
        fn, outs = page.event(compute, draw, [md])
        run.click(fn, [box, page.radio], outs)
        page.finish()
    assert box.label == "interval K" and run.value == "Run"
    assert slot.csv.label == "Download CSV (token timeline)"  # one API name per button
    assert radio.choices == [("alpha", "a"), ("beta", "b")]
    out = fn(3, "中文")
    assert out[0] == "运行 3 次" and calls == [3]
    switch = _switch(demo, "t-lang")
    zh = switch("中文", out[-1])
    by = dict(zip(["title", "intro", "box", "run", "csv", "radio", "md"], zh))
    assert by["title"]["value"] == "# 标题" and by["intro"]["value"] == "你好"
    assert by["box"]["label"] == "间隔 K" and by["run"]["value"] == "运行"
    assert by["radio"]["choices"] == [("甲", "a"), ("乙", "b")]
    assert by["csv"]["label"] == "下载 CSV（token 时间线）"
    assert by["md"]["value"] == "运行 3 次" and calls == [3]  # redrawn, not recomputed
    en = switch("English", out[-1])
    assert en[2]["label"] == "interval K" and en[-1]["value"] == "3 runs"


def test_messages_render_in_the_language_of_the_call():
    """A validation message is a catalog message: English by default, 中文 through a call
    whose ``language`` is 中文 (``study_errors``) and through a validator whose last input is
    the switch (``guard``)."""
    from apps.ui import guard

    @common.study_errors
    def f(x: object, language: str = "English") -> int:
        return common.check_int("seed", x, 0, 9)

    with pytest.raises(gr.Error) as e:
        f(12, language="中文")
    assert e.value.message == "seed必须是 [0, 9] 内的整数，收到 12"
    with pytest.raises(gr.Error) as e:
        f(12)
    assert e.value.message == "seed must be an integer in [0, 9], got 12"
    v = guard.validator(lambda x: common.check_int("seed", x, 0, 9))
    assert v(12, "中文")[0]["message"] == "seed必须是 [0, 9] 内的整数，收到 12"
    assert v(None, "English")[0]["message"].endswith("got an empty field")

    @common.study_errors
    def core(language: str = "English") -> None:
        raise ValueError("spec must have MLA layers")  # a kda_core message: kept, wrapped

    with pytest.raises(gr.Error) as e:
        core(language="中文")
    assert e.value.message == "输入被拒绝，计算代码的原话是：“spec must have MLA layers”"
