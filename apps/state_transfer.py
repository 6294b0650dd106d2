"""state_transfer: the model-state object, prefill -> decode, refusals, the splice drift, tiers.

Draws ``kda_core.studies.transfer``: ``anatomy`` (parts at Kimi K3 scale and on the tiny model,
the safetensors header), ``prefill_decode`` (the transfer timeline of a prefill instance
publishing into the embedded store and a decode instance restoring), ``mismatches`` (objects
refused by instances that differ), ``splice_drift`` (the teaching switch) and ``tier_rates``
(device / + host / + remote on the Mooncake trace).

Main actions: ``state_transfer_pd``, ``state_transfer_mismatch``, ``state_transfer_splice``,
``state_transfer_tiers``. Figures and tables follow the language switch (re-drawn from the
results kept in ``gr.State``).
"""

from __future__ import annotations

import gradio as gr
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import common
from apps.common import COLORS, SERIES
from kda_core.studies import transfer as st

NAME = "state_transfer"
MB = float(1 << 20)

EN = """**A decode instance needs three things at one boundary.** With KDA, a prefix is resumable
only where the MLA KV, the KDA recurrent state and the conv window were saved together, from the
same weights, tokenizer and tensor-parallel layout. So serving across instances moves *model-state
objects*: the three parts plus metadata (token range, prefix hash, fingerprints, layout, dtypes),
here as safetensors. A store (embedded, or Mooncake Store) moves the bytes by prefix hash without
understanding them; the receiving instance validates every field and refuses a mismatch.
**Look at:** the object's parts at K3 scale; the timeline (prefill publishes, decode fetches the
longest jointly restorable prefix and matches one instance exactly); which field each mismatch
is refused on; how far a forced splice drifts; what host and remote tiers add on the real trace."""

ZH = (
    "**Decode 实例需要同一边界上的三样东西。** 对 KDA 来说，只有 MLA K"
    "V、KDA 递归状态和卷积窗口在同一边界一起保存、且来自同一权重、同一分词器、同一张量并"
    "行布局时，前缀才能被恢复。因此跨实例服务搬运的是*模型状态对象*：三个部分加上元数据（t"
    "oken 范围、前缀哈希、指纹、布局、精度），这里用 safetensors 保存。存储"
    "（内嵌存储或Mooncake Store）按前缀哈希搬运字节而不理解内容；接收方逐字段校"
    "验，不匹配就拒绝。**请看**：K3 规模下对象的各个部分；时间线（prefill 发布"
    "，decode 取回最长可联合恢复前缀，结果与单实例完全一致）；每种不匹配被哪个字段拒绝"
    "；强行拼接会漂移多远；在真实 trace 上 host与远端层级带来多少收益。"
)

