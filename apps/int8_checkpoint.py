"""int8_checkpoint: park a real KDA state compressed, restore it, decode on.

Draws ``kda_core.studies.int8.int8_study``: TinyHybrid reads the first N tokens of the reader's
text; its KDA recurrent states are parked as INT8 (per key channel = SGLang's layout, per head,
per tensor), fp8-e4m3 or bf16. Figures: the state and the signed error of one (layer, head);
histograms of the errors and of the values; the divergence over the next tokens when the state
is quantized once at parking vs at every step; the error of every variant against its bound; the
checkpoint bytes and capacity gained (tiny config and Kimi K3).

Main action: ``int8_checkpoint_run`` (all inputs -> summary, five figures with CSVs, this
session's history). The history lives in ``gr.State``.
"""

from __future__ import annotations

import html

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.i18n_tables import INT8_CHECKPOINT as TR
from apps.ui import COLORS, SERIES, guard, i18n
from kda_core.studies import int8 as st
from kda_core.studies import quality

NAME = "int8_checkpoint"
VARIANT_LABELS = tuple(v[0] for v in st.VARIANTS)
N_LAYERS = 6
N_HEADS = 4
MAX_HISTORY = 10
# categorical colours (palette rule: SERIES in a fixed order, never a semantic colour)
RUN_COLORS = {run: SERIES[i] for i, run in enumerate(st.RUNS)}  # park once, every step
OTHER, SELECTED = SERIES[0], SERIES[1]  # the formats chart: other formats vs the selected one


def ticks_125(lo: float, hi: float) -> list[float]:
    """1-2-5 tick values covering [lo, hi] (> 0): readable log ticks over a narrow range."""
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    vals = [m * 10.0**k for k in range(k0, k1 + 1) for m in (1, 2, 5)]
    inside = [v for v in vals if lo <= v <= hi]
    below = [v for v in vals if v < lo][-1:]
    above = [v for v in vals if v > hi][:1]
    return below + inside + above


EN = """**Parking a checkpoint in fewer bytes.** A checkpoint is a copy of every KDA layer's
recurrent state (plus the short-conv window). SGLang can park it as **INT8 with one scale per
(head, key channel)** and dequantize on restore: one rounding per cache hit, about half the bytes
of bf16, so about twice the checkpoints fit. Here the tiny model reads your text; its real state
is compressed and restored. **Look at:** the error map (stripes along key channels with large
values), the error against its theoretical ceiling per variant, and the divergence: quantizing
*once* at parking stays flat, quantizing *at every step* keeps adding error."""

ZH = (
    "**用更少的字节停放检查点。** 检查点是每个 KDA 层递推状态（加短卷积窗口）的一份拷贝。SGLa"
    "ng 可以把它以 **INT8、每个 (头, key 通道) 一个缩放因子** 停放，恢复时反量化：每次命中只"
    "舍入一次，字节数约为 bf16的一半，能存下约两倍的检查点。这里小模型读取你的文本，它的真实"
    "状态被压缩再恢复。**请看：** 误差图（数值大的 key 通道呈条纹），各种格式的误差与理论上限"
    "，以及偏离曲线：只在停放时量化*一次*保持平稳，*每一步*都量化则误差不断累积。"
)


def _variant(label: str) -> tuple[str, str | None]:
    label = ui.check_choice("format", label, VARIANT_LABELS)
    _, fmt, gran = st.VARIANTS[VARIANT_LABELS.index(label)]
    return fmt, gran


# ---------------------------------------------------------------------------------------------
# Figures (pure: study -> figure, csv path)
# ---------------------------------------------------------------------------------------------


def _tick(v: float) -> str:
    return f"{v:g}"


