"""How vLLM 0.33's hybrid KV cache manager sizes a hybrid model: one pool of equal pages.

Every linear layer keeps its state in a "mamba page" and every attention layer its KV in pages
of ``block_size`` tokens; both share one block pool, so the attention block size is raised until
an attention page holds a mamba page (``Platform._align_hybrid_block_size``) and the mamba page
is padded up to it. Layers form KV cache groups of equal size
(``_get_kv_cache_groups_uniform_page_size``); a block holds one page per layer of the largest
group (``get_kv_cache_config_from_groups``); a request at ``max_model_len`` needs
``cdiv(len, block)`` blocks per attention group and ``2 + spec`` (align mode) per mamba group
(``MambaSpec.max_memory_usage_bytes``), which sets the "Maximum concurrency" line. Sources and
the lab's choices (backend kernel block sizes are inputs): docs/sizing.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import GIB, MAX_COUNT, ModelSpec, as_spec, dtype_bytes
from kda_core.sizing.sizes import state_shape

_MAMBA_CACHE_MODES: tuple[str, ...] = ("align", "none")


def vllm_ssm_dtype(spec: ModelSpec | str, conv_dtype: str = "bfloat16") -> str:
    """vLLM's recurrent-state dtype under ``--mamba-ssm-cache-dtype auto``: float32 for KDA
    (``kda_state_dtype``) and Nemotron-H (``NemotronHForCausalLMConfig``), the config's
    ``mamba_ssm_dtype`` for Qwen3.5, else the conv (model) dtype (``_mamba_state_dtype``)."""
    spec = as_spec(spec)
    if spec.linear_kind in ("kda", "mamba2"):
        return "float32"
    return spec.ssm_dtype or conv_dtype


def attn_page_per_token(spec: ModelSpec | str, tp: int = 1, kv_dtype: str = "bfloat16") -> int:
    """Bytes of one token in one attention layer's page: MLA ``(r + rope) * b``
    (``MLAAttentionSpec``, one latent head), GQA ``max(1, kv_heads // tp) * 2 * head_dim * b``
    (``FullAttentionSpec``)."""
    spec = as_spec(spec)
    b = dtype_bytes(kv_dtype, "kv_dtype")
    if spec.attn_kind == "mla":
        return spec.mla_latent_dim * b
    return max(1, spec.attn_kv_heads // tp) * 2 * spec.attn_head_dim * b


def mamba_page_bytes(
    spec: ModelSpec | str,
    tp: int = 1,
    conv_dtype: str = "bfloat16",
    ssm_dtype: str = "float32",
    num_spec: int = 0,
) -> int:
    """One linear layer's unpadded state page (``MambaSpec.page_size_bytes``): conv window
    (widened by ``num_spec`` speculative tokens) + recurrent state, vLLM's shapes."""
    shape = state_shape(spec, tp, "vllm", num_spec)
    return shape.conv_elems * dtype_bytes(
        conv_dtype, "conv_dtype"
    ) + shape.temporal_elems * dtype_bytes(ssm_dtype, "ssm_dtype")


def kv_cache_groups(n_attn: int, n_linear: int) -> tuple[int, int, int]:
    """(group size, attention groups, mamba groups): the smallest layer count is the group size
    unless the largest is under 1.5 x it (then the largest); each kind splits into
    ``cdiv(layers, group size)`` groups (``_get_kv_cache_groups_uniform_page_size``)."""
    a = _check_int("n_attn", n_attn, 1, 1 << 16)
    m = _check_int("n_linear", n_linear, 1, 1 << 16)
    size = max(a, m) if max(a, m) < min(a, m) * 1.5 else min(a, m)
    return size, -(-a // size), -(-m // size)


@dataclass(frozen=True, slots=True)
class VllmPlan:
    """vLLM's plan for one GPU (bytes per GPU; ``blocks_per_request`` at ``max_model_len``)."""

    spec: ModelSpec
    tp: int
    kv_dtype: str
    conv_dtype: str
    ssm_dtype: str
    mamba_cache_mode: str
    max_model_len: int
    available_bytes: int
    attn_page_per_token: int
    mamba_page_bytes: int  # unpadded
    block_size: int
    block_size_raised: bool  # the "Setting attention block size" line is printed
    page_bytes: int  # attention page = padded mamba page
    mamba_padding_pct: float | None  # None: pages already equal (no padding line)
    group_size: int
    attn_groups: int
    mamba_groups: int
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    max_num_seqs: int
    max_num_seqs_error: str | None
    min_prefix_hit_tokens: int | None  # None: prefix caching off


def _aligned_block_size(
    spec: ModelSpec,
    attn_page: int,
    mamba_page: int,
    block_size: int,
    kernel: int,
    mode: str,
    alignment: int | None,
) -> int:
    """``_align_hybrid_block_size``: the smallest kernel-aligned block whose page holds a mamba
    page (MLA: a multiple of 128; align mode: of the prefill checkpoint alignment too)."""
    k = max(kernel, block_size)
    if spec.attn_kind == "mla":
        k = max(k, 128)
    if mode == "align":
        k = math.lcm(k, alignment or 1)
    blk = k * -(-mamba_page // (k * attn_page))
    return max(block_size, kernel * -(-blk // kernel))


def _check_plan(spec: ModelSpec, mode: str, alignment: int | None) -> None:
    if spec.n_mla_layers == 0 or spec.n_kda_layers == 0:
        raise ValueError("spec must have both attention and linear layers for a hybrid plan")
    if mode not in _MAMBA_CACHE_MODES:
        raise ValueError(f"mamba_cache_mode must be one of {_MAMBA_CACHE_MODES}, got {mode!r}")
    if alignment is not None:
        _check_int("checkpoint_alignment", alignment, 1, 1 << 16)


def vllm_plan(
    spec: ModelSpec | str,
    available_bytes: int,
    tp: int = 1,
    kv_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    ssm_dtype: str | None = None,
    *,
    max_model_len: int | None = None,
    block_size: int = 16,
    kernel_block_size: int = 16,
    mamba_cache_mode: str = "align",
    checkpoint_alignment: int | None = None,
    prefill_checkpoint_blocks: int = 0,
    num_spec: int = 0,
    max_num_seqs: int = 256,
) -> VllmPlan:
    """vLLM 0.33's KV cache plan for ``available_bytes`` ("Available KV cache memory") on one GPU.

    ``kernel_block_size`` is the attention backend's smallest kernel block (16 for FlashAttention
    and FlashInfer); ``block_size`` the block before alignment (16, or ``--block-size``).
    ``mamba_cache_mode`` "align" (prefix caching on) or "none"; ``checkpoint_alignment`` and
    ``prefill_checkpoint_blocks`` (0 or 1) what the linear layers' prefill backend declares
    (e.g. Mamba2: 1 and 1; FLA GDN and KDA: None and 0). ``ssm_dtype`` None = vLLM's auto.
    """
    spec = as_spec(spec)
    _check_plan(spec, mamba_cache_mode, checkpoint_alignment)
    avail = _check_int("available_bytes", available_bytes, 0, MAX_COUNT)
    length = spec.context_len if max_model_len is None else max_model_len
    length = _check_int("max_model_len", length, 1, 1 << 32)
    kernel = _check_int("kernel_block_size", kernel_block_size, 1, 1 << 16)
    bs0 = _check_int("block_size", block_size, 1, 1 << 20)
    ckpt = _check_int("prefill_checkpoint_blocks", prefill_checkpoint_blocks, 0, 1)
    seqs = _check_int("max_num_seqs", max_num_seqs, 1, MAX_COUNT)
    ssm = vllm_ssm_dtype(spec, conv_dtype) if ssm_dtype is None else ssm_dtype
    attn = attn_page_per_token(spec, tp, kv_dtype)
    mamba = mamba_page_bytes(spec, tp, conv_dtype, ssm, num_spec)
    bs = _aligned_block_size(spec, attn, mamba, bs0, kernel, mamba_cache_mode, checkpoint_alignment)
    page = bs * attn
    pad = None if page == mamba else 100 * (page - mamba) / mamba
    size, n_attn, n_mamba = kv_cache_groups(spec.n_mla_layers, spec.n_kda_layers)
    per_block = size * page
    blocks = avail // per_block
    per_mamba = (2 + num_spec + ckpt) if mamba_cache_mode == "align" else (1 + num_spec)
    per_req = n_attn * -(-length // bs) + n_mamba * per_mamba
    conc = blocks / per_req
    hit = bs + 1 if mamba_cache_mode == "align" else None
    return VllmPlan(
        spec=spec,
        tp=tp,
        kv_dtype=kv_dtype,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm,
        mamba_cache_mode=mamba_cache_mode,
        max_model_len=length,
        available_bytes=avail,
        attn_page_per_token=attn,
        mamba_page_bytes=mamba,
        block_size=bs,
        block_size_raised=bs > bs0,
        page_bytes=page,
        mamba_padding_pct=pad,
        group_size=size,
        attn_groups=n_attn,
        mamba_groups=n_mamba,
        bytes_per_block=per_block,
        num_blocks=blocks,
        blocks_per_request=per_req,
        max_concurrency=conc,
        kv_cache_tokens=int(conc * length),
        max_num_seqs=seqs,
        max_num_seqs_error=max_num_seqs_error(seqs, blocks),
        min_prefix_hit_tokens=hit,
    )


def max_num_seqs_error(max_num_seqs: int, num_blocks: int) -> str | None:
    """vLLM's startup error when ``max_num_seqs`` exceeds the blocks (full decode CUDA graphs
    need one mamba block per sequence: ``CompilationConfig``), else None."""
    if max_num_seqs <= num_blocks:
        return None
    return (
        f"max_num_seqs ({max_num_seqs}) exceeds available Mamba cache blocks ({num_blocks}). Each "
        "decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. "
        f"Please lower max_num_seqs to at most {num_blocks} or increase gpu_memory_utilization."
    )


def format_gib(n: int) -> str:
    """vLLM's ``format_gib``: ``str(round(bytes / GiB, 2))`` (so 6.0, not 6.00)."""
    return f"{round(n / GIB, 2)}"


def vllm_log_lines(p: VllmPlan) -> list[str]:
    """The startup lines vLLM 0.33 prints for this plan (the "GPU KV cache size" and
    "Maximum concurrency" figures share one line in 0.33; older versions split them)."""
    lines = []
    if p.block_size_raised:
        lines.append(
            f"Setting attention block size to {p.block_size} tokens to ensure that attention "
            "page size is >= mamba page size."
        )
    if p.mamba_padding_pct is not None:
        lines.append(
            f"Padding mamba page size by {p.mamba_padding_pct:.2f}% to ensure that mamba page "
            "size and attention page size are exactly equal."
        )
    lines.append(f"Available KV cache memory: {format_gib(p.available_bytes)} GiB")
    for n, groups in ((p.spec.n_mla_layers, p.attn_groups), (p.spec.n_kda_layers, p.mamba_groups)):
        pad = groups * p.group_size - n
        if pad:
            lines.append(
                f"Add {pad} padding layers, may waste at most {pad / n * 100:.2f}% KV cache memory"
            )
    lines.append(
        f"GPU KV cache size: {p.kv_cache_tokens:,} tokens, Maximum concurrency for "
        f"{p.max_model_len:,} tokens per request: {p.max_concurrency:.2f}x"
    )
    if p.max_num_seqs_error:
        lines.append(f"ValueError: {p.max_num_seqs_error}")
    return lines
