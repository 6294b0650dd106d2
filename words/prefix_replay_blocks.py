"""prefix_replay's vLLM block-table panel in words (English / 中文): ``BLOCKS``, a base of
``words.prefix_replay.MSG`` whose keys (``vb_*`` and the panel's fields) shadow none of the
page's."""

from __future__ import annotations

from words.catalog import Catalog

BLOCKS = Catalog(
    "prefix_replay_blocks",
    {
        "acc_vb": (
            "vLLM's block table: one physical block, several logical prefixes",
            "vLLM 的块表：一个物理块，多个逻辑前缀",
        ),
        "vb_intro": (
            "vLLM (0.33, align mode) keeps **logical prefix entries** (a chained hash every "
            "`unit` tokens) apart from **physical blocks** (MLA KV pages and KDA state blocks "
            "from one pool). A KV block serves every prefix that ends inside it; a state block "
            "holds one state, and its key says after which token. With units finer than the "
            "block a hit can end **inside** a block (the request copies that block before "
            "writing). Request A runs first; request B shares A's first tokens.",
            "vLLM（0.33，对齐模式）把**逻辑前缀条目**（每 `unit` 个 token 一个链式哈希）"
            "与**物理块**（同一个池里的 MLA KV 页和 KDA 状态块）分开。"
            "一个 KV 块服务所有在它内部结束的前缀；一个状态块只存一个状态，"
            "它的键说明是哪个 token 之后的状态。哈希单元比块细时，命中可以落在块**内部**"
            "（请求写入前先复制该块）。请求 A 先运行，请求 B 与 A 共享开头的 token。",
        ),
        "f_vb_case": ("Case", "案例"),
        "vb_case_96": ("96 of a 128-token block", "128 token 块中的 96"),
        "vb_case_4480": ("4,480 inside 4,096-token blocks", "4,096 token 块内的 4,480"),
        "f_vb_block": ("Block size (tokens, 16-8192)", "块大小（token，16-8192）"),
        "f_vb_unit": ("Hash unit (tokens, divides the block)", "哈希单元（token，整除块大小）"),
        "f_vb_prompt": ("Request A: prompt tokens (2-32768)", "请求 A：提示词 token 数（2-32768）"),
        "f_vb_outputs": ("Request A: decoded tokens (0-256)", "请求 A：解码 token 数（0-256）"),
        "f_vb_shared": (
            "Request B: tokens shared with A (1 to A's length)",
            "请求 B：与 A 共享的 token 数（1 到 A 的长度）",
        ),
        "b_vb": ("Serve A then B", "先服务 A 再服务 B"),
        "v_vb_case": ("case", "案例"),
        "v_vb_block": ("block size", "块大小"),
        "v_vb_unit": ("hash unit", "哈希单元"),
        "v_vb_prompt": ("request A's prompt tokens", "请求 A 的提示词 token 数"),
        "v_vb_outputs": ("request A's decoded tokens", "请求 A 的解码 token 数"),
        "v_vb_shared": ("tokens B shares with A", "B 与 A 共享的 token 数"),
        "e_vb_unit": (
            "the hash unit {u} must divide the block size {b}",
            "哈希单元 {u} 必须整除块大小 {b}",
        ),
        "e_vb_shared": (
            "request B can share at most A's {n:,} tokens, got {got:,}",
            "请求 B 最多与 A 共享 {n:,} 个 token，收到 {got:,}",
        ),
        "n_vb_blocks": ("physical blocks", "物理块"),
        "n_vb_hit": ("where B resumes", "B 从哪里恢复"),
        "t_vb_blocks": (
            "Physical blocks and the prefixes they serve (after A and B; block {b:,}, unit {u:,})",
            "物理块及其服务的前缀（A、B 之后；块 {b:,}，单元 {u:,}）",
        ),
        "vb_x_block": ("physical block", "物理块"),
        "vb_y_prefix": ("prefix it serves (tokens)", "服务的前缀（token）"),
        "vb_l_kv": ("MLA KV block: prefix key", "MLA KV 块：前缀键"),
        "vb_l_state": ("KDA state block: prefix key", "KDA 状态块：前缀键"),
        "vb_h_entry": (
            "block #{b}<br>serves tokens [0, {y})",
            "块 #{b}<br>服务 token [0, {y})",
        ),
        "vb_a_shared": ("one block, {n} prefixes", "一个块，{n} 个前缀"),
        "t_vb_hit": (
            "Where request B resumes: {hit:,} of its {shared:,} shared tokens",
            "请求 B 从哪里恢复：共享的 {shared:,} 个 token 中的 {hit:,}",
        ),
        "vb_x_tokens": ("tokens", "token"),
        "vb_r_shared": ("B shares with A", "B 与 A 共享"),
        "vb_r_fine": ("hit, keys every {u:,} tokens", "命中（每 {u:,} 个 token 一个键）"),
        "vb_r_coarse": ("hit, keys per block", "命中（每块一个键）"),
        "vb_h_bar": ("{row}<br>[0, {x})", "{row}<br>[0, {x})"),
        "vb_a_boundary": ("block boundary", "块边界"),
        "s_vb_hit": (
            "**B resumes at token {hit:,}** (state block #{sb}, entry {idx} of its state table"
            "{partial}); with one key per block it would resume at **{coarse:,}**. "
            "B shares {shared:,} tokens with A; the MLA KV alone matches {kv:,}.",
            "**B 从第 {hit:,} 个 token 恢复**（状态块 #{sb}，状态块表的第 {idx} 项{partial}）；"
            "若每块只有一个键，则从 **{coarse:,}** 恢复。B 与 A 共享 {shared:,} 个 token；"
            "仅 MLA KV 就能匹配 {kv:,} 个。",
        ),
        "s_vb_partial": (
            ", inside a block: copied before B writes",
            "，落在块内部：B 写入前先复制",
        ),
        "s_vb_none": (
            "**B finds no state to resume from** in its {shared:,} shared tokens: no key was "
            "registered inside them.",
            "**B 在共享的 {shared:,} 个 token 内找不到可恢复的状态**：其中没有注册任何键。",
        ),
        "s_vb_th": (
            "| request | tokens | keys registered | blocks copied |",
            "| 请求 | token | 注册的键 | 复制的块 |",
        ),
        "s_vb_key_kv": ("KV [0, {n:,}) → #{b}", "KV [0, {n:,}) → #{b}"),
        "s_vb_key_state": ("state @ {n:,} → #{b}", "状态 @ {n:,} → #{b}"),
    },
)

__all__ = ["BLOCKS"]
