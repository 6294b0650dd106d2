"""int8_checkpoint in words (English / 中文): the page and its figures (``_PAGE``; a format's
code ``var_<label>``), and what only the static figures ``plots/plot_int8_checkpoint.py`` and
``plots/plot_checkpoint_quality.py`` say (``_FIGURES``, keys ``fig_*``; they name the formats,
the axes and the checkpoints that fit as the page does)."""

from __future__ import annotations

from words.catalog import Catalog
from words.common import COMMON

_PAGE: dict[str, tuple[str, str]] = {
    "title": ("INT8 checkpoints", "INT8 检查点"),
    "blurb": (
        "Park a real state as INT8 / fp8 / bf16, restore it, and watch the error and divergence.",
        "把真实状态以 INT8 / fp8 / bf16 停放再恢复，观察误差与后续输出的偏离。",
    ),
    "intro": (
        "**Parking a checkpoint in fewer bytes.** A checkpoint is a copy of every KDA "
        "layer's recurrent state (plus the short-conv window). SGLang can park it as **INT8 "
        "with one scale per (head, key channel)** and dequantize on restore: one rounding "
        "per cache hit, about half the bytes of bf16, so about twice the checkpoints fit. "
        "Here the tiny model reads your text; its real state is compressed and restored. "
        "**Look at:** the error map (stripes along key channels with large values), the "
        "error against its theoretical ceiling per variant, and the divergence: quantizing "
        "*once* at parking stays flat, quantizing *at every step* keeps adding error.",
        "**用更少的字节停放检查点。** 检查点是每个 KDA 层递推状态（加短卷积窗口）的一份拷贝。"
        "SGLang 可以把它以 **INT8、每个 (头, key 通道) 一个缩放因子** 停放，恢复时反量化："
        "每次命中只舍入一次，字节数约为 bf16 的一半，能存下约两倍的检查点。这里小模型读取你的"
        "文本，它的真实状态被压缩再恢复。**请看：** 误差图（数值大的 key 通道呈条纹），各种格式"
        "的误差与理论上限，以及偏离曲线：只在停放时量化*一次*保持平稳，*每一步*都量化则误差"
        "不断累积。",
    ),
    "f_text": ("Text the model reads (1-{n} chars)", "模型读取的文本（1-{n} 个字符）"),
    "f_tokens": (
        "Tokens before parking (1-1024, ≤ text bytes)",
        "停放前的 token 数（1-1024，不超过文本字节数）",
    ),
    "f_variant": ("Format / scale granularity", "格式 / 缩放粒度"),
    "f_layer": ("KDA layer", "KDA 层"),
    "f_head": ("Head", "头"),
    "f_steps": ("Tokens to decode after restore (1-{n})", "恢复后解码的 token 数（1-{n}）"),
    "acc_k3": ("Kimi K3 capacity", "Kimi K3 容量"),
    "f_native": ("Native state pool dtype", "原生状态池精度"),
    "f_tp": ("TP (divides 96)", "TP（整除 96）"),
    "f_budget": ("Checkpoint budget (GiB, 0.01-4096)", "检查点预算（GiB，0.01-4096）"),
    "b_run": ("Park and restore", "停放并恢复"),
    "var_native": ("native", "原生"),
    "var_int8 / key channel": ("int8 / key channel", "int8 / 每 key 通道"),
    "var_int8 / head": ("int8 / head", "int8 / 每个头"),
    "var_int8 / tensor": ("int8 / tensor", "int8 / 整个张量"),
    "var_fp8-e4m3 / key channel": ("fp8-e4m3 / key channel", "fp8-e4m3 / 每 key 通道"),
    "var_bf16": ("bf16", "bf16"),
    "v_text": ("text", "文本"),
    "v_tokens": (
        "tokens to park (≤ the text's UTF-8 bytes)",
        "停放的 token 数（不超过文本的 UTF-8 字节数）",
    ),
    "v_format": ("format", "格式"),
    "v_layer": ("KDA layer", "KDA 层"),
    "v_head": ("head", "头"),
    "v_steps": ("tokens to decode", "解码的 token 数"),
    "v_native": ("native state dtype", "原生状态精度"),
    "v_tp": ("TP", "TP"),
    "v_budget": ("checkpoint budget (GiB)", "检查点预算（GiB）"),
    "e_text_empty": (
        "text must be non-empty (1 to {n} characters)",
        "文本不能为空（1 到 {n} 个字符）",
    ),
    "e_text_long": (
        "text must be 1 to {n} characters, got {got}",
        "文本必须为 1 到 {n} 个字符，收到 {got}",
    ),
    "e_tp": (
        "TP must divide Kimi K3's 96 KDA heads; got TP={tp}",
        "TP 必须整除 Kimi K3 的 96 个 KDA 头；收到 TP={tp}",
    ),
    "n_errmap": ("error map", "误差图"),
    "n_divergence": ("divergence", "偏离"),
    "n_variants": ("variants", "各格式"),
    "n_hist": ("histograms", "直方图"),
    "n_capacity": ("capacity", "容量"),
    # error map
    "st_state": (
        "parked state S (KDA layer {layer}, head {head})",
        "停放的状态 S（KDA 第 {layer} 层，头 {head}）",
    ),
    "st_error": ("restored − S ({v})", "恢复值 − S（{v}）"),
    "h_state": ("key k={y}, value v={x}<br>S {z}", "key k={y}，value v={x}<br>S {z}"),
    "h_error": (
        "key k={y}, value v={x}<br>error {z}<br>bound {b}",
        "key k={y}，value v={x}<br>误差 {z}<br>界 {b}",
    ),
    "cb_error": ("error", "误差"),
    "t_errmap": (
        "Error map of {v}: max |error| {e:.2e}, max error / bound {r} (≤ 1: within the bound)",
        "{v} 的误差图：max |误差| {e:.2e}，最大误差 / 界 {r}（≤ 1：在界内）",
    ),
    "x_value": ("value channel v", "value 通道 v"),
    "y_key": ("key channel k", "key 通道 k"),
    # histograms
    "st_err_hist": ("signed error, all KDA layers", "带符号误差，所有 KDA 层"),
    "st_val_hist": ("state values, all KDA layers", "状态值，所有 KDA 层"),
    "l_err_hist": ("error ({v})", "误差（{v}）"),
    "h_err_hist": ("error {x}<br>{y} elements", "误差 {x}<br>{y} 个元素"),
    "l_val_hist": ("state value", "状态值"),
    "h_val_hist": ("value {x}<br>{y} elements", "数值 {x}<br>{y} 个元素"),
    "t_hist": (
        "Histograms: where the rounding error and the values fall",
        "直方图：舍入误差与数值的分布",
    ),
    "y_count": ("elements (count, log scale)", "元素（个数，对数坐标）"),
    "x_err": ("restored − S", "恢复值 − S"),
    # divergence
    "st_dist": ("state distance to the exact run", "与精确运行的状态距离"),
    "st_logit": ("max |logit − exact logit|", "max |logit − 精确 logit|"),
    "run_park_once": ("quantized once at parking", "停放时量化一次"),
    "run_every_step": ("re-quantized at every step", "每步重新量化"),
    "h_dist": (
        "{run}<br>after {x} tokens<br>relative distance {y}",
        "{run}<br>{x} 个 token 之后<br>相对距离 {y}",
    ),
    "h_logit": (
        "{run}<br>token {x}<br>max |Δlogit| {y}",
        "{run}<br>第 {x} 个 token<br>max |Δlogit| {y}",
    ),
    "l_differs": ("{run}: different greedy token", "{run}：贪心 token 不同"),
    "h_differs": ("token {x}: greedy token differs", "第 {x} 个 token：贪心 token 不同"),
    "t_div": (
        "Decoding {n} tokens after the restore ({v}); same greedy token: park once "
        "{a}/{n}, every step {b}/{n}",
        "恢复后解码 {n} 个 token（{v}）；贪心 token 相同：只停放一次 {a}/{n}，每步量化 {b}/{n}",
    ),
    "x_decoded": ("tokens decoded after parking", "停放后解码的 token"),
    "y_dist": ("relative Frobenius distance", "相对 Frobenius 距离"),
    "y_logit": ("max |Δlogit| (logit units)", "max |Δlogit|（logit 单位）"),
    # variants
    "l_other": ("measured ‖error‖ / ‖S‖, other formats", "实测 ‖误差‖ / ‖S‖，其他格式"),
    "l_selected": ("measured ‖error‖ / ‖S‖, selected: {v}", "实测 ‖误差‖ / ‖S‖，所选：{v}"),
    "h_rel": ("{x}<br>relative error {y}", "{x}<br>相对误差 {y}"),
    "l_ceiling": ("theoretical ceiling", "理论上限"),
    "h_ceiling": ("{x}<br>ceiling {y}", "{x}<br>上限 {y}"),
    "t_variants": (
        "Every format on the same parked state (all KDA layers)",
        "同一停放状态上的各种格式（所有 KDA 层）",
    ),
    "x_format": ("format / scale granularity", "格式 / 缩放粒度"),
    "y_rel_log": ("relative Frobenius error (log scale)", "相对 Frobenius 误差（对数坐标）"),
    # capacity
    "st_k3": ("{model} TP{tp}, {gib:g} GiB", "{model} TP{tp}，{gib:g} GiB"),
    "st_tiny": ("{model} (tiny), {mib:g} MiB", "{model}（小模型），{mib:g} MiB"),
    "l_fit": ("checkpoints that fit", "放得下的检查点"),
    "l_fit_sel": ("checkpoints that fit, selected: {v}", "放得下的检查点，所选：{v}"),
    "h_fit": (
        "{x}<br>{y} checkpoints<br>state {s} B + conv {c} B = {t} B each",
        "{x}<br>{y} 个检查点<br>每个：状态 {s} B + 卷积 {c} B = {t} B",
    ),
    "t_capacity": (
        "Checkpoint capacity per format (native pool {dtype}; ×gain vs native)",
        "各格式的检查点容量（原生池 {dtype}；×为相对原生的增益）",
    ),
    "y_capacity": ("checkpoints in the budget (count)", "预算内的检查点（个数）"),
    # summary
    "th": ("| quantity | value |", "| 量 | 值 |"),
    "r_parked": ("parked after", "停放于"),
    "r_tokens": ("{n} tokens", "{n} 个 token"),
    "r_format": ("format", "格式"),
    "r_scales": ("scales in the native dtype", "缩放因子用原生精度保存"),
    "r_rel": ("relative error (all layers)", "相对误差（所有层）"),
    "r_ceiling": ("ceiling {c:.3g}", "上限 {c:.3g}"),
    "r_max_abs": ("max abs error (all layers)", "最大绝对误差（所有层）"),
    "r_bound_ok": (
        "max error / bound {r} (≤ 1: within the bound)",
        "最大误差 / 界 {r}（≤ 1：在界内）",
    ),
    "r_bound_bad": (
        "max error / bound {r} (> 1: ABOVE the bound)",
        "最大误差 / 界 {r}（> 1：超出界）",
    ),
    "r_once": ("park once, last step", "只停放一次，最后一步"),
    "r_every": ("every step, last step", "每步都量化，最后一步"),
    "r_dlogit": ("max Δlogit {d:.3g}", "最大 Δlogit {d:.3g}"),
    "r_ckpt": ("{model} checkpoint", "{model} 检查点"),
    "r_native": ("native {m:.1f} MiB", "原生 {m:.1f} MiB"),
    "r_gain": ("**capacity gained**", "**增加的容量**"),
    "r_vs": ("{a:,} vs {b:,} checkpoints", "{a:,} 对 {b:,} 个检查点"),
    # continuation and runs
    "c_same": ("identical for all {n} tokens", "全部 {n} 个 token 都相同"),
    "c_diff": (
        "first difference at token {k} of {n}, marked",
        "第 {k} 个 token（共 {n} 个）起不同，已标出",
    ),
    "c_title": (
        "**Greedy continuation after the restore** ({verdict}) · after “…{tail}”",
        "**恢复之后的贪心续写**（{verdict}）· 接在“…{tail}”之后",
    ),
    "c_th": ("| restored from | continuation |", "| 恢复自 | 续写 |"),
    "c_exact": ("exact checkpoint", "精确的检查点"),
    "runs_title": ("**Runs in this session**", "**本会话的运行**"),
    "runs_th": (
        "| # | tokens | format | error | drift | gain |",
        "| # | token 数 | 格式 | 误差 | 偏离 | 增益 |",
    ),
}
_FIGURES: dict[str, tuple[str, str]] = {
    # plot_int8_checkpoint
    "fig_suptitle": (
        "Parking a KDA state as INT8: one rounding per hit, not per step",
        "以 INT8 停放 KDA 状态：每次命中只舍入一次，而不是每步一次",
    ),
    "fig_title_err": (
        "Round-trip error\n{label}\n(KDA layer {layer}, head {head})",
        "往返量化误差\n{label}\n（KDA 第 {layer} 层，头 {head}）",
    ),
    "fig_title_cap": (
        "Checkpoints per {budget}\n(Kimi K3 per GPU, TP{tp})",
        "{budget} 放得下的检查点\n（Kimi K3 每卡，TP{tp}）",
    ),
    "fig_native": ("native {dtype}", "原生 {dtype}"),
    "fig_title_state": ("State distance to an exact run", "与精确运行的状态距离"),
    "fig_title_logit": ("Logit difference to an exact run", "与精确运行的 logit 差"),
    "fig_steps": ("decode steps after restore", "恢复后的解码步数"),
    "fig_logit_y": ("max |Δ logit|", "max |Δ logit|"),
    "fig_once": ("park once: quantize at parking", "只停放一次：停放时量化"),
    "fig_every": ("every step: re-quantize after each token", "每步：每个 token 后重新量化"),
    "fig_flip": ("argmax differs", "argmax 不同"),
    "fig_cbar": ("dequantized − exact", "反量化值 − 精确值"),
    "fig_source": (
        "Data: KDA states of TinyHybrid (trained k3-mini) after {n} tokens, "
        "teacher-forced decoding; capacity: Kimi K3 state size per GPU",
        "数据：TinyHybrid（训练后的 k3-mini）处理 {n} 个 token 后的 KDA 状态，"
        "teacher forcing 解码；容量：Kimi K3 每卡的状态大小",
    ),
    # plot_checkpoint_quality
    "fig_q_suptitle": (
        "What a restore costs in held-out bits per byte",
        "一次恢复在留出文本上的代价（每字节比特数）",
    ),
    "fig_q_title_delta": ("Compressed, k restores", "压缩，恢复 k 次"),
    "fig_q_cycles": ("park/restore cycles k", "停放/恢复次数 k"),
    "fig_q_delta": ("Δ bits per byte vs exact", "相对精确恢复的 Δ 比特/字节"),
    "fig_q_title_bpb": ("vs skipping the replay", "对比：跳过重放"),
    "fig_q_int8_16": ("{label}, k = {k}", "{label}，k = {k}"),
    "fig_q_wrong": (
        "inconsistent, KDA {lag} tokens behind",
        "不一致恢复，KDA 落后 {lag} 个 token",
    ),
    "fig_q_source": (
        "Data: trained k3-mini, {n} held-out passages, {scored:,} scored bytes; "
        "exact restore {exact:.3f} bits per byte",
        "数据：训练后的 k3-mini，{n} 段留出文本，计分 {scored:,} 字节；"
        "精确恢复 {exact:.3f} 比特/字节",
    ),
}
MSG = Catalog("int8_checkpoint", {**_PAGE, **_FIGURES}, COMMON)

__all__ = ["MSG"]
