"""The trace panel's view (``apps/panels/trace_hits.py``) in the language of ``t``: its two
figures (``studies.hit_reasons``, ``studies.host_coverage``; each returns (figure, CSV path),
``name`` prefixing the CSV stem: the panel sits in two apps), the load summary, the request table
and one request's explanation (one sentence per non-zero part of its token match,
``studies.hit_requests.EngineExplanation.parts``, each citing its facts)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES
from kda_core.studies.hit_reasons import ENGINES, REASONS, HitReasons
from kda_core.studies.hit_requests import EngineExplanation, RequestExplanation
from kda_core.studies.host_coverage import HostCoverage
from kda_core.workloads import Trace
from words.catalog import T

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
REASON_COLORS = dict(zip(REASONS, (COLORS["hit"], COLORS["free"], *SERIES), strict=True))
GIB = float(1 << 30)


def fig_reasons(r: HitReasons, name: str, t: T) -> tuple[go.Figure, str]:
    """Per engine, the share of requests (left) and of uncached tokens (right) per reason, as
    stacked bars: SGLang and vLLM side by side on the same trace."""
    req, tok = r.share_arrays()
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=(t("hits_requests"), t("hits_tokens")),
    )
    engines = [ENGINE_NAMES[e] for e in ENGINES]
    present = [k for k in range(len(REASONS)) if req[:, k].any() or tok[:, k].any()]
    for k in present:
        reason = t(f"r_{REASONS[k]}")
        for col, shares in ((1, req), (2, tok)):
            fig.add_bar(
                x=shares[:, k],
                y=engines,
                orientation="h",
                name=reason,
                marker_color=REASON_COLORS[REASONS[k]],
                legendgroup=REASONS[k],
                showlegend=col == 1,
                row=1,
                col=col,
                hovertemplate=t("h_hits_share", engine="%{y}", reason=reason, y="%{x:.1%}")
                + "<extra></extra>",
            )
    ui.style(fig, t("t_hits_reasons", n=len(r.input_len)), "", "", height=380)
    fig.update_layout(barmode="stack", margin={"b": 140})  # the panel titles below the title
    ui.top_margin(fig, 62)
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(
        f"{name}-hit-reasons",
        {
            "reason": list(REASONS),
            **{f"{e}_request_share": req[j] for j, e in enumerate(ENGINES)},
            **{f"{e}_uncached_token_share": tok[j] for j, e in enumerate(ENGINES)},
        },
    )
    return fig, csv


def fig_coverage(c: HostCoverage, name: str, t: T) -> tuple[go.Figure, str]:
    """Against the HiCache host ratio: the share of resident KV pages whose prefix ends on a
    state held on the device, the host, or either."""
    fig = go.Figure()
    gib = [f"{n * c.checkpoint_bytes / GIB:.2f}" for n in c.host_states.tolist()]
    lines = (  # "either" first, under the others: a line it equals stays visible
        (c.any_share, "l_cov_any", COLORS["hit"], "solid"),
        (c.host_share, "l_cov_host", SERIES[0], "dash"),
        (c.device_share, "l_cov_device", COLORS["state"], "dot"),
    )
    for y, key, color, dash in lines:
        fig.add_scatter(
            x=[f"{s:g}" for s in c.sizes.tolist()],
            y=y,
            name=t(key),
            mode="lines+markers",
            line={"color": color, "dash": dash, "width": 3 if dash == "solid" else 2},
            customdata=list(zip(c.host_states.tolist(), gib, strict=True)),
            hovertemplate=t(
                "h_cov",
                name=t(key),
                x="%{x}",
                slots="%{customdata[0]:,}",
                gib="%{customdata[1]}",
                y="%{y:.2%}",
                pages=f"{c.resident_pages:,}",
            )
            + "<extra></extra>",
        )
    ui.style(fig, t("t_cov", d=c.device_states), t("x_cov"), t("y_cov"), height=380)
    fig.update_xaxes(type="category")  # evenly spaced: the ratios double from 0.5 on
    fig.update_yaxes(tickformat=".1%", rangemode="tozero")
    csv = ui.write_csv(
        f"{name}-kv-page-coverage",
        {
            "hicache_ratio": c.sizes,
            "host_state_slots": c.host_states,
            "resident_kv_pages": [c.resident_pages] * len(c.sizes),
            "share_state_on_device": c.device_share,
            "share_state_on_host": c.host_share,
            "share_state_either": c.any_share,
            "state_hit_rate": c.state_hit_rate,
        },
    )
    return fig, csv


def count(key: str, n: int, t: T) -> str:
    """``n`` things in words: ``key`` for one ("1 request"), ``key`` + "s" for more."""
    return t(key) if n == 1 else t(key + "s", n=n)


def _budget(gib: float | None, t: T) -> str:
    return t("budget_none") if not gib else t("budget_gib", gib=gib)


def summary_markdown(
    trace: Trace, name: str, r: HitReasons | None, budget_gib: float | None, t: T
) -> str:
    """The load: what was read, the skipped rows, the rates (or why there are none)."""
    fmt = t(f"fmt_{trace.source_format or 'mooncake'}")
    n = count("n_request", len(trace), t)
    lines = []
    if r is None:
        lines.append(
            t(
                "s_hits_lengths",
                fmt=fmt,
                count=n,
                mi=float(trace.input_len.mean()) if len(trace) else 0.0,
                mo=float(trace.output_len.mean()) if len(trace) else 0.0,
            )
        )
    else:
        budget = _budget(budget_gib, t)
        lines.append(
            t(
                "s_hits_head",
                name=name,
                fmt=fmt,
                count=n,
                block=trace.block_size,
                sg=r.sglang.unit,
                vb=r.vllm.unit,
                budget=budget,
            )
        )
        tot = max(int(r.input_len.sum()), 1)
        lines += [
            "",
            t(
                "s_hits_rate",
                sg=r.sglang.cached.sum() / tot,
                vl=r.vllm.cached.sum() / tot,
                ideal=r.token_match.sum() / tot,
            ),
        ]
    if trace.skipped_rows:
        lines += ["", t("s_hits_skipped", rows=count("n_bad_row", trace.skipped_rows, t))]
        lines += [f"- `{reason}`" for reason in trace.skip_reasons]
    return "\n".join(lines)


def table_rows(r: HitReasons | None, rows: Sequence[int], t: T) -> tuple[list[str], list[list]]:
    """(headers, rows) of the request table: index, input, shared, each engine's cached
    tokens and reason (no rows without a study)."""
    head = [
        t(k)
        for k in (
            "th_request",
            "th_input",
            "th_match",
            "th_sg",
            "th_sg_reason",
            "th_vl",
            "th_vl_reason",
        )
    ]
    out = []
    for i in rows if r is not None else ():
        out.append(
            [
                int(i),
                int(r.input_len[i]),
                int(r.token_match[i]),
                int(r.sglang.cached[i]),
                t(f"r_{REASONS[r.sglang.reason[i]]}"),
                int(r.vllm.cached[i]),
                t(f"r_{REASONS[r.vllm.reason[i]]}"),
            ]
        )
    return head, out


def explain_markdown(e: RequestExplanation | None, t: T) -> str:
    """One request for both engines: its token match split into parts that add up (restored,
    taken by a budget, no state, short of a grid unit, the last token) and why."""
    if e is None:
        return t("x_pick")
    branch = t("x_branch") if e.known_branch else t("x_nobranch")
    lines = [
        t(
            "x_head",
            i=e.index,
            input=e.input_len,
            match=e.token_match,
            blocks=e.matched_blocks,
            block=e.block_size,
            branch=branch,
        ),
        "",
        t("x_th"),
        "|---|---:|---:|",
    ]
    s, v = e.sglang, e.vllm
    lines.append(f"| {t('x_unit')} | {s.unit:,} | {v.unit:,} |")
    ps, pv = s.parts, v.parts
    for part in ps:  # in order: they add up to the shared prefix
        lines.append(f"| {t('x_' + part)} | {ps[part]:,} | {pv[part]:,} |")
    lines.append(f"| {t('x_sum')} | **{sum(ps.values()):,}** | **{sum(pv.values()):,}** |")
    lines.append(f"| {t('x_reason')} | {t('r_' + s.reason)} | {t('r_' + v.reason)} |")
    lines.append("")
    for eng, label in ((s, "SGLang"), (v, "vLLM")):
        lines.append("- " + t("x_why", engine=label, why=why_sentences(eng, e.sharer, t)))
    return "\n".join(lines)


_GAP = {"none": "why_gap_none", "past_match": "why_gap_past", "last_token": "why_gap_last"}


def why_sentences(e: EngineExplanation, sharer: int, t: T) -> str:
    """The engine's sentences, one per non-zero part of the token match (the facts of
    ``EngineExplanation``: who saved the state it restores from, where the deeper one is)."""
    if e.token_match == 0:
        return t("why_first")
    part = e.parts
    out = []
    if e.cached == 0:
        out.append(t("why_nothing"))
    elif e.cached == e.cached_unlimited and e.source >= 0:
        out.append(t("why_restored", n=e.cached, src=e.source))
    else:
        out.append(t("why_restored_any", n=e.cached))
    if e.cached > e.cached_unlimited:
        out.append(t("why_more", full=e.cached_unlimited))
    if part["evicted"]:
        took = t(f"took_{e.evicted_by}")
        out.append(
            t("why_evicted", full=e.cached_unlimited, src=e.source, took=took, n=part["evicted"])
        )
    if part["no_state"]:
        at = max(e.cached, e.cached_unlimited)
        out.append(
            t(
                _GAP[e.deeper_at],
                n=part["no_state"],
                grid=e.grid_point,
                q=e.deeper,
                k=e.deeper_source,
                match=e.token_match,
                at=at,
                j=sharer,
            )
        )
    if part["below_unit"]:
        out.append(t("why_below", n=part["below_unit"], unit=e.unit))
    if part["last_token"]:
        out.append(t("why_last"))
    return ("" if t.zh else " ").join(out)  # Chinese sentences end in "。", no space
