"""Sentences a page and a figure both assemble from a study's codes and numbers, so the two say
the same thing: the density figures' title and replay notes (``kda_core.studies.density.
replay_notes``; messages ``note_*`` of ``words.checkpoint_density``), a study's input and trace
names (``input_source``, ``trace_name``), and ``wrap``, which breaks a sentence to a width
without splitting a number. Each takes a ``T`` of a catalog holding the messages it names (that
catalog, or a page's catalog built on it).
"""

from __future__ import annotations

import re

from kda_core.studies.density import TRENDS, ReplayNotes, ReplayTrend
from words.catalog import T


def _budget(t: T, label: str) -> str:
    """A sweep's budget label ("8 GiB", "unlimited") in ``t``'s language."""
    return t.word("budget", label)


def headline(n: ReplayNotes, t: T) -> str:
    """The figure title: memory ~1/K, and what replay per hit does, budgets grouped by trend."""
    parts = []
    for kind in TRENDS:
        budgets = [_budget(t, x.budget) for x in n.trends if x.trend == kind]
        if budgets:
            parts.append(t(f"note_part_{kind}", budgets=t.join(budgets)))
    return t("note_headline", parts=t("note_sep").join(parts))


def _line(x: ReplayTrend, t: T, key: str, **extra: object) -> str:
    return t(
        key,
        budget=_budget(t, x.budget),
        r0=x.replay0,
        r1=x.replay1,
        k0=x.k0,
        k1=x.k1,
        slope=x.slope,
        **extra,
    )


def replay_note(n: ReplayNotes, t: T, width: int | None = None, *, detail: bool = True) -> str:
    """One line per budget (its trend and end values), why a budgeted curve falls, why the
    unlimited one does not follow K, and the analytic curve's range. ``width``: wrap every line
    at about this many characters with "\\n", never inside a number or word. ``detail=False``:
    only the per-budget lines, short (a small static figure)."""
    if not detail:
        lines = [
            _line(x, t, "note_short", trend=t(f"note_trend_{x.trend}"))
            for x in n.trends
            if x.trend != "one_k"
        ]
    else:
        lines = [_line(x, t, f"note_line_{x.trend}") for x in n.trends]
        if n.falling is not None:
            f = n.falling
            e = {"e0": f.evictions0, "e1": f.evictions1}
            lines.append(_line(f, t, "note_why_falls", **e))
        if n.unlimited_below_k:
            lines.append(t("note_why_unlimited"))
        lines.append(t("note_analytic", a0=n.analytic[0], a1=n.analytic[1]))
    if width is None:
        return "\n".join(lines)
    return "\n".join(w for line in lines for w in wrap(line, width))


_UNIT = re.compile(r"[A-Za-z0-9_.,:;%+\-−–→~=()（）/|]+\s*|\s+|.", re.S)


def wrap(text: str, width: int) -> list[str]:
    """Greedy wrap at ``width`` characters; a run of Latin letters, digits and the marks
    inside numbers ("3,641", "0.13", "K=1,024–16,384") is never broken, CJK wraps anywhere
    between characters, and no line starts with a closing CJK mark."""
    lines: list[str] = []
    cur = ""
    for u in _UNIT.findall(text):
        if cur and len(cur) + len(u.rstrip()) > width and u.strip() and u[0] not in "，。；：）、":
            lines.append(cur.rstrip())
            cur = u.lstrip()
        else:
            cur += u
    if cur.strip():
        lines.append(cur.rstrip())
    return lines


_RANDOM = re.compile(r"random \(seed (-?\d+)\)")
_TRACE_HEAD = re.compile(r"mooncake_conversation_trace\[:(\d+)\]")


def input_source(source: str, t: T) -> str:
    """A study's input ("random (seed 3)", "TinyHybrid layer 0") in words: messages
    ``src_random`` (``seed``) and ``src_model``; another name as it is."""
    m = _RANDOM.fullmatch(source)
    if m:
        return t("src_random", seed=int(m.group(1)))
    return t("src_model") if source == "TinyHybrid layer 0" else source


def trace_name(name: str, t: T) -> str:
    """A trace's name: the bundled conversation trace's head ("mooncake_conversation_trace[:N]")
    in words (message ``trace_head``, ``n``); another name as it is."""
    m = _TRACE_HEAD.fullmatch(name)
    return t("trace_head", n=int(m.group(1))) if m else name
