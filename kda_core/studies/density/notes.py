"""What the density figures say about replay, computed per curve from the data.

``_replay_trends(s)`` classifies each budget's simulated replay per hit against K by its own
log-log slope (fitted over K > block, as ``DensitySweep.replay_slope``): it grows like K
(slope >= ``REPLAY_SLOPE_K``), grows slower than K, stays about flat (|slope| <
``_FLAT_SLOPE``) or falls as K grows. ``headline`` and ``replay_note`` put that into words
(English / 中文, whole sentences with named placeholders in ``MESSAGES``; numbers are formatted
once and never split when a line is wrapped).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from kda_core.studies.density.analytic import REPLAY_SLOPE_K, loglog_slope
from kda_core.studies.density.sweep import DensitySweep

_FLAT_SLOPE = 0.15  # |slope| below this: "stays about flat"
_TRENDS: tuple[str, ...] = ("like_k", "slower", "flat", "falls", "one_k")

MESSAGES: dict[str, tuple[str, str]] = {
    "headline": (
        "A checkpoint every K tokens: memory ~1/K; replay per hit {parts}",
        "每 K 个 token 一个检查点：显存 ~1/K；每次命中的重放量{parts}",
    ),
    "part_like_k": ("grows like K ({budgets})", "随 K 近似线性增长（{budgets}）"),
    "part_slower": ("grows slower than K ({budgets})", "增长慢于 K（{budgets}）"),
    "part_flat": ("stays about flat ({budgets})", "基本持平（{budgets}）"),
    "part_falls": ("falls as K grows ({budgets})", "随 K 增大而下降（{budgets}）"),
    "part_one_k": ("has one K only ({budgets})", "只有一个 K（{budgets}）"),
    "line_like_k": (
        "{budget}: grows like K, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：随 K 近似线性增长，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "line_slower": (
        "{budget}: grows slower than K, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}; 1 would be ~K).",
        "{budget}：增长慢于 K，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}，1 即 ~K）。",
    ),
    "line_flat": (
        "{budget}: stays about flat, {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：基本持平，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "line_falls": (
        "{budget}: falls {r0:,.0f} → {r1:,.0f} tokens over K = {k0:,}–{k1:,} "
        "(log-log slope {slope:.2f}).",
        "{budget}：随 K 增大而下降，K = {k0:,}–{k1:,} 时 {r0:,.0f} → {r1:,.0f} token"
        "（对数斜率 {slope:.2f}）。",
    ),
    "line_one_k": (
        "{budget}: {r0:,.0f} tokens at the one interval K = {k0:,} (a slope needs two or more K).",
        "{budget}：只有 K = {k0:,} 一个间隔，重放 {r0:,.0f} token（算不出斜率，至少需要两个 K）。",
    ),
    "short": (
        "{budget}: {trend}, {r0:,.0f} → {r1:,.0f} tokens (slope {slope:.2f})",
        "{budget}：{trend}，{r0:,.0f} → {r1:,.0f} token（斜率 {slope:.2f}）",
    ),
    "trend_like_k": ("grows like K", "随 K 近似线性增长"),
    "trend_slower": ("grows slower than K", "增长慢于 K"),
    "trend_flat": ("about flat", "基本持平"),
    "trend_falls": ("falls as K grows", "随 K 增大而下降"),
    "why_falls": (
        "Why it falls: under a budget a small K stores more checkpoints than fit, so they are "
        "evicted ({e0:,} evictions at K = {k0:,} vs {e1:,} at K = {k1:,} for {budget}) and a "
        "hit restores further back.",
        "为何下降：有预算时，K 小则检查点多到放不下而被驱逐（{budget}：K = {k0:,} 时驱逐 {e0:,} "
        "次，K = {k1:,} 时 {e1:,} 次），命中只能从更早处恢复。",
    ),
    "why_unlimited": (
        "Without a budget nothing is evicted, yet the cache keeps KV only up to a request's "
        "deepest checkpoint: a follow-up turn usually matches exactly at a checkpoint and "
        "replays only at branch points.",
        "不限预算时没有驱逐，但缓存只保留到请求最深检查点为止的 KV："
        "后续轮次通常恰好在检查点处匹配，只在分叉点才重放。",
    ),
    "analytic": (
        "Dashed (analytic): replay if KV were kept for every token = ideal match − floor to K, "
        "{a0:,.0f}–{a1:,.0f} tokens.",
        "虚线（解析）：若每个 token 的 KV 都保留，重放 = 理想匹配点 − 向下取整到 K，"
        "{a0:,.0f}–{a1:,.0f} token。",
    ),
    "unlimited": ("unlimited", "不限"),
    "list_sep": (", ", "、"),
}


def _msg(key: str, lang: str, **params: object) -> str:
    return MESSAGES[key][1 if lang == "zh" else 0].format(**params)


@dataclass(frozen=True, slots=True)
class _ReplayTrend:
    """One budget's simulated replay per hit over the fitted K range (K > block)."""

    budget: str  # the sweep's label ("8 GiB", "unlimited")
    trend: str  # one of TRENDS
    k0: int
    k1: int
    replay0: float  # replay per hit at k0 / k1 (tokens)
    replay1: float
    slope: float  # log-log slope (nan with one K)
    evictions0: int
    evictions1: int


