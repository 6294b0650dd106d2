"""The hits panel's figure and table: a resent prompt's cached tokens per engine with drafts on
and off (``kda_core.studies.spec_hits.SpecHits``)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies.spec_hits import SpecHits
from words.catalog import T

NAME = "speculative_replay"


def fig_hits(r: SpecHits, t: T) -> tuple[go.Figure, str]:
    """Cached tokens of the resend at each prompt length, one category per length (they sit
    around the block multiples, U - 1, U, U + 1: a numeric axis would stack them, and a line
    would claim values in between): vLLM with drafts off and on, SGLang with drafts on (the
    same as off)."""
    fig = go.Figure()
    x = [f"{n:,}" for n in r.prompt_len.tolist()]
    for y, key, color, symbol, size in (
        (r.vllm_no_drafts, "l_vllm_off", SERIES[0], "circle", 11),
        (r.vllm, "l_vllm_on", SERIES[1], "x", 9),
        (r.sglang, "l_sglang_on", COLORS["neutral"], "diamond-open", 9),
    ):
        name = t(key)
        fig.add_scatter(
            x=x,
            y=y,
            mode="markers",
            name=name,
            marker={"color": color, "symbol": symbol, "size": size},
            hovertemplate=t("h_hits", name=name, x="%{x}", y="%{y:,}") + "<extra></extra>",
        )
    cfg = r.speculative_config
    title = t("t_hits", method=cfg["method"], k=cfg["num_speculative_tokens"], U=r.block_size)
    ui.style(fig, title, t("x_prompt"), t("y_cached"), height=380)
    fig.update_yaxes(rangemode="tozero", tickformat=",")
    fig.update_xaxes(type="category")
    cols = {
        "prompt_len": r.prompt_len,
        "vllm_no_drafts": r.vllm_no_drafts,
        "vllm_drafts": r.vllm,
        "vllm_reason": np.array(r.vllm_reason),
        "sglang_no_drafts": r.sglang_no_drafts,
        "sglang_drafts": r.sglang,
    }
    return fig, ui.write_csv(f"{NAME}-hits", cols)


def hits_markdown(r: SpecHits, t: T) -> str:
    """The headline (how many lengths lose tokens to drafts) and one row per length."""
    lost = r.vllm_no_drafts - r.vllm
    head = t("hits_lost", n=int((lost > 0).sum()), m=len(lost), tok=int(lost.sum()))
    rows = [
        f"| {L:,} | {off:,} | {on:,} | {t.word('r', why)} | {sg:,} |"
        for L, off, on, why, sg in zip(
            r.prompt_len.tolist(),
            r.vllm_no_drafts.tolist(),
            r.vllm.tolist(),
            r.vllm_reason,
            r.sglang.tolist(),
            strict=True,
        )
    ]
    return "\n".join([head, "", t("hits_th"), "|---:|---:|---:|---|---:|", *rows])
