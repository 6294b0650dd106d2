"""The one message catalog (``words/``): importable without a UI library, one ``Catalog``
class for apps and plots, every message in both languages with the same placeholders, and a
study's codes worded (or shown as the code when the catalog has no word for it)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import words
from apps.ui.registry import ORDER
from words.catalog import Catalog, T

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted(m.name for m in pkgutil.iter_modules(words.__path__))


def catalogs() -> list[Catalog]:
    """Every catalog the words modules define (``MSG``, ``COMMON``, ...)."""
    mods = [importlib.import_module(f"words.{m}") for m in MODULES]
    return [v for m in mods for v in vars(m).values() if isinstance(v, Catalog)]


def test_the_catalog_loads_no_ui_library() -> None:
    """A plot script imports its words without gradio or plotly coming along."""
    code = (
        "import sys, importlib\n"
        f"for m in {MODULES!r}: importlib.import_module('words.' + m)\n"
        "print(sorted(m for m in ('gradio', 'plotly', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_apps_and_plots_share_one_catalog_class() -> None:
    from apps.ui import catalog as apps_catalog
    from apps.ui.page import Page  # noqa: F401 - the page shell builds on the same class

    assert apps_catalog.Catalog is Catalog and apps_catalog.T is T


def test_every_message_has_both_languages() -> None:
    found = catalogs()
    assert found, "no catalog in words/"
    for c in found:
        assert words.catalog.problems(c.messages()) == [], c.name


def test_a_code_is_worded_or_shown_as_it_is() -> None:
    c = Catalog("x", {"var_int8": ("INT8 per channel", "每通道 INT8"), "n": ("{n:,}", "{n:,}")})
    zh = c.lang("zh")
    assert zh.word("var", "int8") == "每通道 INT8"
    assert zh.word("var", "SGLang") == "SGLang"  # a name: no message, shown as given
    assert c.lang("en").word("var", "int8") == "INT8 per channel"
    with pytest.raises(KeyError):  # a wrong placeholder is not mistaken for a missing word
        Catalog("y", {"var_a": ("{n}", "{n}")}).lang("en").word("var", "a")


def test_the_language_follows_the_switch_or_a_code() -> None:
    c = Catalog("x", {"k": ("yes", "是")})
    assert [c.text(x, "k") for x in ("English", "中文", "en", "zh", None)] == [
        "yes",
        "是",
        "yes",
        "是",
        "yes",
    ]


# ---- the density notes: kda_core's codes and numbers, worded once for the page and the plot


def _notes():  # noqa: ANN202 - kda_core.studies.density.ReplayNotes
    from kda_core.studies.density import ReplayNotes, ReplayTrend

    falls = ReplayTrend("8 GiB", "falls", 1024, 16384, 3641.0, 120.0, -1.23, 500, 3)
    slower = ReplayTrend("unlimited", "slower", 1024, 16384, 300.0, 900.0, 0.41, 0, 0)
    one = ReplayTrend("64 GiB", "one_k", 2048, 2048, 77.0, 77.0, float("nan"), 0, 0)
    return ReplayNotes((falls, slower, one), falls, True, (512.0, 8192.0))


def test_the_density_headline_groups_budgets_by_trend() -> None:
    from words.checkpoint_density import MSG
    from words.phrases import headline

    n = _notes()
    assert headline(n, MSG.lang("en")) == (
        "A checkpoint every K tokens: memory ~1/K; replay per hit grows slower than K "
        "(unlimited); falls as K grows (8 GiB); has one K only (64 GiB)"
    )
    zh = headline(n, MSG.lang("zh"))
    assert "增长慢于 K（不限）；随 K 增大而下降（8 GiB）；只有一个 K（64 GiB）" in zh


def test_the_density_note_says_each_curve_and_why() -> None:
    from words.checkpoint_density import MSG
    from words.phrases import replay_note

    n, en = _notes(), MSG.lang("en")
    lines = replay_note(n, en).split("\n")
    assert lines[0] == (
        "8 GiB: falls 3,641 → 120 tokens over K = 1,024–16,384 (log-log slope -1.23)."
    )
    assert lines[1].startswith("unlimited: grows slower than K, 300 → 900 tokens")
    assert "a slope needs two or more K" in lines[2] and "nan" not in lines[2]
    assert "(500 evictions at K = 1,024 vs 3 at K = 16,384 for 8 GiB)" in lines[3]
    assert lines[4].startswith("Without a budget nothing is evicted")
    assert lines[5].endswith("512–8,192 tokens.")
    short = replay_note(n, en, detail=False).split("\n")  # the one-K budget has no short line
    assert short == [
        "8 GiB: falls as K grows, 3,641 → 120 tokens (slope -1.23)",
        "unlimited: grows slower than K, 300 → 900 tokens (slope 0.41)",
    ]
    zh = replay_note(n, MSG.lang("zh"))
    assert "8 GiB：随 K 增大而下降" in zh and "不限：增长慢于 K" in zh and "nan" not in zh


@pytest.mark.parametrize(("lang", "width"), [("en", 40), ("zh", 22)])
def test_a_wrapped_note_never_splits_a_number(lang: str, width: int) -> None:
    from words.checkpoint_density import MSG
    from words.phrases import replay_note

    lines = replay_note(_notes(), MSG.lang(lang), width=width).split("\n")
    assert all(len(line) <= width for line in lines)
    for a, b in zip(lines, lines[1:]):  # "3,641" or "1.23" never broken (a sentence's "." may)
        assert not (a[-1:].isdigit() or a[-1:] == ",") or not (b[:1].isdigit() or b[:1] in ".,")


def test_the_trace_panel_and_the_figures_name_a_reason_alike() -> None:
    """Figures and pages say the same thing: the static figures' catalog is the trace panel's
    plus their own ``fig_*`` keys, so a reason is worded once for both (it once said 块 on the
    page, block in the figure)."""
    from kda_core.studies.hit_reasons import REASONS
    from words.trace_hits import HITS, MSG

    assert HITS in MSG.bases and all(k.startswith("fig_") for k in MSG.own)
    assert {f"r_{r}" for r in REASONS} <= set(HITS.own)
    zh = MSG.lang("zh")
    assert zh.word("r", "below_one_block") == "共享前缀不足一个块"
    assert zh.word("r", "evicted_state_budget") == "被状态预算驱逐"


def test_every_scenario_has_a_title() -> None:
    from kda_core.studies.prefix_replay import SCENARIOS
    from words.prefix_replay import MSG

    en, zh = MSG.lang("en"), MSG.lang("zh")
    assert all(en.word("scen", n) != n and zh.word("scen", n) != n for n in SCENARIOS)


@pytest.mark.parametrize("name", ORDER)
def test_a_hub_card_says_the_pages_title(name: str) -> None:
    """The card's words are the app's catalog's (``title``, ``blurb``), and its title is the
    one the page's header shows."""
    from apps.ui.registry import app_info

    info, words_msg = app_info(name), importlib.import_module(f"words.{name}").MSG
    assert (info.title, info.title_zh) == words_msg.pair("title")
    assert (info.blurb, info.blurb_zh) == words_msg.pair("blurb")
    page = importlib.import_module(f"apps.{name}").MSG
    assert page.pair("title") == words_msg.pair("title")


def test_bold_closes_in_both_languages() -> None:
    """Every message drawn as Markdown (CommonMark, placeholders filled) bolds what it marks:
    no ``**`` is left on the page. A closing ``**`` after CJK punctuation and before a CJK
    character or a number (``**推荐：**第``) is not a closing delimiter, so the reader saw the
    asterisks; the colon goes outside the bold (``**推荐**：第``)."""
    import re

    markdown_it = pytest.importorskip("markdown_it")
    md = markdown_it.MarkdownIt("commonmark")
    left = []
    for cat in catalogs():
        for key, pair in cat.messages().items():
            for text in pair:
                html = md.render(re.sub(r"\{[^{}]*\}", "0", text))
                if "**" in re.sub(r"<code>.*?</code>", "", html, flags=re.S):
                    left.append(f"{cat.name}.{key}: {text[:60]!r}")
    assert not left, left
