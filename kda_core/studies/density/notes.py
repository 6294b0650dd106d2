"""The text a density figure and the app print, true to the data (replay ~K only where the
simulated replay per hit follows K)."""

from __future__ import annotations

import math

import numpy as np

from kda_core.studies.density.sweep import DensitySweep


def headline(s: DensitySweep, lang: str = "en") -> str:
    """The figure title's claim, true to the data: "replay ~K" only if ``replay_follows_k``."""
    zh = lang == "zh"
    if s.replay_follows_k:
        return (
            "每 K 个 token 一个检查点：显存 ~1/K，重放 ~K"
            if zh
            else ("A checkpoint every K tokens: memory ~1/K, replay ~K")
        )
    return (
        "每 K 个 token 一个检查点：显存 ~1/K，重放几乎不变"
        if zh
        else "A checkpoint every K tokens: memory ~1/K, replay ~flat"
    )


def replay_note(s: DensitySweep, lang: str = "en", width: int | None = None) -> str:
    """Why the simulated replay per hit does (not) follow the analytic curve, with the numbers.

    ``width``: wrap lines at about this many characters with "\n" (None: one paragraph)."""
    big = s.intervals > s.block_size  # K = block replays only the partial last block
    if not big.any():
        big = np.ones_like(big)
    sim_r = s.mean_replay_per_hit[big]
    pos = sim_r[sim_r > 0]
    lo, hi = (float(pos.min()), float(pos.max())) if pos.size else (0.0, 0.0)
    k0, k1 = int(s.intervals[big][0]), int(s.intervals[big][-1])
    sl = float(np.nanmax(s.replay_slope)) if np.isfinite(s.replay_slope).any() else math.nan
    an = s.analytic.replay_curve[big]
    if lang == "zh":
        parts = (
            [
                f"模拟：每次命中重放 {lo:,.0f}–{hi:,.0f} token"
                + (
                    f"（K={k0:,}–{k1:,}，对数斜率 {sl:.2f}，1 即 ~K）。"
                    if math.isfinite(sl)
                    else f"（只有 K={k0:,} 一个间隔：算不出斜率，至少需要两个 K）。"
                )
            ]
            + (
                []
                if s.replay_follows_k
                else [
                    "几乎不变：缓存只保留到请求最深检查点为止的 KV，"
                    "后续轮次通常恰好在检查点处匹配，只在分叉点才重放。"
                ]
            )
            + [
                f"虚线（解析）：若每个 token 的 KV 都保留，重放 = 理想匹配点 − 向下取整到 K，"
                f"{an.min():,.0f}–{an.max():,.0f} token。"
            ]
        )
    else:
        parts = (
            [
                f"Simulated replay per hit: {lo:,.0f}-{hi:,.0f} tokens "
                + (
                    f"over K={k0:,}-{k1:,} (log-log slope {sl:.2f}; 1 would be ~K)."
                    if math.isfinite(sl)
                    else f"at the one interval K={k0:,} (a slope needs two or more K)."
                )
            ]
            + (
                []
                if s.replay_follows_k
                else [
                    "It stays flat because the cache keeps KV only up to a request's deepest "
                    "checkpoint: a follow-up turn usually matches exactly at a checkpoint and "
                    "replays only at branch points."
                ]
            )
            + [
                "Dashed (analytic): replay if KV were kept for every token = ideal match "
                f"- floor to K, {an.min():,.0f}-{an.max():,.0f} tokens."
            ]
        )
    text = ("" if lang == "zh" else " ").join(parts)
    if width is None:
        return text
    import textwrap

    if lang == "zh":
        return "\n".join(text[i : i + width] for i in range(0, len(text), width))
    return "\n".join(textwrap.wrap(text, width))
