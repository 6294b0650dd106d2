"""The trace panel of checkpoint_density and state_transfer: an uploaded (or the bundled) trace,
why each request got no hit in SGLang and vLLM side by side, one request's explanation a click
away, and the share of resident KV pages with a state against the HiCache host size.

Draws ``kda_core.studies.hit_reasons`` (per request: cached tokens and reason),
``studies.hit_requests`` (the worst requests, one request explained) and
``studies.host_coverage``. The file is read by ``workloads.load_trace`` (the format detected or
chosen; malformed rows skipped and reported, or the file refused at the first one). Caps: an
upload of at most ``MAX_UPLOAD_MIB`` MiB (also Gradio's ``max_file_size``, ``apps.ui.launch``)
and ``MAX_REQUESTS`` requests. ``hits_panel(page, demo, name)`` lays it out and wires it
(drawn on load with the bundled trace); ``analyse`` and ``explain_request`` are the callbacks;
its view is ``trace_hits_view``, its words ``words.trace_hits.HITS``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import gradio as gr
import pandas as pd

from apps import ui
from apps.panels.trace_hits_view import (
    explain_markdown,
    fig_coverage,
    fig_reasons,
    summary_markdown,
    table_rows,
)
from apps.ui import guard
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core import workloads as wl
from kda_core.studies import density as ds
from kda_core.studies.hit_reasons import HitReasons, hit_reasons
from kda_core.studies.hit_requests import RequestExplanation, explain, worst_requests
from kda_core.studies.host_coverage import HostCoverage, host_coverage
from kda_core.workloads.ingest import RowError
from words.catalog import T as Lang
from words.trace_hits import HITS

MAX_UPLOAD_MIB = ui.MAX_UPLOAD_MIB
MAX_UPLOAD_BYTES = MAX_UPLOAD_MIB << 20
MAX_REQUESTS = 20_000
BUNDLED_REQUESTS = 1000
TABLE_ROWS = 30
FORMATS = ("auto", *wl.FORMATS)
HOST_RATIOS = (0, 0.5, 1, 2, 4, 8)
_PRIVATE = {"api_visibility": "private"}


def _path(value: object) -> str | None:
    """The uploaded file's path (``gr.File(type="filepath")``), None when nothing is uploaded."""
    if value is None or value == "":
        return None
    path = getattr(value, "path", value)  # a FileData from the API
    if not isinstance(path, (str, os.PathLike)):
        raise fail("e_hits_missing", HITS)
    return str(path)


def check_file(value: object) -> None:
    """The upload exists and is within the cap (checked before anything reads it)."""
    path = _path(value)
    if path is None:
        return
    try:
        size = Path(path).stat().st_size
    except OSError:
        raise fail("e_hits_missing", HITS) from None
    if size > MAX_UPLOAD_BYTES:
        raise fail("e_hits_big", HITS, size=f"{size / (1 << 20):.1f}", cap=MAX_UPLOAD_MIB)


def _load(path: str, fmt: str, skip: bool, block: int) -> wl.Trace:
    """``load_trace`` on the upload; its messages name the file as the reader knows it (the
    upload's own name, not the server's temporary directory). A format that cannot be told,
    or a file none of whose rows reads, is said in the panel's words (the File format)."""
    try:
        return wl.load_trace(
            path,
            fmt,
            on_error="skip" if skip else "raise",
            block_size=block,
            max_requests=MAX_REQUESTS,
        )
    except ValueError as e:
        said = _reworded(e, Path(path).name) if isinstance(e, RowError) else None
        raise said or ValueError(str(e).replace(str(Path(path).parent) + os.sep, "")) from None


def _reworded(e: RowError, name: str) -> Exception | None:
    """A reader's refusal in the panel's words, from the facts ``load_trace`` gives with it."""
    facts = e.facts
    if e.field == "format" and facts.get("fits"):
        fits = tuple(HITS(f"fmt_{f}") for f in facts["fits"])
        return fail("e_hits_format_two", HITS, name=name, line=facts["line"], fits=fits)
    if e.field == "format":
        return fail("e_hits_format_none", HITS, name=name, line=facts["line"])
    if e.field == "rows" and facts.get("skipped"):
        n = int(facts["skipped"])  # type: ignore[call-overload]
        rows = HITS("n_row") if n == 1 else HITS("n_rows", n=n)
        fmt = HITS(f"fmt_{facts['format']}")
        reasons = "; ".join(facts["reasons"])  # type: ignore[arg-type]
        return fail("e_hits_no_rows", HITS, name=name, fmt=fmt, rows=rows, reasons=reasons)
    return None


