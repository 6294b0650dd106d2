"""int8_checkpoint in headless Chromium: default figures, another format, a bad input."""

from __future__ import annotations

from kda_core.studies import int8 as st

APP = "int8_checkpoint"
N = "int8_checkpoint"


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in ("errmap", "divergence", "variants", "hist", "capacity"):
        ui.wait_plot(f"{N}-{fig}")
    old = ui.figure(f"{N}-errmap")
    assert "Error map of int8 / key channel" in old

    ui.page.get_by_label("int8 / tensor").check()  # a format change re-runs by itself
    new = ui.wait_new_figure(f"{N}-errmap", old)
    assert "Error map of int8 / tensor" in new

    ui.fill(f"{N}-tokens", 5000)
    ui.click("Park and restore")
    n_max = len(st.DEFAULT_TEXT.encode("utf-8"))
    ui.expect_error(f"must be an integer in [1, {n_max}], got 5000")
    ui.close_toasts()

    ui.fill(f"{N}-tokens", 3.5)  # an integer field: rejected, never rounded silently
    ui.click("Park and restore")
    ui.expect_error(f"must be an integer in [1, {n_max}], got 3.5")
    ui.close_toasts()

    ui.fill(f"{N}-tokens", 32)
    ui.click("Park and restore")
    ui.page.locator(f"#{N}-summary").get_by_text("32 tokens").wait_for()
    assert ui.page.locator(f"#{N}-history table tbody tr").count() == 3

    ui.page.get_by_role("radio", name="中文").check()
    ui.page.get_by_text("用更少的字节停放检查点").wait_for()
