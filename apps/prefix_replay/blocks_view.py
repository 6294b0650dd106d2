"""prefix_replay's vLLM block-table panel drawn in the language of ``t``
(``kda_core.studies.block_table``): its two figures (each returns figure, CSV path) and its
summary (the hit in a sentence, the steps that registered keys or copied blocks)."""

from __future__ import annotations

import plotly.graph_objects as go

from apps import ui
from apps.ui import COLORS
from kda_core.studies import block_table as bt
from words.catalog import T as Lang

MAX_BOUNDARIES = 24  # block boundaries drawn on the hit figure


def fig_vb_blocks(v: bt.BlockTable, t: Lang) -> tuple[go.Figure, str]:
    """Every logical prefix entry at its physical block: a column holding several markers is
    one block serving several prefixes."""
    fig = go.Figure()
    entries = sorted(v.after_b.entries, key=lambda e: (e.block_id, e.tokens))
    order = [f"#{b}" for b in sorted({e.block_id for e in entries})]
    for group, key, color in ((0, "vb_l_kv", COLORS["kv"]), (1, "vb_l_state", COLORS["state"])):
        mine = [e for e in entries if e.group == group]
        fig.add_scatter(
            x=[f"#{e.block_id}" for e in mine],
            y=[e.tokens for e in mine],
            mode="markers",
            name=t(key),
            marker={"color": color, "size": 13, "symbol": "square" if group else "circle"},
            customdata=[e.block_id for e in mine],
            hovertemplate=t("vb_h_entry", b="%{customdata}", y="%{y:,}") + "<extra></extra>",
        )
    for block, _group, keys in v.shared_blocks:
        fig.add_scatter(
            x=[f"#{block}"] * 2,
            y=[min(keys), max(keys)],
            mode="lines",
            showlegend=False,
            line={"color": COLORS["kv"], "width": 3},
            hoverinfo="skip",
        )
        fig.add_annotation(
            x=f"#{block}",
            y=max(keys),
            text=t("vb_a_shared", n=len(keys)),
            showarrow=True,
            arrowhead=0,
            ax=40,
            ay=-24,
            font={"size": 11},
            bgcolor="rgba(255,255,255,0.85)",
        )
    title = t("t_vb_blocks", b=v.block_size, u=v.unit)
    ui.style(fig, title, t("vb_x_block"), t("vb_y_prefix"), height=420)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    fig.update_yaxes(rangemode="tozero")
    csv = ui.write_csv(
        "prefix_replay-vllm-blocks",
        {
            "block_id": [e.block_id for e in entries],
            "group": [e.group for e in entries],
            "prefix_tokens": [e.tokens for e in entries],
            "primary": [e.primary for e in entries],
        },
    )
    return fig, csv


def fig_vb_hit(v: bt.BlockTable, t: Lang) -> tuple[go.Figure, str]:
    """B's shared prefix and its two hits (unit keys, block keys) against the block grid."""
    rows = (
        (t("vb_r_coarse"), v.coarse_hit.tokens, COLORS["neutral"]),
        (t("vb_r_fine", u=v.unit), v.hit.tokens, COLORS["hit"]),
        (t("vb_r_shared"), v.shared, COLORS["prefill"]),
    )
    fig = go.Figure()
    for name, x, color in rows:
        fig.add_bar(
            y=[name],
            x=[x],
            orientation="h",
            marker_color=color,
            showlegend=False,
            text=[f"{x:,}"],
            textposition="outside",
            hovertemplate=t("vb_h_bar", row=name, x="%{x:,}") + "<extra></extra>",
        )
    title = t("t_vb_hit", hit=v.hit.tokens, shared=v.shared)
    ui.style(fig, title, t("vb_x_tokens"), "", height=300, legend=False)
    end = max(v.shared, v.block_size) * 1.12
    step = v.block_size
    for i in range(1, min(int(end // step), MAX_BOUNDARIES) + 1):
        ui.vline(fig, i * step, t("vb_a_boundary") if i == 1 else "", y=1.0, xanchor="right")
    fig.update_xaxes(range=[0, end])
    csv = ui.write_csv(
        "prefix_replay-vllm-hit",
        {
            "row": ["coarse_hit", "fine_hit", "shared"],
            "tokens": [v.coarse_hit.tokens, v.hit.tokens, v.shared],
        },
    )
    return fig, csv


_GROUP_KEYS = ("s_vb_key_kv", "s_vb_key_state")


def blocks_markdown(v: bt.BlockTable, t: Lang) -> str:
    """The hit in a sentence and the steps that registered keys or copied blocks."""
    h = v.hit
    partial = t("s_vb_partial") if h.partial else ""
    if h.state_block is None:
        head = t("s_vb_none", shared=v.shared)
    else:
        head = t(
            "s_vb_hit",
            hit=h.tokens,
            sb=h.state_block,
            idx=h.table_index,
            partial=partial,
            coarse=v.coarse_hit.tokens,
            shared=v.shared,
            kv=h.kv_tokens,
        )
    lines = [head, "", t("s_vb_th"), "|---|---|---|---|"]
    for name, st in v.events:
        keys = "<br>".join(t(_GROUP_KEYS[g], n=n, b=b) for g, n, b in st.registered) or "–"
        copies = "<br>".join(f"#{a} → #{b}" for a, b in st.copies) or "–"
        lines.append(f"| {name} | [{st.start:,}, {st.end:,}) | {keys} | {copies} |")
    return "\n".join(lines)
