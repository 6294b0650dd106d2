"""One palette: each semantic colour has one meaning; categorical colours never reuse them."""

from __future__ import annotations

import re

from kda_core.palette import COLORS, SERIES


def test_semantic_colours_are_distinct_hex():
    assert {"kv", "state", "conv", "replay", "prefill", "decode", "checkpoint"} <= set(COLORS)
    assert len(set(COLORS.values())) == len(COLORS)
    assert all(re.fullmatch(r"#[0-9a-fA-F]{6}", c) for c in (*COLORS.values(), *SERIES))


def test_series_never_reuses_a_semantic_colour():
    semantic = {c.lower() for c in COLORS.values()}
    assert len(SERIES) >= 6 and len(set(SERIES)) == len(SERIES)
    assert not semantic & {c.lower() for c in SERIES}
