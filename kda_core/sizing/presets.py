"""Real model presets and the byte / slot / concurrency arithmetic SGLang uses for KDA hybrids.

Everything here is exact integer arithmetic on Python ints (no arrays are allocated), so the
numbers can be compared with SGLang's allocation log lines byte for byte.

Conventions (SGLang's, as described in the third seed and engines.md §1.10):

* "Per GPU" means tensor parallel over the KDA heads: each GPU holds ``heads / tp`` heads of
  every KDA layer. ``tp`` must divide the KDA head count. The MLA latent cache is *not* split
  by TP (every GPU holds the same 576 values per MLA layer per token).
* One state *slot* = the SSM state ``[L_kda, H/tp, K, V]`` + the conv window
  ``[L_kda, W-1, H/tp * (K + K + V)]`` (q, k, v projections of the last W-1 tokens).
* SGLang allocates ``max_mamba_cache_size + 1`` physical slots (slot 0 is a dummy sink); the
  log line prints ``max_mamba_cache_size`` but the sizes it prints count ``size + 1`` slots.
* "GB" in SGLang's log lines is GiB (``bytes / 2**30``).

Left out: DCP sizing (except the ``dcp`` factor of ``balanced_ratio``), the DSpark
draft model's own MHA cache, page-size rounding of the KV pool, and the INT8 checkpoint pool's
per-channel scales (see ``int8_scale_bytes``; ``kda_state_bytes(dtype="int8")`` counts only the
int8 payload).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kda_core._checks import check_int as _check_int

GIB: int = 1 << 30
MIB: int = 1 << 20

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8_e4m3": 1,
    "int8": 1,
}
TORCH_DTYPE_NAME: dict[str, str] = {
    "float32": "torch.float32",
    "bfloat16": "torch.bfloat16",
    "float16": "torch.float16",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "int8": "torch.int8",
}
STRATEGIES: tuple[str, ...] = (
    "auto",
    "no_buffer",
    "extra_buffer",
    "extra_buffer_lazy",
    "radix_off",
)

# SGLang constants (kv_cache_configurator.py).
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO: int = 3
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP: int = 2
MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP: int = 1
# KVCacheConfigurator.resolve_max_num_reqs: request-pool estimate tokens / ctx * 512,
# clamped to [2048, 4096]
REQ_POOL_PER_CONTEXT: int = 512
REQ_POOL_MIN: int = 2048
REQ_POOL_MAX: int = 4096
SIZING_FORMULAS: tuple[str, ...] = ("legacy", "sglang-0.5.23")
"""``split_memory`` is the seed's (legacy) formula; ``split_memory_0523`` SGLang 0.5.23's."""

_MAX_DIM = 1 << 16  # cap on layers, heads, head dims, latent ranks
_MAX_COUNT = 1 << 40  # cap on slots, tokens, byte budgets given as counts


def dtype_bytes(dtype: str, name: str = "dtype") -> int:
    """Bytes per element of ``dtype`` (one of ``DTYPE_BYTES``); ValueError otherwise."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"{name} must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shape facts that size a KDA hybrid's caches.

    ``n_kda_layers`` KDA layers with ``kda_heads`` heads of ``head_k_dim`` x ``head_v_dim``
    (state ``[H, K, V]`` per layer) and a short conv of kernel ``conv_kernel`` (window W-1);
    ``n_mla_layers`` MLA layers each caching ``kv_lora_rank + qk_rope_head_dim`` values per
    token. ``mla_heads`` is informational (the latent cache does not depend on it).
    """

    name: str
    n_kda_layers: int
    n_mla_layers: int
    kda_heads: int
    head_k_dim: int = 128
    head_v_dim: int = 128
    conv_kernel: int = 4
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    mla_heads: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string, got {self.name!r}")
        _check_int("n_kda_layers", self.n_kda_layers, 0, _MAX_DIM)
        _check_int("n_mla_layers", self.n_mla_layers, 0, _MAX_DIM)
        _check_int("kda_heads", self.kda_heads, 1, _MAX_DIM)
        _check_int("head_k_dim", self.head_k_dim, 1, _MAX_DIM)
        _check_int("head_v_dim", self.head_v_dim, 1, _MAX_DIM)
        _check_int("conv_kernel", self.conv_kernel, 1, 64)
        _check_int("kv_lora_rank", self.kv_lora_rank, 0, _MAX_DIM)
        _check_int("qk_rope_head_dim", self.qk_rope_head_dim, 0, _MAX_DIM)
        _check_int("mla_heads", self.mla_heads, 0, _MAX_DIM)
        if self.n_kda_layers + self.n_mla_layers == 0:
            raise ValueError("n_kda_layers + n_mla_layers must be >= 1")

    @property
    def n_layers(self) -> int:
        return self.n_kda_layers + self.n_mla_layers

    @property
    def mla_latent_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim


PRESETS: dict[str, ModelSpec] = {
    # 93 layers = 23 x (3 KDA + 1 MLA) + a final MLA: 69 KDA + 24 MLA.
    "kimi-k3": ModelSpec(
        name="kimi-k3",
        n_kda_layers=69,
        n_mla_layers=24,
        kda_heads=96,
        head_k_dim=128,
        head_v_dim=128,
        conv_kernel=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        mla_heads=96,
    ),
    # 27 layers: 20 KDA + 7 MLA (kda-math.md §9).
    "kimi-linear-48b": ModelSpec(
        name="kimi-linear-48b",
        n_kda_layers=20,
        n_mla_layers=7,
        kda_heads=32,
        head_k_dim=128,
        head_v_dim=128,
        conv_kernel=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        mla_heads=32,
    ),
}


def preset(name: str) -> ModelSpec:
    """The ModelSpec of a real model: ``"kimi-k3"`` or ``"kimi-linear-48b"``."""
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]


def _spec(spec: ModelSpec | str) -> ModelSpec:
    if isinstance(spec, str):
        return preset(spec)
    if not isinstance(spec, ModelSpec):
        raise ValueError(f"spec must be a ModelSpec or a preset name, got {type(spec).__name__}")
    return spec


def local_heads(spec: ModelSpec | str, tp: int = 1) -> int:
    """KDA heads per GPU at tensor-parallel size ``tp`` (which must divide the head count)."""
    spec = _spec(spec)
    tp = _check_int("tp", tp, 1, _MAX_DIM)
    if spec.kda_heads % tp:
        raise ValueError(
            f"tp must divide the KDA head count {spec.kda_heads} of {spec.name}, got tp={tp}"
        )
    return spec.kda_heads // tp


# ---------------------------------------------------------------------------------------------
# Per-slot / per-token sizes
# ---------------------------------------------------------------------------------------------


def kda_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """SSM state bytes of one slot on one GPU: ``L_kda * (H/tp) * K * V * sizeof(dtype)``.

    Kimi K3 at TP8 in bf16: 69 * 12 * 128 * 128 * 2 = 27,131,904 B (25.9 MiB).
    """
    spec = _spec(spec)
    h = local_heads(spec, tp)
    return spec.n_kda_layers * h * spec.head_k_dim * spec.head_v_dim * dtype_bytes(dtype)


def conv_state_bytes(spec: ModelSpec | str, tp: int = 1, dtype: str = "bfloat16") -> int:
    """Conv window bytes of one slot on one GPU: ``L_kda * (W-1) * (H/tp) * (K + K + V) * b``.

    The window holds the last W-1 q, k and v projections. Kimi K3 at TP8 in bf16:
    69 * 3 * 12 * 384 * 2 = 1,907,712 B (1.82 MiB).
    """
    spec = _spec(spec)
    h = local_heads(spec, tp)
    width = 2 * spec.head_k_dim + spec.head_v_dim
    return spec.n_kda_layers * (spec.conv_kernel - 1) * h * width * dtype_bytes(dtype)


def slot_bytes(
    spec: ModelSpec | str,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
) -> int:
    """Bytes of one state slot on one GPU (SSM state + conv window): SGLang's per-slot size."""
    return kda_state_bytes(spec, tp, ssm_dtype) + conv_state_bytes(spec, tp, conv_dtype)