T = {
    "en": {
        "anat": "One object's parts: Kimi K3 per GPU (TP{tp}, bf16, {tokens:,} tokens) "
        "vs the tiny model",
        "part": "part",
        "bytes": "bytes (log)",
        "k3": "Kimi K3 per GPU",
        "tiny": "tiny model ({n} tokens)",
        "tl": "Transfer timeline: prefill (●) publishes, decode (◆) fetches and restores",
        "boundary": "boundary (tokens)",
        "time": "time since prefill started (ms)",
        "spl": "Forced splice: MLA KV of prefix A + KDA state of prefix B ({n} tokens)",
        "step": "decoded token",
        "drift": "max |Δlogit| vs one instance (log)",
        "clean": "clean restore",
        "splice": "spliced restore",
        "tiers": "State tiers on the Mooncake trace ({n} requests, {d} device / {h} host ckpts)",
        "hit": "state hit rate",
        "ttft": "mean TTFT (s)",
        "moved": "loaded (GB)",
        "names": {"mla_kv": "MLA KV", "kda_state": "KDA state", "conv_window": "conv window"},
        "setups": {"device": "device", "device+host": "+ host", "device+host+remote": "+ remote"},
        "kinds": {},
        "tiers_names": {"host": "host", "remote": "remote"},
        "sources": {},
        "meta": "safetensors header of the tiny object",
        "kv": ("key", "value"),
    },
    "zh": {
        "anat": "一个对象的组成：Kimi K3 每卡（TP{tp}，bf16，{tokens:,} token）vs 小模型",
        "part": "部分",
        "bytes": "字节（对数）",
        "k3": "Kimi K3 每卡",
        "tiny": "小模型（{n} 个 token）",
        "tl": "传输时间线：prefill（●）发布，decode（◆）取回并恢复",
        "boundary": "边界（token）",
        "time": "自 prefill 开始的时间（毫秒）",
        "spl": "强行拼接：前缀 A 的 MLA KV + 前缀 B 的 KDA 状态（{n} 个 token）",
        "step": "已解码 token",
        "drift": "与单实例的最大 |Δlogit|（对数）",
        "clean": "正确恢复",
        "splice": "拼接恢复",
        "tiers": "Mooncake trace 上的状态层级（{n} 个请求，设备 {d} / host {h} 个检查点）",
        "hit": "状态命中率",
        "ttft": "平均首 token 时间（秒）",
        "moved": "加载量（GB）",
        "names": {"mla_kv": "MLA KV", "kda_state": "KDA 状态", "conv_window": "卷积窗口"},
        "setups": {"device": "仅设备", "device+host": "+ host", "device+host+remote": "+ 远端"},
        "kinds": {
            "publish": "发布",
            "fetch": "取回",
            "lookup": "查找",
            "restore": "恢复",
            "refuse": "拒绝",
            "serve": "服务",
            "host_load": "host 加载",
            "offload": "卸载到 host",
        },
        "tiers_names": {"host": "host", "remote": "远端"},
        "sources": {"store": "存储", "host": "host", "device": "设备", "none": "（无）"},
        "meta": "小模型对象的 safetensors 头",
        "kv": ("键", "值"),
    },
}
KIND_COLORS = {
    "publish": COLORS["prefill"],
    "fetch": COLORS["kv"],
    "lookup": COLORS["neutral"],
    "restore": COLORS["checkpoint"],
    "refuse": COLORS["state"],
    "serve": COLORS["decode"],
    "host_load": COLORS["hit"],
    "offload": COLORS["conv"],
}


def _lang(lang: str | None) -> str:
    return "zh" if lang == common.LANGS[1] else "en"


