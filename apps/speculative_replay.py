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
import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from apps import ui
from apps.i18n_tables import SPECULATIVE_REPLAY as TR
from apps.ui import COLORS, SERIES, guard, i18n
from kda_core import tokenizer
from kda_core.studies import speculative as sp

NAME = "speculative_replay"
N_LAYERS = 6
N_HEADS = 4
MAX_D = 64
MAX_HISTORY = 10
NOISES = (0.0, 0.1, 0.2, 0.4)
FLOOR = 1e-17  # exact zeros on a log axis
SLOT_KIND = sp.SLOT_KINDS
# categorical colours (palette rule: SERIES in a fixed order): accepted first, rejected second
ACCEPTED, REJECTED = SERIES[0], SERIES[1]
SLOT_COLOR = {-1: COLORS["free"], 0: COLORS["neutral"], 1: ACCEPTED, 2: REJECTED}
RANDOM_NOTE = (
    "TinyHybrid is trained on Python's docstrings; tokens are UTF-8 bytes, shown as decoded text "
    "· TinyHybrid 在 Python 文档字符串上训练过；token 是 UTF-8 字节，以解码后的文本显示"
)

EN = """**Speculative decoding with a recurrent state.** A draft proposes D tokens; the target model
verifies them in one pass and keeps the longest correct prefix. A KV cache just drops the
rejected tokens' entries, but a KDA state has already absorbed them. Instead of saving a full
state per draft token, ReplaySSM writes each step's small inputs (d, k, g, raw v, raw k, beta) to
a **ring** and, once the accepted count is known, **replays exactly** those steps from the old
state. **Look at:** the ring slots the commit keeps (the rejected ones are freed), the commit
error (rounding, ~1e-15, for every acceptance count) against the bf16 fold, and how much smaller
the rings are than per-draft states at Kimi K3 scale. Pick how many tokens are accepted.
*TinyHybrid is trained on Python's docstrings; its tokens (UTF-8 bytes) are shown as decoded
text. What matters is that the commit is exact and the output equals plain greedy.*"""

ZH = (
    "**带递推状态的投机解码。** 草稿模型提出 D 个 token，目标模型一次前向验证，保留最长的正确"
    "前缀。KV 缓存只需丢弃被拒 token 的条目，但 KDA 状态已经吸收了它们。ReplaySSM 不为每个草"
    "稿 token 保存完整状态，而是把每一步的小输入（d、k、g、原始 v、原始 k、beta）写进**环形缓"
    "冲**，知道接受数量后从旧状态**精确重放**这些步。**请看：** 提交保留了哪些环槽（被拒的被"
    "释放），各接受数量下的提交误差（舍入级，约 1e-15）与 bf16 折叠的对比，以及在 Kimi K3 规"
    "模下环比逐草稿状态小多少。可以自己选接受几个 token。"
    "\n*TinyHybrid 在 Python 文档字符串上训练过；它的 token（UTF-8 字节）以解码后的文本显示。"
    "重要的是提交精确、输出与普通贪心解码一致。*"
)


EXACT_TICKS = (FLOOR, 1e-15, 1e-12, 1e-9, 1e-6, 1e-3, 1.0)


def _power(v: float) -> str:
    """Tick label of the exactness axis: FLOOR is an exact 0, the rest powers of ten."""
    return "0 (exact)" if v <= FLOOR else f"10<sup>{round(np.log10(v))}</sup>"


def _mib(v: float) -> str:
    return f"{v:g}"


def _tok(t: int) -> str:
    """A token as decoded text (`kda_core.tokenizer`: escaped only outside valid UTF-8)."""
    return tokenizer.display([int(t)])


def _code(text: str, n: int = 48) -> str:
    """Readable bytes as inline markdown code (no markdown escapes needed), cut at ``n``."""
    t = text if len(text) <= n else text[: n - 1] + "…"
    return "`" + t.replace("`", "'").replace("|", "¦") + "`"


# ---------------------------------------------------------------------------------------------
# Figures (pure: study -> figure, csv path)
# ---------------------------------------------------------------------------------------------