def int8_scale_bytes(spec: ModelSpec | str, tp: int = 1, scale_dtype: str = "bfloat16") -> int:
    """Per-(layer, head, key channel) scales that an INT8 checkpoint of one slot also stores."""
    spec = _spec(spec)
    h = local_heads(spec, tp)
    return spec.n_kda_layers * h * spec.head_k_dim * dtype_bytes(scale_dtype, "scale_dtype")


def mla_kv_bytes_per_token(spec: ModelSpec | str, dtype: str = "bfloat16") -> int:
    """MLA latent cache bytes per token (same on every TP rank): ``L_mla * (r_kv + r_rope) * b``.

    Kimi K3: 24 * 576 * 2 = 27,648 B (27 KiB) in bf16, 13,824 B (13.5 KiB) in fp8.
    """
    spec = _spec(spec)
    return spec.n_mla_layers * spec.mla_latent_dim * dtype_bytes(dtype)


def kv_tokens_for_bytes(spec: ModelSpec | str, kv_bytes: int, dtype: str = "bfloat16") -> int:
    """How many tokens of MLA KV fit in ``kv_bytes`` (floor)."""
    kv_bytes = _check_int("kv_bytes", kv_bytes, 0, _MAX_COUNT)
    per = mla_kv_bytes_per_token(spec, dtype)
    if per == 0:
        raise ValueError("spec has no MLA layers, so tokens per byte budget is unbounded")
    return kv_bytes // per


