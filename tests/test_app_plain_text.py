"""What an app returns as text carries no invisible characters (a script testing
``'max_running' in s`` on an API answer must see exactly what the page shows)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import pytest

INVISIBLE = ("\u2063", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, go.Figure):
        return _strings(v.to_plotly_json())
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, (list, tuple)):
        return [s for x in v for s in _strings(x)]
    return []


def _outputs() -> list[tuple[str, Any]]:
    from apps import int8_checkpoint, memory_planner, prefix_replay

    out = []
    for lang in ("English", "中文"):
        pr = prefix_replay.load_scenario(language=lang, progress=None)
        batch = prefix_replay.serve_batch(session=pr[-1], language=lang, progress=None)
        out.append((f"prefix_replay {lang}", pr))
        out.append((f"prefix_replay batch {lang}", batch))
        out.append((f"memory_planner {lang}", memory_planner.run_plan(max_slots=40, language=lang)))
        out.append((f"int8_checkpoint {lang}", int8_checkpoint.run(language=lang)))
    return out


@pytest.mark.parametrize("case", range(8))
def test_no_invisible_characters_in_text_outputs(case):
    name, value = _outputs_cached()[case]
    bad = [s for s in _strings(value) if any(c in s for c in INVISIBLE)]
    assert not bad, f"{name}: {bad[0]!r}"


_CACHE: list = []


def _outputs_cached() -> list[tuple[str, Any]]:
    if not _CACHE:
        _CACHE.extend(_outputs())
    return _CACHE
