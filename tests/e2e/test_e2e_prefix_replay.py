"""prefix_replay in headless Chromium: default render, stepping and play, a new request, a bad
input, the language switch."""

from __future__ import annotations

from kda_core.studies import prefix_replay as pr

APP = "prefix_replay"
N = "prefix_replay"


def test_page(app_url, ui):
    last = pr.run_scenario().requests[-1].replay_steps.positions.size - 1  # the default request
    ui.goto(app_url)
    for fig in ("timeline", "replay", "tree", "pools"):
        ui.wait_plot(f"{N}-{fig}")
    assert not ui.page.locator(f"#{N}-drift").is_visible()  # hidden until the toggle is on
    assert not ui.page.locator(f"#{N}-drift-csv").is_visible()
    old = ui.figure(f"{N}-replay")
    assert f"Replay step 0/{last}" in old

    ui.click("Next ▶")
    step1 = ui.wait_new_figure(f"{N}-replay", old)
    assert f"Replay step 1/{last}" in step1

    ui.click("▶ Play")  # the timer steps to the match, where the distance is exactly 0
    ui.page.get_by_text(f"Step {last} / {last}").wait_for()
    assert "= the token match; distance 0" in ui.figure(f"{N}-replay")

    tl = ui.figure(f"{N}-timeline")
    ui.fill(f"{N}-text", "System: You are Kimi, a concise assistant. 你好！")
    ui.click("Send")
    new_tl = ui.wait_new_figure(f"{N}-timeline", tl)
    assert "#4" in new_tl
    ui.page.locator(f"#{N}-summary").get_by_text("Request #4").wait_for()
    ui.fill(f"{N}-text", "System: You are Kimi, a concise assistant. 你好！再见。")
    ui.click("Send")  # served incrementally on this tab's engine
    new_tl = ui.wait_new_figure(f"{N}-timeline", new_tl)
    assert "#5" in new_tl
    ui.page.locator(f"#{N}-summary").get_by_text("Request #5").wait_for()

    ui.allow_validation_errors()
    figs = (f"{N}-timeline", f"{N}-replay", f"{N}-tree", f"{N}-pools")
    before = ui.figures(*figs)
    summary = ui.page.inner_text(f"#{N}-summary")
    ui.fill(f"{N}-spacing", 0)
    ui.click("Apply settings")
    ui.expect_invalid(f"{N}-spacing", "checkpoint spacing (tokens) must be an integer in [1, 1024]")
    ui.fill(f"{N}-spacing", 3.5)  # an integer field: rejected, never rounded silently
    ui.click("Apply settings")
    ui.expect_invalid(f"{N}-spacing", "must be an integer in [1, 1024], got 3.5")
    ui.fill(f"{N}-text", "")
    ui.click("Send")
    ui.expect_invalid(f"{N}-text", "request text must be non-empty")
    ui.page.wait_for_timeout(500)
    # the rejected inputs left every output as it was: no "Error" badge, no blanked figure
    assert ui.error_badges() == 0
    assert ui.figures(*figs) == before and all(before.values())
    assert ui.page.inner_text(f"#{N}-summary") == summary

    ui.fill(f"{N}-spacing", 16)
    ui.click("Apply settings")
    again = ui.wait_new_figure(f"{N}-timeline", new_tl)
    assert "#5" in again  # the same session, re-served

    ui.page.get_by_role("radio", name="中文").check()
    ui.page.get_by_text("前缀命中不等于状态命中").wait_for()
    ui.page.get_by_text("检查点策略").wait_for()
    # the figures redraw in Chinese: titles, and the table / radio options / accordion
    ui.wait_title(f"{N}-timeline", "Token 时间线")
    ui.wait_title(f"{N}-tree", "radix 树")
    ui.wait_title(f"{N}-replay", "重放步")
    ui.wait_title(f"{N}-pools", "每个请求之后的池")
    ui.page.locator(f"#{N}-summary").get_by_text("恢复点").first.wait_for()
    ui.page.get_by_text("请求持有恢复锁期间").wait_for()
    ui.page.get_by_text("缓存设置").wait_for()
    ui.click("下一步 ▶")  # stepping stays in Chinese
    ui.wait_title(f"{N}-replay", "重放步 1/")
    ui.page.get_by_role("radio", name="English").check()
    ui.wait_title(f"{N}-timeline", "Token timeline")


def test_text_boxes_do_not_hide_data(app_url, ui):
    ui.goto(app_url)
    for fig in ("timeline", "replay", "tree", "pools"):
        ui.wait_plot(f"{N}-{fig}")
        assert ui.overlaps(f"{N}-{fig}") == [], fig


def test_batch_view(app_url, ui):
    """The batch view renders by default; a new batch redraws; a bad batch input is
    rejected on its field with the page unchanged; the pool figure redraws in Chinese."""
    ui.goto(app_url)
    figs = (f"{N}-batch-phases", f"{N}-batch-pool", f"{N}-pools")
    for fig in figs:
        ui.wait_plot(fig)
    assert "capped to 3 by the mamba state cache" in ui.page.inner_text(f"#{N}-batch-summary")
    old = ui.figure(f"{N}-batch-pool")
    assert "peak 3 running" in old
    ui.page.locator(f"#{N}-batch-strategy").get_by_label("no_buffer").check()
    ui.click("Serve together")
    new = ui.wait_new_figure(f"{N}-batch-pool", old)
    assert "no_buffer" in new and "max running requests 5" in new  # 16 slots // 3 per request
    ui.rejects(f"{N}-batch-slots", 4, "Serve together",
               "state slots must be an integer in [5, 64], got 4", figs)  # fmt: skip
    ui.fill(f"{N}-batch-slots", 16)  # back in range: the next check is the arrivals' count
    ui.rejects(f"{N}-batch-arrivals", "0, 1", "Serve together",
               "arrival steps must give one step in [0, 64] per request (6)", figs)  # fmt: skip
    ui.fill(f"{N}-batch-arrivals", "0, 0, 0, 2, 4, 6")
    # a small KV pool: decoding requests are retracted, and the swimlane shows it
    ui.fill(f"{N}-batch-new", 16)
    ui.fill(f"{N}-batch-kv", 200)
    old = ui.figure(f"{N}-batch-phases")
    assert '"retracted"' not in old
    ui.click("Serve together")
    new = ui.wait_new_figure(f"{N}-batch-phases", old)
    assert '"name":"retracted"' in new
    summary = ui.page.inner_text(f"#{N}-batch-summary")
    assert "KV pool 200 tokens" in summary and "retract_decode" in summary
    ui.rejects(f"{N}-batch-kv", -1, "Serve together",
               "KV pool in tokens (0 = no limit) must be an integer in [0, 65536], got -1",
               figs)  # fmt: skip
    ui.fill(f"{N}-batch-kv", 200)
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-batch-pool", "同一个状态池随时间的变化")
    ui.wait_title(f"{N}-batch-phases", "批处理")
    assert '"name":"被撤回"' in ui.figure(f"{N}-batch-phases")
