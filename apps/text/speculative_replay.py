"""speculative_replay's words (English / 中文): the catalog and the markdown panels."""

from __future__ import annotations

from apps.text.common import COMMON
from apps.ui.catalog import Catalog, T
from kda_core.studies import speculative as sp

MSG = Catalog(
    "speculative_replay",
    {
        "title": ("Speculative replay", "投机解码重放"),
        "intro": (
            "**Speculative decoding with a recurrent state.** A draft proposes D tokens; the "
            "target model verifies them in one pass and keeps the longest correct prefix. A KV "
            "cache just drops the rejected tokens' entries, but a KDA state has already "
            "absorbed them. Instead of saving a full state per draft token, ReplaySSM writes "
            "each step's small inputs (d, k, g, raw v, raw k, beta) to a **ring** and, once the "
            "accepted count is known, **replays exactly** those steps from the old state. "
            "**Look at:** the ring slots the commit keeps (the rejected ones are freed), the "
            "commit error (rounding, ~1e-15, for every acceptance count) against the bf16 fold, "
            "and how much smaller the rings are than per-draft states at Kimi K3 scale. Pick "
            "how many tokens are accepted.\n*TinyHybrid is trained on Python's docstrings; its "
            "tokens (UTF-8 bytes) are shown as decoded text. What matters is that the commit is "
            "exact and the output equals plain greedy.*",
            "**带递推状态的投机解码。** 草稿模型提出 D 个 token，目标模型一次前向验证，保留最长"
            "的正确前缀。KV 缓存只需丢弃被拒 token 的条目，但 KDA 状态已经吸收了它们。ReplaySSM "
            "不为每个草稿 token 保存完整状态，而是把每一步的小输入（d、k、g、原始 v、原始 k、"
            "beta）写进**环形缓冲**，知道接受数量后从旧状态**精确重放**这些步。**请看：** 提交"
            "保留了哪些环槽（被拒的被释放），各接受数量下的提交误差（舍入级，约 1e-15）与 bf16 "
            "折叠的对比，以及在 Kimi K3 规模下环比逐草稿状态小多少。可以自己选接受几个 token。"
            "\n*TinyHybrid 在 Python 文档字符串上训练过；它的 token（UTF-8 字节）以解码后的文本"
            "显示。重要的是提交精确、输出与普通贪心解码一致。*",
        ),
        "f_prompt": (
            "Prompt (1-512 UTF-8 bytes, 中文 works)",
            "提示词（1-512 个 UTF-8 字节，可写中文）",
        ),
        "f_d": ("Draft tokens D (1-64)", "草稿 token 数 D（1-64）"),
        "f_accept": ("Accepted tokens (-1 = greedy, 0-D)", "接受的 token 数（-1 = 贪心，0-D）"),
        "f_noise": ("Draft noise (0-10)", "草稿噪声（0-10）"),
        "f_seed": ("Seed (0-1000000)", "随机种子（0-1000000）"),
        "f_layer": ("KDA layer", "KDA 层"),
        "f_head": ("Head", "头"),
        "f_ring": (
            "Ring length L (0 = next_pow2(2D); power of two ≤ 1024)",
            "环长度 L（0 = next_pow2(2D)；2 的幂，≤ 1024）",
        ),
        "f_new": ("Tokens to generate (1-128)", "生成的 token 数（1-128）"),
        "b_verify": ("Verify and commit", "验证并提交"),
        "b_gen": ("Run speculative generation", "运行投机生成"),
        "b_acc": ("Acceptance vs noise", "接受率与噪声"),
        "v_prompt": ("prompt", "提示词"),
        "v_d": ("draft tokens D", "草稿 token 数 D"),
        "v_accept": ("accepted tokens (-1 = greedy, 0-{d})", "接受的 token 数（-1 = 贪心，0-{d}）"),
        "v_noise": ("draft noise", "草稿噪声"),
        "v_seed": ("seed", "随机种子"),
        "v_layer": ("KDA layer", "KDA 层"),
        "v_head": ("head", "头"),
        "v_ring": ("ring length L (0 = auto)", "环长度 L（0 = 自动）"),
        "v_new": ("tokens to generate", "生成的 token 数"),
        "e_prompt_empty": (
            "prompt must be non-empty (1 to {n} UTF-8 bytes)",
            "提示词不能为空（1 到 {n} 个 UTF-8 字节）",
        ),
        "e_prompt_long": (
            "prompt must be 1 to {n} UTF-8 bytes, got {got}",
            "提示词必须为 1 到 {n} 个 UTF-8 字节，收到 {got}",
        ),
        "e_ring": (
            "ring length L must be 0 (auto) or a power of two in [2D, 1024] = [{lo}, 1024], "
            "got {got}",
            "环长度 L 必须为 0（自动）或 [2D, 1024] = [{lo}, 1024] 内的 2 的幂，收到 {got}",
        ),
        "progress_gen": ("speculative generation and plain greedy", "正在运行投机生成与普通贪心"),
        "progress_acc": (
            "{n} speculative generations at several draft noises",
            "正在以几种草稿噪声运行 {n} 次投机生成",
        ),
        "n_verify": ("verify step", "验证步"),
        "n_ring": ("ring slots", "环槽位"),
        "n_exactness": ("commit exactness", "提交精确度"),
        "n_memory": ("memory over D", "显存随 D"),
        "n_generation": ("generation", "生成"),
        "n_acceptance": ("acceptance vs noise", "接受率与噪声"),
        # verify figure
        "l_committed": ("committed (accepted prefix)", "已提交（接受的前缀）"),
        "l_rejected": ("rejected (rolled back)", "被拒绝（回滚）"),
        "h_strip": (
            "step {x}<br>input token {a}<br>target's greedy next {b}",
            "第 {x} 步<br>输入 token {a}<br>目标模型贪心的下一个 {b}",
        ),
        "h_norm": ("step {x}, field {y}<br>L2 norm {v}", "第 {x} 步，字段 {y}<br>L2 范数 {v}"),
        "t_verify": (
            "Verify D={d}: committed {a} (greedy acceptance {g}); ring of KDA layer {layer}, "
            "all heads",
            "验证 D={d}：提交 {a} 个（贪心接受 {g} 个）；KDA 第 {layer} 层的环，所有头",
        ),
        "y_field": ("ring field", "环字段"),
        "x_draft_step": ("draft step (token index in the verify)", "草稿步（验证中的 token 序号）"),
        # ring figure
        "stage_verify": ("after verify", "验证之后"),
        "stage_commit": ("after commit", "提交之后"),
        "slot_-1": ("empty", "空"),
        "slot_0": ("older history", "更早的历史"),
        "slot_1": ("accepted step", "接受的步"),
        "slot_2": ("rejected step", "被拒绝的步"),
        "h_slot": (
            "{stage}<br>slot {s}: position {p} ({kind})",
            "{stage}<br>槽 {s}：位置 {p}（{kind}）",
        ),
        "t_ring": (
            "Ring of L={L} slots (slot = position mod L): the commit keeps {a} of {d} steps; "
            "conv window kept: after step {w}",
            "L={L} 个槽位的环（槽 = 位置 mod L）：提交保留 {d} 步中的 {a} 步；保留第 {w} 步之后的"
            "卷积窗口",
        ),
        "t_ring_none": (
            "Ring of L={L} slots: nothing accepted, the old state and conv window are kept",
            "L={L} 个槽位的环：没有接受任何 token，保留旧状态与卷积窗口",
        ),
        "x_ring_slot": ("ring slot", "环槽位"),
        # exactness
        "l_fold_bf16": (
            "open-loop fold of bf16 d, k (no raw v / k)",
            "bf16 d、k 的开环折叠（无原始 v / k）",
        ),
        "l_fold": ("open-loop fold, float64", "开环折叠，float64"),
        "l_commit": (
            "ReplaySSM commit (exact replay from the ring)",
            "ReplaySSM 提交（从环精确重放）",
        ),
        "h_exact": (
            "accept {x} tokens<br>max |state error| {v}",
            "接受 {x} 个 token<br>max |状态误差| {v}",
        ),
        "this_commit": ("this commit: {a}", "本次提交：{a}"),
        "t_exact": (
            "Commit exactness vs a sequential run (verify logits error {le:.1e}, outputs "
            "rebuilt from the ring {re:.1e})",
            "提交精确度（对比顺序运行；验证 logits 误差 {le:.1e}，由环重建的输出 {re:.1e}）",
        ),
        "x_accepted": ("tokens accepted (count)", "接受的 token（个数）"),
        "y_state_err": ("max |state error| (log scale)", "max |状态误差|（对数坐标）"),
        "exact_zero": ("0 (exact)", "0（精确）"),
        # memory
        "st_tiny": ("{model} (tiny), TP1", "{model}（小模型），TP1"),
        "st_k3": ("{model}, TP{tp}", "{model}，TP{tp}"),
        "l_per_draft": ("per-draft full states", "每个草稿一份完整状态"),
        "l_rings": ("ReplaySSM rings", "ReplaySSM 环"),
        "l_conv": ("conv windows per draft (both need)", "每个草稿的卷积窗口（两者都需要）"),
        "h_mem": (
            "{name}<br>D={x} (ring L={L})<br>{y} MiB",
            "{name}<br>D={x}（环 L={L}）<br>{y} MiB",
        ),
        "t_memory": (
            "Per-request memory over D (dtype {dtype}): rings vs per-draft states (×{r:.1f} at "
            "D={d} for K3)",
            "每个请求的显存随 D 的变化（{dtype}）：环对比每草稿完整状态（K3 在 D={d} 时为 "
            "×{r:.1f}）",
        ),
        "t_memory_plain": ("Per-request memory over D", "每个请求的显存随 D 的变化"),
        "x_D": ("draft tokens D", "草稿 token 数 D"),
        "y_mib": ("bytes per request (MiB, log scale)", "每个请求的字节数（MiB，对数坐标）"),
        # generation
        "l_gen_committed": ("committed (accepted + 1)", "已提交（接受数 + 1）"),
        "l_gen_verified": ("verified (D)", "已验证（D）"),
        "h_gen": (
            "verify {x} at position {p}<br>committed {y} of {d} drafted + 1",
            "第 {x} 次验证，位置 {p}<br>提交 {y} 个，共 {d} 个草稿 + 1",
        ),
        "h_gen_verified": ("verify {x}: {y} tokens", "第 {x} 次验证：{y} 个 token"),
        "t_generation": (
            "Generation: {n} tokens in {v} verify passes (greedy needs {g}); equal to greedy: "
            "{eq}, logits error {le:.1e}",
            "生成：{n} 个 token，用了 {v} 次验证（贪心需要 {g} 次）；与贪心一致：{eq}，logits "
            "误差 {le:.1e}",
        ),
        "x_verify_step": ("verify step", "验证步"),
        "y_per_verify": ("tokens per verify (count)", "每次验证的 token（个数）"),
        "yes": ("True", "是"),
        "no": ("False", "否"),
        # acceptance
        "l_acc_rate": ("drafts accepted (fraction)", "被接受的草稿（比例）"),
        "h_acc": ("noise {x}<br>acceptance {y}", "噪声 {x}<br>接受率 {y}"),
        "l_per_D": ("tokens per verify / D (D={d})", "每次验证的 token / D（D={d}）"),
        "h_per_D": ("noise {x}<br>{y} tokens per verify", "噪声 {x}<br>每次验证 {y} 个 token"),
        "t_acceptance": (
            "Acceptance vs draft noise (every run equals greedy: {eq})",
            "接受率与草稿噪声（每次运行都与贪心一致：{eq}）",
        ),
        "x_noise": ("draft noise (logit standard deviation)", "草稿噪声（logit 标准差）"),
        "y_fraction": ("fraction (0-1)", "比例（0-1）"),
        # summary, history, generation text
        "th": ("| quantity | value |", "| 量 | 值 |"),
        "r_prompt": ("prompt", "提示词"),
        "r_prompt_v": ("{n} tokens", "{n} 个 token"),
        "r_prompt_n": ("byte tokens", "字节 token"),
        "r_verified": ("verified tokens (D)", "验证的 token（D）"),
        "r_tokens_note": (
            "(token ids and text; bold = committed)",
            "（token id 与文本；粗体 = 已提交）",
        ),
        "r_committed": ("committed", "已提交"),
        "r_greedy": ("greedy acceptance {g}", "贪心接受数 {g}"),
        "r_commit_err": ("max commit error", "最大提交误差"),
        "r_all_counts": ("all acceptance counts", "所有接受数"),
        "r_fold": ("bf16 fold error", "bf16 折叠误差"),
        "r_fold_n": ("why the ring keeps raw v, k", "所以环保留原始 v、k"),
        "r_ring": ("ring bytes (this run, float64)", "环字节数（本次运行，float64）"),
        "r_per_draft": ("per-draft states instead", "改用每草稿完整状态"),
        "r_k3_rings": ("K3 deployment: rings, all slots", "K3 部署：环，全部槽位"),
        "r_k3_rings_n": ("{slots} slots, D={d}", "{slots} 个槽位，D={d}"),
        "r_k3_states": ("K3 deployment: per-draft states", "K3 部署：每草稿完整状态"),
        "r_k3_states_n": ("{n} running requests", "{n} 个运行中的请求"),
        "hist_title": ("**Verify steps in this session**", "**本会话的验证步**"),
        "hist_th": (
            "| # | D | greedy accept | committed | commit error |",
            "| # | D | 贪心接受 | 已提交 | 提交误差 |",
        ),
        "gen_md": (
            "**Generated** {n} tokens · text {text} · ids {ids} · acceptance {acc:.2f} · "
            "{per:.2f} tokens per verify · equal to greedy: **{eq}**",
            "**已生成** {n} 个 token · 文本 {text} · id {ids} · 接受率 {acc:.2f} · 每次验证 "
            "{per:.2f} 个 token · 与贪心一致：**{eq}**",
        ),
        "note": (
            "TinyHybrid is trained on Python's docstrings; tokens are UTF-8 bytes, shown as "
            "decoded text",
            "TinyHybrid 在 Python 文档字符串上训练过；token 是 UTF-8 字节，以解码后的文本显示",
        ),
    },
    COMMON,
)


