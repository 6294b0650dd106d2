"""unified_memory in headless Chromium: default replay, a new run, play, a bad input."""

from __future__ import annotations

APP = "unified_memory"


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in ("buffer", "frontiers", "running", "ratio-fig"):
        ui.wait_plot(f"unified_memory-{fig}")
    old = ui.figure("unified_memory-running")

    ui.fill("unified_memory-nchat", 150)
    ui.click("Run")
    new = ui.wait_new_figure("unified_memory-running", old)

    buf = ui.figure("unified_memory-buffer")
    ui.click("Play")
    ui.wait_new_figure("unified_memory-buffer", buf)  # the timer advanced the step
    ui.click("Pause")

    ui.fill("unified_memory-ratios", "0.5, x")
    ui.click("Run")
    ui.expect_error("static ratio must be a number in [0.01, 100], got 'x'")
    ui.close_toasts()

    ui.fill("unified_memory-ratios", "0.5, 2")
    ui.click("Run")
    ui.wait_new_figure("unified_memory-running", new)
