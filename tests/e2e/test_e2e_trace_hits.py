"""The trace panel in headless Chromium (state_transfer carries it, as checkpoint_density does):
the bundled trace drawn on load, a Mooncake file uploaded and analysed, a table row clicked
explains its request for both engines, a malformed file refused naming its line, and the
language switch redrawing the table and the explanation in 中文 (screenshots of both languages
go to pytest's tmp dir, or to $TRACE_HITS_SHOT_EN / $TRACE_HITS_SHOT_ZH)."""

from __future__ import annotations

import json
import os

APP = "state_transfer"
P = "state_transfer-hits"
ROWS = [
    {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
    {"timestamp": 5, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
    {"timestamp": 9, "input_length": 600, "output_length": 5, "hash_ids": [7, 8]},
    {"timestamp": 12, "input_length": 1400, "output_length": 10, "hash_ids": [1, 2, 4]},
]


def _upload(ui, path) -> None:
    ui.page.locator(f"#{P}-file input[type=file]").set_input_files(str(path))
    ui.page.locator(f"#{P}-file", has_text=path.name).wait_for()


def test_upload_and_explain(app_url, ui, tmp_path):
    ui.goto(app_url)
    ui.wait_plot(f"{P}-reasons")
    ui.wait_plot(f"{P}-coverage")
    ui.page.locator(f"#{P}-summary", has_text="bundled Mooncake conversation trace").wait_for()

    path = tmp_path / "my_trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    _upload(ui, path)
    old = ui.figure(f"{P}-reasons")
    ui.click("Analyse the trace")
    ui.wait_new_figure(f"{P}-reasons", old)
    ui.page.locator(f"#{P}-summary", has_text="my_trace.jsonl").wait_for()
    assert "4 requests" in ui.page.inner_text(f"#{P}-summary")

    # one click: the first row's request explained for both engines
    cells = ui.page.locator(f"#{P}-table .body-cell")  # Gradio 6 draws rows as div cells
    request = cells.first.inner_text().strip()
    cells.nth(2).click()  # the first row's third cell
    why = ui.page.locator(f"#{P}-explain", has_text=f"Request {request}")
    why.wait_for()
    text = why.inner_text()
    assert "restored from a saved state (cached)" in text and "= the shared prefix" in text
    assert "SGLang" in text and "vLLM" in text
    ui.close_toasts()
    ui.page.locator(f"#{P}-table").scroll_into_view_if_needed()
    ui.screenshot(os.environ.get("TRACE_HITS_SHOT_EN", tmp_path / "en.png"))

    ui.page.get_by_label("中文").check()
    ui.page.locator(f"#{P}-explain", has_text=f"请求 {request}").wait_for()
    ui.page.locator(f"#{P}-table", has_text="SGLang 原因").wait_for()
    ui.page.locator(f"#{P}-explain").scroll_into_view_if_needed()
    ui.screenshot(os.environ.get("TRACE_HITS_SHOT_ZH", tmp_path / "zh.png"))


def test_malformed_file_refused(app_url, ui, tmp_path):
    ui.goto(app_url)
    ui.wait_plot(f"{P}-reasons")
    ui.allow_validation_errors()
    summary = ui.page.inner_text(f"#{P}-summary")
    figs = ui.figures(f"{P}-reasons", f"{P}-coverage")
    bad = tmp_path / "broken.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + '{"input_length": 0, "hash_ids": [5]}\n')
    _upload(ui, bad)
    ui.page.locator(f"#{P}-skip input").uncheck()
    ui.click("Analyse the trace")
    ui.expect_invalid(f"{P}-file", "broken.jsonl: line 2: 'input_length'")
    # the refusal sits below the file, in the flow: the file's name and Clear stay visible
    err = ui.page.locator(f"#{P}-file .validation-error").bounding_box()
    named = ui.page.locator(f"#{P}-file .file-preview-holder").bounding_box()
    assert err and named and named["y"] + named["height"] <= err["y"], (named, err)
    ui.page.wait_for_timeout(400)
    assert ui.error_badges() == 0  # the validator refused it: the page as it was
    assert ui.page.inner_text(f"#{P}-summary") == summary
    assert ui.figures(f"{P}-reasons", f"{P}-coverage") == figs
    # a file of no known format: the message names the File format dropdown
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"x": 1}\n')
    ui.page.locator(f"#{P}-file .icon-button-wrapper button[aria-label=Clear]").first.click()
    _upload(ui, odd)
    ui.click("Analyse the trace")
    ui.expect_invalid(f"{P}-file", "odd.jsonl: line 1 looks like none of the formats")
    assert "choose the file's format in File format" in ui.page.inner_text(f"#{P}-file")
