"""speculative_replay in words (English / 中文): its hub card (the page's title and a line), the
page (``apps/speculative_replay/``: the verify step, the ring, exactness, memory, generation and
the hits panel), and what the static figures ``plots/plot_speculative_memory.py`` and
``plots/plot_spec_hits.py`` say (keys ``fig_*``). A hit reason is worded by the trace panel's
catalog (``words.trace_hits.HITS``, a base of ``MSG``), as every page names it."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON
from words.trace_hits import HITS

_CARD: dict[str, tuple[str, str]] = {  # the hub card: the page's title and a line
    "title": ("Speculative replay", "投机解码重放"),
    "blurb": (
        "Verify D draft tokens, accept a prefix, commit exactly by replaying from the ring.",
        "验证 D 个草稿 token，接受前缀，从环形缓冲精确重放提交。",
    ),
}
_PAGE: dict[str, tuple[str, str]] = {  # the page: verify, ring, exactness, memory, generation
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
        "ring length L must be 0 (auto) or a power of two in [2D, 1024] = [{lo}, 1024], got {got}",
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
        "Verify D={d}: committed {a} (greedy acceptance {g}); ring of KDA layer {layer}, all heads",
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
        "每个请求的显存随 D 的变化（{dtype}）：环对比每草稿完整状态（K3 在 D={d} 时为 ×{r:.1f}）",
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
}
_HITS_PANEL: dict[str, tuple[str, str]] = {  # the hits panel (apps/speculative_replay/hits.py)
    "acc_spec_hits": (
        "Prefix-cache hits with drafts on: a resent prompt, per engine",
        "开启草稿时的前缀缓存命中：重发的提示词，按引擎",
    ),
    "spec_hits_intro": (
        "A prompt of each length is sent twice to Kimi K3 at TP8: the cached tokens of the "
        "second request with speculative decoding on and off, under vLLM 0.33 (align mode, "
        "your `speculative_config`) and SGLang 0.5.23 (the same draft count). vLLM's "
        "trailing-block drop (`disable_lookahead_block_hashes`, or a KV connector) keys the "
        "state one block lower; lookahead block hashes, the default, wait for the tokens "
        "after a block (`num_speculative_tokens` of them for multi-module MTP, else one). "
        "SGLang's hybrid tree caches the same with drafts.",
        "每种长度的提示词向 Kimi K3（TP8）发送两次：第二个请求在开启与关闭推测解码时被缓存的 "
        "token 数，分别按 vLLM 0.33（align 模式，你的 `speculative_config`）和 SGLang 0.5.23"
        "（相同的草稿数）计算。vLLM 丢弃末块（`disable_lookahead_block_hashes` 或 KV "
        "connector）时状态落低一个块；默认的前瞻块哈希要等到块后的 token（多模块 MTP 为 "
        "`num_speculative_tokens` 个，否则一个）。SGLang 的混合树开启草稿时缓存不变。",
    ),
    "f_method": ("vLLM method", "vLLM 推测方法"),
    "f_k": ("num_speculative_tokens (1-16)", "num_speculative_tokens（1-16）"),
    "f_n_predict": ("n_predict: MTP modules (1-16)", "n_predict：MTP 模块数（1-16）"),
    "f_drop": (
        "disable_lookahead_block_hashes (the trailing-block drop)",
        "disable_lookahead_block_hashes（丢弃末块）",
    ),
    "f_block": (
        "vLLM block size (16-8192 tokens; 0 = the planner's for Kimi K3 at TP8)",
        "vLLM 块大小（16-8192 个 token；0 = 规划器为 Kimi K3 TP8 给出的值）",
    ),
    "b_hits": ("Compare hits", "比较命中"),
    "v_k": ("num_speculative_tokens", "num_speculative_tokens"),
    "v_n_predict": ("n_predict", "n_predict"),
    "v_block": ("vLLM block size", "vLLM 块大小"),
    "n_hits": ("hits with and without drafts", "有无草稿时的命中"),
    "t_hits": (
        "A resent prompt's cached tokens: {method}, {k} drafts, vLLM block {U}",
        "重发提示词被缓存的 token：{method}，{k} 个草稿，vLLM 块 {U}",
    ),
    "x_prompt": ("prompt length (tokens)", "提示词长度（token）"),
    "y_cached": ("cached tokens of the resend", "重发时被缓存的 token"),
    "l_vllm_off": ("vLLM 0.33, drafts off", "vLLM 0.33，关闭草稿"),
    "l_vllm_on": ("vLLM 0.33, drafts on", "vLLM 0.33，开启草稿"),
    "l_sglang_on": ("SGLang 0.5.23, drafts on (= off)", "SGLang 0.5.23，开启草稿（= 关闭）"),
    "h_hits": (
        "{name}<br>prompt {x} tokens<br>cached {y}",
        "{name}<br>提示词 {x} 个 token<br>缓存 {y}",
    ),
    "hits_th": (
        "| prompt tokens | vLLM drafts off | vLLM drafts on | vLLM reason | SGLang drafts on |",
        "| 提示词 token | vLLM 关闭草稿 | vLLM 开启草稿 | vLLM 原因 | SGLang 开启草稿 |",
    ),
    "hits_lost": (
        "**{n} of {m}** lengths lose cached tokens to drafts under vLLM ({tok:,} tokens in all)",
        "vLLM 下 **{m} 种长度中有 {n} 种**因草稿少缓存 token（共 {tok:,} 个）",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    "fig_suptitle": (
        "Speculative decoding: ReplaySSM rings vs a state per draft token",
        "推测解码：ReplaySSM 环形缓冲 vs 每个草稿 token 一份状态",
    ),
    "fig_title_req": (
        "One request, {model} per GPU (TP{tp}, {dtype})",
        "单个请求，{model} 每卡（TP{tp}，{dtype}）",
    ),
    "fig_d": ("draft tokens D", "草稿 token 数 D"),
    "fig_bytes": ("bytes per request", "每个请求的字节数"),
    "fig_rings": (
        "ReplaySSM rings (L = next pow2 ≥ 2D)",
        "ReplaySSM 环（L = 不小于 2D 的 2 的幂）",
    ),
    "fig_per_draft": ("D per-draft recurrent states", "D 份草稿递推状态"),
    "fig_conv": ("conv windows (both designs)", "卷积窗口（两种设计都需要）"),
    "fig_title_ratio": ("Per-draft states / rings", "草稿状态 / 环"),
    "fig_ratio": ("memory ratio", "显存比值"),
    "fig_title_deploy": ("Deployment: {slots} slots, D = {d}", "部署：{slots} 个槽，D = {d}"),
    "fig_deploy_rings": ("rings\n(every slot)", "环\n（每个槽）"),
    "fig_deploy_draft": ("per-draft states\n({n} running)", "草稿状态\n（{n} 个运行中）"),
    "fig_deploy_conv": ("conv windows\n({n} running)", "卷积窗口\n（{n} 个运行中）"),
    "fig_source": (
        "Data: buffer shapes of SGLang's speculative verify for {model} at TP{tp} "
        "and the lab's tiny model, {dtype}",
        "数据：SGLang 推测验证缓冲区的形状，{model}（TP{tp}）与实验室的小模型，{dtype}",
    ),
}
_SPEC_HITS_FIGURE: dict[str, tuple[str, str]] = {  # plots/plot_spec_hits.py
    "fig_hits_suptitle": (
        "vLLM 0.33 with speculative decoding: what a resent prompt still hits",
        "vLLM 0.33 开启推测解码：重发的提示词还能命中多少",
    ),
    "fig_hits_panel": ("{method}, {k} drafts", "{method}，{k} 个草稿"),
    "fig_hits_x": ("prompt length (tokens)", "提示词长度（token）"),
    "fig_hits_y": ("cached tokens of the resend", "重发时被缓存的 token"),
    "fig_hits_off": ("no drafts", "不开草稿"),
    "fig_hits_on": ("drafts, lookahead block hashes (default)", "开草稿，前瞻块哈希（默认）"),
    "fig_hits_drop": ("drafts, trailing-block drop", "开草稿，丢弃末块"),
    "fig_hits_source": (
        "Data: vLLM 0.33's prefix-cache rules with drafts, block {U} (Kimi K3 at TP8); "
        "SGLang 0.5.23 caches the same with drafts as without",
        "数据：vLLM 0.33 开启草稿时的前缀缓存规则，块 {U}（Kimi K3，TP8）；SGLang 0.5.23 "
        "开启草稿与否缓存相同",
    ),
}
MSG = Catalog(
    "speculative_replay",
    {**_CARD, **_PAGE, **_HITS_PANEL, **_FIGURES, **_SPEC_HITS_FIGURE},
    COMMON,
    HITS,
)

__all__ = ["MSG"]
