"""checkpoint_density in headless Chromium: default sweep, new intervals, a bad input."""

from __future__ import annotations

APP = "checkpoint_density"


FIGS = ("tradeoff", "hits", "timeline", "pareto", "policies")
ZH_TITLES = {"hits": "token 命中不等于状态命中", "pareto": "显存与状态命中：Pareto 前沿",
             "policies": "同一预算下的各策略", "timeline": "trace 上的累计命中率"}  # fmt: skip


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"checkpoint_density-{fig}")
    old = ui.figure("checkpoint_density-tradeoff")

    ui.fill("checkpoint_density-intervals", "2048, 8192, 32768")
    ui.click("Run")
    new = ui.wait_new_figure("checkpoint_density-tradeoff", old)
    assert "32768" in new

    figs = tuple(f"checkpoint_density-{f}" for f in FIGS)
    ui.rejects("checkpoint_density-intervals", "1000", "Run",
               "interval K must be a multiple of the block size 512", figs)  # fmt: skip

    ui.fill("checkpoint_density-intervals", "4096")
    ui.click("Run")
    ui.wait_new_figure("checkpoint_density-tradeoff", new)


def test_chinese_figures_stale_note_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"checkpoint_density-{fig}")
        assert ui.overlaps(f"checkpoint_density-{fig}") == [], fig
    ui.page.get_by_role("radio", name="中文").check()
    for fig, title in ZH_TITLES.items():
        ui.wait_title(f"checkpoint_density-{fig}", title)
    ui.page.get_by_text("随 K 增大而下降").first.wait_for()  # the study's own Chinese note
    ui.page.get_by_role("radio", name="English").check()
    ui.wait_title("checkpoint_density-hits", "A token hit is not a state hit")
    ui.page.locator("#checkpoint_density-workload input").click()
    ui.page.get_by_role("option", name="multi-turn chat (synthetic)").click()
    ui.page.locator("#checkpoint_density-stale").get_by_text("previous workload").wait_for()
