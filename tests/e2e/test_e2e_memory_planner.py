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
        assert f.readline().strip() == "context_tokens,kv_bytes,state_slot_bytes"

    ui.fill("memory_planner-tp", 4)
    ui.click("Plan")
    new = ui.wait_new_figure("memory_planner-context", old)
    assert "kimi-k3, TP4" in new

    figs = ("memory_planner-context", "memory_planner-ratio-fig", "memory_planner-strategies")
    ui.rejects("memory_planner-tp", 0, "Plan", "TP must be an integer in [1, 64], got 0", figs)
    ui.rejects(
        "memory_planner-tp",
        7,
        "Plan",
        "TP must divide the 96 recurrent-state heads; got TP=7",
        figs,
    )

    ui.fill("memory_planner-tp", 2)
    ui.click("Plan")
    again = ui.wait_new_figure("memory_planner-context", new)
    assert "kimi-k3, TP2" in again
    rows = ui.page.locator("#memory_planner-history table tbody tr").count()
    assert rows == 3  # load + two good plans in this tab's session

    # the planner's max running requests next to what a live run admitted
    ui.wait_plot("memory_planner-live")
    live = ui.page.inner_text("#memory_planner-live-summary")
    assert "peak 3 running = the planner's max running requests 3" in live
    assert "max_running_requests is capped to 3 by the mamba state cache" in live

    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("一块 GPU 上混合模型的缓存预算").wait_for()
    ui.page.get_by_text("张量并行 TP（1-64）").wait_for()

    ui.wait_title("memory_planner-context", "单卡上一个请求的显存随上下文的变化")
    ui.wait_title("memory_planner-strategies", "Radix 策略")
    ui.page.get_by_text("SGLang 会打印的日志").wait_for()
    assert "Mamba Cache is allocated" in ui.page.inner_text("#memory_planner-log")  # as printed


def test_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in ("context", "ratio-fig", "strategies"):
        ui.wait_plot(f"memory_planner-{fig}")
        assert ui.overlaps(f"memory_planner-{fig}") == [], fig


def test_engines_k3_example_config_and_log(app_url, ui):
    """SGLang next to vLLM, the K3 write-up example's KV line, a real log read back in both
    languages, and a pasted config that lacks a field: refused by name, the page unchanged."""
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    engines = ui.page.locator("#memory_planner-engines")
    engines.get_by_text("smallest prompt that can hit the prefix cache").wait_for()
    ui.page.locator("#memory_planner-k3").click()
    ui.page.locator(
        "#memory_planner-log", has_text="#tokens: 1947648, KV size: 25.08 GB"
    ).wait_for()
    assert "| 80 |" not in engines.inner_text()  # a rendered table, not markdown source
    assert "Setting attention block size" in ui.page.inner_text("#memory_planner-vllm-log")

    ui.page.locator("#memory_planner-example-1").click()  # Qwen3.8-27B-FP8 on SGLang
    report = ui.page.locator("#memory_planner-report", has_text="Verdict: bound by the state slots")
    report.wait_for()
    assert "124 state slots / 5 reserved per request = 24 running requests" in report.inner_text()
    ui.page.locator("#memory_planner-lines table tbody tr").nth(2).wait_for()  # 3 known lines
    assert "3 lines skipped" in ui.page.inner_text("#memory_planner-lines")

    ui.page.get_by_text("config.json (model = config.json)").click()
    ui.page.locator("#memory_planner-config .cm-content").click()
    ui.page.keyboard.type('{"model_type": "qwen3_next", "num_hidden_layers": 4}')
    # pasting (typing) a config makes it the model: nothing else is planned silently
    model = ui.page.locator("#memory_planner-model input")
    ui.page.wait_for_function(
        "() => document.querySelector('#memory_planner-model input').value.startsWith('config')"
    )
    assert model.input_value() == "config.json (pasted or uploaded)"
    ui.allow_validation_errors()  # the plan itself is not run: its validator refuses it
    ui.click("Plan")
    # the refusal is said by the Plan button, and the right column says nothing was planned
    status = ui.page.locator("#memory_planner-status", has_text="Not planned")
    status.wait_for()
    assert "missing field 'layer_types'" in status.inner_text()
    engines.get_by_text("Not planned").wait_for()
    run_box = ui.page.locator("#memory_planner-run").bounding_box()
    status_box = status.bounding_box()
    assert 0 <= status_box["y"] - run_box["y"] < 200  # under the button, not 1,000 px above

    ui.page.get_by_label("中文").check()
    ui.page.locator("#memory_planner-report", has_text="结论：受限于状态槽").wait_for()
    ui.page.locator("#memory_planner-status", has_text="未规划").wait_for()
    report = ui.page.inner_text("#memory_planner-report")
    assert "124 个状态槽 / 每请求预留 5 个 = 最多 24 个并发请求" in report  # reasons in 中文


