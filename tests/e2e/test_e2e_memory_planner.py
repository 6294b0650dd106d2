"""memory_planner in headless Chromium: default figures, a new plan, a bad input, the switch."""

from __future__ import annotations

APP = "memory_planner"


def test_page(app_url, ui):
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    ui.wait_plot("memory_planner-ratio-fig")
    ui.wait_plot("memory_planner-strategies")
    old = ui.figure("memory_planner-context")
    assert "kimi-k3, TP8" in old

    with ui.page.expect_download() as dl:
        ui.page.locator("#memory_planner-context-csv").click()
    path = dl.value.path()
    assert dl.value.suggested_filename.endswith(".csv")
    with open(path, encoding="utf-8") as f:
        assert f.readline().strip() == "context_tokens,mla_kv_bytes,kda_slot_bytes"

    ui.fill("memory_planner-tp", 4)
    ui.click("Plan")
    new = ui.wait_new_figure("memory_planner-context", old)
    assert "kimi-k3, TP4" in new

    ui.fill("memory_planner-tp", 0)
    ui.click("Plan")
    ui.expect_error("TP must be an integer in [1, 64], got 0")
    ui.close_toasts()

    ui.fill("memory_planner-tp", 2)
    ui.click("Plan")
    again = ui.wait_new_figure("memory_planner-context", new)
    assert "kimi-k3, TP2" in again
    rows = ui.page.locator("#memory_planner-history table tbody tr").count()
    assert rows == 3  # load + two good plans in this tab's session

    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("一块 GPU 上 KDA 混合模型的缓存预算").wait_for()
    ui.page.get_by_text("张量并行 TP (1-64)").wait_for()
