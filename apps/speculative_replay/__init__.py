"""speculative_replay: verify D draft tokens, accept a prefix, commit exactly from the ring.

Draws ``kda_core.studies.speculative``: one ReplaySSM verify step on TinyHybrid (the tokens,
the ring of one KDA layer / head per draft step and which slots the commit keeps, the exactness
of the commit for every acceptance count against the open-loop fold), the memory of the rings
against per-draft states over D (tiny config and Kimi K3 at TP8), and a full speculative
generation (acceptance per verify step, acceptance vs draft noise, equal to plain greedy).

A panel (``hits``, drawn by ``hits_view``): what a resent prompt keeps in the prefix cache per
engine with drafts on and off (``kda_core.studies.spec_hits``), for the reader's vLLM
``speculative_config``.

The page (layout, checks, event wiring); figures: ``figures``; tables: ``tables``; every word
is in ``words.speculative_replay``. Main actions: ``speculative_replay_verify`` (one step),
``speculative_replay_generate`` (the loop; > 1 s, shows progress), ``_acceptance``, ``_hits``.
The history of verify steps lives in ``gr.State``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.speculative_replay.figures import (
    EXACT_TICKS,
    NAME,
    fig_acceptance,
    fig_exactness,
    fig_generation,
    fig_memory,
    fig_ring,
    fig_verify,
)
from apps.speculative_replay.hits import hits, hits_panel
from apps.speculative_replay.tables import (
    code,
    generation_markdown,
    history_markdown,
    summary_markdown,
)
from apps.ui import SERIES, guard
from apps.ui.catalog import T as Lang
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from apps.ui.page import Page, rendered
from kda_core.studies import speculative as sp
from words.speculative_replay import MSG

N_LAYERS, N_HEADS = sp.kda_shape()  # the served model's, not hard-coded
MAX_D = 64
MAX_HISTORY = 10
NOISES = (0.0, 0.1, 0.2, 0.4)


def _prompt(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise fail("e_prompt_empty", MSG, n=sp.MAX_PROMPT_TOKENS)
    n = len(text.encode("utf-8"))
    if n > sp.MAX_PROMPT_TOKENS:
        raise fail("e_prompt_long", MSG, n=sp.MAX_PROMPT_TOKENS, got=n)
    return text


def _ring(ring: object, d: int) -> int:
    rl = ui.check_int(MSG("v_ring"), ring, 0, 1024)
    if rl and (rl & (rl - 1) or rl < 2 * d):
        raise fail("e_ring", MSG, lo=2 * d, got=rl)
    return rl


def _cross_verify(
    _p: object, d: object, n_accept: object, *rest: object
) -> tuple[int, object] | None:
    """The accepted count and the ring length depend on D (the same rules as ``verify``)."""
    dd = ui.check_int(MSG("v_d"), d, 1, MAX_D)
    try:
        ui.check_int(MSG("v_accept", d=dd), n_accept, -1, dd)
    except UserError as e:
        return 2, e.msg
    try:
        _ring(rest[4], dd)  # noise, seed, layer, head, ring_len
    except UserError as e:
        return 7, e.msg
    return None


def compute_verify(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    n_accept: float = -1,
    noise: float = 0.3,
    seed: float = 2,
    layer: float = 0,
    head: float = 0,
    ring_len: float = 0,
    history: list | None = None,
) -> tuple:
    """One verify + commit. ``n_accept`` -1 = the greedy acceptance; ``ring_len`` 0 = SGLang's
    default next_pow2(2D)."""
    text = _prompt(prompt)
    d = ui.check_int(MSG("v_d"), draft_tokens, 1, MAX_D)
    a = ui.check_int(MSG("v_accept", d=d), n_accept, -1, d)
    nz = ui.check_float(MSG("v_noise"), noise, 0.0, 10.0)
    sd = ui.check_int(MSG("v_seed"), seed, 0, 1_000_000)
    lay = ui.check_int(MSG("v_layer"), layer, 0, N_LAYERS - 1)
    hd = ui.check_int(MSG("v_head"), head, 0, N_HEADS - 1)
    rl = _ring(ring_len, d)
    v = sp.verify_step(
        text, d, None if a < 0 else a, ring_len=rl or None, noise=nz, seed=sd, layer=lay, head=hd
    )
    mem = sp.memory_over_d(tuple(range(1, max(16, d) + 1)), deploy_draft_tokens=d)
    hist = list(history or [])
    hist.append([len(hist) + 1, d, v.natural_accept, v.n_accept, f"{v.commit_error.max():.1e}"])
    return v, mem, d, hist[-MAX_HISTORY:]


def draw_verify(view: tuple, t: Lang) -> tuple:
    """Summary, four (figure, csv) pairs, history markdown, history."""
    v, mem, d, hist = view
    return (
        summary_markdown(v, mem, t),
        *fig_verify(v, t),
        *fig_ring(v, t),
        *fig_exactness(v, t),
        *fig_memory(mem, d, t),
        history_markdown(hist, t),
        hist,
    )


verify = rendered(compute_verify, draw_verify, MSG)


def _gen_args(prompt: object, draft_tokens: object, seed: object, max_new_tokens: object):
    return (
        _prompt(prompt),
        ui.check_int(MSG("v_d"), draft_tokens, 1, MAX_D),
        ui.check_int(MSG("v_seed"), seed, 0, 1_000_000),
        ui.check_int(MSG("v_new"), max_new_tokens, 1, 128),
    )


def compute_generate(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    noise: float = 0.3,
    seed: float = 2,
    max_new_tokens: float = 32,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> sp.GenerationStudy:
    """The speculative loop vs plain greedy on the same prompt."""
    text, d, sd, n = _gen_args(prompt, draft_tokens, seed, max_new_tokens)
    nz = ui.check_float(MSG("v_noise"), noise, 0.0, 10.0)
    if progress is not None:
        progress(0.0, desc=MSG("progress_gen").render(language))
    return sp.generation(text, n, draft_tokens=d, noise=nz, seed=sd)


def draw_generate(g: sp.GenerationStudy, t: Lang) -> tuple:
    return (generation_markdown(g, t), *fig_generation(g, t))


generate = rendered(compute_generate, draw_generate, MSG)


def compute_acceptance(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    seed: float = 2,
    max_new_tokens: float = 32,
    language: str = "en",
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple[sp.AcceptanceCurve, int]:
    """Acceptance at draft noises 0, 0.1, 0.2, 0.4 (at most 16 generated tokens each)."""
    text, d, sd, n = _gen_args(prompt, draft_tokens, seed, max_new_tokens)
    if progress is not None:
        progress(0.0, desc=MSG("progress_acc", n=len(NOISES)).render(language))
    return sp.acceptance_vs_noise(NOISES, text, min(n, 16), draft_tokens=d, seed=sd), d


def draw_acceptance(view: tuple[sp.AcceptanceCurve, int], t: Lang) -> tuple:
    return fig_acceptance(*view, t)


acceptance = rendered(compute_acceptance, draw_acceptance, MSG)


def _controls(page: Page) -> tuple:
    """The left column: prompt, D, acceptance, the buttons and the session's verify steps."""
    L = page.label
    prompt = L(gr.Textbox(sp.DEFAULT_PROMPT, lines=2, elem_id=f"{NAME}-prompt"), "f_prompt")
    with gr.Row():
        d = L(gr.Number(8, elem_id=f"{NAME}-d"), "f_d")
        accept = L(gr.Number(-1, elem_id=f"{NAME}-accept"), "f_accept")
    with gr.Row():
        noise = L(gr.Number(0.3, elem_id=f"{NAME}-noise"), "f_noise")
        seed = L(gr.Number(2), "f_seed")
    with gr.Row():
        layer = L(gr.Slider(0, N_LAYERS - 1, value=0, step=1), "f_layer")
        head = L(gr.Slider(0, N_HEADS - 1, value=0, step=1), "f_head")
    ring = L(gr.Number(0, elem_id=f"{NAME}-ring-len"), "f_ring")
    btn = L(gr.Button(variant="primary", elem_id=f"{NAME}-run"), "b_verify")
    summary = gr.Markdown(
        label="Verify summary", elem_id=f"{NAME}-summary", elem_classes=["kda-metrics"]
    )
    hist_md = gr.Markdown(
        label="Verify steps in this session",
        elem_id=f"{NAME}-history",
        elem_classes=["kda-metrics"],
    )
    return prompt, ring, btn, summary, hist_md, d, accept, noise, seed, layer, head