def _trend(slope: float) -> str:
    if not math.isfinite(slope):
        return "one_k"
    if slope >= REPLAY_SLOPE_K:
        return "like_k"
    if slope >= _FLAT_SLOPE:
        return "slower"
    return "flat" if slope > -_FLAT_SLOPE else "falls"


def _replay_trends(s: DensitySweep) -> tuple[_ReplayTrend, ...]:
    """Each budget's curve (columns of ``s``), from its own points with replay > 0."""
    big = s.intervals > s.block_size  # K = block replays only the partial last block
    if not big.any():
        big = np.ones_like(big)
    ks = s.intervals[big]
    out = []
    for j, label in enumerate(s.budget_labels):
        y = s.mean_replay_per_hit[big, j]
        pos = np.flatnonzero(y > 0)
        i0, i1 = (int(pos[0]), int(pos[-1])) if pos.size else (0, ks.size - 1)
        ev = s.evictions[big, j]
        out.append(
            _ReplayTrend(
                budget=label,
                trend=_trend(loglog_slope(ks, y)),
                k0=int(ks[i0]),
                k1=int(ks[i1]),
                replay0=float(y[i0]),
                replay1=float(y[i1]),
                slope=loglog_slope(ks, y),
                evictions0=int(ev[i0]),
                evictions1=int(ev[i1]),
            )
        )
    return tuple(out)


def _label(budget: str, lang: str) -> str:
    return _msg("unlimited", lang) if budget == "unlimited" else budget


def headline(s: DensitySweep, lang: str = "en") -> str:
    """The figure title: memory ~1/K, and what replay per hit does, grouped by trend."""
    trends = _replay_trends(s)
    sep = "；" if lang == "zh" else "; "
    parts = []
    for kind in _TRENDS:
        budgets = [_label(t.budget, lang) for t in trends if t.trend == kind]
        if budgets:
            parts.append(_msg(f"part_{kind}", lang, budgets=_msg("list_sep", lang).join(budgets)))
    return _msg("headline", lang, parts=sep.join(parts))


def replay_note(
    s: DensitySweep, lang: str = "en", width: int | None = None, *, detail: bool = True
) -> str:
    """One line per budget (its trend and end values), why a budgeted curve falls, why the
    unlimited one does not follow K, and the analytic curve's range. ``width``: wrap every
    line at about this many characters with "\n", never inside a number or word.
    ``detail=False``: only the per-budget lines, short (a small static figure)."""
    trends = _replay_trends(s)
    if not detail:
        short = [
            _msg(
                "short",
                lang,
                budget=_label(t.budget, lang),
                trend=_msg(f"trend_{t.trend}", lang),
                r0=t.replay0,
                r1=t.replay1,
                slope=t.slope,
            )
            for t in trends
            if t.trend != "one_k"
        ]
        return "\n".join(w for line in short for w in (wrap(line, width) if width else [line]))
    lines = [
        _msg(
            f"line_{t.trend}",
            lang,
            budget=_label(t.budget, lang),
            r0=t.replay0,
            r1=t.replay1,
            k0=t.k0,
            k1=t.k1,
            slope=t.slope,
        )
        for t in trends
    ]
    falling = [t for t in trends if t.trend == "falls" and t.evictions0 > t.evictions1]
    if falling:
        t = falling[0]
        lines.append(
            _msg(
                "why_falls",
                lang,
                budget=_label(t.budget, lang),
                e0=t.evictions0,
                e1=t.evictions1,
                k0=t.k0,
                k1=t.k1,
            )
        )
    if any(t.budget == "unlimited" and t.trend in ("slower", "flat") for t in trends):
        lines.append(_msg("why_unlimited", lang))
    big = s.intervals > s.block_size
    an = s.analytic.replay_curve[big if big.any() else slice(None)]
    lines.append(_msg("analytic", lang, a0=float(an.min()), a1=float(an.max())))
    if width is None:
        return "\n".join(lines)
    return "\n".join(w for line in lines for w in wrap(line, width))


_UNIT = re.compile(r"[A-Za-z0-9_.,:;%+\-−–→~=()（）/|]+\s*|\s+|.", re.S)


def wrap(text: str, width: int) -> list[str]:
    """Greedy wrap at ``width`` characters; a run of Latin letters, digits and the marks
    inside numbers ("3,641", "0.13", "K=1,024–16,384") is never broken, CJK wraps anywhere
    between characters, and no line starts with a closing CJK mark."""
    units = _UNIT.findall(text)
    lines: list[str] = []
    cur = ""
    for u in units:
        if cur and len(cur) + len(u.rstrip()) > width and u.strip() and u[0] not in "，。；：）、":
            lines.append(cur.rstrip())
            cur = u.lstrip()
        else:
            cur += u
    if cur.strip():
        lines.append(cur.rstrip())
    return lines
