"""state_transfer in headless Chromium: defaults drawn, refusals, a splice, a bad input, the
language switch re-drawing figures (screenshots of both languages go to pytest's tmp dir)."""

from __future__ import annotations

import os

APP = "state_transfer"


def test_page(app_url, ui, tmp_path):
    ui.goto(app_url)
    for fig in ("anatomy", "timeline", "tiers"):
        ui.wait_plot(f"state_transfer-{fig}")
    ui.page.get_by_text("identical to one instance").wait_for()

    ui.click("Offer to mismatched instances")
    table = ui.page.locator("#state_transfer-refusals")
    table.get_by_text("model_fingerprint", exact=True).wait_for()
    for field in ("tokenizer_fingerprint", "layout", "corrupt", "truncated"):
        table.get_by_text(field, exact=True).first.wait_for()

    old = ui.figure("state_transfer-splice")
    ui.click("Force a splice")
    new = ui.wait_new_figure("state_transfer-splice", old)
    assert "spliced restore" in new

    ui.fill("state_transfer-new", 0)
    ui.click("Prefill → decode")
    ui.expect_error("new tokens must be an integer in [1, 64], got 0")
    ui.close_toasts()
    ui.screenshot(os.environ.get("STATE_TRANSFER_SHOT_EN", tmp_path / "en.png"))

    tiers = ui.figure("state_transfer-tiers")
    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("Decode 实例需要同一边界上的三样东西").wait_for()
    zh = ui.wait_new_figure("state_transfer-tiers", tiers)
    assert "状态层级" in zh
    ui.page.get_by_text("拒绝字段").wait_for()
    ui.page.get_by_text("强行拼接", exact=True).wait_for()
    ui.screenshot(os.environ.get("STATE_TRANSFER_SHOT_ZH", tmp_path / "zh.png"))
