"""int8_checkpoint in headless Chromium: default figures, another format, a bad input."""

from __future__ import annotations

from kda_core.studies import int8 as st

APP = "int8_checkpoint"
N = "int8_checkpoint"


FIGS = ("errmap", "divergence", "variants", "hist", "capacity")


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in ("errmap", "divergence", "variants", "hist", "capacity"):
        ui.wait_plot(f"{N}-{fig}")
    old = ui.figure(f"{N}-errmap")
    assert "Error map of int8 / key channel" in old

    ui.page.get_by_label("int8 / tensor").check()  # a format change re-runs by itself
    new = ui.wait_new_figure(f"{N}-errmap", old)
    assert "Error map of int8 / tensor" in new

    n_max = len(st.DEFAULT_TEXT.encode("utf-8"))
    figs = tuple(f"{N}-{f}" for f in FIGS)
    ui.rejects(f"{N}-tokens", 5000, "Park and restore",
               f"must be an integer in [1, {n_max}], got 5000", figs)  # fmt: skip
    # an integer field: rejected, never rounded silently
    ui.rejects(f"{N}-tokens", 3.5, "Park and restore",
               f"must be an integer in [1, {n_max}], got 3.5", figs)  # fmt: skip

    ui.fill(f"{N}-tokens", 32)
    ui.click("Park and restore")
    ui.page.locator(f"#{N}-summary").get_by_text("32 tokens").wait_for()
    assert ui.page.locator(f"#{N}-history table tbody tr").count() == 3

    ui.page.get_by_role("radio", name="中文").check()
    ui.page.get_by_text("用更少的字节停放检查点").wait_for()


def test_chinese_figures_and_no_text_over_data(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"{N}-{fig}")
        assert ui.overlaps(f"{N}-{fig}") == [], fig
    ui.page.get_by_role("radio", name="中文").check()
    ui.wait_title(f"{N}-errmap", "误差图")
    ui.wait_title(f"{N}-hist", "直方图")
    ui.wait_title(f"{N}-variants", "同一停放状态上的各种格式")
    ui.wait_title(f"{N}-capacity", "各格式的检查点容量")
    ui.page.get_by_text("Kimi K3 容量").wait_for()  # the accordion