def code(text: str, n: int = 48) -> str:
    """Readable bytes as inline markdown code (no markdown escapes needed), cut at ``n``."""
    t = text if len(text) <= n else text[: n - 1] + "…"
    return "`" + t.replace("`", "'").replace("|", "¦") + "`"


def yes_no(flag: bool, t: T) -> str:
    return t("yes") if flag else t("no")


def summary_markdown(v: sp.VerifyStudy, mem: sp.MemoryOverD, t: T) -> str:
    toks = " ".join(
        f"**{int(x)}**" if i < v.n_accept else f"~~{int(x)}~~" for i, x in enumerate(v.inputs)
    )
    toks += "<br>" + code(sp.readable(v.inputs)) + " " + t("r_tokens_note")
    gib = 1 << 30
    rows = [
        (t("r_prompt"), t("r_prompt_v", n=v.prompt_tokens), t("r_prompt_n")),
        (t("r_verified"), f"{v.draft_tokens}", toks.replace("|", "&#124;")),
        (t("r_committed"), f"{v.n_accept}", t("r_greedy", g=v.natural_accept)),
        (t("r_commit_err"), f"{v.commit_error.max():.1e}", t("r_all_counts")),
        (t("r_fold"), f"{v.fold_bf16_error.max():.1e}", t("r_fold_n")),
        (t("r_ring"), f"{v.ring_bytes:,}", f"L={v.ring_len}"),
        (t("r_per_draft"), f"{v.per_draft_state_bytes:,}", f"×{v.memory_ratio:.1f}"),
        (t("r_k3_rings"), f"{mem.deploy_ring_bytes / gib:.2f} GiB",
         t("r_k3_rings_n", slots=mem.deploy_slots, d=mem.deploy_draft_tokens)),
        (t("r_k3_states"), f"{mem.deploy_per_draft_bytes / gib:.2f} GiB",
         t("r_k3_states_n", n=mem.deploy_max_running)),
    ]  # fmt: skip
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return t("th") + "\n|---|---|\n" + body


def history_markdown(hist: list, t: T) -> str:
    body = "\n".join("| " + " | ".join(str(x) for x in row) + " |" for row in hist)
    return f"{t('hist_title')}\n\n{t('hist_th')}\n|---|---|---|---|---|\n{body}"


def generation_markdown(g: sp.GenerationStudy, t: T) -> str:
    ids = ", ".join(str(int(x)) for x in g.tokens[:12]) + (", …" if g.tokens.size > 12 else "")
    md = t("gen_md", n=g.tokens.size, text=code(g.readable, 40), ids=ids, acc=g.acceptance_rate,
           per=g.tokens_per_step, eq=yes_no(g.equals_greedy, t))  # fmt: skip
    return f"{md}\n\n<small>{t('note')}</small>"
