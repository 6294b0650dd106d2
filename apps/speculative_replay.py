"""speculative_replay: verify D draft tokens, accept a prefix, commit exactly from the ring.

Draws ``kda_core.studies.speculative``: one ReplaySSM verify step on TinyHybrid (the tokens,
the ring of one KDA layer / head per draft step and which slots the commit keeps, the exactness
of the commit for every acceptance count against the open-loop fold), the memory of the rings
against per-draft states over D (tiny config and Kimi K3 at TP8), and a full speculative
generation (acceptance per verify step, acceptance vs draft noise, equal to plain greedy).

Main actions: ``speculative_replay_verify`` (one step), ``speculative_replay_generate`` (the
loop; > 1 s, shows progress). The history of verify steps lives in ``gr.State``.
"""

from __future__ import annotations

import gradio as gr

from apps import ui
from apps.figures.speculative_replay import (
    EXACT_TICKS,
    NAME,
    fig_acceptance,
    fig_exactness,
    fig_generation,
    fig_memory,
    fig_ring,
    fig_verify,
)
from apps.text.speculative_replay import (
    EN,
    RANDOM_NOTE,
    TR,
    ZH,
    _code,
    history_markdown,
    summary_markdown,
)
from apps.ui import SERIES, guard, i18n
from kda_core.studies import speculative as sp

N_LAYERS, N_HEADS = sp.kda_shape()  # the served model's, not hard-coded
MAX_D = 64
MAX_HISTORY = 10
NOISES = (0.0, 0.1, 0.2, 0.4)


def _prompt(text: object) -> str:
    if not isinstance(text, str) or not text.strip():
        raise gr.Error(
            f"prompt must be non-empty (1 to {sp.MAX_PROMPT_TOKENS} UTF-8 bytes)",
            print_exception=False,
        )
    n = len(text.encode("utf-8"))
    if n > sp.MAX_PROMPT_TOKENS:
        raise gr.Error(
            f"prompt must be 1 to {sp.MAX_PROMPT_TOKENS} UTF-8 bytes, got {n}",
            print_exception=False,
        )
    return text


def _cross_verify(_p: object, d: object, n_accept: object, *rest: object) -> tuple[int, str] | None:
    """The accepted count and the ring length depend on D (the same rules as ``verify``)."""
    dd = ui.check_int("draft tokens D", d, 1, MAX_D)
    try:
        ui.check_int(f"accepted tokens (-1 = greedy, 0-{dd})", n_accept, -1, dd)
    except gr.Error as e:
        return 2, guard.message_of(e)
    ring = rest[4]  # noise, seed, layer, head, ring_len
    try:
        rl = ui.check_int("ring length L (0 = auto)", ring, 0, 1024)
    except gr.Error as e:
        return 7, guard.message_of(e)
    if rl and (rl & (rl - 1) or rl < 2 * dd):
        return 7, (
            f"ring length L must be 0 (auto) or a power of two in [2D, 1024] = "
            f"[{2 * dd}, 1024], got {rl}"
        )
    return None


@ui.study_errors
def verify(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    n_accept: float = -1,
    noise: float = 0.1,
    seed: float = 2,
    layer: float = 0,
    head: float = 0,
    ring_len: float = 0,
    history: list | None = None,
) -> tuple:
    """One verify + commit. ``n_accept`` -1 = the greedy acceptance; ``ring_len`` 0 = SGLang's
    default next_pow2(2D). Outputs: summary, four (figure, csv) pairs, history md, history."""
    text = _prompt(prompt)
    d = ui.check_int("draft tokens D", draft_tokens, 1, MAX_D)
    a = ui.check_int(f"accepted tokens (-1 = greedy, 0-{d})", n_accept, -1, d)
    nz = ui.check_float("draft noise", noise, 0.0, 10.0)
    sd = ui.check_int("seed", seed, 0, 1_000_000)
    lay = ui.check_int("KDA layer", layer, 0, N_LAYERS - 1)
    hd = ui.check_int("head", head, 0, N_HEADS - 1)
    rl = ui.check_int("ring length L (0 = auto)", ring_len, 0, 1024)
    if rl and (rl & (rl - 1) or rl < 2 * d):
        raise gr.Error(
            f"ring length L must be 0 (auto) or a power of two in [2D, 1024] = "
            f"[{2 * d}, 1024], got {rl}",
            print_exception=False,
        )
    v = sp.verify_step(
        text, d, None if a < 0 else a, ring_len=rl or None, noise=nz, seed=sd, layer=lay, head=hd
    )
    mem = sp.memory_over_d(tuple(range(1, max(16, d) + 1)), deploy_draft_tokens=d)
    hist = list(history or [])
    hist.append([len(hist) + 1, d, v.natural_accept, v.n_accept, f"{v.commit_error.max():.1e}"])
    hist = hist[-MAX_HISTORY:]
    return (
        summary_markdown(v, mem),
        *fig_verify(v),
        *fig_ring(v),
        *fig_exactness(v),
        *fig_memory(mem, d),
        history_markdown(hist),
        hist,
    )


