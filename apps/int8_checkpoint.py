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

from typing import NamedTuple

import gradio as gr

from apps import ui
from apps.figures.int8_checkpoint import (
    NAME,
    fig_capacity,
    fig_divergence,
    fig_error_map,
    fig_histograms,
    fig_variants,
    ticks_125,
)
from apps.text.int8_checkpoint import (
    EN,
    TR,
    ZH,
    _cell,
    continuation_markdown,
    history_markdown,
    summary_markdown,
)
from apps.ui import COLORS, SERIES, guard, i18n
from kda_core.studies import int8 as st
from kda_core.studies import quality

VARIANT_LABELS = tuple(v[0] for v in st.VARIANTS)
N_LAYERS, N_HEADS = st.kda_shape()  # the served model's, not hard-coded
MAX_HISTORY = 10


def _variant(label: str) -> tuple[str, str | None]:
    label = ui.check_choice("format", label, VARIANT_LABELS)
    _, fmt, gran = st.VARIANTS[VARIANT_LABELS.index(label)]
    return fmt, gran


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


class Controls(NamedTuple):
    """The left column's components (`_controls`), by name."""

    text: gr.Textbox
    n_tokens: gr.Number
    variant: gr.Radio
    steps: gr.Number
    btn: gr.Button
    summary: gr.Markdown
    hist_md: gr.Markdown
    layer: gr.Slider
    head: gr.Slider
    capacity_box: gr.Accordion
    native: gr.Radio
    tp: gr.Number
    budget: gr.Number


def _controls() -> Controls:
    """The left column: the text, the format, the K3 capacity inputs, the summaries."""
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
        native = gr.Radio(list(st.NATIVE_DTYPES), value="bfloat16", label="Native state pool dtype")
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
    return Controls(
        text=text,
        n_tokens=n_tokens,
        variant=variant,
        steps=steps,
        btn=btn,
        summary=summary,
        hist_md=hist_md,
        layer=layer,
        head=head,
        capacity_box=capacity_box,
        native=native,
        tp=tp,
        budget=budget,
    )


def build() -> gr.Blocks:
    with gr.Blocks(title="INT8 checkpoints · KDA State Lab") as demo:
        lang = ui.header(NAME, "INT8 checkpoints · INT8 检查点", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                ctl = _controls()
            with gr.Column(scale=2):
                s1 = ui.figure_slot(f"{NAME}-errmap", "Error map")
                s3 = ui.figure_slot(f"{NAME}-divergence", "Divergence")
                cont = gr.Markdown(
                    label="Exact vs compressed continuations", elem_id=f"{NAME}-continuation"
                )
                s4 = ui.figure_slot(f"{NAME}-variants", "Variants")
                s2 = ui.figure_slot(f"{NAME}-hist", "Histograms")
                s5 = ui.figure_slot(f"{NAME}-capacity", "Capacity")
        inputs = [
            ctl.text,
            ctl.n_tokens,
            ctl.variant,
            ctl.layer,
            ctl.head,
            ctl.steps,
            ctl.native,
            ctl.tp,
            ctl.budget,
            history,
        ]
        outputs = [
            ctl.summary,
            *s1.outputs,
            *s2.outputs,
            *s3.outputs,
            *s4.outputs,
            *s5.outputs,
            ctl.hist_md,
            history,
            cont,
        ]
        loc = i18n.Localizer(lang.radio, TR)
        run_fn, run_out = loc.wrap(run, outputs)
        run_in, run_v = [*inputs, lang.radio], _run_validator()
        ctl.btn.click(run_fn, run_in, run_out, api_name=f"{NAME}_run", validator=run_v)
        demo.load(run_fn, run_in, run_out, api_visibility="private")
        gr.on(
            [ctl.variant.input, ctl.layer.release, ctl.head.release, ctl.native.input],
            run_fn,
            run_in,
            run_out,
            api_visibility="private",
            validator=run_v,
        )
        loc.finish()
        lang.labels({
            ctl.text: f"模型读取的文本（1-{st.MAX_TEXT_CHARS} 个字符）",
            ctl.n_tokens: "停放前的 token 数（1-1024，不超过文本字节数）",
            ctl.variant: "格式 / 缩放粒度", ctl.layer: "KDA 层", ctl.head: "头",
            ctl.steps: f"恢复后解码的 token 数（1-{st.MAX_STEPS}）", ctl.native: "原生状态池精度",
            ctl.tp: "TP（整除 96）", ctl.budget: "检查点预算（GiB，0.01-4096）",
            ctl.btn: "停放并恢复", ctl.capacity_box: "Kimi K3 容量",
            **{sl.csv: ui.CSV_ZH for sl in (s1, s2, s3, s4, s5)},
        }, tr=TR)  # fmt: skip
    return demo


__all__ = [
    "COLORS",
    "SERIES",
    "VARIANT_LABELS",
    "_cell",
    "build",
    "continuation_markdown",
    "run",
    "ticks_125",
]  # what the tests read as app.<name>


if __name__ == "__main__":
    ui.main(build)
