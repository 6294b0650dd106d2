"""Train k3-mini on the frozen stdlib-docstring corpus (torch on CPU; `pip install .[train]`).

    python -m kda_core.model.train            # the shipped run -> assets/weights/k3-mini.npz
    python -m kda_core.model.train --steps 20 --out /tmp/w.npz
    python -m kda_core.model.train --init w.npz --schedule rsqrt --out /tmp/more.npz

The torch forward (``_torch_net``, shared with ``unlikelihood``) is the same network as
`kda_core.model.TinyHybrid` (same parameter names, same layer code, written for batches).
Training starts from the numpy initialisation of `ModelConfig(seed=0)`
(`TinyHybrid(weights="random")`) or, with ``--init``, from saved weights (a continuation, with
a fresh optimiser), so the only randomness beyond the starting weights is the batch sampler, a
seeded numpy Generator. KDA here is the chunkwise (WY/UT) form with chunk
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
from kda_core.model import _weights as weights
from kda_core.model import corpus
from kda_core.model._torch_net import (
    likelihood_loss,
    optimizer,
    params_from,
    sample_batch,
    setup,
)

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
# training


def _lr(cfg: _TrainConfig, step: int) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    if cfg.schedule == "rsqrt":
        return cfg.lr * math.sqrt(cfg.warmup / (step + 1))
    t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


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
