"""chunk_scan in headless Chromium: default figures, new segments, a bad input, a timing run."""

from __future__ import annotations

APP = "chunk_scan"


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in ("agreement", "cost", "groupings", "orders", "maps"):
        ui.wait_plot(f"chunk_scan-{fig}")
    old = ui.figure("chunk_scan-groupings")

    ui.fill("chunk_scan-lengths", "8, 24, 4")
    ui.click("Run")
    new = ui.wait_new_figure("chunk_scan-groupings", old)
    assert "A=8, B=24, C=4" in new

    ui.fill("chunk_scan-chunk", 0)
    ui.click("Run")
    ui.expect_error("chunk size must be an integer in [1, 256], got 0")
    ui.close_toasts()

    ui.fill("chunk_scan-chunk", 48)
    timing = ui.figure("chunk_scan-timing")
    ui.click("Measure speed")
    assert "chunked C=48" in ui.wait_new_figure("chunk_scan-timing", timing)
    agreement = ui.figure("chunk_scan-agreement")
    ui.click("Run")
    ui.wait_new_figure("chunk_scan-agreement", agreement)  # the grid now holds C = 48
