"""speculative_replay in headless Chromium: default figures, a chosen acceptance, a bad input,
the generation loop, the hits panel with drafts on and off."""

from __future__ import annotations

from kda_core.studies import speculative as sp

APP = "speculative_replay"
N = "speculative_replay"


FIGS = ("verify", "ring", "exactness", "memory", "generation", "acceptance", "hits")


def test_page(app_url, ui):
    a = sp.verify_step().n_accept  # the default verify step's greedy acceptance
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"{N}-{fig}")
    old = ui.figure(f"{N}-ring")
    assert f"the commit keeps {a} of 8 steps" in old

    ui.fill(f"{N}-accept", 6)
    ui.click("Verify and commit")
    new = ui.wait_new_figure(f"{N}-ring", old)
    assert "the commit keeps 6 of 8 steps" in new

    figs = tuple(f"{N}-{f}" for f in FIGS)
    ui.rejects(f"{N}-d", 100, "Verify and commit",
               "draft tokens D must be an integer in [1, 64], got 100", figs)  # fmt: skip
    # an integer field: rejected, never rounded silently
    ui.rejects(f"{N}-d", 3.5, "Verify and commit",
               "draft tokens D must be an integer in [1, 64], got 3.5", figs)  # fmt: skip

    ui.fill(f"{N}-d", 4)
    ui.fill(f"{N}-accept", -1)
    ui.click("Verify and commit")
    again = ui.wait_new_figure(f"{N}-ring", new)
    assert "of 4 steps" in again

    gen = ui.figure(f"{N}-generation")
    ui.fill(f"{N}-new", 16)
    ui.click("Run speculative generation")
    assert "Generation: 16 tokens" in ui.wait_new_figure(f"{N}-generation", gen)


def test_chinese_figures_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"{N}-{fig}")
        assert ui.overlaps(f"{N}-{fig}") == [], fig
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-verify", "验证 D=8")
    ui.wait_title(f"{N}-exactness", "提交精确度")
    ui.wait_title(f"{N}-generation", "生成")
    ui.wait_title(f"{N}-acceptance", "接受率与草稿噪声")
    ui.wait_title(f"{N}-hits", "重发提示词被缓存的 token")


def test_hits_with_the_drop(app_url, ui):
    """The default (multi-module MTP, 3 drafts, lookahead hashes) and then the drop: vLLM's
    drafts-on line changes, the title names the method."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-hits")
    old = ui.figure(f"{N}-hits")
    assert "mtp, 3 drafts" in old
    ui.page.locator(f"#{N}-hits-method").get_by_label("eagle", exact=True).check()
    ui.page.locator(f"#{N}-hits-drop input").check()
    ui.click("Compare hits")
    new = ui.wait_new_figure(f"{N}-hits", old)
    assert "eagle, 3 drafts" in new
