"""chunk_scan: the chunkwise form equals the token recurrence, and why segment maps compose.

Draws ``kda_core.studies.chunk_scan``: chunked vs recurrent errors over T x chunk size, what
chunking buys (sequential steps vs FLOPs at K3 scale), segment maps composed in different
groupings (same map) and orders (different map), the map of a head in the true order vs with
the last two segments swapped, and, on demand, measured speed.

Main actions: ``chunk_scan_run`` (inputs -> five figures + CSVs) and ``chunk_scan_time``
(measures both forms; every measurement of the session is kept in ``gr.State`` and overlaid).
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.i18n_tables import CHUNK_SCAN as TR
from apps.ui import SERIES, guard, i18n
from kda_core.studies import chunk_scan as cs

NAME = "chunk_scan"
SOURCES = ("random inputs", "tiny model on text")
DEFAULT_TEXT = (
    "KDA 为每个请求保存固定大小的状态。A token prefix hit is not a state hit: "
    "the request resumes at a checkpoint and replays the tokens up to the match."
)
FLOOR = 1e-18  # zero differences are drawn at this floor on log axes
MAX_TIMINGS = 6

EN = """**Chunked = recurrent, and why checkpoints compose.** KDA's state update is an *affine map*
S → M S + b for every token; a run of tokens (a segment, a chunk) is one composed map. The
chunkwise kernel evaluates these maps 64 tokens at a time with matrix multiplies instead of one
token at a time. **Look at:** the errors against the token recurrence (float64 round-off,
~1e-15, for every chunk size); how chunking cuts the *sequential* steps by C while doing a bit
*more* arithmetic; segment maps grouped any way give the same map (associative: a parallel scan
works), but applied in another order they give a different state (not commutative: a cache may
only resume a prefix from a checkpoint *of that prefix*)."""

ZH = """**分块计算等于逐步递推，以及检查点为何可以组合。** KDA 每个 token 的状态更新是一个*仿射映射*
S → M S + b；一段 token（一个段、一个块）就是一个复合映射。分块内核每次用矩阵乘法处理 64 个 token，
而不是逐个 token。**请看：** 与逐步递推相比的误差（float64 舍入误差，约 1e-15，
任何块大小都是如此）；分块把*串行*步数减少为 1/C，但算术量略*多*；段映射无论怎样结合都得到同一个映射
（结合律：可以并行扫描），但换一个顺序得到不同的状态（不满足交换律：缓存只能从*该前缀自己的*检查点恢复）。"""


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------


def fig_agreement(a: cs.Agreement) -> tuple[go.Figure, str]:
    fig = go.Figure()
    cols: dict[str, object] = {
        "T": [],
        "chunk_size": [],
        "o_max_abs": [],
        "o_rel": [],
        "S_max_abs": [],
        "S_rel": [],
    }
    for i, T in enumerate(a.T_values.tolist()):
        c = SERIES[i % len(SERIES)]
        fig.add_scatter(
            x=a.chunk_sizes,
            y=np.maximum(a.o_max_abs[i], FLOOR),
            name=f"T={T} output",
            mode="lines+markers",
            line={"color": c, "width": 2},
            customdata=a.o_max_abs[i],
            hovertemplate=f"T={T}, C=%{{x}}<br>max |Δo| %{{customdata:.2e}}<extra></extra>",
        )
        fig.add_scatter(
            x=a.chunk_sizes,
            y=np.maximum(a.S_max_abs[i], FLOOR),
            name=f"T={T} final state",
            mode="lines+markers",
            line={"color": c, "width": 1, "dash": "dot"},
            customdata=a.S_max_abs[i],
            hovertemplate=f"T={T}, C=%{{x}}<br>max |ΔS| %{{customdata:.2e}}<extra></extra>",
        )
        for j, C in enumerate(a.chunk_sizes.tolist()):
            cols["T"].append(T)
            cols["chunk_size"].append(C)
            for key in ("o_max_abs", "o_rel", "S_max_abs", "S_rel"):
                cols[key].append(float(getattr(a, key)[i, j]))
    eps = float(np.finfo(np.float64).eps)
    fig.add_scatter(  # a legend entry, not a label box: nothing sits over the curves
        x=[float(a.chunk_sizes.min()), float(a.chunk_sizes.max())], y=[eps, eps], mode="lines",
        name=f"float64 machine epsilon {eps:.1e}",
        line={"color": ui.COLORS["neutral"], "dash": "dash", "width": 1.5},
        hovertemplate=f"float64 machine epsilon {eps:.1e}<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        f"Chunked vs recurrent: max abs difference ({a.source})",
        "chunk size C (tokens, log scale)",
        "max |chunked − recurrent| (log scale)",
    )
    ui.log_axis(fig, "x", a.chunk_sizes, fmt=lambda v: f"{v:g}")
    ui.log_axis(fig, "y")
    fig.update_yaxes(range=[-18, -10], exponentformat="power")
    return fig, ui.write_csv(f"{NAME}-agreement", cols)


def fig_cost(c: cs.Cost) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.14,
        subplot_titles=("sequential steps per layer", "matmul FLOPs, chunked ÷ recurrent"),
    )
    cols: dict[str, list] = {
        "T": [],
        "chunk_size": [],
        "recurrent_steps": [],
        "chunked_steps": [],
        "recurrent_flops": [],
        "chunked_flops": [],
        "flops_ratio": [],
    }
    for i, T in enumerate(c.T_values.tolist()):
        col = SERIES[i % len(SERIES)]
        fig.add_scatter(
            x=c.chunk_sizes,
            y=c.chunked_steps[i],
            name=f"T={T:,}",
            mode="lines+markers",
            line={"color": col},
            legendgroup=str(T),
            row=1,
            col=1,
            hovertemplate=f"T={T:,}, C=%{{x}}<br>%{{y:,}} chunk steps "
            f"(recurrent: {T:,})<extra></extra>",
        )
        fig.add_scatter(
            x=c.chunk_sizes,
            y=c.flops_ratio[i],
            name=f"T={T:,}",
            mode="lines+markers",
            line={"color": col},
            legendgroup=str(T),
            showlegend=False,
            row=1,
            col=2,
            hovertemplate=f"T={T:,}, C=%{{x}}<br>× %{{y:.2f}} FLOPs<extra></extra>",
        )
        for j, C in enumerate(c.chunk_sizes.tolist()):
            cols["T"].append(T)
            cols["chunk_size"].append(C)
            cols["recurrent_steps"].append(int(c.recurrent_steps[i]))
            cols["chunked_steps"].append(int(c.chunked_steps[i, j]))
            cols["recurrent_flops"].append(int(c.recurrent_flops[i]))
            cols["chunked_flops"].append(int(c.chunked_flops[i, j]))
            cols["flops_ratio"].append(float(c.flops_ratio[i, j]))
    ui.style(
        fig,
        f"What chunking buys: one KDA layer, H={c.H}, K={c.K}, V={c.V}",
        "chunk size C (tokens)",
        "",
    )
    fig.update_yaxes(title_text="steps (log scale)", row=1, col=1)
    ui.log_axis(fig, "y", row=1, col=1)
    fig.update_yaxes(title_text="FLOPs ratio (×)", rangemode="tozero", row=1, col=2)
    fig.update_xaxes(title_text="chunk size C (tokens, log scale)")
    for col in (1, 2):
        ui.log_axis(fig, "x", c.chunk_sizes, row=1, col=col, fmt=lambda v: f"{v:g}")
    fig.update_layout(margin={"t": 80})
    return fig, ui.write_csv(f"{NAME}-cost", cols)


def fig_groupings(m: cs.Composition) -> tuple[go.Figure, str]:
    labels = [g.replace("->", "→") for g in m.grouping_labels]
    fig = go.Figure()
    for key, name, color in (  # categorical: palette.SERIES in its fixed order
        ("grouping_M_diff", "max |ΔM| vs (A→B)→C", SERIES[0]),
        ("grouping_b_diff", "max |Δb| vs (A→B)→C", SERIES[1]),
        ("grouping_S_diff", "max |map(S0) − recurrent S|", SERIES[2]),
    ):
        v = getattr(m, key)
        fig.add_bar(
            y=labels,
            x=np.maximum(v, FLOOR),
            orientation="h",
            name=name,
            marker_color=color,
            customdata=v,
            hovertemplate="%{y}<br>" + name + ": %{customdata:.2e}<extra></extra>",
        )
    eps = float(np.finfo(np.float64).eps)
    ui.vline(fig, eps, log=True, dash="dash")
    fig.add_scatter(  # the line's name in the legend (a label box would cover bars)
        x=[None], y=[None], mode="lines", name=f"float64 machine epsilon {eps:.1e} (dashed)",
        line={"color": ui.COLORS["neutral"], "dash": "dash", "width": 1.5},
        hoverinfo="skip",
    )  # fmt: skip
    seg = ", ".join(f"{a}={n}" for a, n in zip(m.labels, m.lengths.tolist()))
    ui.style(
        fig,
        f"Any grouping gives the same map (segments {seg} tokens)",
        "max abs difference (log scale; 0 drawn at 1e-18)",
        "",
        height=420,
    )
    top = max(float(np.max([m.grouping_M_diff, m.grouping_b_diff, m.grouping_S_diff])), eps)
    ui.log_axis(fig, "x")
    fig.update_xaxes(range=[-18.5, np.log10(top) + 0.8], exponentformat="power")
    fig.update_layout(margin={"t": 64})
    fig.update_layout(barmode="group")
    fig.update_yaxes(autorange="reversed")
    csv = ui.write_csv(
        f"{NAME}-groupings",
        {
            "grouping": list(m.grouping_labels),
            "M_max_abs": m.grouping_M_diff,
            "b_max_abs": m.grouping_b_diff,
            "S_max_abs": m.grouping_S_diff,
        },
    )
    return fig, csv


ORDER_LABELS_MAX = 12  # more orders than this (5 segments: 120) are drawn sorted, unlabelled


def fig_orders(m: cs.Composition) -> tuple[go.Figure, str]:
    """Relative state distance of every order of the segment maps; the true order is 0. With
    more than ORDER_LABELS_MAX orders the bars are sorted by distance and the order itself is
    in the hover (120 rotated labels are unreadable)."""
    labels = [s.replace("->", "→") for s in m.order_labels]
    many = len(labels) > ORDER_LABELS_MAX
    idx = np.argsort(m.order_S_rel, kind="stable") if many else np.arange(len(labels))
    x = list(range(1, len(labels) + 1)) if many else labels
    true_pos = int(np.flatnonzero(idx == 0)[0])
    colors = [SERIES[2] if i == 0 else SERIES[1] for i in idx]  # categorical: true vs others
    fig = go.Figure()
    fig.add_bar(
        x=x,
        y=m.order_S_rel[idx],
        marker_color=colors,
        name="relative state distance",
        customdata=np.stack(
            [np.array(labels, dtype=object)[idx], m.order_M_diff[idx], m.order_b_diff[idx]],
            axis=1,
        ),
        hovertemplate="%{customdata[0]}<br>‖S − S_true‖/‖S_true‖ = %{y:.3g}<br>max |ΔM| "
        "%{customdata[1]:.3g}, max |Δb| %{customdata[2]:.3g}<extra></extra>",
    )
    top = float(np.max(m.order_S_rel)) or 1.0
    for name, color in (
        (f"true order {x[true_pos] if not many else labels[0]} (distance 0)", SERIES[2]),
        ("another order", SERIES[1]),
    ):  # the colours' legend (a text box over the bars would hide them)
        fig.add_scatter(
            x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
            marker={"symbol": "square", "size": 12, "color": color},
        )  # fmt: skip
    ui.style(
        fig,
        "The order matters: other orders give other states"
        + (f" ({len(labels)} orders, sorted)" if many else ""),
        "orders of the segment maps, sorted by distance" if many else "order of the segment maps",
        "‖S − S_true‖ / ‖S_true‖",
    )
    fig.data[0].showlegend = False
    fig.update_yaxes(range=[0, top * 1.15])
    if many:
        fig.update_xaxes(showticklabels=False, ticks="")
    csv = ui.write_csv(
        f"{NAME}-orders",
        {
            "order": list(m.order_labels),
            "M_max_abs": m.order_M_diff,
            "b_max_abs": m.order_b_diff,
            "S_rel": m.order_S_rel,
        },
    )
    return fig, csv


def fig_maps(m: cs.Composition) -> tuple[go.Figure, str]:
    d = m.M_swapped - m.M_true
    lim = float(np.abs(d).max()) or 1.0
    swapped = m.order_labels[1].replace("->", "→")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.2,
        subplot_titles=(
            f"M of {m.order_labels[0].replace('->', '→')} (head {m.head})",
            f"M of {swapped} − M of the true order",
        ),
    )
    fig.add_heatmap(
        z=m.M_true,
        colorscale="Viridis",
        coloraxis="coloraxis",
        row=1,
        col=1,
        hovertemplate="row %{y}, col %{x}<br>M = %{z:.4f}<extra></extra>",
    )
    fig.add_heatmap(
        z=d,
        colorscale="RdBu_r",  # the suite's diverging orientation: negative blue, positive red
        zmid=0,
        zmin=-lim,
        zmax=lim,
        row=1,
        col=2,
        colorbar={"title": "Δ", "x": 1.02},
        hovertemplate="row %{y}, col %{x}<br>ΔM = %{z:.2e}<extra></extra>",
    )
    ui.style(
        fig,
        "The composed transition matrix M [K, K]",
        "key channel (column)",
        "key channel (row)",
        height=420,
        legend=False,
    )
    fig.update_layout(
        coloraxis={"colorscale": "Viridis", "colorbar": {"x": 0.41, "title": "M"}}, margin={"t": 80}
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="", row=1, col=2)
    K = m.M_true.shape[0]
    r, c = np.divmod(np.arange(K * K), K)
    csv = ui.write_csv(
        f"{NAME}-maps",
        {"row": r, "col": c, "M_true": m.M_true.ravel(), "M_swapped": m.M_swapped.ravel()},
    )
    return fig, csv


def fig_timing(runs: list[cs.Timing]) -> tuple[go.Figure, str]:
    fig = go.Figure()
    series: dict[str, tuple] = {}
    for n, t in enumerate(runs, 1):
        dash = "solid" if n == len(runs) else "dot"
        fig.add_scatter(
            x=t.T_values,
            y=t.recurrent_s * 1e3,
            name=f"#{n} recurrent",
            mode="lines+markers",
            line={"color": SERIES[0], "dash": dash},
            hovertemplate="T=%{x}<br>recurrent %{y:.2f} ms<extra></extra>",
        )
        series[f"run{n} recurrent"] = (t.T_values, t.recurrent_s)
        for j, C in enumerate(t.chunk_sizes.tolist()):
            fig.add_scatter(
                x=t.T_values,
                y=t.chunked_s[:, j] * 1e3,
                name=f"#{n} chunked C={C}",
                mode="lines+markers",
                line={"color": SERIES[(j + 1) % len(SERIES)], "dash": dash},
                customdata=t.speedup[:, j],
                hovertemplate=f"T=%{{x}}, C={C}<br>%{{y:.2f}} ms "
                "(×%{customdata:.2f} faster)<extra></extra>",
            )
            series[f"run{n} chunked C={C}"] = (t.T_values, t.chunked_s[:, j])
    t = runs[-1]
    ui.style(
        fig,
        f"Measured on this CPU (numpy, H={t.H}, K={t.K}, V={t.V}, best of "
        f"{t.repeats}); the latest run is solid",
        "sequence length T (tokens)",
        "time (ms, log scale)",
    )
    ui.log_axis(fig, "x", runs[-1].T_values, fmt=lambda v: f"{v:,.0f}")
    ms = np.concatenate([np.r_[t.recurrent_s, t.chunked_s.ravel()] * 1e3 for t in runs])
    ui.log_axis(fig, "y", ui.log_ticks(float(ms.min()), float(ms.max())))
    return fig, ui.series_csv(f"{NAME}-timing", series, "T", "seconds")


def summary_markdown(s: cs.ChunkScanStudy, m: cs.Composition) -> str:
    a = s.agreement
    i = int(np.argmax(s.cost.T_values))
    j = int(np.argmin(np.abs(s.cost.chunk_sizes - 64)))
    return (
        f"- chunked vs recurrent ({a.source}): worst max |Δo| **{a.o_max_abs.max():.2e}**, "
        f"worst max |ΔS| **{a.S_max_abs.max():.2e}** over T ∈ {a.T_values.tolist()} and "
        f"C ∈ {a.chunk_sizes.tolist()}\n"
        f"- groupings: max |ΔM| **{m.grouping_M_diff.max():.2e}**, max |Δb| "
        f"**{m.grouping_b_diff.max():.2e}**; other orders: relative state distance "
        f"**{m.order_S_rel[1:].min():.3g} – {m.order_S_rel[1:].max():.3g}**\n"
        f"- prefix compositions reproduce the recurrent state at every boundary "
        f"{m.boundary_tokens.tolist()} to **{m.boundary_S_diff.max():.1e}**\n"
        f"- one K3 KDA layer at T = {int(s.cost.T_values[i]):,}, C = "
        f"{int(s.cost.chunk_sizes[j])}: **{int(s.cost.chunked_steps[i, j]):,}** sequential "
        f"steps instead of {int(s.cost.recurrent_steps[i]):,}, for "
        f"**×{s.cost.flops_ratio[i, j]:.2f}** the FLOPs"
    )


# ---------------------------------------------------------------------------------------------
# Callbacks
# ---------------------------------------------------------------------------------------------


def _lengths(text: str) -> tuple[int, ...]:
    parts = [p for p in str(text or "").replace(";", ",").split(",") if p.strip()]
    if not 2 <= len(parts) <= cs.MAX_SEGMENTS:
        raise gr.Error(
            f"segment lengths: give 2 to {cs.MAX_SEGMENTS} comma-separated integers "
            f"in [1, 256], got {ui.clip_text(text)}"
        )
    return tuple(ui.check_int("segment length", p.strip(), 1, 256) for p in parts)


def _cross_run(source: str, text: object, _seed: object, _c: object, lengths: str,
               head: object, *_: object) -> tuple[int, str] | None:  # fmt: skip
    """The checks that need two inputs (the same as ``run``'s)."""
    lens = _lengths(lengths)
    if source == SOURCES[1]:
        n = len(str(text or "").encode("utf-8"))
        if not 3 <= n <= 2048:
            return 1, f"text must be 3 to 2048 UTF-8 bytes long, got {n}"
        if sum(lens) > n:
            return 4, f"segment lengths must sum to at most the text's {n} bytes, got {sum(lens)}"
    try:
        ui.check_int("head", head, 0, 3 if source == SOURCES[1] else 1)
    except gr.Error as e:
        return 5, guard.message_of(e)
    return None


@ui.study_errors
def run(
    source: str = SOURCES[0],
    text: str = DEFAULT_TEXT,
    seed: float = 0,
    chunk_size: float = 64,
    lengths: str = "16, 16, 16",
    head: float = 0,
):
    """Returns the summary and five (figure, csv) pairs."""
    source = ui.check_choice("source", source, SOURCES)
    sd = ui.check_int("seed", seed, 0, 2**31 - 1)
    C = ui.check_int("chunk size", chunk_size, 1, 256)
    lens = _lengths(lengths)
    if source == SOURCES[1]:
        text = str(text or "")
        n = len(text.encode("utf-8"))
        if not 3 <= n <= 2048:
            raise gr.Error(f"text must be 3 to 2048 UTF-8 bytes long, got {n}")
        if sum(lens) > n:
            raise gr.Error(
                f"segment lengths must sum to at most the text's {n} bytes, got {sum(lens)}"
            )
        hd = ui.check_int("head", head, 0, 3)
        study = cs.chunk_scan_study(text=text, chunk_size=C)
        comp = cs.composition(lengths=lens, text=text, head=hd)
    else:
        hd = ui.check_int("head", head, 0, 1)
        study = cs.chunk_scan_study(seed=sd, chunk_size=C)
        comp = cs.composition(lengths=lens, seed=sd, head=hd)
    figs = [
        fig_agreement(study.agreement),
        fig_cost(study.cost),
        fig_groupings(comp),
        fig_orders(comp),
        fig_maps(comp),
    ]
    return (summary_markdown(study, comp), *[x for pair in figs for x in pair])


@ui.study_errors
def measure(
    chunk_size: float = 64,
    repeats: float = 3,
    runs: list | None = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - gradio's injection idiom
):
    """Time both forms (best of ``repeats``); the session keeps the last MAX_TIMINGS runs."""
    C = ui.check_int("chunk size", chunk_size, 1, 256)
    r = ui.check_int("repeats", repeats, 1, 5)
    progress(0.1, desc="timing recurrent and chunked forms")
    t = cs.timing(chunk_sizes=tuple(sorted({16, 64, C})), repeats=r)
    kept = (list(runs or []) + [t])[-MAX_TIMINGS:]
    fig, csv = fig_timing(kept)
    return fig, csv, kept


def build() -> gr.Blocks:
    with gr.Blocks(title="Chunk scan · KDA State Lab") as demo:
        lang = ui.header(NAME, "Chunk scan · 分块扫描", EN, ZH)
        timings = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                source = gr.Radio(
                    list(SOURCES), value=SOURCES[0], label="inputs", elem_id=f"{NAME}-source"
                )
                text = gr.Textbox(
                    DEFAULT_TEXT,
                    lines=3,
                    label="text (tiny model, 3-2048 bytes)",
                    elem_id=f"{NAME}-text",
                )
                with gr.Row():
                    seed = gr.Number(0, label="seed", step=1)
                    chunk = gr.Number(
                        64, label="chunk size C (1-256)", step=1, elem_id=f"{NAME}-chunk"
                    )
                with gr.Row():
                    lengths = gr.Textbox(
                        "16, 16, 16",
                        label="segment lengths (2-5 values)",
                        elem_id=f"{NAME}-lengths",
                    )
                    head = gr.Number(0, label="head", step=1)
                run_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
                summary = gr.Markdown(label="Summary", elem_id=f"{NAME}-summary")
                speed_md = gr.Markdown("**Speed** (wall clock on this machine)")
                repeats = gr.Number(3, label="repeats (1-5)", step=1)
                time_btn = gr.Button("Measure speed", elem_id=f"{NAME}-time")
            with gr.Column(scale=2):
                s1 = ui.figure_slot(f"{NAME}-agreement", "Chunked vs recurrent")
                s2 = ui.figure_slot(f"{NAME}-cost", "What chunking buys")
                s3 = ui.figure_slot(f"{NAME}-groupings", "Groupings")
                s4 = ui.figure_slot(f"{NAME}-orders", "Orders")
                s5 = ui.figure_slot(f"{NAME}-maps", "Transition matrices")
                no_timing = ui.empty_figure("Measured speed", "press “Measure speed”")
                s6 = ui.figure_slot(
                    f"{NAME}-timing",
                    "Measured speed",
                    no_timing,
                    csv_visible=False,  # no dead download button before a measurement
                )
        inputs = [source, text, seed, chunk, lengths, head]
        outputs = [summary, *s1.outputs, *s2.outputs, *s3.outputs, *s4.outputs, *s5.outputs]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, outputs)
        run_in = [*inputs, lang.radio]
        run_v = guard.validator(
            lambda v: ui.check_choice("source", v, SOURCES),
            None,
            lambda v: ui.check_int("seed", v, 0, 2**31 - 1),
            lambda v: ui.check_int("chunk size", v, 1, 256),
            _lengths,
            None,
            cross=_cross_run,
        )
        run_btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        time_fn, time_out = loc.wrap(measure, [*s6.outputs, timings])
        time_btn.click(
            time_fn,
            [chunk, repeats, timings, lang.radio],
            time_out,
            api_name=f"{NAME}_time",
            validator=guard.validator(
                lambda v: ui.check_int("chunk size", v, 1, 256),
                lambda v: ui.check_int("repeats", v, 1, 5),
            ),
        ).then(lambda: gr.update(visible=True), None, s6.csv, api_visibility="private")
        loc.initial(s6.plot, no_timing)
        loc.finish()
        lang.labels(
            {
                source: "输入",
                text: "文本（小模型，3-2048 字节）",
                chunk: "块大小 C (1-256)",
                lengths: "段长度（2-5 个值）",
                head: "头",
                seed: "随机种子",
                repeats: "重复次数 (1-5)",
                run_btn: "运行",
                time_btn: "测量速度",
                speed_md: "**速度**（本机实测耗时）",
                **{s.csv: ui.CSV_ZH for s in (s1, s2, s3, s4, s5, s6)},
            },
            tr=TR,
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