def fig_verify(v: sp.VerifyStudy) -> tuple[go.Figure, str]:
    """Ring field norms per draft step (heatmap) over the verified / target tokens."""
    n = v.inputs.size
    steps = np.arange(n)
    acc = v.committed
    fig = make_subplots(
        rows=2, cols=1, row_heights=[0.32, 0.68], shared_xaxes=True, vertical_spacing=0.08
    )

    # bar text by width: "id byte → id byte" up to 8 steps, the input id up to 24, none
    # beyond (a 16-step strip of two-line labels was unreadable); the hover always has both
    def strip_text(a: int, b: int) -> str:
        if n <= 8:
            return f"{_tok(a)}<br>→ {_tok(b)}"
        return str(int(a)) if n <= 24 else ""

    for mask, name, color in (
        (acc, "committed (accepted prefix)", ACCEPTED),
        (~acc, "rejected (rolled back)", REJECTED),
    ):
        if mask.any():
            fig.add_bar(
                x=steps[mask], y=np.ones(mask.sum()), name=name, marker_color=color,
                text=[strip_text(a, b) for a, b in zip(v.inputs[mask], v.targets[mask])],
                textposition="inside", textangle=0, insidetextanchor="middle", row=1, col=1,
                textfont={"size": 11 if n <= 8 else 10}, constraintext="none",
                customdata=np.stack(
                    [[_tok(a) for a in v.inputs[mask]], [_tok(b) for b in v.targets[mask]]],
                    axis=1,
                ),
                hovertemplate="step %{x}<br>input token %{customdata[0]}<br>target's greedy "
                "next %{customdata[1]}<extra></extra>",
            )  # fmt: skip
    fig.add_heatmap(
        z=np.log10(np.maximum(v.ring_norms, FLOOR)), x=steps, y=list(sp.FIELDS), row=2, col=1,
        colorscale="Viridis", colorbar={"title": {"text": "log10 ‖·‖"}, "len": 0.6, "y": 0.3},
        customdata=v.ring_norms,
        hovertemplate="step %{x}, field %{y}<br>L2 norm %{customdata:.3g}<extra></extra>",
    )  # fmt: skip
    fig.add_vline(x=v.n_accept - 0.5, line={"color": "black", "dash": "dash", "width": 2})
    ui.style(
        fig,
        f"Verify D={v.draft_tokens}: committed {v.n_accept} (greedy acceptance "
        f"{v.natural_accept}); ring of KDA layer {v.layer}, all heads",
        "",
        "",
        height=440,
    )
    fig.update_yaxes(visible=False, row=1, col=1)
    fig.update_yaxes(title_text="ring field", row=2, col=1, autorange="reversed")
    fig.update_xaxes(
        title_text="draft step (token index in the verify)",
        row=2,
        col=1,
        tickmode="linear",
        dtick=1,
    )
    fig.update_layout(barmode="overlay", bargap=0.05)
    cols = {"step": steps, "input": v.inputs, "target": v.targets, "committed": acc}
    for f, row in zip(sp.FIELDS, v.ring_norms):
        cols[f"norm_{f}"] = row
    return fig, ui.write_csv(f"{NAME}-verify", cols)


def fig_ring(v: sp.VerifyStudy) -> tuple[go.Figure, str]:
    """The L ring slots after verify and after commit: which position each holds."""
    L = v.ring_len
    rows = ("after verify", "after commit")
    fig = go.Figure()
    data = {"stage": [], "slot": [], "position": [], "kind": []}
    shown: set[int] = set()
    for r, pos, kind in zip(
        rows, (v.pos_after_verify, v.pos_after_commit), (v.kind_after_verify, v.kind_after_commit)
    ):
        for k in (1, 2, 0, -1):
            m = kind == k
            if not m.any():
                continue
            fig.add_bar(
                x=np.ones(int(m.sum())), base=np.arange(L)[m] - 0.5, y=[r] * int(m.sum()),
                orientation="h", width=0.6, name=SLOT_KIND[k], legendgroup=SLOT_KIND[k],
                showlegend=k not in shown,
                marker={"color": SLOT_COLOR[k], "line": {"width": 1, "color": "white"}},
                text=[str(p) if p >= 0 else "" for p in pos[m]], textposition="inside",
                insidetextanchor="middle", customdata=np.stack([np.arange(L)[m], pos[m]], 1),
                hovertemplate=f"{r}<br>slot %{{customdata[0]}}: position %{{customdata[1]}} "
                f"({SLOT_KIND[k]})<extra></extra>",
            )  # fmt: skip
            shown.add(k)
        data["stage"] += [r] * L
        data["slot"] += list(range(L))
        data["position"] += pos.tolist()
        data["kind"] += [SLOT_KIND[int(k)] for k in kind]
    ui.style(
        fig,
        f"Ring of L={L} slots (slot = position mod L): the commit keeps {v.n_accept} of "
        f"{v.draft_tokens} steps; conv window kept: after step {v.committed_window}"
        if v.committed_window >= 0 else
        f"Ring of L={L} slots: nothing accepted, the old state and conv window are kept",
        "ring slot",
        "",
        height=300,
    )  # fmt: skip
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(range=[-0.5, L - 0.5], tickmode="linear", dtick=1 if L <= 32 else 8)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=list(rows))
    return fig, ui.write_csv(f"{NAME}-ring", data)


