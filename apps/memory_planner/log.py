"""memory_planner's log panel: a SGLang or vLLM server log, or any piece of one, pasted (or one of
the real logs loaded) and read back against the model chosen above (``sizing.read_log``): the
verdict, the fixes toward a target, each line rebuilt. ``log_panel(page, model_in)`` lays it out
and wires it; ``read_log`` is the callback (``memory_planner_read_log`` in the API), ``check_log``
its refusal said before it runs; ``log_view`` draws it; its words are
``words.memory_planner_engines``."""

from __future__ import annotations

import inspect

import gradio as gr

from apps import ui
from apps.memory_planner.checks import CUSTOM_MODEL, PRESETS
from apps.memory_planner.log_view import draw_log, draw_log_check, report_markdown
from apps.ui import guard
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import sizing
from kda_core.studies import planner_engines as pe
from words.memory_planner import MSG

NAME = "memory_planner"
_PRIVATE = {"api_visibility": "private"}  # events the page wires, not API endpoints


_NUMBERS = {  # the flags a log may not say: (message key, low, high, integer?)
    "log_ratio": ("v_log_ratio", 0, 10, False),
    "log_page": ("v_log_page", 0, 4096, True),
    "log_tp": ("v_log_tp", 0, 64, True),
    "log_requested": ("v_log_requested", 0, 1_000_000, True),
    "log_target": ("v_log_target", 0, 1_000_000, True),
}


def _number(name: str, value: object) -> float:
    key, lo, hi, integer = _NUMBERS[name]
    return (ui.check_int if integer else ui.check_float)(MSG(key), value, lo, hi)


def _log_text(log: object) -> str:
    """The pasted log, when there is one."""
    if not isinstance(log, str) or not log.strip():
        raise fail("e_log_empty", MSG)
    return log


def _model(model: object) -> str:
    if ui.check_choice(MSG("v_model"), model, PRESETS) == CUSTOM_MODEL:
        raise fail("e_log_custom", MSG)
    return str(model)


def compute_log(
    model: str = "kimi-k3",
    config_json: str = "",
    log: str = "",
    log_ratio: float = 0,
    log_page: float = 0,
    log_tp: float = 0,
    log_requested: float = 0,
    log_target: float = 0,
) -> sizing.LogReport:
    """A pasted SGLang or vLLM log (or a fragment) read back against the chosen shipped or
    pasted config, with the fixes toward ``log_target`` running requests."""
    given = locals()
    _model(model)  # checked in the order the page reads them: model, log, flags
    text = _log_text(log)
    spec = pe.model_spec(model, config_json or "")
    a = {k: _number(k, given[k]) for k in _NUMBERS}
    kw = {"tp": a["log_tp"], "page_size": a["log_page"], "ratio": a["log_ratio"]}
    kw |= {"requested": a["log_requested"], "target": a["log_target"]}
    return sizing.read_log(text, spec, **{k: v or None for k, v in kw.items()})


read_log = rendered(compute_log, draw_log, MSG)


def check_log(*args: object, **kw: object) -> Exception | None:
    """Before reading: the log's refusal, if any (drawn in place of an earlier verdict); an
    empty or out-of-range field is not (``log_validator`` marks it on the field)."""
    try:
        compute_log(*args, **kw)  # type: ignore[arg-type]
    except UserError:
        return None
    except (gr.Error, ValueError) as e:
        return e
    return None


check_log.__signature__ = inspect.signature(compute_log)  # type: ignore[attr-defined]


def log_validator():  # noqa: ANN201 - Gradio's validator callable
    """Read's checks, each on its field: the model, the log (not empty), the flags."""
    nums = [(lambda v, k=k: _number(k, v)) for k in _NUMBERS]
    return guard.validator(_model, None, _log_text, *nums)


def _md(label: str, suffix: str) -> gr.Markdown:
    """A results panel (its label names it in the API)."""
    return gr.Markdown(label=label, elem_id=f"{NAME}-{suffix}", elem_classes=["kda-metrics"])


def _inputs(page: Page) -> tuple[list, gr.Button, list]:
    """The log and the flags it may not say; Read; the real logs' buttons."""
    L = page.label
    log = L(gr.Textbox(lines=8, max_lines=16, elem_id=f"{NAME}-log-text"), "f_log")
    with gr.Row():
        ratio = L(gr.Number(0, elem_id=f"{NAME}-log-ratio"), "f_log_ratio")
        page_size = L(gr.Number(0, step=1), "f_log_page")
        tp = L(gr.Number(0, step=1), "f_log_tp")
    with gr.Row():
        req = L(gr.Number(0, step=1, elem_id=f"{NAME}-log-requested"), "f_log_requested")
        target = L(gr.Number(0, step=1, elem_id=f"{NAME}-log-target"), "f_log_target")
    read = L(gr.Button(variant="primary", elem_id=f"{NAME}-read"), "b_read")
    L(gr.Markdown(), "examples")
    examples = [
        gr.Button(e.name, size="sm", elem_id=f"{NAME}-example-{j}")
        for j, e in enumerate(pe.EXAMPLE_LOGS)
    ]
    return [log, ratio, page_size, tp, req, target], read, examples


def log_panel(page: Page, model_in: list) -> None:
    """The panel (elem ids ``memory_planner-log-*``) below the plan; ``model_in``: the model
    and config.json inputs it reads the log against."""
    L = page.label
    L(gr.Markdown(elem_id=f"{NAME}-log-title"), "log_title")
    L(gr.Markdown(elem_id=f"{NAME}-log-intro"), "log_intro")
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            fields, read, examples = _inputs(page)
        with gr.Column(scale=2):
            report = _md("Verdict", "report")
            lines = _md("Lines", "lines")
    page.initial(report, lambda t: report_markdown(None, t))
    fn, outs = page.event(compute_log, draw_log, [report, lines])
    pre, pre_outs = page.event(check_log, draw_log_check, [report, lines])
    log_in = [*model_in, *fields, page.radio]
    read.click(pre, log_in, pre_outs, **_PRIVATE).then(
        fn, log_in, outs, api_name=f"{NAME}_read_log", validator=log_validator()
    )
    filled = [model_in[0], *fields]
    for e, btn in zip(pe.EXAMPLE_LOGS, examples):
        v = (e.model, e.text, e.ratio or 0, e.page_size or 0, 0, e.requested or 0, 0)
        btn.click(lambda v=v: v, [], filled, **_PRIVATE).then(fn, log_in, outs, **_PRIVATE)


__all__ = ["check_log", "log_panel", "log_validator", "read_log"]
