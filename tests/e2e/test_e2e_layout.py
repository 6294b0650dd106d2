"""Every app on the hub, in English and in 中文: no figure text outside its canvas, no colour
bar, annotation or legend over an axis title, no text box over a data trace, no table or log
wider than its column (the page's own boxes in headless Chromium)."""

from __future__ import annotations

import pytest

from apps.ui import APPS, LANGS

OVERFLOW_JS = """
() => [...document.querySelectorAll('.prose table, .cm-scroller')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 2)
  .map(e => (e.closest('[id]') || e).id + ': ' + e.scrollWidth + ' > ' + e.clientWidth)
"""


def _settle(ui) -> list[str]:  # noqa: ANN001
    ui.page.wait_for_selector(".js-plotly-plot .main-svg")
    ui.page.wait_for_timeout(2500)  # the load events' later figures
    return ui.page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.data)"
        ".map(g => g.closest('[id]').id)"
    )


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", [a.name for a in APPS])
def test_figures_and_tables_fit(hub_url, ui, name: str, lang: str) -> None:
    ui.goto(f"{hub_url}{name}/")
    ids = _settle(ui)
    if lang == LANGS[1]:
        ui.page.get_by_role("radio", name=lang).check()
        ui.page.wait_for_timeout(2500)
    assert ids
    problems = {i: ui.layout_problems(i) + ui.overlaps(i) for i in ids}
    assert {i: p for i, p in problems.items() if p} == {}
    assert ui.page.evaluate(OVERFLOW_JS) == []