# ---------------------------------------------------------------------------------------------
# Speculative decoding buffers
# ---------------------------------------------------------------------------------------------


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    n = _check_int("n", n, 1, _MAX_COUNT)
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
    spec = _spec(spec)
    slots = _check_int("slots", slots, 0, _MAX_COUNT)
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
    max_running = _check_int("max_running", max_running, 0, _MAX_COUNT)
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
    max_running = _check_int("max_running", max_running, 0, _MAX_COUNT)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    if replayssm:
        return 0
    return (max_running + 1) * d * kda_state_bytes(spec, tp, dtype)


# ---------------------------------------------------------------------------------------------
# Slots per request, concurrency cap, memory split
# ---------------------------------------------------------------------------------------------


def _strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    return "extra_buffer" if strategy == "auto" else strategy


def slots_per_request(
    strategy: str = "extra_buffer", overlap: bool = True, skip_decode_lock: bool = False
) -> int:
    """Slots SGLang *reserves* per running request (``_calculate_mamba_ratio``).

    radix_off 1; no_buffer 3; extra_buffer 3 + 2 with the overlap scheduler, 3 + 1 without;
    extra_buffer_lazy 3 + 1 (requires overlap). ``skip_decode_lock``
    (SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1) takes one off the base of the extra-buffer
    strategies; no_buffer stays at 3 (SGLang adds the drop back: its prefill->decode peak
    needs 3 slots). "auto" = extra_buffer. (``KVCacheConfigurator._calculate_mamba_ratio``.)
    """
    s = _strategy(strategy)
    if s == "radix_off":
        return 1
    if s == "no_buffer":
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
    elif s == "extra_buffer":
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + (
            MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP if overlap else 1
        )
    else:  # extra_buffer_lazy
        if not overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
        ratio = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + 1
    if skip_decode_lock and s != "no_buffer":
        ratio -= MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP
    return max(ratio, 1)


def slots_held_per_request(strategy: str = "extra_buffer", overlap: bool = True) -> int:
    """Slots a running request actually *holds* (engines.md §1.10).

    no_buffer / radix_off 1 (the live state); extra_buffer 1 live + ping-pong track slots
    (2 with overlap, 1 without); extra_buffer_lazy 1 live + 1 track.
    """
    s = _strategy(strategy)
    if s in ("radix_off", "no_buffer"):
        return 1
    if s == "extra_buffer":
        return 1 + (2 if overlap else 1)
    if not overlap:
        raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")
    return 2