def fig_error_map(e: st.ErrorMap) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.16,
        subplot_titles=(f"parked state S (KDA layer {e.layer}, head {e.head})",
                        f"restored − S ({e.label})"),
    )  # fmt: skip
    zs = float(np.abs(e.state).max()) or 1.0
    ze = float(np.abs(e.error).max()) or 1.0
    fig.add_heatmap(
        z=e.state, zmin=-zs, zmax=zs, colorscale="RdBu_r", row=1, col=1,
        colorbar={"title": {"text": "S"}, "x": 0.41, "len": 0.8, "thickness": 12},
        hovertemplate="key k=%{y}, value v=%{x}<br>S %{z:.4f}<extra></extra>",
    )  # fmt: skip
    fig.add_heatmap(
        z=e.error, zmin=-ze, zmax=ze, colorscale="RdBu_r", row=1, col=2,
        colorbar={"title": {"text": "error"}, "x": 1.0, "len": 0.8, "thickness": 12},
        customdata=e.bound,
        hovertemplate="key k=%{y}, value v=%{x}<br>error %{z:.2e}<br>bound %{customdata:.2e}"
        "<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        f"Error map of {e.label}: max |error| {e.max_abs_error:.2e}, "
        f"max error / bound {e.max_bound_ratio:.4g} (≤ 1: within the bound)",
        "value channel v",
        "key channel k",
        height=420,
        legend=False,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_yaxes(autorange="reversed", showline=False)
    fig.update_xaxes(showline=False)
    kk, vv = np.meshgrid(np.arange(e.state.shape[0]), np.arange(e.state.shape[1]), indexing="ij")
    csv = ui.write_csv(
        f"{NAME}-error_map",
        {
            "key_channel": kk.ravel(),
            "value_channel": vv.ravel(),
            "state": e.state.ravel(),
            "restored": e.restored.ravel(),
            "error": e.error.ravel(),
            "bound": e.bound.ravel(),
        },
    )
    return fig, csv


def fig_histograms(e: st.ErrorMap) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("signed error, all KDA layers", "state values, all KDA layers"),
    )  # fmt: skip
    ec = 0.5 * (e.err_edges[1:] + e.err_edges[:-1])
    vc = 0.5 * (e.value_edges[1:] + e.value_edges[:-1])
    fig.add_bar(
        x=ec,
        y=e.err_counts,
        width=np.diff(e.err_edges),
        row=1,
        col=1,
        name=f"error ({e.label})",
        marker_color=OTHER,
        hovertemplate="error %{x:.2e}<br>%{y} elements<extra></extra>",
    )
    fig.add_bar(
        x=vc,
        y=e.value_counts,
        width=np.diff(e.value_edges),
        row=1,
        col=2,
        name="state value",
        marker_color=COLORS["state"],
        hovertemplate="value %{x:.3f}<br>%{y} elements<extra></extra>",
    )
    ui.style(
        fig,
        "Histograms: where the rounding error and the values fall",
        "",
        "elements (count, log scale)",
        height=380,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_xaxes(title_text="restored − S", row=1, col=1)
    fig.update_xaxes(title_text="state value", row=1, col=2)
    for c in (1, 2):  # decade ticks only (no stray minor "2" / "5" labels)
        ui.log_axis(fig, "y", row=1, col=c)
    fig.update_layout(bargap=0.02)
    csv = ui.series_csv(
        f"{NAME}-histograms",
        {"error": (ec, e.err_counts), "state_value": (vc, e.value_counts)},
        "bin_center",
        "count",
    )
    return fig, csv


def fig_divergence(d: st.Divergence) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=("state distance to the exact run", "max |logit − exact logit|"),
    )  # fmt: skip
    runs = (
        ("quantized once at parking", RUN_COLORS["park_once"], d.park_once_state_dist,
         d.park_once_logit_diff, d.park_once_agree),
        ("re-quantized at every step", RUN_COLORS["every_step"], d.every_step_state_dist,
         d.every_step_logit_diff, d.every_step_agree),
    )  # fmt: skip
    for name, color, sd, ld, agree in runs:
        fig.add_scatter(
            x=d.steps,
            y=sd,
            mode="lines+markers",
            name=name,
            legendgroup=name,
            line={"color": color, "width": 2},
            row=1,
            col=1,
            hovertemplate=f"{name}<br>after %{{x}} tokens<br>relative distance "
            "%{y:.3g}<extra></extra>",
        )
        fig.add_scatter(
            x=d.steps[1:],
            y=ld[1:],
            mode="lines+markers",
            name=name,
            legendgroup=name,
            showlegend=False,
            line={"color": color, "width": 2},
            row=1,
            col=2,
            hovertemplate=f"{name}<br>token %{{x}}<br>max |Δlogit| %{{y:.3g}}<extra></extra>",
        )
        bad = ~agree
        if bad.any():
            fig.add_scatter(
                x=d.steps[bad],
                y=ld[bad],
                mode="markers",
                row=1,
                col=2,
                name=f"{name}: different greedy token",
                marker={"symbol": "x", "size": 12, "color": color},
                hovertemplate="token %{x}: greedy token differs<extra></extra>",
            )
    same = d.park_once_same, d.every_step_same
    n = d.decoded
    ui.style(
        fig,
        f"Decoding {n} tokens after the restore ({d.label}); same greedy token: "
        f"park once {same[0]}/{n}, every step {same[1]}/{n}",
        "tokens decoded after parking",
        "",
        height=400,
    )
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    fig.update_yaxes(title_text="relative Frobenius distance", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="max |Δlogit| (logit units)", row=1, col=2, rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-divergence",
        {
            "step": d.steps,
            "park_once_state_dist": d.park_once_state_dist,
            "every_step_state_dist": d.every_step_state_dist,
            "park_once_logit_diff": d.park_once_logit_diff,
            "every_step_logit_diff": d.every_step_logit_diff,
            "park_once_agree": d.park_once_agree,
            "every_step_agree": d.every_step_agree,
        },
    )
    return fig, csv