@functools.lru_cache(maxsize=4)
def _bundled(budget_gib: float) -> tuple[HitReasons, HostCoverage]:
    """The default (bundled trace) study, memoised: both apps draw it on load."""
    trace = ds.load_workload("head", "conversation", BUNDLED_REQUESTS)
    return _study(trace, budget_gib)


def _study(trace: wl.Trace, budget_gib: float) -> tuple[HitReasons, HostCoverage]:
    budget = budget_gib * (1 << 30) if budget_gib else None
    return hit_reasons(trace, state_budget_bytes=budget), host_coverage(trace, sizes=HOST_RATIOS)


def _checks() -> list:
    return [
        check_file,
        lambda v: ui.check_choice(HITS("v_hits_format"), v, FORMATS),
        None,
        lambda v: ui.check_int(HITS("v_hits_block"), v, 16, 4096),
        lambda v: ui.check_float(HITS("v_hits_budget"), v, 0, 1024),
    ]


def _readable(file: object, fmt: str, skip: object, block: object, *_: object) -> None:
    """The file loads with the chosen format and row policy (its error names the line)."""
    path = _path(file)
    if path is not None:
        _load(path, fmt, bool(skip), int(float(block)))  # type: ignore[arg-type]


def validator():  # noqa: ANN201 - Gradio's validator callable
    """The panel's inputs checked before Analyse runs, the file read once to find a malformed
    row (a rejected input leaves the page as it was)."""
    return guard.validator(*_checks(), cross=_readable)


def compute_analyse(
    file: object = None,
    fmt: str = "auto",
    skip_bad_rows: bool = True,
    block_size: float = 512,
    budget_gib: float = 0,
) -> dict:
    check_file(file)
    fmt = ui.check_choice(HITS("v_hits_format"), fmt, FORMATS)
    block = ui.check_int(HITS("v_hits_block"), block_size, 16, 4096)
    budget = ui.check_float(HITS("v_hits_budget"), budget_gib, 0, 1024)
    path = _path(file)
    if path is None:
        trace = ds.load_workload("head", "conversation", BUNDLED_REQUESTS)
        r, cov = _bundled(budget)
        return {
            "trace": trace,
            "name": None,
            "r": r,
            "cov": cov,
            "budget": budget,
            "worst": worst_requests(r, TABLE_ROWS).tolist(),
        }
    trace = _load(path, fmt, bool(skip_bad_rows), block)
    out = {
        "trace": trace,
        "name": Path(path).name,
        "r": None,
        "cov": None,
        "budget": budget,
        "worst": [],
    }
    if trace.has_prefix_info:  # a lengths-only file: no hit reasons, said plainly
        out["r"], out["cov"] = _study(trace, budget)
        out["worst"] = worst_requests(out["r"], TABLE_ROWS).tolist()
    return out


def draw_analyse(v: dict, t: Lang) -> tuple:
    """The summary, the reasons figure + CSV, the request table, the explanation prompt, the
    coverage figure + CSV, and the study kept for the explanation."""
    name = f"`{v['name']}`" if v["name"] else t("bundled", n=BUNDLED_REQUESTS)
    r, cov = v["r"], v["cov"]
    md = summary_markdown(v["trace"], name, r, v["budget"], t)
    if r is None:
        none = ui.empty_figure(t("t_hits_none"), t("hits_none"))
        head, rows = table_rows(None, [], t)
        return (
            md,
            none,
            gr.update(visible=False),
            pd.DataFrame(rows, columns=head),
            explain_markdown(None, t),
            none,
            gr.update(visible=False),
            v,
        )
    fig_r, csv_r = fig_reasons(r, "trace-hits", t)
    fig_c, csv_c = fig_coverage(cov, "trace-hits", t)
    head, rows = table_rows(r, v["worst"], t)
    return (
        md,
        fig_r,
        gr.update(value=csv_r, visible=True),
        pd.DataFrame(rows, columns=head),
        explain_markdown(None, t),
        fig_c,
        gr.update(value=csv_c, visible=True),
        v,
    )


analyse = rendered(compute_analyse, draw_analyse, HITS)