def max_running_requests(
    state_slots: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    *,
    cuda_graph_max_bs: int | None = None,
    token_capacity: int | None = None,
) -> int:
    """Concurrency cap from the state cache: ``state_slots // slots_per_request(...)``.

    Optionally also capped by ``cuda_graph_max_bs`` and ``token_capacity // 2``; SGLang's
    full rule (also the request-pool estimate) is ``resolve_max_num_reqs``. 80 slots,
    extra_buffer + overlap (5 per request) -> 16.
    """
    state_slots = _check_int("state_slots", state_slots, 0, _MAX_COUNT)
    n = state_slots // slots_per_request(strategy, overlap, skip_decode_lock)
    if cuda_graph_max_bs is not None:
        n = min(n, _check_int("cuda_graph_max_bs", cuda_graph_max_bs, 1, _MAX_COUNT))
    if token_capacity is not None:
        n = min(n, _check_int("token_capacity", token_capacity, 0, _MAX_COUNT) // 2)
    return n


def request_pool_estimate(token_capacity: int, context_len: int) -> int:
    """SGLang's request-pool size: ``max(min(int(tokens / context_len * 512), 4096), 2048)``."""
    t = _check_int("token_capacity", token_capacity, 0, _MAX_COUNT)
    c = _check_int("context_len", context_len, 1, _MAX_COUNT)
    return max(min(int(t / c * REQ_POOL_PER_CONTEXT), REQ_POOL_MAX), REQ_POOL_MIN)


def resolve_max_num_reqs(
    state_slots: int,
    token_capacity: int,
    context_len: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    requested: int | None = None,
) -> int:
    """``KVCacheConfigurator.resolve_max_num_reqs`` (SGLang 0.5.23, one DP worker): the
    requested ``--max-running-requests`` (or the request-pool estimate when None), capped by
    ``token_capacity // 2`` and by the state cache ``state_slots // slots_per_request``.

    ``ValueError`` where SGLang raises (the state cache cannot serve one request).
    """
    cap_tokens = _check_int("token_capacity", token_capacity, 0, _MAX_COUNT) // 2
    if requested is None:
        n = min(request_pool_estimate(token_capacity, context_len), cap_tokens)
    else:
        n = min(max(1, _check_int("requested", requested, 0, _MAX_COUNT)), cap_tokens)
        _check_int("context_len", context_len, 1, _MAX_COUNT)
    n = min(n, max_running_requests(state_slots, strategy, overlap, skip_decode_lock))
    if n <= 0:
        raise ValueError(
            f"state_slots={state_slots} (or token_capacity={token_capacity}) serves no "
            "request: SGLang refuses to start"
        )
    return n


class MemorySplit(NamedTuple):
    """How ``--mamba-full-memory-ratio`` splits a byte budget (all sizes in bytes)."""

    rest_bytes: int
    ratio: float
    state_budget_bytes: int  # rest * r / (1 + r)
    max_mamba_cache_size: int  # state slots
    state_bytes: int  # slots * per-slot bytes (+ speculative conv windows)
    kv_bytes: int  # rest - state_bytes
    kv_tokens: int
    max_running: int


def _check_ratio(ratio: object) -> None:
    if (
        isinstance(ratio, (bool, np.bool_))
        or not isinstance(ratio, (int, float, np.integer, np.floating))
        or not 0.0 < float(ratio) <= 1e6
    ):
        raise ValueError(f"ratio must be a number in (0, 1e6], got {ratio!r}")


def split_memory(
    spec: ModelSpec | str,
    rest_bytes: int,
    ratio: float = 0.9,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    draft_tokens: int = 0,
) -> MemorySplit:
    """SGLang's auto sizing (``_handle_max_mamba_cache``) of ``rest_bytes`` on one GPU.

    ``state budget = rest * r / (1 + r)``; ``slots = floor(budget / per_slot)`` or, with
    ``draft_tokens = D > 0`` (speculative decoding, per-draft buffers sized jointly),
    ``floor(budget / (per_slot * (1 + D / spr)))`` where spr = slots per request. The KV pool
    gets the rest. ReplaySSM rings are not part of this formula (left out).
    """
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, _MAX_COUNT)
    _check_ratio(ratio)
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    r = float(ratio)
    per_slot = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    budget = int(rest_bytes * r / (1.0 + r))
    slots = int(budget // (per_slot * (1.0 + d / spr))) if d else budget // per_slot
    running = slots // spr
    state = slots * per_slot
    if d:
        state += intermediate_conv_window_bytes(spec, running, d, tp, conv_dtype)
    kv = max(rest_bytes - state, 0)
    per_tok = mla_kv_bytes_per_token(spec, kv_dtype)
    tokens = kv // per_tok if per_tok else 0
    return MemorySplit(rest_bytes, r, budget, slots, state, kv, tokens, running)


def split_memory_0523(
    spec: ModelSpec | str,
    rest_bytes: int,
    ratio: float = 0.9,
    tp: int = 1,
    ssm_dtype: str = "float32",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    draft_tokens: int = 0,
    replayssm: bool = True,
    ring_len: int = 16,
) -> MemorySplit:
    """SGLang 0.5.23's auto sizing (``KVCacheConfigurator._handle_max_mamba_cache``), beside
    the seed's ``split_memory`` (labelled "legacy"; see ``SIZING_FORMULAS``).

    Differences from the legacy formula: the padding slot 0 is paid out of the budget
    (``slots = (budget - per_slot) // per_slot``, and ``slots + 1`` are allocated); with
    ReplaySSM (``replayssm``, ``--enable-linear-replayssm-spec``, on by default here as in
    the seed's deployments) the KDA ring of ``ring_len`` (``--linear-replayssm-cache-len``,
    16) is part of every slot's cost (``per_slot = state + conv + ring``) and no per-draft
    state is reserved; the SSM dtype defaults to float32 (what that flag sets when
    ``--mamba-ssm-dtype`` is not given). Without ReplaySSM and with D draft tokens:
    ``slots = (budget - per_slot * (1 + D)) // (per_slot * (1 + D / spr))`` and the
    intermediate states ``per_slot * (running + 1) * D`` are taken from the KV share.
    The budget is ``rest * r / (1 + r)`` in float bytes, as SGLang computes it in GiB.
    """
    rest_bytes = _check_int("rest_bytes", rest_bytes, 0, _MAX_COUNT)
    _check_ratio(ratio)
    if not isinstance(replayssm, bool):
        raise ValueError(f"replayssm must be a bool, got {replayssm!r}")
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    r = float(ratio)
    per_req = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    budget = rest_bytes / GIB * r / (1.0 + r) * GIB
    ring = sum(replayssm_ring_bytes(spec, 1, tp, ring_len, conv_dtype).values())
    if d and not replayssm:
        slots = int((budget - per_req * (1 + d)) // (per_req * (1.0 + d / spr)))
        slots = max(slots, 0)
        running = slots // spr
        intermediate = per_req * (running + 1) * d
        per_slot = per_req
    else:
        per_slot = per_req + (ring if replayssm else 0)
        slots = max(int((budget - per_slot) // per_slot), 0)
        running = slots // spr
        intermediate = 0
    state = (slots + 1) * per_slot
    kv = max(rest_bytes - state - intermediate, 0)
    per_tok = mla_kv_bytes_per_token(spec, kv_dtype)
    tokens = kv // per_tok if per_tok else 0
    return MemorySplit(rest_bytes, r, int(budget), slots, state, kv, tokens, running)


# ---------------------------------------------------------------------------------------------
# Checkpoints per request and the balancing ratio
# ---------------------------------------------------------------------------------------------


def decode_track_points(input_len: int, output_len: int, track_interval: int = 256) -> list[int]:
    """Total sequence lengths in (input_len, input_len + output_len] where decode tracks a state.

    ``seq_len % track_interval == 0``: prompt 1000, interval 256 -> 1024, 1280, 1536, ...
    (after about 24, 280, 536 decoded tokens), not at output lengths 256, 512, ...
    """
    i = _check_int("input_len", input_len, 0, _MAX_COUNT)
    o = _check_int("output_len", output_len, 0, _MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, _MAX_COUNT)
    first = (i // t + 1) * t
    if (i + o - first) // t > 1_000_000:
        raise ValueError("output_len / track_interval must be <= 1e6 track points")
    return list(range(first, i + o + 1, t))


def checkpoints_per_request(
    input_len: int,
    output_len: int,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
) -> int:
    """States SGLang stores for one request (the third seed's counting).

    One per chunked-prefill chunk, ``ceil(input_len / chunk)``, plus one for decode if decode
    crosses a track boundary (only the last decode state is kept). Input 13600, output 512,
    chunk 6144 -> 3 + 1 = 4. The upper bound is ``input_len // chunk + 2``.
    """
    i = _check_int("input_len", input_len, 0, _MAX_COUNT)
    o = _check_int("output_len", output_len, 0, _MAX_COUNT)
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, _MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, _MAX_COUNT)
    prefill = -(-i // c)
    decode = 1 if (i + o) // t > i // t else 0
    return prefill + decode


def checkpoints_upper_bound(input_len: int, chunked_prefill_size: int = 8192) -> int:
    """The seed's bound on states stored per request: ``input_len // chunked_prefill_size + 2``.

    ``checkpoints_per_request(i, o, c, t) <= checkpoints_upper_bound(i, c)`` for every output
    length and track interval (``ceil(i / c) <= i // c + 1``, plus at most one decode state).
    """
    i = _check_int("input_len", input_len, 0, _MAX_COUNT)
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, _MAX_COUNT)
    return i // c + 2


def mean_checkpoints_per_request(
    input_lens: Sequence[int] | np.ndarray,
    output_lens: Sequence[int] | np.ndarray,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
) -> float:
    """Vectorised mean of ``checkpoints_per_request`` over a workload (arrays of equal length)."""
    i = np.asarray(input_lens)
    o = np.asarray(output_lens)
    if i.ndim != 1 or o.shape != i.shape or i.size == 0 or i.size > 10_000_000:
        raise ValueError(
            "input_lens and output_lens must be 1-D of the same length in [1, 1e7], "
            f"got shapes {i.shape} and {o.shape}"
        )
    if not (np.issubdtype(i.dtype, np.integer) and np.issubdtype(o.dtype, np.integer)):
        raise ValueError("input_lens and output_lens must be integer arrays")
    if (i < 0).any() or (o < 0).any():
        raise ValueError("input_lens and output_lens must be >= 0")
    c = _check_int("chunked_prefill_size", chunked_prefill_size, 1, _MAX_COUNT)
    t = _check_int("track_interval", track_interval, 1, _MAX_COUNT)
    i = i.astype(np.int64)
    o = o.astype(np.int64)
    n = -(-i // c) + ((i + o) // t > i // t)
    return float(n.mean())


def balanced_ratio(
    spec: ModelSpec | str,
    tokens_per_request: float,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
    slots_per_req: float | None = None,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    dcp: bool = False,
) -> float:
    """The ``--mamba-full-memory-ratio`` r at which the state cache and the KV pool run out at
    the same concurrency for a workload holding ``tokens_per_request`` KV tokens per request.

    With a state fraction f = r / (1 + r) of the budget B: requests by state
    ``f B / (spr * slot)`` equal requests by KV ``(1 - f) B / (T * kv_tok)`` when
    ``r = spr * slot / (T * kv_tok)`` (continuous, before flooring). ``slots_per_req`` defaults
    to the strategy's reservation (pass e.g. the expected checkpoints + held slots instead).
    Short prompts need a large r, long ones a small r. With ``dcp=True`` (decode context
    parallelism over the ``tp`` ranks) each GPU holds only 1/tp of a request's MLA KV, so the
    ratio is ``tp`` times larger (the third seed: "开启DCP时 ... 这个mem ratio要乘以TP数").
    """
    if not isinstance(tokens_per_request, (int, float, np.integer, np.floating)) or not (
        0 < float(tokens_per_request) <= 1e9
    ):
        raise ValueError(f"tokens_per_request must be in (0, 1e9], got {tokens_per_request!r}")
    if slots_per_req is None:
        spr = float(slots_per_request(strategy, overlap, skip_decode_lock))
    else:
        spr = float(slots_per_req)
        if not 0 < spr <= 1e6:
            raise ValueError(f"slots_per_req must be in (0, 1e6], got {slots_per_req!r}")
    per_slot = slot_bytes(spec, tp, ssm_dtype, conv_dtype)
    kv_tok = mla_kv_bytes_per_token(spec, kv_dtype)
    if kv_tok == 0:
        raise ValueError("spec has no MLA layers: there is no KV pool to balance against")
    r = spr * per_slot / (float(tokens_per_request) * kv_tok)
    return r * tp if dcp else r


# ---------------------------------------------------------------------------------------------
# What SGLang would print
# ---------------------------------------------------------------------------------------------


def capping_message(
    state_slots: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    ssm_dtype: str | None = None,
    requested: int | None = None,
) -> str | None:
    """SGLang-like warning when the state cache caps concurrency, else None.

    None is returned when ``requested`` (the wanted max_running_requests) fits under the cap.
    The bf16 hint is left out when ``ssm_dtype`` is given and already 2 bytes or smaller.
    """
    cap = max_running_requests(state_slots, strategy, overlap, skip_decode_lock)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    if requested is not None and _check_int("requested", requested, 0, _MAX_COUNT) <= cap:
        return None
    hint = "increase --mamba-full-memory-ratio or --max-mamba-cache-size"
    if ssm_dtype is None or dtype_bytes(ssm_dtype, "ssm_dtype") > 2:
        hint += ", or halve the state size with --mamba-ssm-dtype bfloat16"
    elif not skip_decode_lock and spr > 1:
        hint += ", or reserve one slot fewer with SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1"
    return (
        f"max_running_requests is capped to {cap} by the mamba state cache "
        f"(max_mamba_cache_size={state_slots}, {spr} state slots per request). "
        f"To raise it: {hint}."
    )


def _gb(n: int, digits: int) -> str:
    return f"{n / GIB:.{digits}f}GB"


def mamba_allocation_log(
    spec: ModelSpec | str,
    max_mamba_cache_size: int,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    draft_tokens: int = 0,
    max_running: int | None = None,
    replayssm: bool = True,
    ring_len: int | None = 16,
    ring_dtype: str = "bfloat16",
) -> list[str]:
    """The lines SGLang logs when it allocates the state cache (sizes count size + 1 slots).

    With ``draft_tokens > 0`` the intermediate (per-draft) buffers are printed too, for
    ``max_running`` requests (default ``size // 5``, extra_buffer + overlap). With
    ``replayssm`` (``--enable-linear-replayssm-spec``) and ``ring_len`` set, the ReplaySSM ring
    line follows; its d/k/rawv/rawk tensors are in ``ring_dtype`` (bf16 in all of the seed's
    logs, even with an fp32 SSM state).

    The rings follow the flag, not ``draft_tokens``: the seed's two "no spark spec" logs
    (51 and 80 slots, no intermediate buffers, i.e. D = 0) both print the ring line, so a
    D = 0 configuration with the flag on allocates them. ``replayssm=False`` prints no ring
    line (and, with D > 0, a full per-draft SSM buffer instead).
    """
    size = _check_int("max_mamba_cache_size", max_mamba_cache_size, 0, _MAX_COUNT)
    phys = size + 1
    line = (
        f"Mamba Cache is allocated. max_mamba_cache_size: {size}, "
        f"conv_state size: {_gb(phys * conv_state_bytes(spec, tp, conv_dtype), 2)}, "
        f"ssm_state size: {_gb(phys * kda_state_bytes(spec, tp, ssm_dtype), 2)}"
    )
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    if d:
        run = size // 5 if max_running is None else max_running
        ssm_i = intermediate_ssm_bytes(spec, run, d, tp, ssm_dtype, replayssm)
        conv_i = intermediate_conv_window_bytes(spec, run, d, tp, conv_dtype)
        line += (
            f", intermediate_ssm_state_cache size: {_gb(ssm_i, 2)}, "
            f"intermediate_conv_window_cache size: {_gb(conv_i, 2)}"
        )
    lines = [line]
    if replayssm and ring_len is not None:
        r = replayssm_ring_bytes(spec, phys, tp, ring_len, ring_dtype)
        lines.append(
            f"GDN ReplaySSM ring buffers allocated (L={ring_len}): "
            f"d={_gb(r['d'], 3)}, k={_gb(r['k'], 3)}, g={_gb(r['g'], 3)}, "
            f"rawv={_gb(r['rawv'], 3)}, rawk={_gb(r['rawk'], 3)}, beta={_gb(r['beta'], 3)}"
        )
    return lines


def pool_usage(used: int, total: int, name: str = "used") -> float:
    """Fraction of a pool in use, ``used / total`` (0.0 for an empty pool); used in [0, total]."""
    t = _check_int("total", total, 0, _MAX_COUNT)
    u = _check_int(name, used, 0, t)
    return u / t if t else 0.0


def usage_log(full_used: int, full_total: int, mamba_used: int, mamba_total: int) -> str:
    """SGLang's scheduler usage fragment for a hybrid model, usages to two decimals.

    ``#full token: N, full token usage: U, mamba num: M, mamba usage: V`` where
    U = ``full_used / full_total`` (KV pool tokens) and V = ``mamba_used / mamba_total``
    (state slots, ``max_mamba_cache_size``).
    """
    fu = pool_usage(full_used, full_total, "full_used")
    mu = pool_usage(mamba_used, mamba_total, "mamba_used")
    return (
        f"#full token: {int(full_used)}, full token usage: {fu:.2f}, "
        f"mamba num: {int(mamba_used)}, mamba usage: {mu:.2f}"
    )


def kv_allocation_log(spec: ModelSpec | str, num_tokens: int, kv_dtype: str = "bfloat16") -> str:
    """SGLang's KV pool line: ``KV Cache is allocated. dtype: ..., #tokens: N, KV size: X GB``."""
    n = _check_int("num_tokens", num_tokens, 0, _MAX_COUNT)
    size = n * mla_kv_bytes_per_token(spec, kv_dtype)
    return (
        f"KV Cache is allocated. dtype: {TORCH_DTYPE_NAME[kv_dtype]}, #tokens: {n}, "
        f"KV size: {size / GIB:.2f} GB"
    )


def memory_vs_context(
    spec: ModelSpec | str,
    context_lens: Sequence[int] | np.ndarray,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-request bytes on one GPU vs context length: (MLA KV, KDA state + conv).

    MLA grows linearly (``L * kv_tok``); the KDA part is flat (one slot). int64 arrays.
    """
    ctx = np.asarray(context_lens)
    if ctx.ndim != 1 or ctx.size > 1_000_000 or not np.issubdtype(ctx.dtype, np.integer):
        raise ValueError("context_lens must be a 1-D integer array of at most 1e6 entries")
    if ctx.size and (ctx.min() < 0 or ctx.max() > 1 << 32):
        raise ValueError("context_lens must be in [0, 2**32]")
    kv = ctx.astype(np.int64) * mla_kv_bytes_per_token(spec, kv_dtype)
    st = np.full(ctx.shape, slot_bytes(spec, tp, ssm_dtype, conv_dtype), dtype=np.int64)
    return kv, st


def crossover_context(
    spec: ModelSpec | str,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    kv_dtype: str = "bfloat16",
) -> int:
    """Smallest context length at which one request's MLA KV exceeds its one KDA slot."""
    per = mla_kv_bytes_per_token(spec, kv_dtype)
    if per == 0:
        raise ValueError("spec has no MLA layers")
    return slot_bytes(spec, tp, ssm_dtype, conv_dtype) // per + 1


__all__ = [
    "GIB",
    "MIB",
    "DTYPE_BYTES",
    "STRATEGIES",
    "ModelSpec",
    "PRESETS",
    "preset",
    "local_heads",
    "dtype_bytes",
    "kda_state_bytes",
    "conv_state_bytes",
    "slot_bytes",
    "int8_scale_bytes",
    "mla_kv_bytes_per_token",
    "kv_tokens_for_bytes",
    "next_pow2",
    "default_ring_len",
    "replayssm_ring_bytes",
    "intermediate_conv_window_bytes",
    "intermediate_ssm_bytes",
    "slots_per_request",
    "slots_held_per_request",
    "max_running_requests",
    "request_pool_estimate",
    "resolve_max_num_reqs",
    "MemorySplit",
    "SIZING_FORMULAS",
    "split_memory",
    "split_memory_0523",
    "decode_track_points",
    "checkpoints_per_request",
    "checkpoints_upper_bound",
    "mean_checkpoints_per_request",
    "balanced_ratio",
    "capping_message",
    "mamba_allocation_log",
    "kv_allocation_log",
    "pool_usage",
    "usage_log",
    "memory_vs_context",
    "crossover_context",
]
