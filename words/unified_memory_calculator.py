"""unified_memory's ratio-calculator panel in words (English / 中文): ``CALC``, a base of
``words.unified_memory.MSG`` (its keys shadow none of the app's own)."""

from __future__ import annotations

from words.catalog import Catalog

CALC = Catalog(
    "unified_memory_calculator",
    {
        "acc_calc": (
            "SGLang's ratio calculator next to what the scheduler keeps",
            "SGLang 的比例计算器与调度器实际保留的状态对比",
        ),
        "calc_intro": (
            "SGLang's calculator (its `compute-mamba-ratio` skill and cookbook) picks "
            "`--mamba-full-memory-ratio` as **r\\* = S · token_equiv / L**: S state slots per "
            "running request (5 extra_buffer, 4 lazy, 3 no_buffer), token_equiv = one slot's bytes "
            "over one token's KV bytes, L = input + output. It does not count the states chunked "
            "prefill stores (one per chunk, plus one in decode) nor `--mamba-max-states-per-path`. "
            "Kimi K3, TP8, float32 state, the K3 write-up's profiled memory per GPU.",
            "SGLang 的计算器（其 `compute-mamba-ratio` 技能与 cookbook）按 "
            "**r\\* = S · token_equiv / L** 选择 `--mamba-full-memory-ratio`："
            "S 为每个运行请求预留的状态槽数（extra_buffer 5，lazy 4，no_buffer 3），"
            "token_equiv = 一个槽位的字节数除以一个 token 的 KV 字节数，L = 输入 + 输出。"
            "它既不计入分块预填充保存的状态（每块一个，解码再一个），也不计入 "
            "`--mamba-max-states-per-path`。"
            "Kimi K3，TP8，float32 状态，K3 文章实测的单卡可用显存。",
        ),
        "f_calc_lens": (
            "Input lengths (tokens, comma-separated, 1-12 values)",
            "输入长度（token，逗号分隔，1-12 个值）",
        ),
        "f_calc_out": ("Output length (tokens, 0-65536)", "输出长度（token，0-65536）"),
        "f_calc_chunk": (
            "Chunked prefill size (tokens, 256-65536)",
            "分块预填充大小（token，256-65536）",
        ),
        "f_calc_cap": (
            "--mamba-max-states-per-path (0 = not set, up to 64)",
            "--mamba-max-states-per-path（0 = 不设置，最多 64）",
        ),
        "f_calc_strategy": ("Cache strategy", "缓存策略"),
        "b_calc": ("Compare", "对比"),
        "v_calc_len": ("input length", "输入长度"),
        "v_calc_out": ("output length", "输出长度"),
        "v_calc_chunk": ("chunked prefill size", "分块预填充大小"),
        "v_calc_cap": ("--mamba-max-states-per-path", "--mamba-max-states-per-path"),
        "v_calc_strategy": ("cache strategy", "缓存策略"),
        "e_calc_lens": (
            "input lengths: give 1 to {n} comma-separated integers, got {got}",
            "输入长度：请填写 1 到 {n} 个以逗号分隔的整数，收到 {got}",
        ),
        "n_calc_running": ("concurrency", "并发"),
        "n_calc_slots": ("slots and ratio", "槽位与比例"),
        "t_calc_running": (
            "Running requests per GPU: what the calculator promises, and how many keep "
            "their states",
            "每卡运行请求数：计算器承诺的，与能保留状态的",
        ),
        "calc_x_len": ("input length (tokens)", "输入长度（token）"),
        "calc_y_running": ("running requests", "运行请求数"),
        "calc_l_promised": ("calculator: at r*, slots // S", "计算器：在 r* 下，槽位 // S"),
        "calc_l_kept": (
            "at r*, requests that keep their states",
            "在 r* 下，能保留全部状态的请求",
        ),
        "calc_l_live": (
            "ratio balanced for the states kept",
            "按实际保留状态平衡的比例",
        ),
        "calc_h_running": ("input {x} tokens<br>{y} requests", "输入 {x} token<br>{y} 个请求"),
        "t_calc_slots": (
            "State slots per running request, and the ratio each count asks for",
            "每个运行请求的状态槽数，以及各自需要的比例",
        ),
        "calc_y_slots": ("slots per request", "每请求槽位"),
        "calc_y_ratio": ("--mamba-full-memory-ratio", "--mamba-full-memory-ratio"),
        "calc_l_reserved": ("S: reserved at admission", "S：准入时预留"),
        "calc_l_occupied": (
            "live + track slots + states kept",
            "活动 + 跟踪槽 + 保留的状态",
        ),
        "calc_l_ratio": ("calculator's r*", "计算器的 r*"),
        "calc_l_ratio_live": ("r for the states kept", "按保留状态算出的 r"),
        "calc_h_slots": ("input {x} tokens<br>{y} slots", "输入 {x} token<br>{y} 个槽位"),
        "calc_h_ratio": ("input {x} tokens<br>r = {y}", "输入 {x} token<br>r = {y}"),
        "s_calc_head": (
            "**{model}, TP{tp}, {strategy}**: one state slot costs the KV of **{te:,.0f} tokens** "
            "(token_equiv); S = **{s}** reserved, **{held}** held at once (live + track). "
            "Output {out:,} tokens, chunk {chunk:,}, states per path {cap}.",
            "**{model}，TP{tp}，{strategy}**：一个状态槽位相当于 **{te:,.0f} 个 token** 的 KV"
            "（token_equiv）；S = **{s}** 个预留，同时持有 **{held}** 个（活动 + 跟踪）。"
            "输出 {out:,} token，分块 {chunk:,}，每条路径状态上限 {cap}。",
        ),
        "s_calc_nocap": ("not set", "未设置"),
        "s_calc_th": (
            "| input | r* | promised | states stored | slots used | keep states | r\u00a0needed "
            "| running |",
            "| 输入 | r* | 承诺并发 | 保存的状态 | 占用槽位 | 能保留状态 | 所需 r | 并发 |",
        ),
        "s_calc_tail": (
            "Where a request stores more states than S covers, the calculator's concurrency is "
            "reached only by evicting running requests' chunk states (their prefix hits go); "
            "the ratio balanced for the states kept gives fewer, but whole, requests.",
            "当请求保存的状态超过 S 时，计算器给出的并发只能靠驱逐运行中请求的分块状态来达到"
            "（它们的前缀命中随之失去）；按保留状态平衡的比例给出的请求更少，但状态完整。",
        ),
    },
)

__all__ = ["CALC"]