def compute_explain(study: dict | None = None, request: float = 0) -> RequestExplanation | None:
    """Request ``request`` of the analysed trace (None: nothing analysed, or lengths only)."""
    if not study or study.get("r") is None:
        return None
    n = len(study["r"].input_len)
    return explain(study["r"], ui.check_int(HITS("th_request"), request, 0, max(n - 1, 0)))


def draw_explain(e: RequestExplanation | None, t: Lang) -> tuple:
    return (explain_markdown(e, t),)


explain_request = rendered(compute_explain, draw_explain, HITS)


def pick_row(study: dict | None, evt: gr.SelectData) -> int | dict:
    """A clicked table row -> its request index: the row's first cell (the table may have
    been sorted on the page), else the row's place in ``study["worst"]``."""
    worst = (study or {}).get("worst") or []
    first = (evt.row_value or [None])[0]
    if first is not None and str(first).strip().isdigit() and int(first) in worst:
        return int(first)
    row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
    return int(worst[row]) if isinstance(row, int) and 0 <= row < len(worst) else gr.skip()


def _inputs(page: Page, name: str) -> tuple:
    L = page.label
    upload = L(
        gr.File(
            file_types=[".jsonl", ".json", ".csv", ".txt"],
            type="filepath",
            elem_id=f"{name}-hits-file",
            elem_classes=["kda-upload"],  # its refusal drawn below it (apps.ui.launch.CSS)
            height=140,
        ),
        "f_hits_file",
        mib=MAX_UPLOAD_MIB,
        n=MAX_REQUESTS,
    )
    fmt = page.choices(
        L(gr.Dropdown(list(FORMATS), value="auto", elem_id=f"{name}-hits-format"), "f_hits_format"),
        [(f"fmt_{f}", f) for f in FORMATS],
    )
    skip = L(gr.Checkbox(True, elem_id=f"{name}-hits-skip"), "f_hits_skip")
    with gr.Row():
        block = L(gr.Number(512, step=16, elem_id=f"{name}-hits-block"), "f_hits_block")
        budget = L(gr.Number(0, elem_id=f"{name}-hits-budget"), "f_hits_budget")
    btn = L(gr.Button(variant="secondary", elem_id=f"{name}-hits-run"), "b_hits")
    return [upload, fmt, skip, block, budget], btn


def hits_panel(page: Page, demo: gr.Blocks, name: str) -> None:
    """The panel (elem ids ``<name>-hits-*``), drawn on load with the bundled trace."""
    L = page.label
    with gr.Accordion(open=True) as box:
        L(gr.Markdown(elem_id=f"{name}-hits-intro"), "hits_intro")
        with gr.Row():
            with gr.Column(scale=1, min_width=290):
                inputs, btn = _inputs(page, name)
            with gr.Column(scale=2):
                md = gr.Markdown(
                    label="Trace summary",
                    elem_id=f"{name}-hits-summary",
                    elem_classes=["kda-metrics"],
                )
                reasons = page.figure_slot(f"{name}-hits-reasons", "n_hits_reasons")
        table = L(
            gr.Dataframe(
                interactive=False, elem_id=f"{name}-hits-table", max_height=360, wrap=True
            ),
            "table_label",
            n=TABLE_ROWS,
        )
        with gr.Row():
            request = L(
                gr.Number(0, step=1, elem_id=f"{name}-hits-request", scale=0, min_width=160),
                "th_request",
            )
            why = gr.Markdown(
                label="Request explanation",
                elem_id=f"{name}-hits-explain",
                elem_classes=["kda-metrics"],
            )
        coverage = page.figure_slot(f"{name}-hits-coverage", "n_hits_cov")
    L(box, "acc_hits")
    study = gr.State(None)
    outs = [md, *reasons.outputs, table, why, *coverage.outputs, study]
    run_fn, run_out = page.event(compute_analyse, draw_analyse, outs)
    ins = [*inputs, page.radio]
    btn.click(run_fn, ins, run_out, api_name=f"{name}_hits", validator=validator())
    demo.load(run_fn, ins, run_out, **_PRIVATE)
    ex_fn, ex_out = page.event(compute_explain, draw_explain, [why])
    ex_in = [study, request, page.radio]
    table.select(pick_row, [study], [request], **_PRIVATE).then(ex_fn, ex_in, ex_out, **_PRIVATE)
    request.submit(ex_fn, ex_in, ex_out, api_name=f"{name}_hits_explain")


__all__ = ["analyse", "check_file", "explain_request", "hits_panel", "pick_row"]
