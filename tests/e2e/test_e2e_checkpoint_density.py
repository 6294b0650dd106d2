"""checkpoint_density in headless Chromium: default sweep, new intervals, a bad input."""

from __future__ import annotations

APP = "checkpoint_density"


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in ("tradeoff", "hits", "timeline", "pareto", "policies"):
        ui.wait_plot(f"checkpoint_density-{fig}")
    old = ui.figure("checkpoint_density-tradeoff")

    ui.fill("checkpoint_density-intervals", "2048, 8192, 32768")
    ui.click("Run")
    new = ui.wait_new_figure("checkpoint_density-tradeoff", old)
    assert "32768" in new

    ui.fill("checkpoint_density-intervals", "1000")
    ui.click("Run")
    ui.expect_error("interval K must be a multiple of the block size 512")
    ui.close_toasts()

    ui.fill("checkpoint_density-intervals", "4096")
    ui.click("Run")
    ui.wait_new_figure("checkpoint_density-tradeoff", new)
