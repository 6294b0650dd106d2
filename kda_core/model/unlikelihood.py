"""Sequence-level unlikelihood fine-tuning of k3-mini (torch on CPU; `pip install .[train]`).

    python -m kda_core.model.unlikelihood --init base.npz      # the shipped fine-tune
    python -m kda_core.model.unlikelihood --init base.npz --steps 4 --out /tmp/u.npz

Greedy decoding of a likelihood-trained byte model loops ("the string of the string of ..."):
once a phrase is written, its most probable continuation is the phrase again. Welleck et al.,
"Neural Text Generation with Unlikelihood Training" (ICLR 2020, arXiv:1908.04319,
facebookresearch/unlikelihood_training) fine-tune on the model's own greedy continuations and
push down the probability of every token that lies in an n-gram already written (their
sequence-level objective, -log(1 - p(x_t | x_<t)) on those tokens), alternating with ordinary
likelihood batches so the model keeps its fit to text. Here the tokens are bytes, n is 12 (the
`corpus.first_repeat` loop definition), prefixes are 32 bytes of the training split (never the
sample prompts or held-out text), continuations 64 bytes, even steps likelihood, odd steps
unlikelihood, a constant learning rate after warm-up. Deterministic like `train`: a fixed thread
count, deterministic torch algorithms and a seeded sampler.

Chosen differently from their code (`custom/gpt2/run_gpt2.py`: `ul_seq`, `ngram_repeat_mask`,
the training loop): the loss is the mean over the repeated bytes, not the sum divided by every
continuation token (a batch with few repeats still pushes them down); the mask covers the last
n-gram of a continuation too (their loop stops one n-gram short); steps alternate instead of a
coin flip with `--sequence-tune-rate` 0.5 (the same share, one draw fewer to reproduce).

Left out: the token-level unlikelihood term (at byte level almost every byte has occurred
before, so "previous tokens" would be nearly the whole alphabet), sampled decoding.
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
from kda_core.model import _torch_net as net
from kda_core.model import _weights as weights
from kda_core.model import corpus, train


@dataclass(slots=True, frozen=True)
class _UnlikelihoodConfig:
    seed: int = 0  # the sampler's seed
    steps: int = 600  # half of them likelihood steps, half unlikelihood steps
    batch: int = 8
    seq_len: int = 256  # the likelihood batches' length
    prefix: int = 32  # the unlikelihood batches: greedy continuations of training-text prefixes
    continuation: int = 64
    ngram: int = 12
    lr: float = 3e-4
    warmup: int = 10
    weight_decay: float = 0.01
    clip: float = 1.0
    chunk: int = 16
    threads: int = 1
    log_every: int = 10
    # every check_every steps, log which SAMPLE_PROMPTS loop (no effect on the run)
    check_every: int = 100

    def __post_init__(self) -> None:
        for name, lo, hi in (
            ("steps", 1, 100_000),
            ("batch", 1, 256),
            ("seq_len", 8, 4096),
            ("prefix", 1, 1024),
            ("continuation", 2, 1024),
            ("ngram", 1, 64),
            ("threads", 1, 64),
            ("chunk", 1, 64),
            ("check_every", 1, 100_000),
        ):
            check_int(name, getattr(self, name), lo, hi)


def _repeated_positions(ids: np.ndarray, n: int) -> np.ndarray:
    """[B, L] byte ids -> [B, L] bool: True where the byte lies in an n-gram of its row that
    already occurred earlier in the row (occurrences may overlap). A row has a True exactly when
    `corpus.first_repeat` finds a repeat, and its first True is that repeat's second start."""
    check_int("n", n, 1, 64)
    ids = np.asarray(ids)
    out = np.zeros(ids.shape, dtype=bool)
    for b, row in enumerate(ids):
        data = bytes(row.astype(np.uint8).tolist())
        seen: set[bytes] = set()
        for i in range(len(data) - n + 1):
            gram = data[i : i + n]
            if gram in seen:
                out[b, i : i + n] = True
            seen.add(gram)
    return out


def _greedy(p: dict, prompts: torch.Tensor, n_new: int, cfg: model.ModelConfig, chunk: int = 16):
    """[B, P] prompt ids -> [B, P + n_new]: greedy continuations, each step a full forward of the
    sequence so far (net.forward; no state cache: short sequences, one code path)."""
    x = prompts
    with torch.no_grad():
        for _ in range(n_new):
            logits = net.forward(p, x, cfg, chunk)[:, -1]
            x = torch.cat([x, logits.argmax(-1, keepdim=True)], dim=1)
    return x


