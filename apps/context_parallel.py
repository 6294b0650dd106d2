"""context_parallel: one long sequence split over P ranks, joined by an affine prefix scan.

Draws ``kda_core.studies.context_parallel``: the ranks' segments (and packed documents), the
scan's messages step by step, the state each rank receives next to the true one, the error of
every rank's outputs against a single rank, the bytes each rank sends against an MLA KV
all-gather of the same context, and the modelled speed-up over P from measured per-step costs.
The ranks run in this process (the plan and messages the gloo ranks run; no processes here).

Main action: ``context_parallel_run`` (inputs -> summary + five figures + CSVs). Every figure
follows the language switch (the switch re-renders them).
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.ui import COLORS, SERIES, guard
from kda_core.studies import context_parallel as cps

NAME = "context_parallel"
SCANS = ("logdepth", "allgather")
SCAN_CHOICES = [
    ("log-depth · 对数深度", "logdepth"),
    ("all-gather + fold · 全收集 + 折叠", "allgather"),
]
MAX_DOCS_TEXT = 200

EN = """**Context parallelism for KDA: scan the maps, do not broadcast the KV.** An attention layer
split over P ranks can send every rank the other ranks' KV. A KDA layer cannot: the state after
rank 1's tokens depends on the state rank 0 ended with, and states of different segments do not
add. What does compose is each segment's *affine map* S → M S + b. **Each rank** computes its
map in one chunked pass; an **exclusive prefix scan** over the maps (all-gather + fold, or
log-depth with send/recv) hands every rank its incoming state; each rank then finishes its
outputs. **Look at:** the messages per step (a map is H·K·(K+V) numbers, a state H·K·V —
whatever T is), the state each rank receives (equal to the true one), errors at float64
round-off, and bytes against an MLA KV all-gather that grows with T. Packed documents reset the
scan at their starts."""

ZH = """**KDA 的上下文并行：扫描映射，而不是广播 KV。** 注意力层切到 P 个 rank 上时，可以把其他 rank
的 KV 发给每个 rank。KDA 层不行：rank 1 处理完之后的状态取决于 rank 0 结束时的状态，而不同段的状态
不能相加。能够组合的是每一段的*仿射映射* S → M S + b。**每个 rank** 用一次分块计算得到自己的映射；
对这些映射做一次**排他前缀扫描**（全收集 + 折叠，或用 send/recv 的对数深度扫描），每个 rank 就拿到
自己的初始状态，然后完成自己的输出。**请看：** 每一步的消息（一个映射是 H·K·(K+V) 个数，一个状态是
H·K·V 个数，与 T 无关）、每个 rank 收到的状态（与真实状态相同）、float64 舍入级的误差，以及与随 T
增长的 MLA KV 全收集相比的字节数。打包的多个文档在各自的起点重置扫描。"""

TEXT = {
    "en": {
        "steps": "Ranks and scan steps ({scan}, P = {P}, T = {T})",
        "tokens": "token position",
        "step": "step",
        "local": "local pass",
        "finish": "finish",
        "rank": "rank",
        "map": "map (M, b)",
        "state": "state b",
        "doc": "document start",
        "state_title": "State handed to rank {r} (head 0) and its difference from the truth",
        "received": "received S_in",
        "diff": "S_in − true state (max |Δ| {d:.1e})",
        "key": "key channel",
        "value": "value channel",
        "exact_title": "Outputs per rank vs one rank (float64)",
        "rel": "relative error of o (log)",
        "bound": "test bound 1e-10",
        "bytes_title": "Bytes each rank sends (T = {T}, P = {P})",
        "bytes": "bytes (log)",
        "demo_layer": "this demo's layer",
        "k3_layer": "a K3 layer (8 heads × 128, fp32)",
        "kv": "MLA KV all-gather",
        "speed_title": "Modelled speed-up of one K3 layer (8 heads, measured step costs)",
        "ctx": "{scan}, T = {T}",
        "P": "ranks P",
        "speedup": "speed-up vs one rank",
        "ideal": "P (ideal)",
        "scans": {"logdepth": "log-depth scan", "allgather": "all-gather + fold"},
    },
    "zh": {
        "steps": "rank 与扫描步骤（{scan}，P = {P}，T = {T}）",
        "tokens": "token 位置",
        "step": "步骤",
        "local": "本地计算",
        "finish": "收尾",
        "rank": "rank",
        "map": "映射 (M, b)",
        "state": "状态 b",
        "doc": "文档起点",
        "state_title": "交给 rank {r} 的状态（头 0）及其与真实状态之差",
        "received": "收到的 S_in",
        "diff": "S_in − 真实状态（max |Δ| {d:.1e}）",
        "key": "键通道",
        "value": "值通道",
        "exact_title": "每个 rank 的输出与单 rank 相比（float64）",
        "rel": "o 的相对误差（对数）",
        "bound": "测试阈值 1e-10",
        "bytes_title": "每个 rank 发送的字节数（T = {T}，P = {P}）",
        "bytes": "字节（对数）",
        "demo_layer": "本演示的层",
        "k3_layer": "K3 的一层（8 个头 × 128，fp32）",
        "kv": "MLA KV 全收集",
        "speed_title": "K3 一层的模型加速比（8 个头，实测的步骤开销）",
        "ctx": "{scan}，T = {T}",
        "P": "rank 数 P",
        "speedup": "相对单 rank 的加速比",
        "ideal": "P（理想）",
        "scans": {"logdepth": "对数深度扫描", "allgather": "全收集 + 折叠"},
    },
}
KIND_COLORS = {"map": SERIES[0], "state": COLORS["state"]}


def _t(lang: str) -> dict:
    return TEXT["zh" if lang == ui.LANGS[1] else "en"]


def fig_steps(d: cps.Demo, t: dict) -> tuple[go.Figure, str]:
    fig = make_subplots(rows=2, cols=1, row_heights=[0.3, 0.7], vertical_spacing=0.16)
    for r in range(d.P):
        a, b = int(d.bounds[r]), int(d.bounds[r + 1])
        fig.add_bar(x=[b - a], base=[a], y=[f"{t['rank']} {r}"], orientation="h",
                    marker_color=SERIES[r % len(SERIES)], showlegend=False, row=1, col=1,
                    hovertemplate=f"{t['rank']} {r}: [{a}, {b})<extra></extra>")  # fmt: skip
    for c in d.cu_seqlens[1:-1].tolist():
        fig.add_vline(x=c, line={"color": COLORS["neutral"], "dash": "dot"}, row=1, col=1)
    n_steps = int(d.msg_step.max()) + 1 if d.msg_step.size else 0
    ys = [t["local"]] + [f"{t['step']} {i + 1}" for i in range(n_steps)] + [t["finish"]]
    fig.add_scatter(x=list(range(d.P)) * 2, y=[ys[0]] * d.P + [ys[-1]] * d.P, mode="markers",
                    marker={"color": COLORS["neutral"], "size": 9}, showlegend=False,
                    row=2, col=1, hoverinfo="skip")  # fmt: skip
    shown = set()
    for i in range(d.msg_src.size):
        kind = str(d.msg_kind[i])
        s, e = int(d.msg_step[i]), int(d.msg_step[i]) + 1
        fig.add_scatter(
            x=[d.msg_src[i], d.msg_dst[i]], y=[ys[s], ys[e]], mode="lines+markers",
            line={"color": KIND_COLORS[kind], "width": 2}, marker={"size": 7, "symbol": "circle"},
            name=t[kind], legendgroup=kind, showlegend=kind not in shown, row=2, col=1,
            hovertemplate=f"{t['rank']} {d.msg_src[i]} → {d.msg_dst[i]}: {t[kind]}, "
            f"{int(d.msg_bytes[i]):,} B<extra></extra>",
        )  # fmt: skip
        shown.add(kind)
    ui.style(fig, t["steps"].format(scan=t_scan(t, d.scan), P=d.P, T=d.T), "", "",
                 height=460)  # fmt: skip
    fig.update_xaxes(title_text=t["tokens"], row=1, col=1)
    fig.update_xaxes(title_text=t["rank"], dtick=1, row=2, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=ys[::-1], row=2, col=1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    cols = {
        "step": d.msg_step, "src": d.msg_src, "dst": d.msg_dst,
        "kind": [str(k) for k in d.msg_kind], "bytes": d.msg_bytes,
    }  # fmt: skip
    return fig, ui.write_csv(f"{NAME}-messages", cols)


def t_scan(t: dict, scan: str) -> str:
    return t["scans"][scan]


def fig_state(d: cps.Demo, rank: int, t: dict) -> tuple[go.Figure, str]:
    S, diff = d.S_in[rank], d.S_in[rank] - d.S_true[rank]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=(t["received"],
                                        t["diff"].format(d=float(np.abs(diff).max()))))  # fmt: skip
    lim = float(np.abs(S).max()) or 1.0
    fig.add_heatmap(z=S, zmin=-lim, zmax=lim, colorscale="RdBu_r", row=1, col=1,
                    colorbar={"x": 0.43, "len": 0.9}, hovertemplate="k %{y}, v %{x}: %{z:.4f}"
                    "<extra></extra>")  # fmt: skip
    dl = float(np.abs(diff).max()) or 1e-18
    fig.add_heatmap(z=diff, zmin=-dl, zmax=dl, colorscale="RdBu_r", row=1, col=2,
                    colorbar={"x": 1.0, "len": 0.9, "exponentformat": "e"},
                    hovertemplate="k %{y}, v %{x}: %{z:.2e}<extra></extra>")  # fmt: skip
    ui.style(fig, t["state_title"].format(r=rank), t["value"], t["key"], height=380,
                 legend=False)  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(margin={"t": 72})  # room for the subplot titles under the figure title
    K, V = S.shape
    cols = {"key": np.repeat(np.arange(K), V), "value": np.tile(np.arange(V), K),
            "S_in": S.ravel(), "S_true": d.S_true[rank].ravel()}  # fmt: skip
    return fig, ui.write_csv(f"{NAME}-state", cols)


def fig_exact(d: cps.Demo, t: dict) -> tuple[go.Figure, str]:
    floor = 1e-18
    fig = go.Figure()
    fig.add_bar(x=list(range(d.P)), y=np.maximum(d.o_rel, floor), customdata=d.o_rel,
                marker_color=SERIES[0], name="o", showlegend=False, textposition="outside",
                text=[f"{v:.1e}" if v else "0" for v in d.o_rel.tolist()],
                hovertemplate=f"{t['rank']} %{{x}}: %{{customdata:.2e}}"
                "<extra></extra>")  # fmt: skip
    ui.hline(fig, 1e-10, t["bound"], log=True, dash="dash")
    ui.style(fig, t["exact_title"], t["rank"], t["rel"], height=340, legend=False)
    ui.log_axis(fig, "y")
    fig.update_yaxes(range=[-18, -8], exponentformat="power")
    fig.update_xaxes(dtick=1)
    cols = {"rank": np.arange(d.P), "o_rel": d.o_rel, "S_in_rel": d.S_in_rel}
    return fig, ui.write_csv(f"{NAME}-exactness", cols)


def fig_bytes(d: cps.Demo, m: cps.CostModel, t: dict) -> tuple[go.Figure, str]:
    fig = go.Figure()
    groups = [t["demo_layer"], t["k3_layer"]]
    other = "allgather" if d.scan == "logdepth" else "logdepth"
    demo_b = {d.scan: int(d.bytes_sent.max()), other: int(d.bytes_other.max())}
    rows = {"group": [], "series": [], "bytes": []}
    for i, scan in enumerate(SCANS):
        vals = [demo_b[scan], int(m.bytes_sent[scan][-1])]
        fig.add_bar(x=groups, y=vals, name=t["scans"][scan], marker_color=SERIES[i],
                    hovertemplate="%{x}: %{y:,} B<extra></extra>")  # fmt: skip
        for g, v in zip(groups, vals):
            rows["group"].append(g), rows["series"].append(scan), rows["bytes"].append(v)
    kv = [d.kv_bytes, int(m.kv_bytes[-1])]
    fig.add_bar(x=groups, y=kv, name=t["kv"], marker_color=COLORS["kv"],
                hovertemplate="%{x}: %{y:,} B<extra></extra>")  # fmt: skip
    for g, v in zip(groups, kv):
        rows["group"].append(g), rows["series"].append("mla_kv_allgather"), rows["bytes"].append(v)
    ui.style(fig, t["bytes_title"].format(T=d.T, P=d.P), "", t["bytes"], height=360)
    ui.log_axis(fig, "y")
    fig.update_layout(barmode="group")
    return fig, ui.write_csv(f"{NAME}-bytes", rows)


SPEEDUP_T = (8192, 32768, 131072, 1 << 20)


def _k(T: int) -> str:
    return f"{T >> 20}M" if T >= 1 << 20 else f"{T >> 10}k"


def fig_speedup(models: dict[int, cps.CostModel], t: dict) -> tuple[go.Figure, str]:
    """Log-depth at every context of SPEEDUP_T; all-gather at 32k (dotted) for contrast."""
    fig = go.Figure()
    P = next(iter(models.values())).P
    fig.add_scatter(x=P, y=P, mode="lines", name=t["ideal"],
                    line={"color": COLORS["neutral"], "dash": "dash"})  # fmt: skip
    cols: dict[str, object] = {"P": P}
    for i, (T, m) in enumerate(models.items()):
        for scan in SCANS:
            cols[f"speedup_{scan}_T{T}"] = m.speedup[scan]
            if scan == "allgather" and T != 32768:
                continue
            fig.add_scatter(
                x=P, y=m.speedup[scan], mode="lines+markers",
                name=t["ctx"].format(scan=t["scans"][scan], T=_k(T)),
                line={"color": SERIES[i], "dash": "dot" if scan == "allgather" else "solid"},
                hovertemplate=f"T={_k(T)}, P=%{{x}}: ×%{{y:.2f}}<extra></extra>",
            )  # fmt: skip
    ui.style(fig, t["speed_title"], t["P"], t["speedup"], height=400)
    ui.log_axis(fig, "x", P, fmt=lambda v: f"{v:g}")
    ui.log_axis(fig, "y", [1, 2, 4, 8, 16, 32, 64], fmt=lambda v: f"{v:g}")
    return fig, ui.write_csv(f"{NAME}-speedup", cols)


def summary_markdown(d: cps.Demo, seed: int, lang: str) -> str:
    zh = lang == ui.LANGS[1]
    worst = float(d.o_rel.max())
    sent, kv = int(d.bytes_sent.max()), d.kv_bytes
    n = d.cu_seqlens.size - 1
    if zh:
        return (f"- {d.P} 个 rank，{d.T} 个 token，随机输入（种子 {seed}），{n} 个文档："
                f"输出最大相对误差 **{worst:.1e}**，"
                f"最终状态 **{d.S_final_rel:.1e}**\n- 扫描：每个 rank 最多发送 **{sent:,} B**；"
                f"同样上下文的 MLA KV 全收集（K3 一层）：**{kv:,} B**")  # fmt: skip
    return (f"- {d.P} ranks, {d.T} tokens, random inputs (seed {seed}), {n} document"
            f"{'s' if n > 1 else ''}: worst relative error of the outputs "
            f"**{worst:.1e}**, final state **{d.S_final_rel:.1e}**\n- scan: at most "
            f"**{sent:,} B** sent per rank; an MLA KV all-gather of the same context (one K3 "
            f"layer): **{kv:,} B**")  # fmt: skip


def _docs(text: str, T: int) -> list[int] | None:
    text = str(text or "").strip()
    if not text:
        return None
    if len(text) > MAX_DOCS_TEXT:
        raise gr.Error(f"document lengths: at most {MAX_DOCS_TEXT} characters")
    parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
    if not 1 <= len(parts) <= cps.MAX_DOCS:
        raise gr.Error(f"document lengths: give 1 to {cps.MAX_DOCS} comma-separated integers")
    lens = [ui.check_int("document length", p.strip(), 1, T) for p in parts]
    if sum(lens) != T:
        raise gr.Error(f"document lengths must sum to T = {T}, got {sum(lens)}")
    return lens


def _cross_run(T: float, P: float, scan: str, docs: str, *_: object) -> tuple[int, str] | None:
    """Checks that need two inputs: P <= T, and document lengths that sum to T."""
    t = int(T)
    if int(P) > t:
        return 1, f"ranks P must be in [1, {min(cps.MAX_P, t)}] (at most T), got {int(P)}"
    try:
        _docs(docs, t)
    except (gr.Error, ValueError) as e:
        return 3, guard.message_of(e)
    return None


@ui.study_errors
def run(T: float = 512, P: float = 4, scan: str = SCANS[0], docs: str = "", rank: float = 2,
        seed: float = 0, language: str = ui.LANGS[0]):  # fmt: skip
    """Returns the summary and five (figure, csv) pairs."""
    T = ui.check_int("T", T, 16, cps.MAX_T)
    P = ui.check_int("ranks P", P, 1, min(cps.MAX_P, T))
    scan = ui.check_choice("scan", scan, SCANS)
    # the last rank when P shrank below the chosen one (the title names the rank shown)
    r = min(ui.check_int("rank to inspect", rank, 0, cps.MAX_P - 1), P - 1)
    sd = ui.check_int("seed", seed, 0, 2**31 - 1)
    lang = ui.check_choice("language", language, ui.LANGS)
    d = cps.demo(T=T, P=P, scan=scan, docs=_docs(docs, T), seed=sd)
    models = {
        ctx: cps.cost_model(cps.MEASURED, T=ctx, P_values=(1, 2, 4, 8, 16, 32, 64))
        for ctx in SPEEDUP_T
    }
    mp = cps.cost_model(cps.MEASURED, T=T, P_values=(P,))
    t = _t(lang)
    figs = [fig_steps(d, t), fig_state(d, r, t), fig_exact(d, t), fig_bytes(d, mp, t),
            fig_speedup(models, t)]  # fmt: skip
    return (summary_markdown(d, sd, lang), *[x for pair in figs for x in pair])


def build() -> gr.Blocks:
    with gr.Blocks(title="Context parallel · KDA State Lab") as demo:
        lang = ui.header(NAME, "Context parallel · 上下文并行", EN, ZH)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                T = gr.Number(512, label=f"tokens T (16-{cps.MAX_T})", step=1, elem_id=f"{NAME}-T")
                P = gr.Number(4, label=f"ranks P (1-{cps.MAX_P})", step=1, elem_id=f"{NAME}-P")
                scan = gr.Radio(SCAN_CHOICES, value=SCANS[0], label="scan", elem_id=f"{NAME}-scan")
                docs = gr.Textbox(
                    "",
                    label="document lengths (empty: one document)",
                    placeholder="e.g. 100, 300, 112",
                    elem_id=f"{NAME}-docs",
                )
                with gr.Row():
                    rank = gr.Number(2, label="rank to inspect", step=1, elem_id=f"{NAME}-rank")
                    seed = gr.Number(0, label="seed", step=1)
                run_btn = gr.Button("Run", variant="primary", elem_id=f"{NAME}-run")
                summary = gr.Markdown(label="Context parallel summary", elem_id=f"{NAME}-summary")
            with gr.Column(scale=2):
                slots = [
                    ui.figure_slot(f"{NAME}-{k}", k)
                    for k in ("steps", "state", "exactness", "bytes", "speedup")
                ]
        inputs = [T, P, scan, docs, rank, seed, lang.radio]
        outputs = [summary] + [o for s in slots for o in s.outputs]
        run_v = guard.validator(
            lambda v: ui.check_int("T", v, 16, cps.MAX_T),
            lambda v: ui.check_int("ranks P", v, 1, cps.MAX_P),
            lambda v: ui.check_choice("scan", v, SCANS),
            None,
            lambda v: ui.check_int("rank to inspect", v, 0, cps.MAX_P - 1),
            lambda v: ui.check_int("seed", v, 0, 2**31 - 1),
            None,
            cross=_cross_run,
        )
        run_btn.click(run, inputs, outputs, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run, inputs, outputs, api_visibility="private")
        lang.radio.change(run, inputs, outputs, api_visibility="private")
        lang.labels(
            {
                T: f"token 数 T (16-{cps.MAX_T})",
                P: f"rank 数 P (1-{cps.MAX_P})",
                scan: "扫描方式",
                docs: "文档长度（留空：一个文档）",
                rank: "查看的 rank",
                seed: "随机种子",
                run_btn: "运行",
                **{s.csv: ui.CSV_ZH for s in slots},
            }
        )
    return demo


if __name__ == "__main__":
    ui.main(build)
