"""Every app on the hub, in English and in 中文: no figure text outside its canvas, no colour
bar, annotation or legend over an axis title, no text box over a data trace, no table or log
wider than its column, no table header printed one character per line (the page's own boxes
in headless Chromium). The browser sees only DejaVu Sans and one CJK font (``minimal_fonts`` in
conftest.py), the barest machine the lab supports, whatever this machine has installed."""

from __future__ import annotations

import pytest

from apps.ui import APPS, LANGS

OVERFLOW_JS = """
() => [...document.querySelectorAll('.prose table, .cm-scroller')]
  .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 2)
  .map(e => (e.closest('[id]') || e).id + ': ' + e.scrollWidth + ' > ' + e.clientWidth)
"""

# a table header (or a short cell) printed one character per line: a line of its text that
# holds a single character while the text has more
BROKEN_JS = """
() => {
  const bad = [];
  for (const c of document.querySelectorAll('.prose th, .prose td')) {
    if (c.offsetParent === null) continue;
    const walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const s = n.textContent, chars = s.replace(/\\s/g, '').length;
      if (chars < 2 || (c.tagName === 'TD' && chars > 8)) continue;
      const lines = new Map();
      for (let i = 0; i < s.length; i++) {
        if (/\\s/.test(s[i])) continue;
        const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        const b = r.getBoundingClientRect();
        if (b.height) lines.set(Math.round(b.top), (lines.get(Math.round(b.top)) || 0) + 1);
      }
      if (lines.size > 1 && [...lines.values()].includes(1))
        bad.push((c.closest('[id]') || c).id + ': ' + JSON.stringify(s.trim()));
    }
  }
  return bad;
}
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
    assert ui.page.evaluate(BROKEN_JS) == []