def _looping_prompts(p: dict, cfg: model.ModelConfig) -> list[str]:
    """The SAMPLE_PROMPTS whose 64-byte greedy continuation loops (`corpus.first_repeat`)."""
    out = []
    for prompt in corpus.SAMPLE_PROMPTS:
        ids = torch.tensor([list(prompt.encode())])
        written = _greedy(p, ids, 64, cfg)[0, ids.shape[1] :].tolist()
        if corpus.first_repeat(bytes(written)) is not None:
            out.append(prompt)
    return out


def _unlikelihood_loss(p: dict, seqs: torch.Tensor, prefix: int, n: int, cfg, chunk: int = 16):
    """Mean -log(1 - p(x_t | x_<t)) over the continuation bytes (after ``prefix``) that lie in a
    repeated n-gram of the continuation, and how many there are (the loss is 0 when none)."""
    mask = torch.from_numpy(_repeated_positions(seqs[:, prefix:].numpy(), n))
    logp = net.forward(p, seqs[:, :-1], cfg, chunk)[:, prefix - 1 :].log_softmax(-1)
    logp_written = logp.gather(-1, seqs[:, prefix:, None])[..., 0]
    # log(1 - p) from log p without cancellation; the clamp keeps p = 1 finite
    log_not = torch.log(-torch.expm1(logp_written.clamp(max=-1e-6)))
    count = int(mask.sum())
    return (-log_not * mask).sum() / max(count, 1), count


def finetune(
    cfg: _UnlikelihoodConfig, init: dict, text: str | None = None, log=print
) -> tuple[dict, list[dict]]:
    """Fine-tune the weights ``init`` (keyed like the .npz); returns (float32 numpy weights, log
    rows: per logged step its kind, loss and, for unlikelihood steps, the repeated bytes)."""
    net.setup(cfg.threads, cfg.seed)
    data = np.frombuffer((corpus.load("train") if text is None else text).encode(), np.uint8)
    if data.size < max(cfg.seq_len, cfg.prefix) + 2:
        raise ValueError(f"text must hold more than {max(cfg.seq_len, cfg.prefix) + 1} bytes")
    mcfg = model.ModelConfig()
    p = net.params_from(model.TinyHybrid(mcfg, weights=init))
    opt = net.optimizer(p, cfg.lr, cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    rows: list[dict] = []
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        for group in opt.param_groups:
            group["lr"] = cfg.lr * min(1.0, (step + 1) / cfg.warmup)
        row: dict = {"step": step}
        if step % 2 == 0:
            loss = net.likelihood_loss(p, net.sample_batch(data, rng, cfg), mcfg, cfg.chunk)
            row.update(kind="likelihood", bpb=loss.item() / math.log(2))
        else:
            starts = rng.integers(0, data.size - cfg.prefix, cfg.batch)
            prefixes = np.stack([data[s : s + cfg.prefix] for s in starts]).astype(np.int64)
            seqs = _greedy(p, torch.from_numpy(prefixes), cfg.continuation, mcfg, cfg.chunk)
            loss, count = _unlikelihood_loss(p, seqs, cfg.prefix, cfg.ngram, mcfg, cfg.chunk)
            row.update(kind="unlikelihood", loss=loss.item(), repeated_bytes=count)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), cfg.clip)
        opt.step()
        if step % cfg.log_every in (0, 1) or step == cfg.steps - 1:
            row["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            log(json.dumps(row))
        if (step + 1) % cfg.check_every == 0:
            rows.append({"steps_done": step + 1, "looping_prompts": _looping_prompts(p, mcfg)})
            log(json.dumps(rows[-1]))
    return {k: t.detach().numpy().astype(np.float32) for k, t in p.items()}, rows


def _main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m kda_core.model.unlikelihood", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--init", type=Path, required=True, help="the weights to fine-tune (.npz)")
    ap.add_argument("--out", type=Path, default=weights.DEFAULT_PATH)
    for f in dataclasses.fields(_UnlikelihoodConfig):
        kind = type(f.default)
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default)
    args = ap.parse_args(argv)
    fields = dataclasses.fields(_UnlikelihoodConfig)
    cfg = _UnlikelihoodConfig(**{f.name: getattr(args, f.name) for f in fields})
    t0 = time.perf_counter()
    init, base_meta = weights.load(args.init)
    arrays, rows = finetune(cfg, init)
    meta = train.record(arrays, rows, time.perf_counter() - t0)
    base = {k: v for k, v in base_meta.items() if k not in ("log", "corpus", "file", "bytes")}
    meta.update(
        {
            "train_config": base_meta["train_config"],
            "init": base_meta.get("init", "random"),
            "base": base,  # the likelihood-trained weights this fine-tune started from
            "unlikelihood_config": dataclasses.asdict(cfg),
        }
    )
    digest = weights.save(args.out, arrays, meta)
    summary = {k: v for k, v in meta.items() if k not in ("log", "corpus", "model_config", "base")}
    print(json.dumps({"out": str(args.out), "sha256": digest, **summary}))


if __name__ == "__main__":
    _main()
