"""prefix_replay in headless Chromium: default render, stepping and play, a new request, a bad
input, the language switch."""

from __future__ import annotations

import re

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


def test_tree_labels_do_not_run_into_each_other(app_url, ui):
    """The radix tree's node labels: none crosses another label or a node (the default
    request's tree, in both languages: the labels are the prompts' text)."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-tree")
    assert ui.page.locator(f"#{N}-tree .textpoint text").count() > 0  # some labels are drawn
    assert ui.label_overlaps(f"{N}-tree") == []
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-tree", "radix 树")
    assert ui.label_overlaps(f"{N}-tree") == []


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


def _step_text(ui) -> str:
    return ui.page.inner_text(f"#{N}-step-info")


def test_pause_stops_play_and_enter_goes_to_a_step(app_url, ui):
    """Pause after Play: the step stops moving and stays (a tick in flight does not restart the
    timer). The replay step field goes to a step on Enter, without leaving the field."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-replay")
    ui.page.locator(f"#{N}-step-info").get_by_text("Step 0 /").wait_for()
    ui.click("▶ Play")
    # any step past 0 (under load a poll can miss the 0.4 s that step 1 is shown)
    ui.page.wait_for_function(
        "id => /Step ([1-9][0-9]*) \\//.test(document.getElementById(id)?.innerText || '')",
        arg=f"{N}-step-info",
    )
    ui.click("❚❚ Pause")
    ui.page.wait_for_timeout(1200)  # let a tick already in flight land
    paused = _step_text(ui)
    ui.page.wait_for_timeout(2500)  # six timer intervals
    assert _step_text(ui) == paused, "Play went on after Pause"
    last = pr.run_scenario().requests[-1].replay_steps.positions.size - 1
    assert f"Step {last} / {last}" not in paused
    old = ui.figure(f"{N}-replay")
    target = 2 if f"Step 4 / {last}" in paused else 4  # a step the replay is not at already
    box = ui.page.locator(f"#{N}-step input").first
    box.fill(str(target))
    box.press("Enter")
    assert f"Replay step {target}/" in ui.wait_new_figure(f"{N}-replay", old)
    ui.page.locator(f"#{N}-step-info").get_by_text(f"Step {target} /").wait_for()
    # a step past the match is marked on the field (the validator), not a toast
    ui.allow_validation_errors()
    box.fill("99")
    box.press("Enter")
    ui.expect_invalid(f"{N}-step", f"step must be an integer in [0, {last}] (request #3: ")
    assert ui.page.locator(".toast-body").count() == 0 and ui.error_badges() == 0
    # so is a request typed past the session's
    pick = ui.page.locator(f"#{N}-request input")
    pick.fill("9999")
    pick.press("Enter")
    ui.expect_invalid(f"{N}-request", "request must be one of this session's requests, #1 to #3")
    assert ui.page.locator(".toast-body").count() == 0


def test_the_readers_text_is_shown_as_typed(app_url, ui):
    """Markdown typed into a request stays text in the summary: no link, no code span."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-replay")
    typed = "See [link](http://x) and `code` *b*"
    ui.page.locator(f"#{N}-text textarea").fill(typed)
    ui.click("Send")
    # the table itself (has_text is case-blind: the progress line "serving request #4" matched)
    ui.page.locator(f"#{N}-summary .md", has_text=re.compile("Request #4")).wait_for()
    prompt = ui.page.locator(f"#{N}-summary tr").nth(1)
    assert typed in prompt.inner_text()
    assert prompt.locator("a").count() == 0 and prompt.locator("code").count() == 0


def test_batch_with_every_request_rejected(app_url, ui):
    """A KV pool smaller than every request: said once, with the smallest pool that admits a
    request; the page stays intact."""
    ui.goto(app_url)
    ui.wait_plot(f"{N}-batch-phases")
    old = ui.figure(f"{N}-batch-phases")
    ui.fill(f"{N}-batch-kv", 151)
    ui.click("Serve together")
    new = ui.wait_new_figure(f"{N}-batch-phases", old)
    assert '"name":"rejected"' in new
    summary = ui.page.locator(f"#{N}-batch-summary")
    summary.get_by_text("No request fits a KV pool of 151 tokens").wait_for()
    text = summary.inner_text()
    assert "The smallest KV pool that admits one is 152 tokens (request #6)" in text
    assert text.count("Requested token count exceeds") == 1 and "no cap" not in text
    assert ui.error_badges() == 0


LONG = "\n".join(
    f"Req {i}: " + ("The quick brown fox jumps over the lazy dog. " * 12)[:500] for i in range(6)
)


def test_batch_byte_buffer_and_index_table(app_url, ui):
    """The decode index table renders by default (SGLang's small captured sizes); one byte
    buffer draws its border per step and the request that waits for it; bad values of the two
    fields are refused on their field, in each language, with the page unchanged."""
    ui.goto(app_url)
    figs = (f"{N}-batch-border", f"{N}-batch-graphs", f"{N}-batch-phases")
    for fig in figs:
        ui.wait_plot(fig)
    assert "Decode on captured sizes 1, 2, 4, 8, 12" in ui.figure(f"{N}-batch-graphs")
    old = ui.figure(f"{N}-batch-border")
    assert '"d":[]' in old and "byte buffer border" in old  # off: the placeholder
    ui.fill(f"{N}-batch-text", LONG)
    ui.page.locator(f"#{N}-batch-strategy").get_by_label("extra_buffer_lazy").check()
    ui.fill(f"{N}-batch-buffer", 4000)
    ui.fill(f"{N}-batch-graph-bs", "1, 2, 4")
    ui.click("Serve together")
    new = ui.wait_new_figure(f"{N}-batch-border", old, timeout=90)
    assert "One byte buffer of 4000 KiB" in new and "waits for the buffer" in new
    summary = ui.page.locator(f"#{N}-batch-summary")
    summary.get_by_text("waited").wait_for()
    assert '"name":"waiting: memory full"' in ui.figure(f"{N}-batch-phases")
    ui.wait_title(f"{N}-batch-graphs", "Decode on captured sizes 1, 2, 4")
    for fig in figs[:2]:  # the drawn options fit their canvas, no text box over a trace
        assert ui.layout_problems(fig) + ui.overlaps(fig) == []
    ui.rejects(
        f"{N}-batch-buffer",
        100,
        "Serve together",
        "one byte buffer in KiB must be 0 (two separate pools) or an integer in "
        "[985, 16384] for extra_buffer_lazy",
        figs,
    )
    ui.fill(f"{N}-batch-buffer", 4000)
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-batch-border", "统一字节缓冲区")
    ui.wait_title(f"{N}-batch-graphs", "按捕获大小")
    for fig in figs[:2]:
        assert ui.layout_problems(fig) + ui.overlaps(fig) == []
    ui.rejects(
        f"{N}-batch-graph-bs",
        "0, 4",
        "一起服务",
        "捕获的解码批大小必须是 1 到 16 个 [1, 64] 内",
        figs,
    )
