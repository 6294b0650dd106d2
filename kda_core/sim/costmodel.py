"""Forward-pass FLOP model per layer type, and the time-to-first-token estimate built on it.

The prefill of tokens ``[start, end)`` on top of a cached prefix of ``start`` tokens costs

    F(start, end) = (end - start) * (n_attn * attn_proj + n_lin * linear + mlp)
                    + n_attn * attn_pair * pairs(start, end)

* ``attn_proj``: FLOPs per token of one attention (MLA) layer that do not depend on the context
  (q/kv low-rank projections, up-projections, output gate, output projection);
* ``attn_pair``: FLOPs per (query, key) pair of one attention layer, 2 * H * (d_qk + d_v)
  (scores and attention-weighted values; the softmax is dropped, as in Marconi's Table 1);
* ``pairs(start, end)``: query-key pairs the new queries see. Causal (default):
  ``sum_{t=start}^{end-1} (t + 1) = (end(end+1) - start(start+1)) / 2``. Marconi's convention
  (``causal=False``) counts the full square, ``end^2 - start^2``;
* ``linear``: FLOPs per token of one KDA (or SSM) layer: q/k/v, gate, beta, output-gate and
  output projections, the short conv, and the recurrence (about 4 K V multiply-adds per head:
  decay, k^T S, rank-1 write, S^T q);
* ``mlp``: FLOPs per token of all MLP / MoE layers together (active experts only).

One multiply-add counts 2 FLOPs. Replaying tokens from a checkpoint costs exactly what
prefilling them costs (every layer runs again: KDA outputs feed the later layers).

Marconi's own formulas (the ``"marconi-7b"`` preset, ``causal=False``): docs/simulator.md.

Left out: embeddings and the LM head, norms, activations, the softmax, MoE routing imbalance,
kernel efficiency differences between layer types, restore (copy) time. The Kimi K3 MoE shape
(896 experts, 16 active + 2 shared of width 3072, latent routed width 3584, one dense layer of
width 33792) comes from a third-party copy of the released config, not from the config itself;
Kimi-Linear's dense width 9216 is assumed.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

_MAX_TOKENS = 1 << 31


@dataclass(frozen=True, slots=True)
class CostSpec:
    """Per-layer-type FLOP coefficients of one model (see the module docstring)."""

    name: str
    n_attn_layers: int
    n_linear_layers: int
    attn_proj_flops: float
    attn_pair_flops: float
    linear_flops: float
    mlp_flops: float
    causal: bool = True

    def __post_init__(self) -> None:
        for f in ("n_attn_layers", "n_linear_layers"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1 << 16:
                raise ValueError(f"{f} must be an integer in [0, 65536], got {v!r}")
        for f in ("attn_proj_flops", "attn_pair_flops", "linear_flops", "mlp_flops"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 <= v <= 1e15):
                raise ValueError(f"{f} must be a finite number in [0, 1e15], got {v!r}")

    @property
    def per_token_flops(self) -> float:
        """FLOPs per token that do not depend on the context length."""
        return (
            self.n_attn_layers * self.attn_proj_flops
            + self.n_linear_layers * self.linear_flops
            + self.mlp_flops
        )


def _hybrid_cost_spec(
    name: str,
    *,
    hidden: int,
    n_kda: int,
    n_mla: int,
    kda_heads: int,
    head_k: int = 128,
    head_v: int = 128,
    conv_kernel: int = 4,
    gate_rank: int = 128,
    full_rank_output_gate: bool = False,
    mla_heads: int,
    q_lora_rank: int = 0,
    kv_lora_rank: int = 512,
    qk_nope: int = 128,
    qk_rope: int = 64,
    v_head: int = 128,
    mla_output_gate: bool = False,
    n_dense_mlp: int = 0,
    dense_inter: int = 0,
    n_moe: int = 0,
    moe_inter: int = 0,
    experts_per_token: int = 0,
    n_shared: int = 0,
    n_experts: int = 0,
    routed_hidden: int | None = None,
) -> CostSpec:
    """FLOP coefficients of a KDA + MLA hybrid with (latent) MoE MLPs, from its config.

    MLA per token (multiply-adds): q ``D*rq + rq*H*(dn+dr)`` (or ``D*H*(dn+dr)`` without
    q_lora), kv down ``D*(rkv+dr)``, kv up ``rkv*H*(dn+dv)`` (prefill decompresses),
    output ``H*dv*D``, optional output gate ``D*H*dv``; per pair ``H*(dn+dr+dv)``.
    KDA per token: q/k/v ``3*D*H*K`` (K = V assumed for k), beta ``D*H``, decay gate
    ``D*r + r*H*K``, output gate (full rank ``D*H*V`` or low rank ``D*r + r*H*V``), output
    ``H*V*D``, conv ``W*H*(2K+V)``, recurrence ``4*H*K*V``. MoE layer: shared
    ``3*D*I*n_shared``, router ``D*E``, routed ``k*3*Dr*I`` plus the latent down/up
    projections ``2*D*Dr`` when ``routed_hidden`` differs from D. Dense layer ``3*D*I_dense``.
    """
    d = hidden
    hq = mla_heads
    if q_lora_rank:
        q = d * q_lora_rank + q_lora_rank * hq * (qk_nope + qk_rope)
    else:
        q = d * hq * (qk_nope + qk_rope)
    kv = d * (kv_lora_rank + qk_rope) + kv_lora_rank * hq * (qk_nope + v_head)
    o = hq * v_head * d + (d * hq * v_head if mla_output_gate else 0)
    attn_proj = 2.0 * (q + kv + o)
    attn_pair = 2.0 * hq * (qk_nope + qk_rope + v_head)
    h, k, v = kda_heads, head_k, head_v
    ogate = d * h * v if full_rank_output_gate else d * gate_rank + gate_rank * h * v
    kda = (
        d * h * (2 * k + v)  # q, k, v projections
        + d * h  # beta
        + d * gate_rank
        + gate_rank * h * k  # decay gate (low rank)
        + ogate
        + h * v * d  # output projection
        + conv_kernel * h * (2 * k + v)  # short conv
        + 4 * h * k * v  # recurrence
    )
    dr = d if routed_hidden is None else routed_hidden
    latent = 2 * d * dr if dr != d else 0
    moe = 3 * d * moe_inter * n_shared + d * n_experts + experts_per_token * 3 * dr * moe_inter
    mlp = n_dense_mlp * 3 * d * dense_inter + n_moe * (moe + latent)
    return CostSpec(
        name=name,
        n_attn_layers=n_mla,
        n_linear_layers=n_kda,
        attn_proj_flops=attn_proj,
        attn_pair_flops=attn_pair,
        linear_flops=2.0 * kda,
        mlp_flops=2.0 * mlp,
        causal=True,
    )


def _marconi_cost_spec(
    d: int = 4096, n: int = 128, n_attn: int = 4, n_ssm: int = 24, n_mlp: int = 28
) -> CostSpec:
    """Marconi's Table 1 model (NVIDIA Attention-Mamba2 hybrid 7B by default), non-causal."""
    return CostSpec(
        name=f"marconi-{n_attn}a{n_ssm}m",
        n_attn_layers=n_attn,
        n_linear_layers=n_ssm,
        attn_proj_flops=8.0 * d * d,
        attn_pair_flops=4.0 * d,
        linear_flops=12.0 * d * d + 16.0 * d * n + 10.0 * d,
        mlp_flops=n_mlp * 16.0 * d * d,
        causal=False,
    )


