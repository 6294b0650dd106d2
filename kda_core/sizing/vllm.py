"""How vLLM 0.33's hybrid KV cache manager sizes a hybrid model: one pool of equal pages.

Every linear layer keeps its state in a "mamba page" and every attention layer its KV in pages
of ``block_size`` tokens; both share one block pool, so the attention block size is raised until
an attention page holds a mamba page (``Platform._align_hybrid_block_size``) and the mamba page
is padded up to it. Layers form KV cache groups of equal size
(``_get_kv_cache_groups_uniform_page_size``); a block holds one page per layer of the largest
group (``get_kv_cache_config_from_groups``); a request at ``max_model_len`` needs
``cdiv(len, block)`` blocks per attention group and ``2 + spec (+ the layer's prefill
checkpoint block)`` per mamba group in align mode (``MambaSpec.max_memory_usage_bytes``), which
sets the "Maximum concurrency" line. An MTP drafter's attention layers join the attention
layers (``_drafts``). ``size_vllm(spec, deployment)``; ``vllm_plan`` is its flat
spelling. Sources and the lab's choices (backend kernel block sizes are inputs): docs/sizing.md.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kda_core.sizing._drafts import vllm_mtp_layers, vllm_mtp_tokens
from kda_core.sizing._eagle import check_eagle, vllm_eagle_groups
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.deployment import Deployment
from kda_core.sizing.families import engine_refusal
from kda_core.sizing.presets import GIB, ModelSpec, as_spec, dtype_bytes
from kda_core.sizing.sizes import state_shape


def _attn_page_per_token(spec: ModelSpec, tp: int, kv_dtype: str) -> int:
    """Bytes of one token in one attention layer's page: MLA ``(r + rope) * b``
    (``MLAAttentionSpec``, one latent head), GQA ``max(1, kv_heads // tp) * 2 * head_dim * b``
    (``FullAttentionSpec``)."""
    b = dtype_bytes(kv_dtype, "kv_dtype")
    if spec.attn_kind == "mla":
        return spec.mla_latent_dim * b
    return max(1, spec.attn_kv_heads // tp) * 2 * spec.attn_head_dim * b


def _kv_cache_groups(n_attn: int, n_linear: int) -> tuple[int, int, int]:
    """(group size, attention groups, mamba groups): the smallest layer count is the group size
    unless the largest is under 1.5 x it (then the largest); each kind splits into
    ``cdiv(layers, group size)`` groups (``_get_kv_cache_groups_uniform_page_size``)."""
    a, m = n_attn, n_linear
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
    draft_attn_layers: int = 0  # the drafter's attention layers (``_drafts``, ``_eagle``)
    draft_kv_bytes_per_request: int = 0  # their blocks at max_model_len
    draft_groups: int = 0  # an EAGLE drafter's own groups (0: it joined the attention groups)
    draft_block_size: int = 0  # the drafter's block after unifying pages (0: no drafter)
    recoverssm_records_bytes: int = 0  # RecoverSSM's verify records, outside the KV pool
    num_speculative_tokens: int = 0  # as vLLM resolves it (an MTP draft's default)


def _aligned_block_size(spec: ModelSpec, attn_page: int, mamba_page: int, d: Deployment) -> int:
    """``_align_hybrid_block_size``: the smallest kernel-aligned block whose page holds a mamba
    page (MLA: a multiple of 128; align mode: of the prefill checkpoint alignment too)."""
    kernel = d.kernel_block_size
    k = max(kernel, d.block_size)
    if spec.attn_kind == "mla":
        k = max(k, 128)
    if d.mamba_cache_mode == "align":
        k = math.lcm(k, d.checkpoint_alignment or 1)
    blk = k * -(-mamba_page // (k * attn_page))
    return max(d.block_size, kernel * -(-blk // kernel))


def _mamba_page(spec: ModelSpec, d: Deployment, ssm: str) -> int:
    """One linear layer's unpadded state page (``MambaSpec.page_size_bytes``): conv window
    (widened by the speculative tokens) + recurrent state, vLLM's shapes."""
    shape = state_shape(spec, d.tp, "vllm", d.num_speculative_tokens)
    conv = shape.conv_elems * dtype_bytes(d.conv_dtype, "conv_dtype")
    return conv + shape.temporal_elems * dtype_bytes(ssm, "ssm_dtype")


def _vllm_layers(spec: ModelSpec) -> ModelSpec:
    """The spec with vLLM's layer counts: its ``vllm_tail_attn_layers`` linear layers are
    attention layers in vLLM (Ling 3.0's trailing partial group, ``bailing_moe_v3.py``
    ``_is_kda_layer``; SGLang keeps them linear)."""
    t = spec.vllm_tail_attn_layers
    if not t:
        return spec
    return dataclasses.replace(
        spec,
        n_linear_layers=spec.n_linear_layers - t,
        n_attn_layers=spec.n_attn_layers + t,
        vllm_tail_attn_layers=0,
    )


def _check_served(spec: ModelSpec) -> None:
    if spec.n_attn_layers == 0 or spec.n_linear_layers == 0:
        raise ValueError("spec must have both attention and linear layers for a hybrid plan")
    refusal = engine_refusal(spec, "vllm")
    if refusal:
        raise ValueError(f"spec: {refusal}")


def size_vllm(spec: ModelSpec | str, d: Deployment) -> VllmPlan:
    """vLLM 0.33's KV cache plan for ``d.rest_bytes`` ("Available KV cache memory") on one GPU.

    ``d.kernel_block_size`` is the attention backend's smallest kernel block (16 for
    FlashAttention and FlashInfer); ``d.block_size`` the block before alignment.
    ``d.mamba_cache_mode`` "align" (prefix caching on) or "none"; ``d.checkpoint_alignment``
    and ``d.prefill_checkpoint_blocks`` what the linear layers' prefill backend declares (None:
    the kind's, ``MambaMixer2``: 1 block; FLA GDN and KDA: none).
    """
    spec = _vllm_layers(as_spec(spec))
    _check_served(spec)
    if d.eagle is not None:
        check_eagle(spec, "vllm")
    if d.eagle is not None and not d.num_speculative_tokens:
        raise ValueError("eagle: num_speculative_tokens must be given (1..1024) for an EAGLE draft")
    if d.mtp:  # the MTP draft's default num_speculative_tokens
        d = d.replace(num_speculative_tokens=vllm_mtp_tokens(spec, d.num_speculative_tokens))
    length = spec.context_len if d.max_model_len is None else d.max_model_len
    if not length:
        raise ValueError("max_model_len must be given: the config names no context length")
    ssm = d.state_dtype(spec, "vllm")
    attn = _attn_page_per_token(spec, d.tp, d.kv_dtype)
    mamba = _mamba_page(spec, d, ssm)
    bs = _aligned_block_size(spec, attn, mamba, d)
    g = _groups(spec, d, bs, bs * attn)
    page, size, draft, n_attn, n_mamba = g.page, g.group_size, g.draft_layers, g.attn, g.mamba
    ckpt = d.prefill_checkpoint_blocks
    ckpt = LINEAR_KINDS[spec.linear_kind].vllm_checkpoint_blocks if ckpt is None else ckpt
    spec_blocks = 0 if _check_recoverssm(spec, d) else d.num_speculative_tokens
    align = d.mamba_cache_mode == "align"
    per_mamba = (2 + spec_blocks + ckpt) if align else (1 + spec_blocks)
    draft_blocks = g.draft_groups * -(-length // g.draft_block)
    per_req = n_attn * -(-length // g.target_block) + draft_blocks + n_mamba * per_mamba
    blocks = d.rest_bytes // (size * page)
    conc = blocks / per_req
    return VllmPlan(
        spec=spec,
        tp=d.tp,
        kv_dtype=d.kv_dtype,
        conv_dtype=d.conv_dtype,
        ssm_dtype=ssm,
        mamba_cache_mode=d.mamba_cache_mode,
        max_model_len=length,
        available_bytes=d.rest_bytes,
        attn_page_per_token=attn,
        mamba_page_bytes=mamba,
        block_size=bs,
        block_size_raised=bs > d.block_size,
        page_bytes=page,
        mamba_padding_pct=None if page == mamba else 100 * (page - mamba) / mamba,
        group_size=size,
        attn_groups=n_attn,
        mamba_groups=n_mamba,
        bytes_per_block=size * page,
        num_blocks=blocks,
        blocks_per_request=per_req,
        max_concurrency=conc,
        kv_cache_tokens=int(conc * length),
        max_num_seqs=d.max_num_seqs,
        max_num_seqs_error=_max_num_seqs_error(d.max_num_seqs, blocks),
        min_prefix_hit_tokens=bs + 1 if align else None,
        draft_attn_layers=draft,
        num_speculative_tokens=d.num_speculative_tokens,
        draft_kv_bytes_per_request=(
            draft_blocks * size * page if g.draft_groups else draft * -(-length // bs) * page
        ),
        draft_groups=g.draft_groups,
        draft_block_size=g.draft_block if draft else 0,
        recoverssm_records_bytes=_recoverssm_records(spec, d) if _check_recoverssm(spec, d) else 0,
    )


@dataclass(frozen=True, slots=True)
class _Groups:
    page: int
    group_size: int
    draft_layers: int
    attn: int
    mamba: int
    draft_groups: int = 0
    target_block: int = 0
    draft_block: int = 1


def _groups(spec: ModelSpec, d: Deployment, bs: int, page: int) -> _Groups:
    """The KV cache groups: an MTP drafter's layers join the attention layers (``_drafts``);
    an EAGLE drafter's pages are unified with the target's and grouped by spec (``_eagle``)."""
    if d.eagle is not None:
        e = vllm_eagle_groups(spec, d.eagle, bs, page, d.tp, d.kv_dtype)
        return _Groups(
            page=e.page,
            group_size=e.group_size,
            draft_layers=d.eagle.num_hidden_layers,
            attn=e.attn_groups,
            mamba=e.mamba_groups,
            draft_groups=e.draft_groups,
            target_block=e.target_block,
            draft_block=e.draft_block,
        )
    draft = vllm_mtp_layers(spec) if d.mtp else 0
    size, n_attn, n_mamba = _kv_cache_groups(spec.n_attn_layers + draft, spec.n_linear_layers)
    return _Groups(page, size, draft, n_attn, n_mamba, 0, bs)


def _check_recoverssm(spec: ModelSpec, d: Deployment) -> bool:
    """``--use-replayssm`` on a KDA model with speculative tokens is RecoverSSM
    (``VllmConfig.validate_mamba_cached_kernel``); ValueError for what the lab does not model:
    ReplaySSM on other kinds, or on KDA without speculative tokens (which Kimi K3 refuses:
    ``KimiK3DeltaAttention.__init__``), and for Ling 3.0, which vLLM refuses there
    (``supports_replayssm`` is False for ``BailingMoeV3ForCausalLM``)."""
    if not d.use_replayssm:
        return False
    if spec.linear_kind != "kda":
        raise ValueError("use_replayssm: the lab sizes vLLM's ReplaySSM on KDA (RecoverSSM) only")
    if spec.family == "bailing_hybrid":  # BailingMoeV3ForCausalLM is no SupportsReplaySSM
        raise ValueError(
            "use_replayssm: vLLM 0.33 does not support --use-replayssm for Ling 3.0 "
            "(BailingMoeV3ForCausalLM)"
        )
    if not d.num_speculative_tokens:
        raise ValueError(
            "use_replayssm: Kimi-K3 supports --use-replayssm only with speculative "
            "decoding (num_speculative_tokens >= 1)"
        )
    return True


def _recoverssm_records(spec: ModelSpec, d: Deployment) -> int:
    """RecoverSSM's verify records on one GPU (``KDARecoverSSMRecords.allocate``, per KDA layer,
    allocated with the model, so outside "Available KV cache memory"): ``max_num_seqs x H/tp x
    (1 + k)`` rows of a float32 correction [V] and a key and gate [2K] in the model dtype
    (bfloat16 taken: the sizing knows no model dtype)."""
    heads = state_shape(spec, d.tp, "vllm").temporal_elems // (spec.linear_v_dim**2)
    rows = d.max_num_seqs * heads * (1 + d.num_speculative_tokens)
    return spec.n_linear_layers * rows * (4 * spec.linear_v_dim + 2 * 2 * spec.linear_k_dim)


def vllm_plan(
    spec: ModelSpec | str,
    available_bytes: int,
    tp: int = 1,
    kv_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    ssm_dtype: str | None = None,
    **knobs: object,
) -> VllmPlan:
    """``size_vllm(spec, Deployment(available_bytes, ...))``: vLLM 0.33's plan spelled with the
    DESIGN.md contract's arguments; ``knobs`` are the other ``Deployment`` fields
    (``max_model_len``, ``block_size``, ``mamba_cache_mode``, ``num_speculative_tokens``, ...).
    ``ssm_dtype`` None = vLLM's ``auto`` for the model."""
    d = Deployment.build(
        rest_bytes=available_bytes,
        tp=tp,
        kv_dtype=kv_dtype,
        conv_dtype=conv_dtype,
        ssm_dtype=ssm_dtype,
        **knobs,
    )
    return size_vllm(spec, d)


def _max_num_seqs_error(max_num_seqs: int, num_blocks: int) -> str | None:
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
    if p.recoverssm_records_bytes:
        n, b = p.max_num_seqs, p.recoverssm_records_bytes
        lines.append(
            f"Allocated the KDA RecoverSSM verify records: {b / GIB:.2f} GiB in total for {n} "
            f"requests ({b / n / (1 << 20):.2f} MiB per request)."
        )
    lines.append(f"Available KV cache memory: {format_gib(p.available_bytes)} GiB")
    own = p.draft_groups > 0  # an EAGLE drafter in a bucket of its own
    buckets = [(p.spec.n_attn_layers + (0 if own else p.draft_attn_layers), p.attn_groups)]
    buckets.append((p.spec.n_linear_layers, p.mamba_groups))
    if own:
        buckets.append((p.draft_attn_layers, p.draft_groups))
    for n, groups in buckets:
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