def build() -> gr.Blocks:
    with gr.Blocks(title="Speculative replay · KDA State Lab") as demo:
        page = Page(NAME, MSG)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                prompt, ring, btn, summary, hist_md, d, accept, noise, seed, layer, head = (
                    _controls(page)
                )
            with gr.Column(scale=2):
                s1, s2, s3, s4 = (
                    page.figure_slot(f"{NAME}-{k}", f"n_{k}")
                    for k in ("verify", "ring", "exactness", "memory")
                )
                with gr.Row():
                    n_new = page.label(gr.Number(32, elem_id=f"{NAME}-new", scale=1), "f_new")
                    gen = page.label(gr.Button(elem_id=f"{NAME}-gen", scale=1), "b_gen")
                    acc_btn = page.label(gr.Button(elem_id=f"{NAME}-acc", scale=1), "b_acc")
                gen_md = gr.Markdown(label="Generation summary", elem_id=f"{NAME}-gen-info")
                s5 = page.figure_slot(f"{NAME}-generation", "n_generation")
                s6 = page.figure_slot(f"{NAME}-acceptance", "n_acceptance")
        lr = page.radio
        inputs = [prompt, d, accept, noise, seed, layer, head, ring, history, lr]
        outputs = [summary, *s1.outputs, *s2.outputs, *s3.outputs, *s4.outputs, hist_md, history]
        gen_in = [prompt, d, noise, seed, n_new, lr]
        acc_in = [prompt, d, seed, n_new, lr]
        ver_fn, ver_out = page.event(compute_verify, draw_verify, outputs)
        gen_fn, gen_out = page.event(compute_generate, draw_generate, [gen_md, *s5.outputs])
        acc_fn, acc_out = page.event(compute_acceptance, draw_acceptance, s6.outputs)
        d_ok = lambda v: ui.check_int(MSG("v_d"), v, 1, MAX_D)  # noqa: E731
        seed_ok = lambda v: ui.check_int(MSG("v_seed"), v, 0, 1_000_000)  # noqa: E731
        noise_ok = lambda v: ui.check_float(MSG("v_noise"), v, 0.0, 10.0)  # noqa: E731
        new_ok = lambda v: ui.check_int(MSG("v_new"), v, 1, 128)  # noqa: E731
        ver_v = guard.validator(_prompt, d_ok, None, noise_ok, seed_ok, cross=_cross_verify)
        gen_v = guard.validator(_prompt, d_ok, noise_ok, seed_ok, new_ok)
        acc_v = guard.validator(_prompt, d_ok, seed_ok, new_ok)
        btn.click(ver_fn, inputs, ver_out, api_name=f"{NAME}_verify", validator=ver_v)
        gen.click(gen_fn, gen_in, gen_out, api_name=f"{NAME}_generate", validator=gen_v).success(
            acc_fn, acc_in, acc_out, api_visibility="private"
        )
        acc_btn.click(acc_fn, acc_in, acc_out, api_name=f"{NAME}_acceptance", validator=acc_v)
        demo.load(ver_fn, inputs, ver_out, api_visibility="private").then(
            gen_fn, gen_in, gen_out, api_visibility="private"
        ).then(acc_fn, acc_in, acc_out, api_visibility="private")
        redraw = [layer.release, head.release]
        gr.on(redraw, ver_fn, inputs, ver_out, api_visibility="private", validator=ver_v)
        hits_panel(page, demo)
        page.finish()
    return demo


__all__ = [
    "EXACT_TICKS",
    "MSG",
    "NOISES",
    "SERIES",
    "acceptance",
    "build",
    "code",
    "generate",
    "hits",
    "verify",
]  # what the tests read as app.<name>
