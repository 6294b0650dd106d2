"""prefix_replay's batch view: its panel and callbacks (several requests at once, one pool).

``batch_panel`` lays out its inputs and figures. ``serve_batch`` checks the batch inputs (one
prompt per line, arrival steps, max new tokens, strategy, state slots, token budget, KV pool;
capped ranges), runs ``studies.batch_view.batch_view`` (``Engine.serve``) and returns the batch
summary, the swimlane, the pool over time and the pools panel (which shows the batch run's real
concurrency next to the session's counters); ``redraw_batch`` redraws them (the language
switch). ``batch_validator`` is the same checks as Gradio's ``validator=`` (a rejected input
leaves the page as it was).
"""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import gradio as gr

from apps import ui
from apps.figures.prefix_replay_batch import fig_batch_phases, fig_batch_pool, fig_pools
from apps.text.prefix_replay import batch_markdown
from apps.ui import figure_slot, guard
from kda_core.model import encode
from kda_core.studies import batch_view as bv

BATCH_STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer")
MAX_BATCH = 12  # requests per batch (the default renders in about a second)
MAX_LINE_BYTES = 512
MAX_ARRIVAL = 64
MAX_NEW = 32
SLOTS_RANGE = (5, 64)  # one extra_buffer request reserves 5 slots
BUDGET_RANGE = (8, 256)
# the MLA KV token pool (0: no limit). A small one makes the scheduler retract a decoding
# request (back to waiting, redone later, as SGLang's retract_decode) and reject one that can
# never fit (an SGLang-style message: serve.loop.reject_message)
KV_RANGE = (0, 65536)
KV_NAME = "KV pool in tokens (0 = no limit)"
PROMPTS_NAME = "batch requests (one per line)"
ARRIVALS_NAME = "arrival steps"


def parse_prompts(text: object) -> list[str]:
    """The non-empty lines of ``text``: 1 to ``MAX_BATCH``, each 1 to 512 UTF-8 bytes."""
    if not isinstance(text, str):
        raise gr.Error(f"{PROMPTS_NAME} must be text", print_exception=False)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not 1 <= len(lines) <= MAX_BATCH:
        raise gr.Error(
            f"{PROMPTS_NAME} must hold 1 to {MAX_BATCH} non-empty lines, got {len(lines)}",
            print_exception=False,
        )
    for i, ln in enumerate(lines):
        if len(encode(ln)) > MAX_LINE_BYTES:
            raise gr.Error(
                f"{PROMPTS_NAME}: line {i + 1} must be 1 to {MAX_LINE_BYTES} UTF-8 bytes, "
                f"got {len(encode(ln))}",
                print_exception=False,
            )
    return lines


def parse_arrivals(text: object, n: int | None = None) -> list[int] | None:
    """Comma / space separated integers in [0, 64] (None: empty, all arrive at step 0); with
    ``n``, exactly one per request."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    parts = [p for p in re.split(r"[,\s]+", str(text).strip()) if p]
    try:  # integers keep their own spelling in an error message (-3, not -3.0)
        nums = [int(p) if re.fullmatch(r"[+-]?\d+", p) else float(p) for p in parts]
    except ValueError:
        raise gr.Error(
            f"{ARRIVALS_NAME} must be integers in [0, {MAX_ARRIVAL}] separated by commas, "
            f"got {ui.clip_text(text)}",
            print_exception=False,
        ) from None
    out = [ui.check_int(ARRIVALS_NAME, x, 0, MAX_ARRIVAL) for x in nums]
    if n is not None and len(out) != n:
        raise gr.Error(
            f"{ARRIVALS_NAME} must give one step in [0, {MAX_ARRIVAL}] per request ({n}) or be "
            f"empty, got {len(out)}",
            print_exception=False,
        )
    return out


def _checks() -> list:
    """One check per batch input, aligned with ``BATCH_INPUTS`` order."""
    return [
        parse_prompts,
        parse_arrivals,
        lambda v: ui.check_int("max new tokens", v, 1, MAX_NEW),
        lambda v: ui.check_choice("strategy", v, BATCH_STRATEGIES),
        lambda v: ui.check_int("state slots", v, *SLOTS_RANGE),
        lambda v: ui.check_int("token budget per step", v, *BUDGET_RANGE),
        lambda v: ui.check_int(KV_NAME, v, *KV_RANGE),
    ]


def _cross(prompts: object, arrivals: object, *_: object) -> tuple[int, str] | None:
    try:
        parse_arrivals(arrivals, len(parse_prompts(prompts)))
    except gr.Error as e:
        return 1, guard.message_of(e)
    return None


def batch_validator():  # noqa: ANN201 - Gradio's validator callable
    return guard.validator(*_checks(), cross=_cross)


def _outputs(v: bv.BatchView, session: object) -> tuple:
    """(summary, swimlane + CSV, pool + CSV, pools panel + CSV, state)."""
    res = getattr(session, "result", None)
    if res is not None:
        pools = fig_pools(res, session.slots is not None, v)  # type: ignore[union-attr]
    else:
        pools = (ui.empty_figure("Pools", "empty session: send a request"), None)
    state = replace(session, batch=v) if res is not None else session
    return (batch_markdown(v), *fig_batch_phases(v), *fig_batch_pool(v), *pools, state)


@ui.study_errors
def serve_batch(
    prompts: str = "\n".join(bv.DEFAULT_PROMPTS),
    arrivals: str = ", ".join(map(str, bv.DEFAULT_ARRIVALS)),
    max_new_tokens: float = 8,
    strategy: str = "extra_buffer",
    state_slots: float = 16,
    token_budget: float = 64,
    kv_pool: float = 0,
    session: object = None,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Serve the batch (all lines at once, each arriving at its step) on one state pool."""
    lines = parse_prompts(prompts)
    arr = parse_arrivals(arrivals, len(lines))
    n_new = ui.check_int("max new tokens", max_new_tokens, 1, MAX_NEW)
    strat = ui.check_choice("strategy", strategy, BATCH_STRATEGIES)
    slots = ui.check_int("state slots", state_slots, *SLOTS_RANGE)
    budget = ui.check_int("token budget per step", token_budget, *BUDGET_RANGE)
    kv = ui.check_int(KV_NAME, kv_pool, *KV_RANGE) or None
    if progress is not None:
        progress(0.0, desc=f"serving {len(lines)} requests together")
    v = bv.batch_view(
        lines, n_new, arr, strategy=strat, state_slots=slots, max_batch_tokens=budget,
        kv_tokens=kv,
    )  # fmt: skip
    return _outputs(v, session)


