"""Bytes of one state slot, one token of KV and the speculative-decoding buffers, per GPU.

Exact integer arithmetic (no arrays), so the numbers compare with SGLang's and vLLM's logs byte
for byte. Per GPU = tensor parallel over the linear layers' heads. One slot = the recurrent
state + the conv window of every linear layer, with the shapes of the kind's entry in
``sizing.kinds`` (SGLang 0.5.23's; vLLM 0.33's with ``engine="vllm"``). KV per token: an MLA
latent is not split by TP; GQA K + V are split over the KV heads, one head per GPU once TP
exceeds them. Derivations and sources: docs/sizing.md. ``kda_state_bytes(dtype="int8")`` counts
the int8 payload only (``int8_scale_bytes`` the scales).
"""

from __future__ import annotations

from kda_core._checks import check_int as _check_int
from kda_core.sizing._kinds import LINEAR_KINDS, StateShape, engine_state_shape
from kda_core.sizing.presets import MAX_COUNT, ModelSpec, as_spec, dtype_bytes, local_heads

_ENGINES: tuple[str, ...] = ("sglang", "vllm")


def state_shape(
    spec: ModelSpec | str, tp: int = 1, engine: str = "sglang", num_spec: int = 0
) -> StateShape:
    """The per-layer state shape on one GPU, as the engine's own shape code computes it
    (``sizing.kinds``: one entry per linear kind). ``num_spec`` (vLLM only) widens the conv
    window by the speculative tokens."""
    spec = as_spec(spec)
    if engine not in _ENGINES:
        raise ValueError(f"engine must be one of {_ENGINES}, got {engine!r}")
    tp = _check_int("tp", tp, 1, 1 << 16)
    num_spec = _check_int("num_spec", num_spec, 0, 1 << 10)
    if engine == "sglang" and num_spec:
        raise ValueError("num_spec widens the conv window in vLLM only (engine='vllm')")
    return engine_state_shape(spec, tp, engine, num_spec)


def kda_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """Recurrent state bytes of one slot on one GPU over all linear layers:
    ``L * (H/tp) * V * K * sizeof(dtype)`` for KDA (its kind's shape for the others).

    Kimi K3 at TP8 in bf16: 69 * 12 * 128 * 128 * 2 = 27,131,904 B (25.9 MiB).
    """
    spec = as_spec(spec)
    return spec.n_linear_layers * state_shape(spec, tp).temporal_elems * dtype_bytes(dtype)


def conv_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """Conv window bytes of one slot on one GPU over all linear layers (``state_shape``).

    KDA: ``L * (W-1) * (H/tp) * (K + K + V) * b`` (the last W-1 q, k and v projections).
    Kimi K3 at TP8 in bf16: 69 * 3 * 12 * 384 * 2 = 1,907,712 B (1.82 MiB).
    """
    spec = as_spec(spec)
    return spec.n_linear_layers * state_shape(spec, tp).conv_elems * dtype_bytes(dtype)


def slot_bytes(
    spec: ModelSpec | str,
    tp: int = 1,
    ssm_dtype: str | None = None,
    conv_dtype: str = "bfloat16",
) -> int:
    """Bytes of one state slot on one GPU (SSM state + conv window): SGLang's
    ``mamba_cache_per_req``. ``ssm_dtype`` None = SGLang's default for the model (float32
    unless its config declares one SGLang reads)."""
    spec = as_spec(spec)
    ssm = spec.sglang_ssm_dtype if ssm_dtype is None else ssm_dtype
    ssm_b, conv_b = dtype_bytes(ssm, "ssm_dtype"), dtype_bytes(conv_dtype, "conv_dtype")
    return kda_state_bytes(spec, tp, "int8") * ssm_b + conv_state_bytes(spec, tp, "int8") * conv_b


def int8_scale_bytes(spec: ModelSpec | str, tp: int = 1, scale_dtype: str = "bfloat16") -> int:
    """Per-(layer, head, key channel) scales that an INT8 checkpoint of one slot also stores."""
    spec = as_spec(spec)
    h = local_heads(spec, tp)
    return spec.n_linear_layers * h * spec.linear_k_dim * dtype_bytes(scale_dtype, "scale_dtype")