def fig_variants(t: st.VariantTable, chosen: str) -> tuple[go.Figure, str]:
    labels = list(t.labels)
    fig = go.Figure()
    sel = np.array([x == chosen for x in labels])
    for mask, name, color in (
        (~sel, "measured ‖error‖ / ‖S‖, other formats", OTHER),
        (sel, f"measured ‖error‖ / ‖S‖, selected: {chosen}", SELECTED),
    ):
        if mask.any():
            fig.add_bar(
                x=[x for x, m in zip(labels, mask) if m], y=t.rel_fro[mask], name=name,
                marker_color=color,
                hovertemplate="%{x}<br>relative error %{y:.3g}<extra></extra>",
            )  # fmt: skip
    fig.add_scatter(
        x=labels, y=t.bound_rel_fro, mode="markers", name="theoretical ceiling",
        marker={"symbol": "line-ew", "size": 34, "line": {"width": 3, "color": "black"}},
        hovertemplate="%{x}<br>ceiling %{y:.3g}<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        "Every format on the same parked state (all KDA layers)",
        "format / scale granularity",
        "relative Frobenius error (log scale)",
        height=380,
    )
    vals = np.concatenate([t.rel_fro, t.bound_rel_fro])
    ui.log_axis(fig, "y", ticks_125(float(vals.min()), float(vals.max())), fmt=_tick)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    csv = ui.write_csv(
        f"{NAME}-variants",
        {
            "variant": labels,
            "max_abs": t.max_abs,
            "mean_abs": t.mean_abs,
            "rel_fro": t.rel_fro,
            "bound_rel_fro": t.bound_rel_fro,
            "max_bound_ratio": t.max_bound_ratio,
            "bound_holds": t.bound_holds,
            "state_bytes": t.state_bytes,
        },
    )
    return fig, csv


def fig_capacity(
    tiny: st.Capacity, k3: st.Capacity, chosen: str | None = None
) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.1,
        subplot_titles=(f"{k3.model} TP{k3.tp}, {k3.budget_bytes / (1 << 30):g} GiB",
                        f"{tiny.model} (tiny), {tiny.budget_bytes / (1 << 20):g} MiB"),
    )  # fmt: skip
    for col, c in ((1, k3), (2, tiny)):
        sel = np.array([x == chosen for x in c.labels])
        cd = np.stack([c.state_bytes, c.conv_bytes, c.total_bytes], axis=1)
        for mask, name, color in (
            (~sel, "checkpoints that fit", COLORS["checkpoint"]),
            (sel, f"checkpoints that fit, selected: {chosen}", SELECTED),
        ):
            if not mask.any():
                continue
            fig.add_bar(
                x=[x for x, m in zip(c.labels, mask) if m], y=c.capacity[mask], row=1, col=col,
                showlegend=col == 1, name=name, legendgroup=name, marker_color=color,
                text=[f"×{g:.2f}" for g in c.gain[mask]], textposition="outside",
                customdata=cd[mask],
                hovertemplate="%{x}<br>%{y:,} checkpoints<br>state %{customdata[0]:,} B + conv "
                "%{customdata[1]:,} B = %{customdata[2]:,} B each<extra></extra>",
            )  # fmt: skip
        fig.update_xaxes(
            type="category", categoryorder="array", categoryarray=list(c.labels), row=1, col=col
        )
    ui.style(
        fig,
        f"Checkpoint capacity per format (native pool {k3.native_dtype}; ×gain vs native)",
        "",
        "checkpoints in the budget (count)",
        height=400,
    )
    fig.update_layout(margin={"t": 86}, barmode="overlay")  # room for the subplot titles
    fig.update_xaxes(tickangle=-25)
    for col, c in ((1, k3), (2, tiny)):  # headroom for the "×gain" labels above the bars
        fig.update_yaxes(range=[0, 1.18 * max(int(c.capacity.max()), 1)], row=1, col=col)
    rows = {
        "model": [],
        "variant": [],
        "state_bytes": [],
        "conv_bytes": [],
        "total_bytes": [],
        "capacity": [],
        "gain": [],
    }
    for c in (k3, tiny):
        rows["model"] += [c.model] * len(c.labels)
        rows["variant"] += list(c.labels)
        for k in ("state_bytes", "conv_bytes", "total_bytes", "capacity", "gain"):
            rows[k] += list(getattr(c, k))
    return fig, ui.write_csv(f"{NAME}-capacity", rows)