def fig_exactness(v: sp.VerifyStudy) -> tuple[go.Figure, str]:
    m = np.arange(v.draft_tokens + 1)
    fig = go.Figure()
    for y, name, color in (
        (v.fold_bf16_error, "open-loop fold of bf16 d, k (no raw v / k)", SERIES[0]),
        (v.fold_error, "open-loop fold, float64", SERIES[1]),
        (v.commit_error, "ReplaySSM commit (exact replay from the ring)", SERIES[2]),
    ):
        fig.add_scatter(
            x=m, y=np.maximum(y, FLOOR), mode="lines+markers", name=name,
            line={"color": color, "width": 2}, customdata=y,
            hovertemplate="accept %{x} tokens<br>max |state error| %{customdata:.3g}"
            "<extra></extra>",
        )  # fmt: skip
    ui.vline(fig, v.n_accept, f"this commit: {v.n_accept}", color="black", xanchor="right")
    ui.style(
        fig,
        f"Commit exactness vs a sequential run (verify logits error {v.logits_error:.1e}, "
        f"outputs rebuilt from the ring {v.reconstruct_error:.1e})",
        "tokens accepted (count)",
        "max |state error| (log scale)",
        height=380,
    )
    ui.log_axis(fig, "y", EXACT_TICKS, fmt=_power)
    fig.update_xaxes(tickmode="linear", dtick=1 if v.draft_tokens <= 16 else 4)
    csv = ui.write_csv(
        f"{NAME}-exactness",
        {"accepted": m, "commit_error": v.commit_error, "fold_error": v.fold_error,
         "fold_bf16_error": v.fold_bf16_error},
    )  # fmt: skip
    return fig, csv


def fig_memory(mem: sp.MemoryOverD, d: int) -> tuple[go.Figure, str]:
    fig = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.12,
        subplot_titles=(f"{mem.models[0]} (tiny), TP1", f"{mem.models[1]}, TP{mem.tp}"),
    )  # fmt: skip
    mib = float(1 << 20)
    for col in (0, 1):
        for y, name, color in (
            (mem.per_draft_state_bytes[col], "per-draft full states", COLORS["state"]),
            (mem.ring_bytes[col], "ReplaySSM rings", COLORS["replay"]),
            (mem.conv_window_bytes[col], "conv windows per draft (both need)", COLORS["conv"]),
        ):
            fig.add_scatter(
                x=mem.d_values, y=y / mib, mode="lines+markers", name=name, legendgroup=name,
                showlegend=col == 0, line={"color": color, "width": 2}, row=1, col=col + 1,
                customdata=mem.ring_len,
                hovertemplate=f"{name}<br>D=%{{x}} (ring L=%{{customdata}})<br>%{{y:,.3f}} MiB"
                "<extra></extra>",
            )  # fmt: skip
    for c in (1, 2):
        fig.add_vline(x=d, line={"color": "black", "dash": "dot"}, row=1, col=c)
    ui.style(
        fig,
        f"Per-request memory over D (dtype {mem.dtype}): rings vs per-draft states "
        f"(×{mem.ratio[1][list(mem.d_values).index(d)]:.1f} at D={d} for K3)"
        if d in mem.d_values else "Per-request memory over D",
        "draft tokens D",
        "",
        height=400,
    )  # fmt: skip
    fig.update_layout(margin={"t": 86})  # room for the subplot titles
    for c in (1, 2):  # decade ticks only (no stray minor "2" / "5" labels)
        ui.log_axis(fig, "y", row=1, col=c, fmt=_mib)
    fig.update_yaxes(title_text="bytes per request (MiB, log scale)", row=1, col=1)
    data = {
        "model": [],
        "D": [],
        "ring_len": [],
        "ring_bytes": [],
        "per_draft_state_bytes": [],
        "conv_window_bytes": [],
        "ratio": [],
    }
    for i, model in enumerate(mem.models):
        data["model"] += [model] * mem.d_values.size
        data["D"] += mem.d_values.tolist()
        data["ring_len"] += mem.ring_len.tolist()
        for k in ("ring_bytes", "per_draft_state_bytes", "conv_window_bytes", "ratio"):
            data[k] += getattr(mem, k)[i].tolist()
    return fig, ui.write_csv(f"{NAME}-memory", data)


