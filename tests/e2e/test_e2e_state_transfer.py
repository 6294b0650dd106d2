"""state_transfer in headless Chromium: defaults drawn, refusals, a splice, bad inputs that leave
the page as it was, the language switch re-drawing figures in 中文, no text box over a data trace
(screenshots of both languages go to pytest's tmp dir)."""

from __future__ import annotations

import os

APP = "state_transfer"
N = "state_transfer"
FIGS = tuple(f"{N}-{f}" for f in ("anatomy", "timeline", "splice", "tiers"))


def test_page(app_url, ui, tmp_path):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(fig)
    ui.page.get_by_text("identical to one instance").wait_for()

    ui.click("Offer to mismatched instances")
    table = ui.page.locator(f"#{N}-refusals")
    table.get_by_text("model_fingerprint", exact=True).wait_for()
    for field in ("tokenizer_fingerprint", "layout", "corrupt", "truncated"):
        table.get_by_text(field, exact=True).first.wait_for()

    csv_btn = ui.page.locator(f"#{N}-splice-csv")
    assert csv_btn.count() == 0 or not csv_btn.is_visible()  # no file before a splice
    old = ui.figure(f"{N}-splice")
    ui.click("Force a splice")
    new = ui.wait_new_figure(f"{N}-splice", old)
    assert "spliced restore" in new
    csv_btn.wait_for(state="visible")
    with ui.page.expect_download() as dl:
        csv_btn.click()
    with open(dl.value.path(), encoding="utf-8") as f:
        assert f.readline().strip() == "step,drift_clean,drift_splice"

    summary = ui.page.inner_text(f"#{N}-summary")
    refusals = ui.page.inner_text(f"#{N}-refusals")
    ui.rejects(f"{N}-new", 0, "Prefill → decode",
               "new tokens must be an integer in [1, 64], got 0", FIGS)  # fmt: skip
    ui.rejects(f"{N}-tp", 7, "Prefill → decode", "TP must divide K3's 96 KDA heads, got 7", FIGS)
    ui.fill(f"{N}-tp", 8)
    ui.fill(f"{N}-new", 16)
    ui.rejects(f"{N}-req", 5, "Simulate tiers",
               "trace requests must be an integer in [100, 12031], got 5", FIGS)  # fmt: skip
    ui.rejects(f"{N}-ratio", 0, "Simulate tiers", "host / device ratio", FIGS)
    # text B equal to prompt A: the splice would be no splice; refused on text B
    prompt = ui.page.locator(f"#{N}-text textarea").input_value()
    ui.rejects(f"{N}-text-b", prompt, "Force a splice", "prompt B must differ", FIGS)
    assert ui.page.inner_text(f"#{N}-summary") == summary
    assert ui.page.inner_text(f"#{N}-refusals") == refusals
    ui.close_toasts()
    ui.screenshot(os.environ.get("STATE_TRANSFER_SHOT_EN", tmp_path / "en.png"))

    tiers = ui.figure(f"{N}-tiers")
    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("Decode 实例需要同一边界上的三样东西").wait_for()
    zh = ui.wait_new_figure(f"{N}-tiers", tiers)
    assert "状态层级" in zh
    ui.page.get_by_text("拒绝字段").wait_for()
    ui.page.get_by_text("强行拼接", exact=True).wait_for()
    ui.upload_label_clear(f"{N}-hits-file")  # the long 中文 label above the upload icon
    ui.page.get_by_text("主机只保存每个请求的最后一个状态").wait_for()  # why + host adds nothing
    ui.screenshot(os.environ.get("STATE_TRANSFER_SHOT_ZH", tmp_path / "zh.png"))


def test_chinese_figures_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(fig)
    old = ui.figure(f"{N}-splice")
    ui.click("Force a splice")
    ui.wait_new_figure(f"{N}-splice", old)
    for fig in FIGS:
        assert ui.overlaps(fig) == [], fig

    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-anatomy", "一个对象的组成")
    ui.wait_title(f"{N}-timeline", "传输时间线")
    ui.wait_title(f"{N}-splice", "强行拼接")
    ui.wait_title(f"{N}-tiers", "Mooncake trace 上的状态层级")
    ui.page.get_by_text("Mooncake trace 上的存储层级").wait_for()  # the accordion
    ui.page.get_by_text("下载 CSV（对象组成）").wait_for()
    ui.page.get_by_text("已解码 token").first.wait_for(state="attached")  # splice x axis
    for fig in FIGS:
        assert ui.overlaps(fig) == [], fig


def test_placeholders_follow_the_switch(app_url, ui):
    """Before any splice / refusal run, their placeholders switch language too."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-splice")
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-splice", "强行拼接")
    ui.page.get_by_text("请按“交给不匹配的实例”").wait_for()
