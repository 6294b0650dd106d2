"""memory_planner in headless Chromium with the bundled EAGLE3 drafter: Kimi K3 is refused on
the EAGLE3 checkbox; no draft tokens refused; Qwen3.8-27B at TP2 with D = 2 shows the drafter's
rows (its own vLLM group and block, SGLang over-reserving), in English then 中文. Screenshots
go to $KDA_SCREENSHOTS when it is set."""

from __future__ import annotations

import os
from pathlib import Path

APP = "memory_planner"


def _shot(ui, name: str) -> None:
    out = os.environ.get("KDA_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        ui.page.locator("#memory_planner-engines").screenshot(path=str(Path(out) / name))


def test_eagle_drafter_rows_and_refusals(app_url, ui):
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    ui.allow_validation_errors()
    ui.page.locator("#memory_planner-eagle input").check()
    ui.fill("memory_planner-draft", 2)
    ui.click("Plan")
    ui.expect_invalid("memory_planner-eagle", "eagle: the lab sizes an EAGLE draft beside")
    model = ui.page.locator("#memory_planner-model input")
    model.click()
    model.fill("qwen3.8-27b-fp8")
    ui.page.get_by_role("option", name="qwen3.8-27b-fp8").first.click()
    ui.fill("memory_planner-tp", 2)
    ui.fill("memory_planner-draft", 0)
    ui.click("Plan")
    ui.expect_invalid("memory_planner-eagle", "needs draft tokens >= 1")
    ui.fill("memory_planner-draft", 2)
    ui.click("Plan")
    engines = ui.page.locator("#memory_planner-engines")
    engines.get_by_text("its own KV cache group (another shape)").wait_for()
    text = engines.inner_text()
    assert "EAGLE3 drafter's KV" in text and "more than the pool takes" in text
    _shot(ui, "memory_planner_eagle_en.png")
    ui.page.get_by_label("中文").check()
    engines.get_by_text("自己的 KV cache 组（形状不同）").wait_for()
    assert "EAGLE3 草稿模型的 KV" in engines.inner_text()
    _shot(ui, "memory_planner_eagle_zh.png")