def fig_generation(g: sp.GenerationStudy) -> tuple[go.Figure, str]:
    steps = np.arange(1, g.start.size + 1)
    fig = go.Figure()
    fig.add_bar(
        x=steps,
        y=g.committed,
        name="committed (accepted + 1)",
        marker_color=ACCEPTED,
        customdata=np.stack([g.start, g.drafted], axis=1),
        hovertemplate="verify %{x} at position %{customdata[0]}<br>committed %{y} of "
        "%{customdata[1]} drafted + 1<extra></extra>",
    )
    fig.add_scatter(
        x=steps,
        y=g.drafted + 1,
        mode="markers",
        name="verified (D)",
        marker={"symbol": "line-ew", "size": 18, "line": {"width": 2, "color": "black"}},
        hovertemplate="verify %{x}: %{y} tokens<extra></extra>",
    )
    ui.style(
        fig,
        f"Generation: {g.tokens.size} tokens in {g.verify_passes} verify passes (greedy needs "
        f"{g.greedy_passes}); equal to greedy: {g.equals_greedy}, logits error "
        f"{g.logits_error:.1e}",
        "verify step",
        "tokens per verify (count)",
        height=360,
    )
    fig.update_yaxes(rangemode="tozero")
    csv = ui.write_csv(
        f"{NAME}-generation",
        {"verify_step": steps, "start": g.start, "drafted": g.drafted, "accepted": g.accepted,
         "committed": g.committed},
    )  # fmt: skip
    return fig, csv


def fig_acceptance(a: sp.AcceptanceCurve, d: int) -> tuple[go.Figure, str]:
    fig = go.Figure()
    fig.add_scatter(
        x=a.noise, y=a.acceptance_rate, mode="lines+markers", name="drafts accepted (fraction)",
        line={"color": SERIES[0], "width": 2},
        hovertemplate="noise %{x}<br>acceptance %{y:.2f}<extra></extra>",
    )  # fmt: skip
    fig.add_scatter(
        x=a.noise, y=a.tokens_per_step / d, mode="lines+markers", line={"dash": "dot",
        "color": SERIES[1], "width": 2}, name=f"tokens per verify / D (D={d})",
        customdata=a.tokens_per_step,
        hovertemplate="noise %{x}<br>%{customdata:.2f} tokens per verify<extra></extra>",
    )  # fmt: skip
    ui.style(
        fig,
        f"Acceptance vs draft noise (every run equals greedy: {a.all_equal_greedy})",
        "draft noise (logit standard deviation)",
        "fraction (0-1)",
        height=340,
    )
    fig.update_yaxes(range=[0, 1.05])
    csv = ui.write_csv(
        f"{NAME}-acceptance",
        {"noise": a.noise, "acceptance_rate": a.acceptance_rate,
         "tokens_per_step": a.tokens_per_step},
    )  # fmt: skip
    return fig, csv


def summary_markdown(v: sp.VerifyStudy, mem: sp.MemoryOverD) -> str:
    toks = " ".join(
        f"**{int(t)}**" if i < v.n_accept else f"~~{int(t)}~~" for i, t in enumerate(v.inputs)
    )
    toks += "<br>" + _code(sp.readable(v.inputs)) + " (token ids and text; bold = committed)"
    rows = [
        ("prompt", f"{v.prompt_tokens} tokens", "byte tokens"),
        ("verified tokens (D)", f"{v.draft_tokens}", toks.replace("|", "&#124;")),
        ("committed", f"{v.n_accept}", f"greedy acceptance {v.natural_accept}"),
        ("max commit error", f"{v.commit_error.max():.1e}", "all acceptance counts"),
        ("bf16 fold error", f"{v.fold_bf16_error.max():.1e}", "why the ring keeps raw v, k"),
        ("ring bytes (this run, float64)", f"{v.ring_bytes:,}", f"L={v.ring_len}"),
        ("per-draft states instead", f"{v.per_draft_state_bytes:,}", f"×{v.memory_ratio:.1f}"),
        ("K3 deployment: rings, all slots", f"{mem.deploy_ring_bytes / (1 << 30):.2f} GiB",
         f"{mem.deploy_slots} slots, D={mem.deploy_draft_tokens}"),
        ("K3 deployment: per-draft states", f"{mem.deploy_per_draft_bytes / (1 << 30):.2f} GiB",
         f"{mem.deploy_max_running} running requests"),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return "| quantity | value |\n|---|---|\n" + body


# ---------------------------------------------------------------------------------------------
# Callbacks
# ---------------------------------------------------------------------------------------------


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


HISTORY_HEADERS = ["#", "D", "greedy accept", "committed", "commit error"]


def history_markdown(hist: list) -> str:
    head = "| " + " | ".join(HISTORY_HEADERS) + " |\n|" + "---|" * len(HISTORY_HEADERS)
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return "**Verify steps in this session**\n\n" + head + "\n" + body


def build() -> gr.Blocks:
    with gr.Blocks(title="Speculative replay · KDA State Lab") as demo:
        lang = ui.header(NAME, "Speculative replay · 投机解码重放", EN, ZH)
        history = gr.State([])
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
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


if __name__ == "__main__":
    ui.main(build)
