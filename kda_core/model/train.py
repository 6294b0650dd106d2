"""Train k3-mini on the frozen stdlib-docstring corpus (torch on CPU; `pip install .[train]`).

    python -m kda_core.model.train            # the shipped run -> assets/weights/k3-mini.npz
    python -m kda_core.model.train --steps 20 --out /tmp/w.npz
    python -m kda_core.model.train --init w.npz --schedule rsqrt --out /tmp/more.npz

The torch forward is the same network as `kda_core.model.TinyHybrid` (same parameter names,
same layer code, written for batches). Training starts from the numpy initialisation of
`ModelConfig(seed=0)` (`TinyHybrid(weights="random")`) or, with ``--init``, from saved weights
(a continuation, with a fresh optimiser), so the only randomness beyond the starting weights is
the batch sampler, a seeded numpy Generator. KDA here is the chunkwise (WY/UT) form with chunk
C, its pairwise decay factors taken around the chunk's middle row so float32 cannot overflow
(the equations: docs/model.md). Determinism: deterministic torch algorithms, a fixed thread
count, a seeded sampler and a fixed step count, so a run repeats bit for bit on one machine
kind (`tests/test_train.py` repeats a 20-step run and checks the forward against TinyHybrid).

Left out: GPU training, mixed precision, any wall-clock budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kda_core import model
from kda_core._checks import check_int
from kda_core.model import corpus, weights

_HELDOUT_EVAL_BYTES = 65536  # the record's in-domain score: the first 64 KiB of held-out documents


@dataclass(slots=True, frozen=True)
class _TrainConfig:
    seed: int = 0  # the sampler's seed (the initial weights are ModelConfig(seed=0)'s)
    steps: int = 2000
    batch: int = 8
    seq_len: int = 256
    lr: float = 4e-3
    min_lr_ratio: float = 0.1  # cosine decay to lr * this
    warmup: int = 100
    # "cosine": warm-up, then cosine to lr * min_lr_ratio at `steps`; "rsqrt": warm-up, then
    # lr * sqrt(warmup / (step + 1)), a function of the step alone, so the first k steps of a
    # longer run are a k-step run (a continuation can stop at any step and stay reproducible)
    schedule: str = "cosine"
    weight_decay: float = 0.01  # on matrices only (not norms, gates' biases, embeddings)
    clip: float = 1.0
    chunk: int = 16
    # One thread: on the shared 2-core machine (load ~8) two torch threads made a step 6x slower
    # in wall time (each op waits for its second thread to be scheduled); measured 7 s vs 43 s.
    threads: int = 1
    log_every: int = 10

    def __post_init__(self) -> None:
        for name, lo, hi in (
            ("steps", 1, 100_000),
            ("batch", 1, 256),
            ("seq_len", 8, 4096),
            ("threads", 1, 64),
            ("chunk", 1, 64),
        ):
            check_int(name, getattr(self, name), lo, hi)
        if self.schedule not in ("cosine", "rsqrt"):
            raise ValueError(f"schedule must be 'cosine' or 'rsqrt', got {self.schedule!r}")


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


# --------------------------------------------------------------------------------------------
# training


def _decays(name: str) -> bool:
    """Weight decay on projection matrices only."""
    return name not in ("embed",) and not name.endswith(
        ("norm1", "norm2", "final_norm", "norm_w", "norm_c", "A_log", "dt_bias", "conv_w")
    )


def _lr(cfg: _TrainConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if cfg.schedule == "rsqrt":
        return cfg.lr * math.sqrt(cfg.warmup / (step + 1))
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


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


def train(
    cfg: _TrainConfig, text: str | None = None, log=print, snapshot=None, init: dict | None = None
) -> tuple[dict, list[dict]]:
    """Run the training; returns (float32 numpy weights keyed like the .npz, log rows).
    ``init``: the starting weights (keyed like the .npz; None: the random initialisation).
    ``snapshot(steps_done, weights)``, when given, receives the weights after every
    ``log_every``-th step (a copy; it changes nothing in the run)."""
    setup(cfg.threads, cfg.seed)
    data = np.frombuffer((corpus.load("train") if text is None else text).encode(), np.uint8)
    if data.size < cfg.seq_len + 2:
        raise ValueError(f"text must hold more than seq_len + 1 = {cfg.seq_len + 1} bytes")
    mcfg = model.ModelConfig()
    p = params_from(model.TinyHybrid(mcfg, weights="random" if init is None else init))
    opt = optimizer(p, cfg.lr, cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        batch = sample_batch(data, rng, cfg)
        for gr in opt.param_groups:
            gr["lr"] = _lr(cfg, step)
        loss = likelihood_loss(p, batch, mcfg, cfg.chunk)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), cfg.clip)
        opt.step()
        if step % cfg.log_every == 0 or step == cfg.steps - 1:
            row = {
                "step": step,
                "bpb": loss.item() / math.log(2),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            rows.append(row)
            log(json.dumps(row))
        if snapshot is not None and (step + 1) % cfg.log_every == 0:
            snapshot(step + 1, {k: t.detach().numpy().astype(np.float32) for k, t in p.items()})
    return {k: t.detach().numpy().astype(np.float32) for k, t in p.items()}, rows


def record(arrays: dict, rows: list[dict], seconds: float) -> dict:
    """The record saved with trained weights: model config, corpus hashes, scores, the log (the
    caller adds its own config)."""
    scores = corpus.scores(model.TinyHybrid(weights=arrays), _HELDOUT_EVAL_BYTES)
    return {
        "model_config": dataclasses.asdict(model.ModelConfig()),
        "corpus": corpus.manifest()["files"],
        "torch": torch.__version__,
        "train_seconds": round(seconds, 1),
        "final_train_bpb": [r["bpb"] for r in rows if "bpb" in r][-1],
        "heldout_bpb_first_64k": scores.pop("heldout"),
        "out_of_style_bpb": scores.pop("out_of_style"),
        **scores,
        "log": rows,
    }


def _main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m kda_core.model.train", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--out", type=Path, default=weights.DEFAULT_PATH)
    ap.add_argument("--init", type=Path, default=None, help="start from these weights (.npz)")
    ap.add_argument(
        "--snapshots",
        type=Path,
        default=None,
        help="also write the weights after every --snapshot-every steps here (a multiple of "
        "--log-every; after<steps>.npz)",
    )
    ap.add_argument("--snapshot-every", type=int, default=250)
    for f in dataclasses.fields(_TrainConfig):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = ap.parse_args(argv)
    cfg = _TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(_TrainConfig)})
    snap = None
    if args.snapshots is not None:
        args.snapshots.mkdir(parents=True, exist_ok=True)

        def snap(steps_done: int, arrays: dict) -> None:
            if steps_done % args.snapshot_every == 0:
                np.savez(args.snapshots / f"after{steps_done:06d}.npz", **arrays)

    t0 = time.perf_counter()
    init = None if args.init is None else weights.load(args.init)[0]
    arrays, rows = train(cfg, snapshot=snap, init=init)
    init_label = "random" if args.init is None else weights.sha256_file(args.init)
    meta = record(arrays, rows, time.perf_counter() - t0)
    meta.update({"train_config": dataclasses.asdict(cfg), "init": init_label})
    digest = weights.save(args.out, arrays, meta)
    summary = {k: v for k, v in meta.items() if k not in ("log", "corpus", "model_config")}
    print(json.dumps({"out": str(args.out), "sha256": digest, **summary}))


if __name__ == "__main__":
    _main()