def test_log_panel_fragment_and_rejected_log(app_url, ui):
    """A one-line fragment read with its fixes; an empty paste is marked on the log field
    (no toast) and the verdict stays."""
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    ui.page.locator("#memory_planner-example-4").click()  # sgl-project/sglang#38846's line
    report = ui.page.locator("#memory_planner-report", has_text="requested 32, effective 9")
    report.wait_for()
    assert "--disable-radix-cache" in report.inner_text()
    ui.page.locator("#memory_planner-log-text textarea").fill("")
    ui.allow_validation_errors()
    ui.click("Read the log")
    ui.expect_invalid("memory_planner-log-text", "paste a log first")
    ui.page.wait_for_timeout(400)
    assert ui.error_badges() == 0 and ui.page.locator(".toast-body").count() == 0
    assert "effective 9" in ui.page.inner_text("#memory_planner-report")


def test_switch_after_a_refused_plan_redraws_in_chinese(app_url, ui):
    """Budget -28 refused on its field, then 中文: every output redraws the last good plan in
    中文 (the refused Plan's pre-check wrote nothing); the uploads' labels sit above their
    icons."""
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    ui.allow_validation_errors()
    ui.fill("memory_planner-budget", -28)
    ui.click("Plan")
    ui.expect_invalid("memory_planner-budget", "must be a number in [0.5, 1024]")
    ui.page.get_by_label("中文").check()
    ui.page.locator("#memory_planner-engines", has_text="相同显存预算、TP 与精度").wait_for()
    ui.page.locator("#memory_planner-summary", has_text="一个状态槽").wait_for()
    ui.wait_title("memory_planner-context", "单卡上一个请求的显存随上下文的变化")
    ui.upload_label_clear("memory_planner-trace-file")


def test_mtp_drafter_rows_and_refusal(app_url, ui):
    """Qwen3-Next at TP4 with D = 2 and the MTP drafter: the engines table gains the drafter's
    rows (English, then 中文); Kimi K3 with MTP is refused on the checkbox, by SGLang's reason."""
    ui.goto(app_url)
    ui.wait_plot("memory_planner-context")
    ui.allow_validation_errors()
    ui.page.locator("#memory_planner-mtp input").check()
    ui.click("Plan")
    ui.expect_invalid("memory_planner-mtp", "SGLang 0.5.23 has no MTP draft model for Kimi K3")
    model = ui.page.locator("#memory_planner-model input")
    model.click()
    model.fill("qwen3-next-80b-a3b-instruct")
    ui.page.get_by_role("option", name="qwen3-next-80b-a3b-instruct").first.click()
    ui.fill("memory_planner-tp", 4)
    ui.fill("memory_planner-draft", 2)
    ui.click("Plan")
    engines = ui.page.locator("#memory_planner-engines")
    engines.get_by_text("draft KV pool beyond the budget").wait_for()
    assert "KV tokens without the drafter" in engines.inner_text()
    ui.page.get_by_label("中文").check()
    engines.get_by_text("超出预算的草稿 KV 池").wait_for()
