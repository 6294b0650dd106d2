"""unified_memory in headless Chromium: default replay, a new run, play, a bad input."""

from __future__ import annotations

APP = "unified_memory"


FIGS = ("buffer", "frontiers", "running", "ratio-fig")


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"unified_memory-{fig}")
    old = ui.figure("unified_memory-running")

    ui.fill("unified_memory-nchat", 150)
    ui.click("Run")
    new = ui.wait_new_figure("unified_memory-running", old)

    # before Play: no timer tick can change the buffer between the two snapshots
    figs = tuple(f"unified_memory-{f}" for f in FIGS)
    ui.rejects("unified_memory-ratios", "0.5, x", "Run",
               "static ratio must be a number in [0.01, 100], got 'x'", figs)  # fmt: skip

    buf = ui.figure("unified_memory-buffer")
    ui.click("Play")
    ui.wait_new_figure("unified_memory-buffer", buf)  # the timer advanced the step
    ui.click("Pause")

    ui.fill("unified_memory-ratios", "0.5, 2")
    ui.click("Run")
    ui.wait_new_figure("unified_memory-running", new)


def test_chinese_figures_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"unified_memory-{fig}")
        assert ui.overlaps(f"unified_memory-{fig}") == [], fig
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title("unified_memory-buffer", "的缓冲区")
    ui.wait_title("unified_memory-frontiers", "两端的位置")
    ui.wait_title("unified_memory-running", "运行中的请求随时间变化")
    ui.wait_title("unified_memory-ratio-fig", "平均运行请求数")
