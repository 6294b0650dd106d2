"""context_parallel in headless Chromium: default figures, more ranks, documents, a bad input,
the language switch translating labels and figures."""

from __future__ import annotations

APP = "context_parallel"
FIGS = ("steps", "state", "exactness", "bytes", "speedup")


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"context_parallel-{fig}")
    old = ui.figure("context_parallel-steps")
    assert "P = 4, T = 512" in old

    ui.fill("context_parallel-P", 8)
    ui.click("Run")
    new = ui.wait_new_figure("context_parallel-steps", old)
    assert "P = 8, T = 512" in new
    ui.page.get_by_text("8 ranks, 512 tokens").wait_for()

    ui.fill("context_parallel-docs", "100, 300, 112")
    ui.click("Run")
    ui.page.get_by_text("3 documents").wait_for()

    # a rejected input: the message on that input, every figure and the summary kept
    figs = tuple(f"context_parallel-{f}" for f in FIGS)
    ui.rejects(
        "context_parallel-docs",
        "100, 100",
        "Run",
        "document lengths must sum to T = 512, got 200",
        figs,
    )
    assert "3 documents" in ui.page.locator("#context_parallel-summary").inner_text()
    ui.fill("context_parallel-docs", "100, 300, 112")

    steps = ui.figure("context_parallel-steps")
    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("扫描映射，而不是广播 KV").first.wait_for()
    ui.page.get_by_text("查看的 rank").wait_for()
    ui.fill("context_parallel-docs", "")
    ui.page.get_by_role("button", name="运行").click()
    zh = ui.wait_new_figure("context_parallel-steps", steps)
    assert "rank 与扫描步骤" in zh
