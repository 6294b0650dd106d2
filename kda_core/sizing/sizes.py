"""Bytes of one state slot, one token of MLA KV and the speculative-decoding buffers, per GPU.

Exact integer arithmetic (no arrays), so the numbers compare with SGLang's allocation log byte
for byte. Per GPU = tensor parallel over the KDA heads (``tp`` divides the head count); the MLA
latent cache is not split by TP. One slot = SSM state ``[L_kda, H/tp, K, V]`` + conv window
``[L_kda, W-1, H/tp * (K + K + V)]``. Derivations and SGLang sources: docs/sizing.md.
Left out: page-size rounding of the KV pool; ``kda_state_bytes(dtype="int8")`` counts the int8
payload only (``int8_scale_bytes`` the scales).
"""

from __future__ import annotations

from kda_core._checks import check_int as _check_int
from kda_core.sizing.presets import MAX_COUNT, ModelSpec, as_spec, dtype_bytes, local_heads


def kda_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """SSM state bytes of one slot on one GPU: ``L_kda * (H/tp) * K * V * sizeof(dtype)``.

    Kimi K3 at TP8 in bf16: 69 * 12 * 128 * 128 * 2 = 27,131,904 B (25.9 MiB).
    """
    spec = as_spec(spec)
    return _state_bytes(spec, local_heads(spec, tp), dtype_bytes(dtype))


def _state_bytes(spec: ModelSpec, h: int, b: int) -> int:
    """`kda_state_bytes` for a checked spec, ``h`` local heads and ``b`` bytes per value."""
    return spec.n_kda_layers * h * spec.head_k_dim * spec.head_v_dim * b


def conv_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """Conv window bytes of one slot on one GPU: ``L_kda * (W-1) * (H/tp) * (K + K + V) * b``.

    The window holds the last W-1 q, k and v projections. Kimi K3 at TP8 in bf16:
    69 * 3 * 12 * 384 * 2 = 1,907,712 B (1.82 MiB).
    """
    spec = as_spec(spec)
    return _conv_bytes(spec, local_heads(spec, tp), dtype_bytes(dtype))


def _conv_bytes(spec: ModelSpec, h: int, b: int) -> int:
    """`conv_state_bytes` for a checked spec, ``h`` local heads and ``b`` bytes per value."""
    width = 2 * spec.head_k_dim + spec.head_v_dim
    return spec.n_kda_layers * (spec.conv_kernel - 1) * h * width * b


def slot_bytes(
    spec: ModelSpec | str,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
) -> int:
    """Bytes of one state slot on one GPU (SSM state + conv window): SGLang's per-slot size."""
    spec = as_spec(spec)
    h = local_heads(spec, tp)
    ssm, conv = dtype_bytes(ssm_dtype, "ssm_dtype"), dtype_bytes(conv_dtype, "conv_dtype")
    return _state_bytes(spec, h, ssm) + _conv_bytes(spec, h, conv)


def int8_scale_bytes(spec: ModelSpec | str, tp: int = 1, scale_dtype: str = "bfloat16") -> int:
    """Per-(layer, head, key channel) scales that an INT8 checkpoint of one slot also stores."""
    spec = as_spec(spec)
    h = local_heads(spec, tp)
    return spec.n_kda_layers * h * spec.head_k_dim * dtype_bytes(scale_dtype, "scale_dtype")


def mla_kv_bytes_per_token(
    spec: ModelSpec | str, dtype: str = "bfloat16", *, name: str = "dtype"
) -> int:
    """MLA latent cache bytes per token (same on every TP rank): ``L_mla * (r_kv + r_rope) * b``.

    Kimi K3: 24 * 576 * 2 = 27,648 B (27 KiB) in bf16, 13,824 B (13.5 KiB) in fp8. ``name`` is
    the caller's argument a bad ``dtype`` message names (``kv_dtype`` in the split functions).
    """
    spec = as_spec(spec)
    return spec.n_mla_layers * spec.mla_latent_dim * dtype_bytes(dtype, name)


def kv_tokens_for_bytes(spec: ModelSpec | str, kv_bytes: int, dtype: str = "bfloat16") -> int:
    """How many tokens of MLA KV fit in ``kv_bytes`` (floor)."""
    kv_bytes = _check_int("kv_bytes", kv_bytes, 0, MAX_COUNT)
    per = mla_kv_bytes_per_token(spec, dtype)
    if per == 0:
        raise ValueError("spec has no MLA layers, so tokens per byte budget is unbounded")
    return kv_bytes // per


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    n = _check_int("n", n, 1, MAX_COUNT)
    return 1 << (n - 1).bit_length()


def default_ring_len(draft_tokens: int) -> int:
    """SGLang's rule: ``L = next_power_of_two(2 * D)`` (16 for D = 8)."""
    d = _check_int("draft_tokens", draft_tokens, 1, 1 << 16)
    return next_pow2(2 * d)


def replayssm_ring_bytes(
    spec: ModelSpec | str,
    slots: int,
    tp: int = 1,
    ring_len: int = 16,
    dtype: str = "bfloat16",
) -> dict[str, int]:
    """Bytes of the six ReplaySSM ring buffers for ``slots`` physical slots on one GPU.

    Shapes (L_kda layers, S slots, h = H/tp heads, R = ring_len):
    d ``[L, S, h, R, V]``, k ``[L, S, h, R, K]``, rawv ``[L, S, h, R, V]``,
    rawk ``[L, S, h, R, K]`` in ``dtype``; g ``[L, S, h, R, K]`` and beta ``[L, S, h, R]`` in
    float32. ``ring_len`` must be a power of two (SGLang also requires >= 2 D; see
    ``default_ring_len``). ``slots`` is the physical count (SGLang passes size + 1).
    """
    spec = as_spec(spec)
    slots = _check_int("slots", slots, 0, MAX_COUNT)
    ring_len = _check_int("ring_len", ring_len, 1, 1 << 16)
    if ring_len & (ring_len - 1):
        raise ValueError(f"ring_len must be a power of two, got {ring_len}")
    h = local_heads(spec, tp)
    b = dtype_bytes(dtype)
    base = spec.n_kda_layers * slots * h * ring_len
    return {
        "d": base * spec.head_v_dim * b,
        "k": base * spec.head_k_dim * b,
        "g": base * spec.head_k_dim * 4,
        "rawv": base * spec.head_v_dim * b,
        "rawk": base * spec.head_k_dim * b,
        "beta": base * 4,
    }


def intermediate_conv_window_bytes(
    spec: ModelSpec | str,
    max_running: int,
    draft_tokens: int,
    tp: int = 1,
    dtype: str = "bfloat16",
) -> int:
    """Per-draft-step conv windows for speculative verify on one GPU.

    Shape ``[L_kda, max_running + 1, D, W-1, h * (K + K + V)]``: one conv window per draft step
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

    Without ReplaySSM: ``[L_kda, max_running + 1, D, h, K, V]`` (a full state per draft token).
    With ReplaySSM the buffer is empty (0 B) and the rings of ``replayssm_ring_bytes`` replace it.
    """
    max_running = _check_int("max_running", max_running, 0, MAX_COUNT)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    if not isinstance(replayssm, bool):
        raise ValueError(f"replayssm must be a bool, got {replayssm!r}")
    per_state = kda_state_bytes(spec, tp, dtype)  # checked even when the buffer is empty
    return 0 if replayssm else (max_running + 1) * d * per_state