def summary_markdown(s: st.Int8Study, chosen: str) -> str:
    t = s.table
    i = t.labels.index(chosen)
    k3 = s.memory_k3
    j = k3.labels.index(chosen)
    d = s.divergence
    text = s.parked_text.replace("\n", "⏎").replace("|", "&#124;")
    rows = [
        ("parked after", f"{s.n_tokens} tokens", i18n.verbatim(text[-60:])),
        ("format", chosen, "scales in the native dtype"),
        ("relative error (all layers)", f"{t.rel_fro[i]:.3g}", f"ceiling {t.bound_rel_fro[i]:.3g}"),
        ("max abs error", f"{t.max_abs[i]:.3g}",
         f"max error / bound {t.max_bound_ratio[i]:.4g}"
         + (" (≤ 1: within the bound)" if t.bound_holds[i] else " (> 1: ABOVE the bound)")),
        ("park once, last step", f"{d.park_once_state_dist[-1]:.3g}",
         f"max Δlogit {d.park_once_logit_diff.max():.3g}"),
        ("every step, last step", f"{d.every_step_state_dist[-1]:.3g}",
         f"max Δlogit {d.every_step_logit_diff.max():.3g}"),
        (f"{k3.model} checkpoint", f"{k3.total_bytes[j] / (1 << 20):.1f} MiB",
         f"native {k3.total_bytes[0] / (1 << 20):.1f} MiB"),
        ("**capacity gained**", f"**×{k3.gain[j]:.2f}**",
         f"{k3.capacity[j]:,} vs {k3.capacity[0]:,} checkpoints"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return "| quantity | value |\n|---|---|\n" + body


# ---------------------------------------------------------------------------------------------
# Callback
# ---------------------------------------------------------------------------------------------


@ui.study_errors
def run(
    text: str = st.DEFAULT_TEXT,
    n_tokens: float = 64,
    variant: str = VARIANT_LABELS[0],
    layer: float = 0,
    head: float = 0,
    steps: float = 16,
    native_dtype: str = "bfloat16",
    tp: float = 8,
    budget_gib: float = 8.0,
    history: list | None = None,
) -> tuple:
    """Validate, run the study, draw. Outputs: summary, five (figure, csv) pairs, history
    table (markdown), history (session state)."""
    if not isinstance(text, str) or not text.strip():
        raise gr.Error(
            f"text must be non-empty (1 to {st.MAX_TEXT_CHARS} characters)", print_exception=False
        )
    if len(text) > st.MAX_TEXT_CHARS:
        raise gr.Error(
            f"text must be 1 to {st.MAX_TEXT_CHARS} characters, got {len(text)}",
            print_exception=False,
        )
    n_max = min(len(text.encode("utf-8")), st.MAX_PARK_TOKENS)
    n = ui.check_int("tokens to park (≤ the text's UTF-8 bytes)", n_tokens, 1, n_max)
    fmt, gran = _variant(variant)
    lay = ui.check_int("KDA layer", layer, 0, N_LAYERS - 1)
    hd = ui.check_int("head", head, 0, N_HEADS - 1)
    stp = ui.check_int("tokens to decode", steps, 1, st.MAX_STEPS)
    nat = ui.check_choice("native state dtype", native_dtype, st.NATIVE_DTYPES)
    tp_i = ui.check_int("TP", tp, 1, 64)
    if 96 % tp_i:
        raise gr.Error(
            f"TP must divide Kimi K3's 96 KDA heads; got TP={tp_i}", print_exception=False
        )
    gib = ui.check_float("checkpoint budget (GiB)", budget_gib, 0.01, 4096)
    s = st.int8_study(text, n, fmt, gran, lay, hd, stp, nat, tp_i, gib)
    f1 = fig_error_map(s.errors)
    f2 = fig_histograms(s.errors)
    f3 = fig_divergence(s.divergence)
    f4 = fig_variants(s.table, variant)
    f5 = fig_capacity(s.memory_tiny, s.memory_k3, variant)
    i = s.table.labels.index(variant)
    j = s.memory_k3.labels.index(variant)
    hist = list(history or [])
    hist.append(
        [
            len(hist) + 1,
            n,
            variant,
            f"{s.table.rel_fro[i]:.3g}",
            f"{s.divergence.every_step_state_dist[-1]:.3g}",
            f"×{s.memory_k3.gain[j]:.2f}",
        ]
    )
    hist = hist[-MAX_HISTORY:]
    cont = continuation_markdown(quality.continuation(text, n, fmt, gran, max(stp, 32)))
    return (
        summary_markdown(s, variant),
        *f1,
        *f2,
        *f3,
        *f4,
        *f5,
        history_markdown(hist),
        hist,
        cont,
    )


def _cell(text: str) -> str:
    """Decoded text safe inside a markdown table cell (HTML-escaped, markdown characters as
    entities, so backslash escapes and pipes print as they are)."""
    t = html.escape(text, quote=False)
    for ch, ent in (
        ("\\", "&#92;"),
        ("|", "&#124;"),
        ("*", "&#42;"),
        ("_", "&#95;"),
        ("`", "&#96;"),
    ):
        t = t.replace(ch, ent)
    return t


def continuation_markdown(c: quality.Continuation) -> str:
    """Exact vs compressed greedy continuations side by side; the first difference marked."""
    k = c.first_divergence

    def row(pieces: tuple[str, ...]) -> str:
        if k is None:
            return _cell("".join(pieces))
        first = _cell(pieces[k] or "…")
        return (
            _cell("".join(pieces[:k]))
            + f"<mark><b>{first}</b></mark>"
            + _cell("".join(pieces[k + 1 :]))
        )

    verdict = (
        f"identical for all {len(c.exact)} tokens" if k is None
        else f"first difference at token {k + 1} of {len(c.exact)}, marked"
    )  # fmt: skip
    return (
        f"**Greedy continuation after the restore** ({verdict}) · after “…{_cell(c.prompt_tail)}”"
        "\n\n| restored from | continuation |\n|---|---|\n"
        f"| exact checkpoint | {row(c.exact_pieces)} |\n| {c.label} | {row(c.compressed_pieces)} |"
    )


HISTORY_HEADERS = ["#", "tokens", "format", "error", "drift", "gain"]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Runs in this session**\n\n" + head + "\n" + body


def _run_validator():  # noqa: ANN202
    """``run``'s checks, per input (so a rejected input leaves the page as it was)."""

    def text_ok(text: object) -> None:
        if not isinstance(text, str) or not text.strip():
            raise gr.Error(f"text must be non-empty (1 to {st.MAX_TEXT_CHARS} characters)")
        if len(text) > st.MAX_TEXT_CHARS:
            raise gr.Error(f"text must be 1 to {st.MAX_TEXT_CHARS} characters, got {len(text)}")

    def cross(text: str, n_tokens: object, *rest: object) -> tuple[int, str] | None:
        n_max = min(len(text.encode("utf-8")), st.MAX_PARK_TOKENS)
        try:
            ui.check_int("tokens to park (≤ the text's UTF-8 bytes)", n_tokens, 1, n_max)
        except gr.Error as e:
            return 1, guard.message_of(e)
        tp_i = int(float(rest[5]))  # type: ignore[arg-type]
        if 96 % tp_i:
            return 7, f"TP must divide Kimi K3's 96 KDA heads; got TP={tp_i}"
        return None

    return guard.validator(
        text_ok,
        None,
        lambda v: _variant(v),
        lambda v: ui.check_int("KDA layer", v, 0, N_LAYERS - 1),
        lambda v: ui.check_int("head", v, 0, N_HEADS - 1),
        lambda v: ui.check_int("tokens to decode", v, 1, st.MAX_STEPS),
        lambda v: ui.check_choice("native state dtype", v, st.NATIVE_DTYPES),
        lambda v: ui.check_int("TP", v, 1, 64),
        lambda v: ui.check_float("checkpoint budget (GiB)", v, 0.01, 4096),
        cross=cross,
    )


def build() -> gr.Blocks:
    with gr.Blocks(title="INT8 checkpoints · KDA State Lab") as demo:
        lang = ui.header(NAME, "INT8 checkpoints · INT8 检查点", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                text = gr.Textbox(
                    st.DEFAULT_TEXT,
                    lines=4,
                    elem_id=f"{NAME}-text",
                    label=f"Text the model reads (1-{st.MAX_TEXT_CHARS} chars)",
                )
                n_tokens = gr.Number(
                    64,
                    elem_id=f"{NAME}-tokens",
                    label="Tokens before parking (1-1024, ≤ text bytes)",
                )
                variant = gr.Radio(
                    list(VARIANT_LABELS),
                    value=VARIANT_LABELS[0],
                    label="Format / scale granularity",
                    elem_id=f"{NAME}-variant",
                )
                with gr.Row():
                    layer = gr.Slider(0, N_LAYERS - 1, value=0, step=1, label="KDA layer")
                    head = gr.Slider(0, N_HEADS - 1, value=0, step=1, label="Head")
                steps = gr.Number(
                    16,
                    elem_id=f"{NAME}-steps",
                    label=f"Tokens to decode after restore (1-{st.MAX_STEPS})",
                )
                with gr.Accordion("Kimi K3 capacity", open=False) as capacity_box:
                    native = gr.Radio(
                        list(st.NATIVE_DTYPES), value="bfloat16", label="Native state pool dtype"
                    )
                    with gr.Row():
                        tp = gr.Number(8, label="TP (divides 96)", elem_id=f"{NAME}-tp")
                        budget = gr.Number(
                            8.0,
                            label="Checkpoint budget (GiB, 0.01-4096)",
                            elem_id=f"{NAME}-budget",
                        )
                btn = gr.Button("Park and restore", variant="primary", elem_id=f"{NAME}-run")
                summary = gr.Markdown(
                    label="Park and restore summary",
                    elem_id=f"{NAME}-summary",
                    elem_classes=["kda-metrics"],
                )
                hist_md = gr.Markdown(
                    label="Runs in this session",
                    elem_id=f"{NAME}-history",
                    elem_classes=["kda-metrics"],
                )
            with gr.Column(scale=2):
                s1 = ui.figure_slot(f"{NAME}-errmap", "Error map")
                s3 = ui.figure_slot(f"{NAME}-divergence", "Divergence")
                cont = gr.Markdown(
                    label="Exact vs compressed continuations", elem_id=f"{NAME}-continuation"
                )
                s4 = ui.figure_slot(f"{NAME}-variants", "Variants")
                s2 = ui.figure_slot(f"{NAME}-hist", "Histograms")
                s5 = ui.figure_slot(f"{NAME}-capacity", "Capacity")
        inputs = [text, n_tokens, variant, layer, head, steps, native, tp, budget, history]
        outputs = [
            summary,
            *s1.outputs,
            *s2.outputs,
            *s3.outputs,
            *s4.outputs,
            *s5.outputs,
            hist_md,
            history,
            cont,
        ]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, outputs)
        run_in, run_v = [*inputs, lang.radio], _run_validator()
        btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        gr.on(
            [variant.input, layer.release, head.release, native.input],
            run_fn,
            run_in,
            run_out,
            api_visibility="private",
            validator=run_v,
        )
        loc.finish()
        lang.labels({
            text: f"模型读取的文本（1-{st.MAX_TEXT_CHARS} 个字符）",
            n_tokens: "停放前的 token 数（1-1024，不超过文本字节数）",
            variant: "格式 / 缩放粒度", layer: "KDA 层", head: "头",
            steps: f"恢复后解码的 token 数（1-{st.MAX_STEPS}）", native: "原生状态池精度",
            tp: "TP（整除 96）", budget: "检查点预算（GiB，0.01-4096）",
            btn: "停放并恢复", capacity_box: "Kimi K3 容量",
            **{sl.csv: ui.CSV_ZH for sl in (s1, s2, s3, s4, s5)},
        }, tr=TR)  # fmt: skip
    return demo


if __name__ == "__main__":
    ui.main(build)
