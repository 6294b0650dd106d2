"""The torch side shared by the two training runs (``train``, ``unlikelihood``): the batched
forward (the same network as ``TinyHybrid``: same parameter names, same layer code), the
weights as tensors, deterministic set-up, the optimiser, the batch sampler and the likelihood
loss. KDA here is the chunkwise (WY/UT) form with chunk C (the equations: docs/model.md).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from kda_core import model

# --------------------------------------------------------------------------------------------
# the forward (float32 or float64, batched)


def _rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _kda_chunked(q, k, v, g, beta, chunk: int = 16) -> torch.Tensor:
    """KDA outputs for a zero initial state. q, k, g [B, T, H, K]; v [B, T, H, V]; beta [B, T, H].

    Pads T to a multiple of ``chunk`` with k = v = g = beta = 0 (a padded token leaves the state
    unchanged). Returns o [B, T, H, V].
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk
    pad = (-T) % C
    if pad:
        q, k, v, g = (torch.nn.functional.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, g))
        beta = torch.nn.functional.pad(beta, (0, 0, 0, pad))
    N = (T + pad) // C

    def heads(x: torch.Tensor) -> torch.Tensor:  # [B, N*C, H, *] -> [B, H, N, C, *]
        return x.reshape(B, N, C, H, -1).permute(0, 3, 1, 2, 4)

    q, k, v, g = heads(q), heads(k), heads(v), heads(g)
    b = beta.reshape(B, N, C, H).permute(0, 3, 1, 2)  # [B, H, N, C]
    gam = g.cumsum(-2)
    # pairwise decays e^(Gam_t - Gam_s) factorised around the chunk's middle row: both factors
    # stay within e^(+-|g|max * C / 2) (+-40 for C = 16, lower bound -5), far from float32's
    # limits, and the products are exact to rounding; the mask removes s > t before use.
    mid = gam[..., C // 2 : C // 2 + 1, :]
    to_mid, from_mid = (gam - mid).exp(), (mid - gam).exp()
    q_in, k_out, k_in = q * to_mid, k * to_mid, k * from_mid
    eg = gam.exp()
    causal = torch.ones(C, C, dtype=torch.bool).tril()
    strictly_below = causal.tril(-1)
    a_kk = (k_out @ k_in.transpose(-1, -2)).masked_fill(~strictly_below, 0.0)
    a_qk = (q_in @ k_in.transpose(-1, -2)).masked_fill(~causal, 0.0)
    L = torch.eye(C, dtype=q.dtype) + b[..., None] * a_kk
    u_v = torch.linalg.solve_triangular(L, b[..., None] * v, upper=False, unitriangular=True)
    w_k = torch.linalg.solve_triangular(L, b[..., None] * k * eg, upper=False, unitriangular=True)
    qg = q * eg
    k_end = k * (gam[..., -1:, :] - gam).exp()  # [B, H, N, C, K]
    S = torch.zeros(B, H, K, V, dtype=q.dtype)
    scale = K**-0.5
    outs = []
    for n in range(N):
        u = u_v[:, :, n] - w_k[:, :, n] @ S
        outs.append(scale * (qg[:, :, n] @ S + a_qk[:, :, n] @ u))
        S = eg[:, :, n, -1, :, None] * S + k_end[:, :, n].transpose(-1, -2) @ u
    o = torch.stack(outs, dim=2)  # [B, H, N, C, V]
    return o.permute(0, 2, 3, 1, 4).reshape(B, N * C, H, V)[:, :T]


def _kda_block(p: dict, i: int, h: torch.Tensor, cfg: model.ModelConfig, chunk: int):
    pre = f"blocks.{i}.mixer."
    B, T, _ = h.shape
    H, K, W = cfg.n_heads, cfg.head_dim, cfg.conv_size
    raw = h @ p[pre + "w_qkv"]  # [B, T, 3HK]
    full = torch.nn.functional.pad(raw, (0, 0, W - 1, 0))
    w = p[pre + "conv_w"]  # [3HK, W], last column multiplies the current token
    y = sum(full[:, j : j + T] * w[:, j] for j in range(W))
    act = y * torch.sigmoid(y)
    q, k, v = (act[..., j * H * K : (j + 1) * H * K].reshape(B, T, H, K) for j in range(3))
    f = ((h @ p[pre + "f_a"]) @ p[pre + "f_b"]).reshape(B, T, H, K)
    z = p[pre + "A_log"].exp()[:, None] * (f + p[pre + "dt_bias"].reshape(H, K))
    g = cfg.gate_lower_bound * torch.sigmoid(z)
    beta = torch.sigmoid(h @ p[pre + "w_beta"])
    o = _kda_chunked(_l2norm(q), _l2norm(k), v, g, beta, chunk)
    gate = torch.sigmoid(h @ p[pre + "w_gate"])
    y = _rmsnorm(o, p[pre + "norm_w"], cfg.norm_eps).reshape(B, T, H * K) * gate
    return y @ p[pre + "w_o"]


def _mla_block(p: dict, i: int, h: torch.Tensor, cfg: model.ModelConfig):
    pre = f"blocks.{i}.mixer."
    B, T, _ = h.shape
    Hm, dh = cfg.mla_heads, cfg.mla_head_dim
    lat = _rmsnorm(h @ p[pre + "w_dkv"], p[pre + "norm_c"], cfg.norm_eps)
    q = (h @ p[pre + "w_q"]).reshape(B, T, Hm, dh).transpose(1, 2)
    k = (lat @ p[pre + "w_uk"]).reshape(B, T, Hm, dh).transpose(1, 2)
    v = (lat @ p[pre + "w_uv"]).reshape(B, T, Hm, dh).transpose(1, 2)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = s.masked_fill(~mask, -math.inf).softmax(-1)
    o = (att @ v).transpose(1, 2).reshape(B, T, Hm * dh)
    return (o * torch.sigmoid(h @ p[pre + "w_gate"])) @ p[pre + "w_o"]


def forward(p: dict, tokens: torch.Tensor, cfg: model.ModelConfig, chunk: int = 16):
    """Logits [B, T, vocab] of token ids [B, T] from a fresh state (TinyHybrid's network)."""
    x = p["embed"][tokens]
    for i, kind in enumerate(cfg.layer_kinds):
        h = _rmsnorm(x, p[f"blocks.{i}.norm1"], cfg.norm_eps)
        mixer = _kda_block(p, i, h, cfg, chunk) if kind == "kda" else _mla_block(p, i, h, cfg)
        x = x + mixer
        gu = _rmsnorm(x, p[f"blocks.{i}.norm2"], cfg.norm_eps) @ p[f"blocks.{i}.w_up"]
        F = cfg.mlp_hidden
        x = x + (torch.nn.functional.silu(gu[..., :F]) * gu[..., F:]) @ p[f"blocks.{i}.w_down"]
    return _rmsnorm(x, p["final_norm"], cfg.norm_eps) @ p["lm_head"]


def params_from(tiny: model.TinyHybrid, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """The model's weights as torch tensors (copies), keyed like the shipped .npz."""
    return {k: torch.tensor(v, dtype=dtype) for k, v in model.named_weights(tiny).items()}


def _decays(name: str) -> bool:
    """Weight decay on projection matrices only."""
    return name not in ("embed",) and not name.endswith(
        ("norm1", "norm2", "final_norm", "norm_w", "norm_c", "A_log", "dt_bias", "conv_w")
    )


def setup(threads: int, seed: int) -> None:
    """Deterministic torch on ``threads`` threads (a run repeats bit for bit on one machine)."""
    torch.use_deterministic_algorithms(True)
    # deterministic mode also NaN-fills every new tensor (a debugging aid): ~20 % of a step
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.set_num_threads(threads)
    torch.manual_seed(seed)


def optimizer(p: dict[str, torch.Tensor], lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``p`` (now requiring gradients), weight decay on projection matrices only."""
    for t in p.values():
        t.requires_grad_(True)
    groups = [
        {"params": [t for n, t in p.items() if _decays(n)], "weight_decay": weight_decay},
        {"params": [t for n, t in p.items() if not _decays(n)], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


def sample_batch(data: np.ndarray, rng: np.random.Generator, cfg) -> torch.Tensor:
    """``cfg.batch`` windows of ``cfg.seq_len + 1`` bytes at uniform random starts: [B, T + 1]."""
    starts = rng.integers(0, data.size - cfg.seq_len - 1, cfg.batch)
    windows = np.stack([data[s : s + cfg.seq_len + 1] for s in starts])
    return torch.from_numpy(windows.astype(np.int64))


def likelihood_loss(p: dict, batch: torch.Tensor, cfg: model.ModelConfig, chunk: int):
    """Mean next-byte cross-entropy (nats) of a [B, T + 1] batch."""
    logits = forward(p, batch[:, :-1], cfg, chunk)
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, model.VOCAB), batch[:, 1:].reshape(-1)
    )