def redraw_batch(session: object = None) -> tuple:
    """The batch outputs of the last run again (the language switch redraws in 中文)."""
    v = getattr(session, "batch", None)
    if v is None:
        return (gr.skip(),) * 8
    return _outputs(v, session)


def batch_panel(ui: SimpleNamespace, name: str) -> None:
    """The batch view's components on ``ui`` (elem ids ``{name}-batch-*``): several requests
    submitted at once, inputs left, figures right."""

    with (
        gr.Accordion("Batch view: several requests at once", open=True) as ui.batch_box,
        gr.Row(),
    ):
        with gr.Column(scale=1, min_width=300):
            ui.b_text = gr.Textbox(
                    "\n".join(bv.DEFAULT_PROMPTS), lines=6, max_lines=14,
                    label=f"Batch requests (one prompt per line, 1-{MAX_BATCH} lines)",
                    elem_id=f"{name}-batch-text",
                )  # fmt: skip
            ui.b_arr = gr.Textbox(
                    ", ".join(map(str, bv.DEFAULT_ARRIVALS)),
                    label="Arrival steps (one per request, 0-64; empty = all at step 0)",
                    elem_id=f"{name}-batch-arrivals",
                )  # fmt: skip
            with gr.Row():
                ui.b_new = gr.Number(
                        8, label=f"Max new tokens (1-{MAX_NEW})", step=1,
                        elem_id=f"{name}-batch-new",
                    )  # fmt: skip
                ui.b_budget = gr.Number(
                        64, label="Token budget per step (8-256)", step=1,
                        elem_id=f"{name}-batch-budget",
                    )  # fmt: skip
            ui.b_strategy = gr.Radio(
                    list(BATCH_STRATEGIES), value="extra_buffer", label="Strategy",
                    elem_id=f"{name}-batch-strategy",
                )  # fmt: skip
            with gr.Row():
                ui.b_slots = gr.Number(
                    16, label="State slots (5-64)", step=1, elem_id=f"{name}-batch-slots"
                )
                ui.b_kv = gr.Number(
                        0, label=f"KV pool in tokens (0 = no limit; up to {KV_RANGE[1]})",
                        step=1, elem_id=f"{name}-batch-kv",
                    )  # fmt: skip
            ui.b_run = gr.Button("Serve together", variant="primary", elem_id=f"{name}-batch-run")
        with gr.Column(scale=2):
            ui.b_md = gr.Markdown(
                    label="Batch summary", elem_id=f"{name}-batch-summary",
                    elem_classes=["kda-metrics"],
                )  # fmt: skip
            ui.s_phases = figure_slot(f"{name}-batch-phases", "Batch swimlane")
            ui.s_bpool = figure_slot(f"{name}-batch-pool", "Batch pool")
