"""chunk_scan in headless Chromium: default figures, new segments, a bad input, a timing run."""

from __future__ import annotations

APP = "chunk_scan"


FIGS = ("agreement", "cost", "groupings", "orders", "maps")
ZH_TITLES = {"agreement": "分块与逐步递推：最大绝对差", "cost": "分块带来什么",
             "groupings": "任意结合方式得到同一个映射", "orders": "顺序很重要",
             "maps": "复合转移矩阵 M"}  # fmt: skip


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"chunk_scan-{fig}")
    old = ui.figure("chunk_scan-groupings")

    ui.fill("chunk_scan-lengths", "8, 24, 4")
    ui.click("Run")
    new = ui.wait_new_figure("chunk_scan-groupings", old)
    assert "A=8, B=24, C=4" in new

    figs = tuple(f"chunk_scan-{f}" for f in FIGS)
    ui.rejects("chunk_scan-chunk", 0, "Run", "chunk size must be an integer in [1, 256], got 0",
               figs)  # fmt: skip

    ui.fill("chunk_scan-chunk", 48)
    timing = ui.figure("chunk_scan-timing")
    ui.click("Measure speed")
    assert "chunked C=48" in ui.wait_new_figure("chunk_scan-timing", timing)
    agreement = ui.figure("chunk_scan-agreement")
    ui.click("Run")
    ui.wait_new_figure("chunk_scan-agreement", agreement)  # the grid now holds C = 48


def test_chinese_figures_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"chunk_scan-{fig}")
        assert ui.overlaps(f"chunk_scan-{fig}") == [], fig
    ui.page.get_by_role("radio", name="中文").check()
    for fig, title in ZH_TITLES.items():
        ui.wait_title(f"chunk_scan-{fig}", title)
    ui.wait_title("chunk_scan-timing", "实测速度")