def anatomy_figure(a: st.Anatomy, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    names = [t["names"][p] for p in a.parts]
    fig = go.Figure()
    fig.add_bar(
        x=names,
        y=a.k3_bytes,
        name=t["k3"],
        marker_color=SERIES[0],
        text=[common._compact(v) + "B" for v in a.k3_bytes.tolist()],
    )
    fig.add_bar(
        x=names,
        y=a.tiny_bytes,
        name=t["tiny"].format(n=a.tiny_tokens),
        marker_color=SERIES[1],
        text=[common._compact(v) + "B" for v in a.tiny_bytes.tolist()],
    )
    common.style(fig, t["anat"].format(tp=a.tp, tokens=a.tokens), t["part"], t["bytes"], height=380)
    fig.update_yaxes(type="log")
    csv = common.write_csv(
        f"{NAME}-anatomy",
        {"part": list(a.parts), "k3_bytes_per_gpu": a.k3_bytes, "tiny_bytes": a.tiny_bytes},
    )
    return fig, csv


def metadata_markdown(a: st.Anatomy, lang: str = "en") -> str:
    rows = "\n".join(f"| `{k}` | `{common.clip_text(v, 90)[1:-1]}` |" for k, v in a.metadata)
    shapes = ", ".join(
        f"{p} {list(s)} {d}" for p, s, d in zip(a.parts, a.tiny_shapes, a.tiny_dtypes)
    )
    t = T[lang]
    unit = "字节" if lang == "zh" else "bytes"
    return (
        f"**{t['meta']}** ({a.file_bytes:,} {unit}; {shapes})\n\n"
        f"| {t['kv'][0]} | {t['kv'][1]} |\n|---|---|\n{rows}"
    )


def timeline_figure(r: st.PDRun, lang: str = "en") -> tuple[go.Figure, str]:
    """Every event at (time, boundary): prefill circles, decode diamonds, colour = kind."""
    t = T[lang]
    fig = go.Figure()
    t0 = r.events[0].t if r.events else 0.0
    symbols = {"prefill": "circle", "decode": "diamond"}
    for kind, color in KIND_COLORS.items():
        ev = [e for e in r.events if e.kind == kind]
        if not ev:
            continue
        fig.add_scatter(
            x=[1e3 * (e.t - t0) for e in ev],
            y=[e.boundary for e in ev],
            mode="markers",
            name=t["kinds"].get(kind, kind),
            marker={
                "color": color,
                "size": 12,
                "symbol": [symbols.get(e.instance, "square") for e in ev],
                "line": {"color": "white", "width": 1},
            },
            customdata=[[e.instance, e.nbytes, e.detail] for e in ev],
            hovertemplate=f"%{{customdata[0]}}: {kind}<br>boundary %{{y}} tokens<br>"
            "%{customdata[1]:,} B<br>%{customdata[2]}<br>%{x:.1f} ms<extra></extra>",
        )
    common.style(fig, t["tl"], t["time"], t["boundary"], height=360)
    csv = common.write_csv(
        f"{NAME}-timeline",
        {
            "t_ms": [1e3 * (e.t - t0) for e in r.events],
            "instance": [e.instance for e in r.events],
            "kind": [e.kind for e in r.events],
            "boundary": [e.boundary for e in r.events],
            "bytes": [e.nbytes for e in r.events],
        },
    )
    return fig, csv


def pd_markdown(r: st.PDRun, lang: str = "en") -> str:
    same = r.tokens == r.reference_tokens
    if lang == "zh":
        return (
            f"**decode 从{T['zh']['sources'].get(r.source, r.source)}"
            f"恢复到第 {r.restore_at} 个 token**"
            f"（提示 {r.prompt_len} 个 token；prefill 在 {list(r.published)} 发布）"
            f" · 取回 {r.bytes_moved:,} 字节 · 与单实例 token {'一致' if same else '不同'}，"
            f"最大 |Δlogit| = {r.max_dlogit:.1e}"
        )
    return (
        f"**decode restored from the {r.source} at token {r.restore_at}** (prompt {r.prompt_len} "
        f"tokens; prefill published at {list(r.published)}) · fetched {r.bytes_moved:,} bytes · "
        f"tokens {'identical to' if same else 'DIFFERENT from'} one instance, max |Δlogit| = "
        f"{r.max_dlogit:.1e}"
    )


def refusals_markdown(m: st.Refusals, lang: str = "en") -> str:
    head = (
        "| 不匹配 | 拒绝字段 | 信息 | 仍正确服务 |"
        if lang == "zh"
        else "| mismatch | refused on | message | still serves correctly |"
    )
    rows = "\n".join(
        f"| {k} | `{f or '—'}` | {common.clip_text(msg, 110)[1:-1]} | {'✓' if ok else '✗'} |"
        for k, f, msg, ok in zip(m.kinds, m.fields, m.messages, m.served_ok)
    )
    return f"{head}\n|---|---|---|---|\n{rows}"


def splice_figure(d: st.SpliceDrift, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    floor = 1e-17  # exact restores differ by rounding only; keep them visible on a log axis
    fig = go.Figure()
    for key, y, color in (
        ("clean", d.drift_clean, COLORS["hit"]),
        ("splice", d.drift_splice, COLORS["state"]),
    ):
        fig.add_scatter(
            x=d.steps,
            y=np.maximum(y, floor),
            name=t[key],
            mode="lines+markers",
            line={"color": color, "width": 2},
        )
    common.style(fig, t["spl"].format(n=d.boundary), t["step"], t["drift"], height=340)
    fig.update_yaxes(type="log")
    csv = common.write_csv(
        f"{NAME}-splice",
        {"step": d.steps, "drift_clean": d.drift_clean, "drift_splice": d.drift_splice},
    )
    return fig, csv


def tiers_figure(r: st.TierRates, lang: str = "en") -> tuple[go.Figure, str]:
    t = T[lang]
    names = [t["setups"][s] for s in r.setups]
    fig = make_subplots(rows=1, cols=3, subplot_titles=(t["hit"], t["ttft"], t["moved"]))
    colors = [SERIES[i] for i in range(len(names))]
    fig.add_bar(
        x=names,
        y=r.state_hit_rate,
        marker_color=colors,
        showlegend=False,
        row=1,
        col=1,
        text=[f"{v:.1%}" for v in r.state_hit_rate.tolist()],
    )
    fig.add_bar(
        x=names,
        y=r.ttft_mean_s,
        marker_color=colors,
        showlegend=False,
        row=1,
        col=2,
        text=[f"{v:.2f}" for v in r.ttft_mean_s.tolist()],
    )
    for j, (tier, color) in enumerate((("host", COLORS["hit"]), ("remote", COLORS["kv"]))):
        fig.add_bar(
            x=names,
            y=r.bytes_loaded[:, j] / 1e9,
            name=t["tiers_names"][tier],
            marker_color=color,
            row=1,
            col=3,
        )
    fig.update_layout(barmode="stack")
    title = t["tiers"].format(n=r.n_requests, d=r.device_ckpts, h=r.host_ckpts)
    common.style(fig, title, "", "", height=400)
    fig.update_layout(margin={"t": 80})
    fig.update_annotations(yshift=4)
    csv = common.write_csv(
        f"{NAME}-tiers",
        {
            "setup": list(r.setups),
            "state_hit_rate": r.state_hit_rate,
            "ttft_mean_s": r.ttft_mean_s,
            "ttft_p95_s": r.ttft_p95_s,
            "hits_device": r.hits[:, 0],
            "hits_host": r.hits[:, 1],
            "hits_remote": r.hits[:, 2],
            "bytes_loaded_host": r.bytes_loaded[:, 0],
            "bytes_loaded_remote": r.bytes_loaded[:, 1],
            "bytes_written_host": r.bytes_written[:, 0],
            "bytes_written_remote": r.bytes_written[:, 1],
        },
    )
    return fig, csv


# ---------------------------------------------------------------------------------------------
# Callbacks (validate, call the study, draw)
# ---------------------------------------------------------------------------------------------


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise gr.Error(f"{name} must be non-empty text")
    if len(value) > st.MAX_TEXT:
        raise gr.Error(f"{name}: at most {st.MAX_TEXT} characters, got {len(value)}")
    return value


def draw_pd(a: st.Anatomy, r: st.PDRun, lang: str) -> tuple:
    return (
        *anatomy_figure(a, lang),
        metadata_markdown(a, lang),
        *timeline_figure(r, lang),
        pd_markdown(r, lang),
    )


@common.study_errors
def run_pd(
    text: str = st.DEFAULT_TEXT, n_new: float = 16, tp: float = 8, language: str = "English"
):
    text = _text(text, "text")
    n = common.check_int("new tokens", n_new, 1, st.MAX_NEW)
    tp = common.check_int("TP", tp, 1, 96)
    lang = _lang(language)
    a = st.anatomy(tp=tp, text=text)
    r = st.prefill_decode(text, n)
    return (*draw_pd(a, r, lang), (a, r))


@common.study_errors
def run_mismatch(text: str = st.DEFAULT_TEXT, language: str = "English"):
    m = st.mismatches(_text(text, "text"))
    return refusals_markdown(m, _lang(language)), m


@common.study_errors
def run_splice(
    text_a: str = st.DEFAULT_TEXT, text_b: str = "", n_new: float = 16, language: str = "English"
):
    a = _text(text_a, "text A")
    b = text_b if isinstance(text_b, str) else ""
    n = common.check_int("new tokens", n_new, 1, st.MAX_NEW)
    d = st.splice_drift(a, b, n)
    return (*splice_figure(d, _lang(language)), d)


@common.study_errors
def run_tiers(
    n_requests: float = 1000,
    device_ckpts: float = 16,
    host_ratio: float = 2.0,
    language: str = "English",
):
    n = common.check_int("trace requests", n_requests, 100, 12031)
    d = common.check_int("device checkpoints", device_ckpts, 1, 4096)
    h = common.check_float("host / device ratio", host_ratio, 0.1, 64)
    r = st.tier_rates(n, d, h)
    return (*tiers_figure(r, _lang(language)), r)


def redraw(language: str, pd_state, mis_state, spl_state, tier_state) -> list:
    """The language switch: re-draw every figure and table from the kept results."""
    lang = _lang(language)
    out: list = []
    out += list(draw_pd(*pd_state, lang)) if pd_state else [gr.update()] * 6
    out += [refusals_markdown(mis_state, lang) if mis_state else gr.update()]
    out += list(splice_figure(spl_state, lang)) if spl_state else [gr.update()] * 2
    out += list(tiers_figure(tier_state, lang)) if tier_state else [gr.update()] * 2
    return out


def build() -> gr.Blocks:
    with gr.Blocks(title="State transfer · KDA State Lab") as demo:
        lang = common.header(NAME, "State transfer · 跨实例状态传输", EN, ZH)
        pd_state, mis_state, spl_state, tier_state = (gr.State(None) for _ in range(4))
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                text = gr.Textbox(
                    st.DEFAULT_TEXT,
                    lines=5,
                    elem_id=f"{NAME}-text",
                    label=f"Prompt (1-{st.MAX_TEXT} chars)",
                )
                with gr.Row():
                    n_new = gr.Number(
                        16, label=f"New tokens (1-{st.MAX_NEW})", elem_id=f"{NAME}-new"
                    )
                    tp = gr.Number(8, label="K3 TP (divides 96)", elem_id=f"{NAME}-tp")
                pd_btn = gr.Button("Prefill → decode", variant="primary", elem_id=f"{NAME}-run")
                mis_btn = gr.Button("Offer to mismatched instances", elem_id=f"{NAME}-mismatch")
                text_b = gr.Textbox(
                    "",
                    lines=2,
                    elem_id=f"{NAME}-text-b",
                    label="Splice: prompt B (empty = prompt A reversed)",
                )
                spl_btn = gr.Button("Force a splice", elem_id=f"{NAME}-splice-run")
                with gr.Accordion("Tiers on the Mooncake trace", open=True) as acc:
                    n_req = gr.Number(
                        1000, label="Trace requests (100-12031)", elem_id=f"{NAME}-req"
                    )
                    dev = gr.Number(16, label="Device checkpoints (1-4096)", elem_id=f"{NAME}-dev")
                    ratio = gr.Number(
                        2.0, label="Host / device ratio (0.1-64)", elem_id=f"{NAME}-ratio"
                    )
                    tier_btn = gr.Button("Simulate tiers", elem_id=f"{NAME}-tiers-run")
            with gr.Column(scale=2):
                s_an = common.figure_slot(f"{NAME}-anatomy", "Object anatomy")
                meta_md = gr.Markdown(elem_id=f"{NAME}-metadata", elem_classes=["kda-metrics"])
                pd_md = gr.Markdown(elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"])
                s_tl = common.figure_slot(f"{NAME}-timeline", "Transfer timeline")
                mis_md = gr.Markdown(
                    "*Press “Offer to mismatched instances”.*",
                    elem_id=f"{NAME}-refusals",
                    elem_classes=["kda-metrics"],
                )
                s_sp = common.figure_slot(
                    f"{NAME}-splice",
                    "Splice drift",
                    common.empty_figure("Forced splice", "Press “Force a splice”"),
                )
                s_ti = common.figure_slot(f"{NAME}-tiers", "Tiers")
        pd_out = [*s_an.outputs, meta_md, *s_tl.outputs, pd_md, pd_state]
        pd_in = [text, n_new, tp, lang.radio]
        pd_btn.click(run_pd, pd_in, pd_out, api_name=f"{NAME}_pd")
        mis_btn.click(
            run_mismatch, [text, lang.radio], [mis_md, mis_state], api_name=f"{NAME}_mismatch"
        )
        spl_in = [text, text_b, n_new, lang.radio]
        spl_btn.click(run_splice, spl_in, [*s_sp.outputs, spl_state], api_name=f"{NAME}_splice")
        tier_in = [n_req, dev, ratio, lang.radio]
        tier_btn.click(run_tiers, tier_in, [*s_ti.outputs, tier_state], api_name=f"{NAME}_tiers")
        demo.load(run_pd, pd_in, pd_out, api_visibility="private")
        demo.load(run_tiers, tier_in, [*s_ti.outputs, tier_state], api_visibility="private")
        lang.radio.change(
            redraw,
            [lang.radio, pd_state, mis_state, spl_state, tier_state],
            [*s_an.outputs, meta_md, *s_tl.outputs, pd_md, mis_md, *s_sp.outputs, *s_ti.outputs],
            api_visibility="private",
            show_progress="hidden",
        )
        lang.labels({
            text: f"提示（1-{st.MAX_TEXT} 个字符）", n_new: f"新 token 数（1-{st.MAX_NEW}）",
            tp: "K3 张量并行 TP（整除 96）", pd_btn: "Prefill → decode",
            mis_btn: "交给不匹配的实例", text_b: "拼接：提示 B（留空 = 把提示 A 反转）",
            spl_btn: "强行拼接", n_req: "trace 请求数（100-12031）",
            dev: "设备检查点数（1-4096）", ratio: "host / 设备 比例（0.1-64）",
            tier_btn: "模拟层级", acc: "Mooncake trace 上的存储层级",
            **{s.csv: common.CSV_ZH for s in (s_tl, s_an, s_sp, s_ti)},
        })  # fmt: skip
    return demo


if __name__ == "__main__":
    common.main(build)