COST_PRESETS: dict[str, CostSpec] = {
    "kimi-k3": _hybrid_cost_spec(
        "kimi-k3",
        hidden=7168,
        n_kda=69,
        n_mla=24,
        kda_heads=96,
        full_rank_output_gate=True,
        mla_heads=96,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope=128,
        qk_rope=64,
        v_head=128,
        mla_output_gate=True,
        n_dense_mlp=1,
        dense_inter=33792,
        n_moe=92,
        moe_inter=3072,
        experts_per_token=16,
        n_shared=2,
        n_experts=896,
        routed_hidden=3584,
    ),
    "kimi-linear-48b": _hybrid_cost_spec(
        "kimi-linear-48b",
        hidden=2304,
        n_kda=20,
        n_mla=7,
        kda_heads=32,
        mla_heads=32,
        q_lora_rank=0,
        kv_lora_rank=512,
        qk_nope=128,
        qk_rope=64,
        v_head=128,
        n_dense_mlp=1,
        dense_inter=9216,
        n_moe=26,
        moe_inter=1024,
        experts_per_token=8,
        n_shared=1,
        n_experts=256,
    ),
    "marconi-7b": _marconi_cost_spec(),
}


def cost_spec(model: str | CostSpec) -> CostSpec:
    """A CostSpec by preset name (``"kimi-k3"``, ``"kimi-linear-48b"``, ``"marconi-7b"``)."""
    if isinstance(model, CostSpec):
        return model
    if model not in COST_PRESETS:
        allowed = sorted(COST_PRESETS)
        raise ValueError(f"model must be one of {allowed} or a CostSpec, got {model!r}")
    return COST_PRESETS[model]


def _check_bounds(start: object, end: object) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if s.shape != e.shape and s.ndim and e.ndim:
        s, e = np.broadcast_arrays(s, e)
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(e))):
        raise ValueError("start and end must be finite token counts")
    if np.any(s < 0) or np.any(e < s) or np.any(e > _MAX_TOKENS):
        raise ValueError(f"start and end must satisfy 0 <= start <= end <= {_MAX_TOKENS}")
    return s, e


def _context_pairs(start: object, end: object, causal: bool = True) -> np.ndarray | float:
    """Query-key pairs of the queries ``[start, end)`` (see the module docstring); float64."""
    s, e = _check_bounds(start, end)
    out = (e * (e + 1.0) - s * (s + 1.0)) / 2.0 if causal else e * e - s * s
    return float(out) if out.ndim == 0 else out


