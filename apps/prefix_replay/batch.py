"""prefix_replay's batch view: its panel and callbacks (several requests at once, one pool).

``batch_panel`` lays out its inputs and figures. ``serve_batch`` checks the batch inputs (one
prompt per line, arrival steps, max new tokens, strategy, state slots, token budget, KV pool,
one byte buffer, captured decode sizes; capped ranges), runs ``studies.batch_view.batch_view``
(``Engine.serve``) and returns the batch summary, the swimlane, the pool over time, the pools
panel (which shows the batch run's real concurrency next to the session's counters), the byte
buffer's border per step and the decode index table per step; ``redraw_batch`` redraws them
(the language switch). ``batch_validator`` is the same checks as Gradio's ``validator=`` (a
rejected input leaves the page as it was). Its figures are ``batch_view`` and
``batch_options_view``, its summary ``batch_tables``; its words ``words.prefix_replay_batch``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import gradio as gr

from apps import ui
from apps.prefix_replay.batch_options_view import fig_border, fig_graphs
from apps.prefix_replay.batch_tables import batch_markdown
from apps.prefix_replay.batch_view import fig_batch_phases, fig_batch_pool, fig_pools
from apps.ui import guard
from apps.ui.catalog import Msg, UserError
from apps.ui.checks import fail
from apps.ui.page import Page
from kda_core.model import encode
from kda_core.studies import batch_view as bv
from words.catalog import T as Lang
from words.prefix_replay import MSG

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
# one byte buffer for the state slots and the MLA KV, in KiB (0: the two separate pools); the
# floor is one request's reserved slots and one KV token (``batch_view.buffer_floor``)
MAX_BUFFER_KIB = 16384
# captured decode batch sizes (SGLang's cuda_graph_bs): each in [1, 64], at most 16 of them
GRAPH_RANGE = (1, 64)
MAX_GRAPH_SIZES = 16
# the field's default: SGLang's captured decode sizes up to 12 requests, the most a batch here
# has (``arg_groups/cuda_graph_hook.py`` ``generate_decode_cuda_graph_batch_sizes`` without
# speculative decoding: [1, 2, 4, 8, 12] + range(16, 257, 8) + ...)
DEFAULT_GRAPH_BS: tuple[int, ...] = (1, 2, 4, 8, 12)


def parse_prompts(text: object) -> list[str]:
    """The non-empty lines of ``text``: 1 to ``MAX_BATCH``, each 1 to 512 UTF-8 bytes."""
    if not isinstance(text, str):
        raise fail("e_b_text", MSG)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not 1 <= len(lines) <= MAX_BATCH:
        raise fail("e_b_lines", MSG, n=MAX_BATCH, got=len(lines))
    for i, ln in enumerate(lines):
        if len(encode(ln)) > MAX_LINE_BYTES:
            raise fail("e_b_line", MSG, i=i + 1, n=MAX_LINE_BYTES, got=len(encode(ln)))
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
        raise fail("e_b_arr_int", MSG, n=MAX_ARRIVAL, got=ui.clip_text(text)) from None
    out = [ui.check_int(MSG("v_arrivals"), x, 0, MAX_ARRIVAL) for x in nums]
    if n is not None and len(out) != n:
        raise fail("e_b_arr_count", MSG, n=MAX_ARRIVAL, k=n, got=len(out))
    return out


def buffer_kib_floor(strategy: str) -> int:
    """The smallest buffer in KiB the engine takes for ``strategy``."""
    return -(-bv.buffer_floor(strategy) // 1024)


def parse_buffer(value: object, strategy: str) -> int | None:
    """The byte buffer in bytes, or None for 0 (the separate pools): an integer number of KiB
    in [the strategy's floor, ``MAX_BUFFER_KIB``]."""
    lo = buffer_kib_floor(strategy)
    try:
        kib = ui.check_int(MSG("v_buffer"), value, 0, MAX_BUFFER_KIB)
    except UserError:
        kib = -1
    if kib == 0:
        return None
    if not lo <= kib <= MAX_BUFFER_KIB:
        got = ui.clip_text(value)
        raise fail("e_buffer", MSG, lo=lo, hi=MAX_BUFFER_KIB, strategy=strategy, got=got)
    return kib * 1024


def parse_graph_bs(text: object) -> tuple[int, ...] | None:
    """Captured decode sizes: integers in ``GRAPH_RANGE`` separated by commas / spaces, at most
    ``MAX_GRAPH_SIZES`` (None: empty, eager decode)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    lo, hi = GRAPH_RANGE
    parts = [p for p in re.split(r"[,\s]+", str(text).strip()) if p]
    ints = all(re.fullmatch(r"\+?\d+", p) for p in parts)
    if len(parts) > MAX_GRAPH_SIZES or not ints or not all(lo <= int(p) <= hi for p in parts):
        raise fail("e_graph", MSG, lo=lo, hi=hi, n=MAX_GRAPH_SIZES, got=ui.clip_text(text))
    return tuple(sorted({int(p) for p in parts}))


def _checks() -> list:
    """One check per batch input, aligned with ``BATCH_INPUTS`` order."""
    return [
        parse_prompts,
        parse_arrivals,
        lambda v: ui.check_int(MSG("v_new"), v, 1, MAX_NEW),
        lambda v: ui.check_choice(MSG("v_strategy"), v, BATCH_STRATEGIES),
        lambda v: ui.check_int(MSG("v_b_slots"), v, *SLOTS_RANGE),
        lambda v: ui.check_int(MSG("v_budget"), v, *BUDGET_RANGE),
        lambda v: ui.check_int(MSG("v_kv"), v, *KV_RANGE),
        None,  # the byte buffer's floor is the strategy's: ``_cross`` checks it
        parse_graph_bs,
    ]


def _cross(prompts: object, arrivals: object, *rest: object) -> tuple[int, Msg] | None:
    strategy, buffer = rest[1], rest[5]
    try:
        parse_arrivals(arrivals, len(parse_prompts(prompts)))
    except UserError as e:
        return 1, e.msg
    try:
        parse_buffer(buffer, str(strategy))
    except UserError as e:
        return 7, e.msg
    return None


def batch_validator():  # noqa: ANN201 - Gradio's validator callable
    return guard.validator(*_checks(), cross=_cross)


def _outputs(v: bv.BatchView, session: object, t: Lang) -> tuple:
    """(summary, swimlane + CSV, pool + CSV, pools panel + CSV, border + CSV, index table +
    CSV, state)."""
    res = getattr(session, "result", None)
    if res is not None:
        pools = fig_pools(res, session.slots is not None, v, t)  # type: ignore[union-attr]
    else:
        pools = (ui.empty_figure(t("n_pools"), t("empty_pools")), None)
    state = replace(session, batch=v) if res is not None else session
    return (
        batch_markdown(v, t),
        *fig_batch_phases(v, t),
        *fig_batch_pool(v, t),
        *pools,
        *_shown(*fig_border(v, t)),
        *_shown(*fig_graphs(v, t)),
        state,
    )


def _shown(fig: object, csv: str | None) -> tuple:
    """An option's figure and its CSV button, hidden while the option is off (no CSV)."""
    return fig, gr.update(value=csv, visible=csv is not None)


@ui.study_errors
def serve_batch(
    prompts: str = "\n".join(bv.DEFAULT_PROMPTS),
    arrivals: str = ", ".join(map(str, bv.DEFAULT_ARRIVALS)),
    max_new_tokens: float = 8,
    strategy: str = "extra_buffer",
    state_slots: float = 16,
    token_budget: float = 64,
    kv_pool: float = 0,
    buffer_kib: float = 0,
    graph_sizes: str = ", ".join(map(str, DEFAULT_GRAPH_BS)),
    session: object = None,
    language: str = "English",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Serve the batch (all lines at once, each arriving at its step) on one state pool, or
    from one byte buffer (``buffer_kib`` > 0: it sets the state slots and the KV), decoding on
    the captured sizes ``graph_sizes`` (empty: eager)."""
    t = MSG.lang(language)
    lines = parse_prompts(prompts)
    arr = parse_arrivals(arrivals, len(lines))
    n_new = ui.check_int(MSG("v_new"), max_new_tokens, 1, MAX_NEW)
    strat = ui.check_choice(MSG("v_strategy"), strategy, BATCH_STRATEGIES)
    slots = ui.check_int(MSG("v_b_slots"), state_slots, *SLOTS_RANGE)
    budget = ui.check_int(MSG("v_budget"), token_budget, *BUDGET_RANGE)
    kv = ui.check_int(MSG("v_kv"), kv_pool, *KV_RANGE) or None
    buffer = parse_buffer(buffer_kib, strat)
    graph_bs = parse_graph_bs(graph_sizes)
    if progress is not None:
        progress(0.0, desc=t("progress_batch", n=len(lines)))
    v = bv.batch_view(
        lines,
        n_new,
        arr,
        strategy=strat,
        state_slots=None if buffer else slots,
        max_batch_tokens=budget,
        kv_tokens=None if buffer else kv,
        cuda_graph_bs=graph_bs,
        unified_memory=buffer,
    )
    return _outputs(v, session, t)


def redraw_batch(session: object = None, language: str = "English") -> tuple:
    """The batch outputs of the last run again, in ``language`` (the switch)."""
    v = getattr(session, "batch", None)
    if v is None:
        return (gr.skip(),) * 12
    return _outputs(v, session, MSG.lang(language))


def batch_panel(ui: SimpleNamespace, name: str, page: Page) -> None:
    """The batch view's components on ``ui`` (elem ids ``{name}-batch-*``): several requests
    submitted at once, inputs left, figures right."""
    L = page.label
    with gr.Accordion(open=True) as ui.batch_box, gr.Row():
        with gr.Column(scale=1, min_width=300):
            ui.b_text = L(
                gr.Textbox(
                    "\n".join(bv.DEFAULT_PROMPTS),
                    lines=6,
                    max_lines=14,
                    elem_id=f"{name}-batch-text",
                ),
                "f_b_text",
                n=MAX_BATCH,
            )
            ui.b_arr = L(
                gr.Textbox(
                    ", ".join(map(str, bv.DEFAULT_ARRIVALS)), elem_id=f"{name}-batch-arrivals"
                ),
                "f_b_arr",
            )
            with gr.Row():
                ui.b_new = L(
                    gr.Number(8, step=1, elem_id=f"{name}-batch-new"), "f_b_new", n=MAX_NEW
                )
                ui.b_budget = L(gr.Number(64, step=1, elem_id=f"{name}-batch-budget"), "f_b_budget")
            ui.b_strategy = L(
                gr.Radio(
                    list(BATCH_STRATEGIES), value="extra_buffer", elem_id=f"{name}-batch-strategy"
                ),
                "f_b_strategy",
            )
            with gr.Row():
                ui.b_slots = L(gr.Number(16, step=1, elem_id=f"{name}-batch-slots"), "f_b_slots")
                ui.b_kv = L(
                    gr.Number(0, step=1, elem_id=f"{name}-batch-kv"), "f_b_kv", n=KV_RANGE[1]
                )
            ui.b_buffer = L(
                gr.Number(0, step=1, elem_id=f"{name}-batch-buffer"),
                "f_b_buffer",
                n=MAX_BUFFER_KIB,
            )
            ui.b_graph = L(
                gr.Textbox(", ".join(map(str, DEFAULT_GRAPH_BS)), elem_id=f"{name}-batch-graph-bs"),
                "f_b_graph",
                lo=GRAPH_RANGE[0],
                hi=GRAPH_RANGE[1],
            )
            ui.b_run = L(gr.Button(variant="primary", elem_id=f"{name}-batch-run"), "b_batch")
        with gr.Column(scale=2):
            ui.b_md = gr.Markdown(
                label="Batch summary", elem_id=f"{name}-batch-summary", elem_classes=["kda-metrics"]
            )
            ui.s_phases = page.figure_slot(f"{name}-batch-phases", "n_phases")
            ui.s_bpool = page.figure_slot(f"{name}-batch-pool", "n_bpool")
            ui.s_border = page.figure_slot(f"{name}-batch-border", "n_border", csv=False)
            ui.s_graphs = page.figure_slot(f"{name}-batch-graphs", "n_graphs", csv=False)
    L(ui.batch_box, "acc_batch")
