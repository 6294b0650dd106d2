"""memory_planner in headless Chromium: a refused EAGLE3 drafter is said below its checkbox in
full, inside its block and clear of the box (which stays clickable), in English and 中文; the
trace panel's CSV button shows only once a plan wrote its file, and the file holds the ratios
the user typed."""

from __future__ import annotations

import csv

APP = "memory_planner"
N = "memory_planner"

# the refusal's box: its text fits (nothing scrolled or cut) and it lies inside the checkbox's
# block (the block grew around it), clear of the checkbox itself
FITS_JS = """id => {
  const block = document.getElementById(id);
  const err = block.querySelector('.validation-error');
  const box = block.querySelector('input[type=checkbox]').getBoundingClientRect();
  const e = err.getBoundingClientRect(), b = block.getBoundingClientRect();
  return {cut: err.scrollHeight > err.clientHeight + 1 || err.scrollWidth > err.clientWidth + 1,
          inside: e.top >= b.top - 1 && e.bottom <= b.bottom + 1 &&
                  e.left >= b.left - 1 && e.right <= b.right + 1,
          overBox: !(e.bottom <= box.top || e.top >= box.bottom)}; }"""


def _eagle_refused(ui, text: str) -> None:
    ui.page.locator(f"#{N}-run").click()
    ui.expect_invalid(f"{N}-eagle", text)
    fit = ui.page.evaluate(FITS_JS, f"{N}-eagle")
    assert fit == {"cut": False, "inside": True, "overBox": False}, fit
    ui.page.locator(f"#{N}-eagle input").uncheck()  # the box is not covered: it can be unticked
    assert not ui.page.locator(f"#{N}-eagle input").is_checked()


def test_eagle_refusal_below_the_box(app_url, ui):
    ui.goto(app_url)
    ui.wait_plot(f"{N}-context")
    ui.allow_validation_errors()
    ui.fill(f"{N}-draft", 2)
    ui.page.locator(f"#{N}-eagle input").check()
    _eagle_refused(ui, "eagle: the lab sizes an EAGLE draft beside")  # Kimi K3: MLA target
    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("张量并行 TP（1-64）").wait_for()
    ui.page.locator(f"#{N}-eagle input").check()
    _eagle_refused(ui, "输入被拒绝，计算代码的原话是：“eagle: the lab sizes")


def test_trace_csv_once_planned(app_url, ui):
    ui.goto(app_url)
    ui.wait_plot(f"{N}-context")
    btn = ui.page.locator(f"#{N}-trace-front-csv")
    assert btn.count() == 0 or not btn.is_visible()  # nothing to download before a plan
    ui.fill(f"{N}-trace-n", 300)
    ui.fill(f"{N}-trace-ratios", "0.2, 0.5")
    ui.page.locator(f"#{N}-trace-run").click()
    ui.wait_plot(f"{N}-trace-front")
    btn.wait_for(state="visible")
    with ui.page.expect_download() as dl:
        btn.click()
    with open(dl.value.path(), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {float(r["mamba_full_memory_ratio"]) for r in rows} == {0.2, 0.5}