class _FlopBreakdown(NamedTuple):
    """Prefill FLOPs by layer type (float64 scalars or arrays of one shape)."""

    attn_proj: np.ndarray | float
    attn_context: np.ndarray | float
    linear: np.ndarray | float
    mlp: np.ndarray | float
    total: np.ndarray | float


def _prefill_breakdown(model: str | CostSpec, start: object, end: object) -> _FlopBreakdown:
    """FLOPs to compute tokens ``[start, end)`` given a cached prefix of ``start`` tokens."""
    spec = cost_spec(model)
    s, e = _check_bounds(start, end)
    n = e - s
    ap = n * (spec.n_attn_layers * spec.attn_proj_flops)
    pairs = (e * (e + 1.0) - s * (s + 1.0)) / 2.0 if spec.causal else e * e - s * s
    ac = spec.n_attn_layers * spec.attn_pair_flops * pairs
    lin = n * (spec.n_linear_layers * spec.linear_flops)
    mlp = n * spec.mlp_flops
    tot = ap + ac + lin + mlp
    if tot.ndim == 0:
        return _FlopBreakdown(float(ap), float(ac), float(lin), float(mlp), float(tot))
    return _FlopBreakdown(ap, ac, lin, mlp, tot)


def prefill_flops(model: str | CostSpec, start: object, end: object) -> np.ndarray | float:
    """Total FLOPs to compute tokens ``[start, end)`` on top of a ``start``-token prefix."""
    spec = cost_spec(model)
    s, e = _check_bounds(start, end)
    pairs = (e * (e + 1.0) - s * (s + 1.0)) / 2.0 if spec.causal else e * e - s * s
    tot = (e - s) * spec.per_token_flops + spec.n_attn_layers * spec.attn_pair_flops * pairs
    return float(tot) if tot.ndim == 0 else tot


@dataclass(frozen=True, slots=True)
class TimeModel:
    """TTFT = ``overhead_s + FLOPs / flops_per_s`` (optionally plus queueing, see sim).

    The default 3.2 PFLOP/s is one TP8 instance at about 400 TFLOP/s effective per GPU (roughly
    40 % of an H100/H800's dense bf16 peak). Marconi's fitted Jamba profile (17.8 ms + 0.053
    ms/token) is the same form with FLOPs replaced by uncached tokens. ``decode_s_per_token``
    (only the simulator's in-flight schedule reads it: how long a request keeps running, and
    holding its locks, after its prefill) is an assumed 20 ms per output token (50 tokens/s
    per request, a typical large-MoE serving speed; not a measurement).
    """

    flops_per_s: float = 3.2e15
    overhead_s: float = 0.0
    decode_s_per_token: float = 0.02

    def __post_init__(self) -> None:
        if not (math.isfinite(self.flops_per_s) and 1e6 <= self.flops_per_s <= 1e21):
            raise ValueError(f"flops_per_s must be in [1e6, 1e21], got {self.flops_per_s!r}")
        if not (math.isfinite(self.overhead_s) and 0 <= self.overhead_s <= 1e4):
            raise ValueError(f"overhead_s must be in [0, 1e4], got {self.overhead_s!r}")
        d = self.decode_s_per_token
        if not (math.isfinite(d) and 0 <= d <= 10.0):
            raise ValueError(f"decode_s_per_token must be in [0, 10], got {d!r}")

    def seconds(self, flops: np.ndarray | float) -> np.ndarray | float:
        return self.overhead_s + np.asarray(flops, dtype=np.float64) / self.flops_per_s


def fcfs_queue(
    arrival_s: np.ndarray, service_s: np.ndarray, servers: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """First-come-first-served queue over ``servers`` identical prefill servers.

    Returns (start_s, finish_s) ``[N]``; the TTFT with queueing is ``finish - arrival``.
    Requests are served in index order (arrivals must be non-decreasing).
    """
    a = np.asarray(arrival_s, dtype=np.float64)
    d = np.asarray(service_s, dtype=np.float64)
    if a.ndim != 1 or d.shape != a.shape:
        raise ValueError("arrival_s and service_s must be 1-D arrays of the same length")
    if isinstance(servers, bool) or not isinstance(servers, int) or not 1 <= servers <= 4096:
        raise ValueError(f"servers must be an integer in [1, 4096], got {servers!r}")
    if a.size and (np.any(np.diff(a) < 0) or np.any(d < 0)):
        raise ValueError("arrival_s must be non-decreasing and service_s >= 0")
    free = [0.0] * servers
    start = np.empty_like(a)
    al = a.tolist()
    dl = d.tolist()
    heapq.heapify(free)
    for i in range(a.size):
        f = heapq.heappop(free)
        s = al[i] if al[i] > f else f
        start[i] = s
        heapq.heappush(free, s + dl[i])
    return start, start + d