def _gen_args(prompt: object, draft_tokens: object, seed: object, max_new_tokens: object):
    return (
        _prompt(prompt),
        ui.check_int("draft tokens D", draft_tokens, 1, MAX_D),
        ui.check_int("seed", seed, 0, 1_000_000),
        ui.check_int("tokens to generate", max_new_tokens, 1, 128),
    )


@ui.study_errors
def generate(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    noise: float = 0.1,
    seed: float = 2,
    max_new_tokens: float = 32,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """The speculative loop vs plain greedy on the same prompt."""
    text, d, sd, n = _gen_args(prompt, draft_tokens, seed, max_new_tokens)
    nz = ui.check_float("draft noise", noise, 0.0, 10.0)
    if progress is not None:
        progress(0.0, desc="speculative generation and plain greedy")
    g = sp.generation(text, n, draft_tokens=d, noise=nz, seed=sd)
    ids = ", ".join(str(int(t)) for t in g.tokens[:12]) + (", …" if g.tokens.size > 12 else "")
    md = (
        f"**Generated** {g.tokens.size} tokens · text {_code(g.readable, 40)} · ids {ids} · "
        f"acceptance {g.acceptance_rate:.2f} · "
        f"{g.tokens_per_step:.2f} tokens per verify · equal to greedy: **{g.equals_greedy}**"
        f"\n\n<small>{RANDOM_NOTE}</small>"
    )
    return (md, *fig_generation(g))


@ui.study_errors
def acceptance(
    prompt: str = sp.DEFAULT_PROMPT,
    draft_tokens: float = 8,
    seed: float = 2,
    max_new_tokens: float = 32,
    progress: gr.Progress = gr.Progress(),  # noqa: B008
) -> tuple:
    """Acceptance at draft noises 0, 0.1, 0.2, 0.4 (at most 16 generated tokens each)."""
    text, d, sd, n = _gen_args(prompt, draft_tokens, seed, max_new_tokens)
    if progress is not None:
        progress(0.0, desc=f"{len(NOISES)} speculative generations at several draft noises")
    a = sp.acceptance_vs_noise(NOISES, text, min(n, 16), draft_tokens=d, seed=sd)
    return fig_acceptance(a, d)


def _controls() -> tuple:
    """The left column: prompt, D, acceptance, the buttons and the session's verify steps."""
    prompt = gr.Textbox(
        sp.DEFAULT_PROMPT,
        lines=2,
        elem_id=f"{NAME}-prompt",
        label="Prompt (1-512 UTF-8 bytes, 中文 works)",
    )
    with gr.Row():
        d = gr.Number(8, label="Draft tokens D (1-64)", elem_id=f"{NAME}-d")
        accept = gr.Number(
            -1,
            elem_id=f"{NAME}-accept",
            label="Accepted tokens (-1 = greedy, 0-D)",
        )
    with gr.Row():
        noise = gr.Number(0.1, label="Draft noise (0-10)", elem_id=f"{NAME}-noise")
        seed = gr.Number(2, label="Seed (0-1000000)")
    with gr.Row():
        layer = gr.Slider(0, N_LAYERS - 1, value=0, step=1, label="KDA layer")
        head = gr.Slider(0, N_HEADS - 1, value=0, step=1, label="Head")
    ring = gr.Number(
        0,
        elem_id=f"{NAME}-ring-len",
        label="Ring length L (0 = next_pow2(2D); power of two ≤ 1024)",
    )
    btn = gr.Button("Verify and commit", variant="primary", elem_id=f"{NAME}-run")
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
        lang = ui.header(NAME, "Speculative replay · 投机解码重放", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                prompt, ring, btn, summary, hist_md, d, accept, noise, seed, layer, head = (
                    _controls()
                )
            with gr.Column(scale=2):
                s1 = ui.figure_slot(f"{NAME}-verify", "Verify step")
                s2 = ui.figure_slot(f"{NAME}-ring", "Ring slots")
                s3 = ui.figure_slot(f"{NAME}-exactness", "Commit exactness")
                s4 = ui.figure_slot(f"{NAME}-memory", "Memory over D")
                with gr.Row():
                    n_new = gr.Number(
                        32,
                        label="Tokens to generate (1-128)",
                        elem_id=f"{NAME}-new",
                        scale=1,
                    )
                    gen = gr.Button("Run speculative generation", elem_id=f"{NAME}-gen", scale=1)
                    acc_btn = gr.Button("Acceptance vs noise", elem_id=f"{NAME}-acc", scale=1)
                gen_md = gr.Markdown(label="Generation summary", elem_id=f"{NAME}-gen-info")
                s5 = ui.figure_slot(f"{NAME}-generation", "Generation")
                s6 = ui.figure_slot(f"{NAME}-acceptance", "Acceptance vs noise")
        inputs = [prompt, d, accept, noise, seed, layer, head, ring, history]
        outputs = [summary, *s1.outputs, *s2.outputs, *s3.outputs, *s4.outputs, hist_md, history]
        gen_in = [prompt, d, noise, seed, n_new]
        gen_out = [gen_md, *s5.outputs]
        loc = i18n.Localizer(lang.radio, TR)
        lr = lang.radio
        ver_fn, ver_out = loc.wrap(verify, outputs)
        gen_fn, gen_out2 = loc.wrap(generate, gen_out)
        acc_fn, acc_out = loc.wrap(acceptance, s6.outputs)
        prompt_ok = _prompt
        d_ok = lambda v: ui.check_int("draft tokens D", v, 1, MAX_D)  # noqa: E731
        seed_ok = lambda v: ui.check_int("seed", v, 0, 1_000_000)  # noqa: E731
        noise_ok = lambda v: ui.check_float("draft noise", v, 0.0, 10.0)  # noqa: E731
        new_ok = lambda v: ui.check_int("tokens to generate", v, 1, 128)  # noqa: E731
        ver_v = guard.validator(prompt_ok, d_ok, None, noise_ok, seed_ok, cross=_cross_verify)
        gen_v = guard.validator(prompt_ok, d_ok, noise_ok, seed_ok, new_ok)
        acc_v = guard.validator(prompt_ok, d_ok, seed_ok, new_ok)
        btn.click(ver_fn, [*inputs, lr], ver_out, api_name=f"{NAME}_verify", validator=ver_v)
        acc_in = [prompt, d, seed, n_new, lr]
        gen.click(
            gen_fn, [*gen_in, lr], gen_out2, api_name=f"{NAME}_generate", validator=gen_v
        ).success(acc_fn, acc_in, acc_out, api_visibility="private")
        acc_btn.click(acc_fn, acc_in, acc_out, api_name=f"{NAME}_acceptance", validator=acc_v)
        demo.load(ver_fn, [*inputs, lr], ver_out, api_visibility="private").then(
            gen_fn, [*gen_in, lr], gen_out2, api_visibility="private"
        ).then(acc_fn, acc_in, acc_out, api_visibility="private")
        gr.on(
            [layer.release, head.release], ver_fn, [*inputs, lr], ver_out,
            api_visibility="private", validator=ver_v,
        )  # fmt: skip
        loc.finish()
        lang.labels({
            prompt: "提示词（1-512 个 UTF-8 字节，支持中文）", d: "草稿 token 数 D（1-64）",
            accept: "接受的 token 数（-1 = 贪心，0-D）", noise: "草稿噪声（0-10）",
            seed: "随机种子（0-1000000）", layer: "KDA 层", head: "头",
            ring: "环长度 L（0 = next_pow2(2D)；2 的幂，≤ 1024）",
            n_new: "生成 token 数（1-128）",
            btn: "验证并提交", gen: "运行投机生成", acc_btn: "接受率与噪声",
            **{sl.csv: ui.CSV_ZH for sl in (s1, s2, s3, s4, s5, s6)},
        }, tr=TR)  # fmt: skip
    return demo


__all__ = [
    "EXACT_TICKS",
    "NOISES",
    "SERIES",
    "_code",
    "acceptance",
    "build",
    "generate",
    "verify",
]  # what the tests read as app.<name>


if __name__ == "__main__":
    ui.main(build)