def kv_bytes_per_token(
    spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16", *, name: str = "dtype"
) -> int:
    """Attention KV bytes per token on one GPU, over all attention layers.

    MLA: ``L * (kv_lora_rank + qk_rope_head_dim) * b`` on every TP rank (Kimi K3: 24 * 576 * 2
    = 27,648 B in bf16). GQA: ``L * max(1, kv_heads // tp) * 2 * head_dim * b`` (K and V; a GPU
    keeps one KV head once TP exceeds them: SGLang ``get_num_kv_heads``, vLLM likewise).
    ``name`` is the argument a bad ``dtype`` message names (``kv_dtype`` in the split functions).
    """
    spec = as_spec(spec)
    tp = _check_int("tp", tp, 1, 1 << 16)
    b = dtype_bytes(dtype, name)
    if spec.attn_kind == "mla":
        return spec.n_attn_layers * spec.mla_latent_dim * b
    heads = max(1, spec.attn_kv_heads // tp)
    return spec.n_attn_layers * heads * 2 * spec.attn_head_dim * b


def mla_kv_bytes_per_token(
    spec: ModelSpec | str, dtype: str = "bfloat16", *, name: str = "dtype"
) -> int:
    """MLA latent cache bytes per token (same on every TP rank): ``L_mla * (r_kv + r_rope) * b``.

    Kimi K3: 24 * 576 * 2 = 27,648 B (27 KiB) in bf16, 13,824 B (13.5 KiB) in fp8. A GQA spec is
    refused (its KV depends on TP: ``kv_bytes_per_token``).
    """
    spec = as_spec(spec)
    if spec.attn_kind != "mla":
        raise ValueError(f"spec {spec.name} has GQA attention: use kv_bytes_per_token(spec, tp)")
    return kv_bytes_per_token(spec, 1, dtype, name=name)


def default_ring_len(draft_tokens: int) -> int:
    """The lab's default ring length, ``L = next_power_of_two(2 * D)`` (16 for D = 8): the
    smallest ring SGLang 0.5.23 accepts (``mem_cache/memory_pool.py`` ``MambaPool.__init__``
    refuses a KDA spec ring that is not a power of two or is below ``2 * D``). Not SGLang's
    default: ``--linear-replayssm-cache-len`` is 16 whatever D (``arg_groups/fields/exec_.py``),
    so SGLang refuses D > 8 unless the flag is raised; the lab sizes the ring to D instead."""
    d = _check_int("draft_tokens", draft_tokens, 1, 1 << 16)
    return 1 << (2 * d - 1).bit_length()


def replayssm_ring_bytes(
    spec: ModelSpec | str,
    slots: int,
    tp: int = 1,
    ring_len: int = 16,
    dtype: str = "bfloat16",
) -> dict[str, int]:
    """Bytes of the ReplaySSM ring buffers for ``slots`` physical slots on one GPU.

    KDA, six buffers (L layers, S slots, h = H/tp value heads, hk key heads per GPU,
    R = ring_len): d ``[L, S, h, R, V]``, k ``[L, S, hk, R, K]``, rawv ``[L, S, h, R, V]``,
    rawk ``[L, S, hk, R, K]`` in ``dtype``; g ``[L, S, h, R, K]`` and beta ``[L, S, h, R]`` in
    float32. GDN-shaped kinds (SGLang's compact ring): d, k in ``dtype``, a scalar g
    ``[L, S, h, R]`` in float32, and, unless ``dtype`` is float32, the low parts d_low and k_low.
    The per-slot sum is SGLang's ``replayssm_ring_bytes_per_req``. ``ring_len`` must be a power
    of two (SGLang also requires >= 2 D; see ``default_ring_len``). A kind without a ring
    (Mamba2, short conv, ...) is refused.
    """
    spec = as_spec(spec)
    slots = _check_int("slots", slots, 0, MAX_COUNT)
    ring_len = _check_int("ring_len", ring_len, 1, 1 << 16)
    if ring_len & (ring_len - 1):
        raise ValueError(f"ring_len must be a power of two, got {ring_len}")
    ring = LINEAR_KINDS[spec.linear_kind].ring
    if not ring:
        raise ValueError(f"spec: {spec.linear_kind} layers keep no ReplaySSM ring (KDA, GDN only)")
    shape = state_shape(spec, tp)
    h, v, k = shape.temporal
    b = dtype_bytes(dtype)
    per = spec.n_linear_layers * slots * ring_len
    d, kk = per * h * v * b, per * shape.k_heads * k * b
    if ring == "kda":
        g, beta = per * h * k * 4, per * h * 4
        return {"d": d, "k": kk, "g": g, "rawv": d, "rawk": kk, "beta": beta}
    out = {"d": d, "k": kk, "g": per * h * 4}
    if dtype != "float32":
        out.update(d_low=d, k_low=kk)
    return out


def intermediate_conv_window_bytes(
    spec: ModelSpec | str,
    max_running: int,
    draft_tokens: int,
    tp: int = 1,
    dtype: str = "bfloat16",
) -> int:
    """Per-draft-step conv windows for speculative verify on one GPU.

    Shape ``[L, max_running + 1, D, W-1, conv channels / tp]``: one conv window per draft step
    for each running request (+1 dummy).
    """
    max_running = _check_int("max_running", max_running, 0, MAX_COUNT)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    return (max_running + 1) * d * conv_state_bytes(spec, tp, dtype)


def intermediate_ssm_bytes(
    spec: ModelSpec | str,
    max_running: int,
    draft_tokens: int,
    tp: int = 1,
    dtype: str = "bfloat16",
    replayssm: bool = True,
) -> int:
    """Per-draft-step SSM states for speculative verify on one GPU.

    Without ReplaySSM: ``[L, max_running + 1, D, h, K, V]`` (a full state per draft token).
    With ReplaySSM the buffer is empty (0 B) and the rings of ``replayssm_ring_bytes`` replace it.
    """
    max_running = _check_int("max_running", max_running, 0, MAX_COUNT)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    if not isinstance(replayssm, bool):
        raise ValueError(f"replayssm must be a bool, got {replayssm!r}")
    per_state = kda_state_bytes(spec, tp, dtype)  # checked even when the buffer is empty
    return 0 if replayssm else (max_running + 1) * d * per_state
