"""memory_planner's left column: the model (a shipped config, ``config.json`` pasted or uploaded,
or the custom model's kinds and numbers) and the deployment's knobs, each component keyed by the
plan callback's parameter name; pasting or uploading a config switches the model to it."""

from __future__ import annotations

from collections.abc import Sequence

import gradio as gr

from apps.memory_planner.checks import (
    CHOICES,
    CONFIG,
    CUSTOM,
    CUSTOM_MODEL,
    DTYPES,
    PRESETS,
    SSM_DTYPES,
    STRATEGIES,
    check_upload,
)
from apps.ui import guard
from apps.ui.page import Page
from kda_core.studies import planner_engines as pe
from words.memory_planner import MSG

NAME = "memory_planner"
_PRIVATE = {"api_visibility": "private"}  # events the page wires, not API endpoints


def load_config(path: str, language: str = "English") -> tuple:
    """An uploaded config.json into the text box (its size checked by ``check_upload`` first)."""
    return pe.read_config_file(path), CONFIG


def pasted(text: str) -> object:
    """Typed or pasted into the editor: the model becomes config.json (cleared: left alone)."""
    return CONFIG if isinstance(text, str) and text.strip() else gr.skip()


def model_inputs(page: Page) -> dict:
    """The model and its config: ``{"model", "config_json", <custom model's names>}``."""
    L = page.label
    names = {CUSTOM_MODEL: MSG("o_custom"), CONFIG: MSG("o_config")}
    model = page.choices(
        L(gr.Dropdown(list(PRESETS), value="kimi-k3", elem_id=f"{NAME}-model"), "f_model"),
        [(names.get(m, MSG("model_name", name=m)), m) for m in PRESETS],
    )
    with gr.Accordion(open=False) as config_box:
        editor = gr.Code(
            "", language="json", lines=6, max_lines=12, elem_id=f"{NAME}-config", interactive=True
        )
        config = L(editor, "f_config_text")
        upload = gr.File(
            file_types=[".json"],
            type="filepath",
            elem_id=f"{NAME}-upload",
            elem_classes=["kda-upload"],  # its label above it (apps.ui.launch.CSS)
            height=90,
        )
        upload = L(upload, "f_config_file")
    L(config_box, "acc_config")
    with gr.Accordion(open=False) as custom_box:
        with gr.Row():
            c = {
                k: L(gr.Dropdown(list(CHOICES[k][1]), value=CHOICES[k][1][0]), f"f_{k}")
                for k in ("linear_kind", "attn_kind")
            }
        c.update({k: L(gr.Number(v[3], step=1), f"f_{k}") for k, v in CUSTOM.items()})
    L(custom_box, "acc_custom")
    check = guard.validator(check_upload)
    upload.upload(load_config, [upload, page.radio], [config, model], validator=check, **_PRIVATE)
    config.input(pasted, [config], [model], **_PRIVATE)
    return {"model": model, "config_json": config, **c}


def plan_inputs(page: Page, names: Sequence[str]) -> dict:
    """The left column's inputs by the plan's parameter ``names`` (those it lays out, in order)."""
    L = page.label
    c = model_inputs(page)
    with gr.Row():
        c["tp"] = L(gr.Number(8, step=1, elem_id=f"{NAME}-tp"), "f_tp")
        c["budget_gib"] = L(gr.Number(28, elem_id=f"{NAME}-budget"), "f_budget")
    with gr.Row():
        c["ratio"] = L(gr.Number(0.9, elem_id=f"{NAME}-ratio"), "f_ratio")
        c["max_slots"] = L(gr.Number(0, step=1), "f_max_slots")
    with gr.Row():
        for k, choices in (("ssm", SSM_DTYPES), ("conv", DTYPES), ("kv", DTYPES)):
            value = "auto" if k == "ssm" else "bfloat16"
            dd = gr.Dropdown(list(choices), value=value, elem_id=f"{NAME}-{k}-dtype")
            c[f"{k}_dtype"] = L(dd, f"f_{k}_dtype")
    c["strategy"] = L(gr.Radio(list(STRATEGIES), value="extra_buffer"), "f_strategy")
    with gr.Row():
        c["overlap"] = L(gr.Checkbox(True), "f_overlap")
        c["skip_lock"] = L(gr.Checkbox(False), "f_skip_lock")
        c["replayssm"] = L(gr.Checkbox(False, elem_id=f"{NAME}-replayssm"), "f_replayssm")
    # the drafters one under the other at the column's width: beside D their long labels ran
    # to seven lines and a refusal drawn on a box that narrow was cut on both sides; their
    # refusal sits below the box, in the flow (apps.ui.launch.CSS, ``kda-flow-error``)
    c["draft"] = L(gr.Number(0, step=1, elem_id=f"{NAME}-draft"), "f_draft")
    for k in ("mtp", "eagle"):
        box = gr.Checkbox(False, elem_id=f"{NAME}-{k}", elem_classes=["kda-flow-error"])
        c[k] = L(box, f"f_{k}")
    with gr.Row():
        c["input_len"] = L(gr.Number(16_000, step=1, elem_id=f"{NAME}-input"), "f_input")
        c["output_len"] = L(gr.Number(3_000, step=1), "f_output")
    with gr.Row():
        c["page_size"] = L(gr.Number(1, step=1, elem_id=f"{NAME}-page"), "f_page")
        c["requested"] = L(gr.Number(0, step=1), "f_requested")
    with gr.Row():
        seqs = gr.Number(256, step=1, elem_id=f"{NAME}-max-num-seqs")
        c["max_num_seqs"] = L(seqs, "f_max_num_seqs")
        c["prefix_caching"] = L(gr.Checkbox(True), "f_prefix")
    return {n: c[n] for n in names if n in c}


__all__ = ["load_config", "model_inputs", "pasted", "plan_inputs"]
