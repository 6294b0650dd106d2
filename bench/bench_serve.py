"""Serving benchmark: batched vs one at a time, varlen prefill vs one long sequence, bookkeeping.

1. Serving (TinyHybrid, float64): 32 requests of 16 distinct random prompt tokens and 64 new
   tokens. One at a time = ``Engine.generate`` per request (``serve`` of one request, with its
   trace); batched = one ``Engine().serve`` of all 32 arriving at step 0, with the defaults
   (one shared state pool of ``DEFAULT_STATE_SLOTS``: all 32 run at once).
   Tokens/s = (prompt + generated tokens) / CPU seconds. A round times one run one at a
   time (~3-5 s) and, over about as long a window, 8 batched runs (~0.6 s each, their mean); the
   ratio is the median over rounds (3 with --quick, 5 without) of each round's ratio.
   Target: batched >= 8x.
2. Varlen prefill: 32 sequences totalling 8192 tokens (equal and ragged lengths) in one
   ``varlen.chunked_varlen`` call vs one 8192-token ``kda.chunked`` (H = 4, K = V = 32, the
   model's sizes, and H = 8, K = V = 128), and the whole model (``model.batch.forward_batch``
   vs ``TinyHybrid.forward``). Target: varlen >= 0.8x the single sequence's tokens/s. A round
   times every variant next to the single sequence (the best of ``repeat`` calls each, the
   two in alternating order from round to round); the ratio is the median over rounds (5 with
   --quick, 7 without) of each round's pair. (Timing the single sequence once ahead of all four
   variants reads the ragged rows low: the ragged call comes three calls after it.)
3. Scheduler bookkeeping: the batched serve's time outside the model pass (scheduling,
   admission, binding states to slots, checkpoints, step rows) over its total, at 32 running,
   in CPU seconds (``ServeReport.seconds`` / ``runner_seconds``), the median over every batched
   run (the fastest run's would flatter it). Target: <= 10 %.

Times are CPU seconds (``time.process_time``). Ratios are paired: each round compares runs
made next to each other, so a load change hits both sides of its ratio, and the median round
is the estimate (the VM's cores swing by a third within seconds; the best and worst rounds
are printed beside it). Dividing each side's best run over two rounds instead lets one lucky
run of either side move the ratio by 10 % or more (one run read 7.1x that way where its median
round was 8.2x).
Exit status 1 if a target is missed.

Run: ``OPENBLAS_NUM_THREADS=1 python -m bench.bench_serve [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from kda_core import kda  # noqa: E402
from kda_core.kda import varlen  # noqa: E402
from kda_core.model import TinyHybrid  # noqa: E402
from kda_core.model.batch import forward_batch  # noqa: E402
from kda_core.serve.engine import Engine, Request  # noqa: E402


def best(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return min(out)


def next_to_each_other(first, second, repeat: int, flip: bool) -> tuple[float, float]:
    """(first's time, second's time), each the best of ``repeat`` calls, timed one right after
    the other (second first if ``flip``), so that a load change hits both alike."""
    if flip:
        t2 = best(second, repeat)
        return best(first, repeat), t2
    t1 = best(first, repeat)
    return t1, best(second, repeat)


def serving(model: TinyHybrid, n: int, prompt_len: int, new: int, rounds: int) -> dict:
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(0, 256, prompt_len)] for _ in range(n)]
    tokens = n * (prompt_len + new)

    def one_at_a_time() -> None:
        e = Engine(model=model)
        for p in prompts:
            e.generate(p, new)

    rep = {}

    def batched() -> None:
        e = Engine(model=model)  # the defaults
        rep["r"] = e.serve([Request(p, new) for p in prompts])

    # paired rounds: one run one at a time, then batched runs over about as long a window (the
    # mean of 8), so a load change hits both sides of a round's ratio alike
    ratios, t1s, tbs, shares = [], [], [], []
    for _ in range(rounds):
        t1 = best(one_at_a_time, 1)
        runs = []
        for _ in range(8):
            runs.append(best(batched, 1))
            r = rep["r"]  # each batched run's bookkeeping share (the median is reported)
            shares.append(
                ((r.seconds - r.runner_seconds) / r.seconds, r.scheduler_seconds / r.seconds)
            )
        ratios.append(t1 / np.mean(runs))
        t1s.append(t1)
        tbs.append(float(np.mean(runs)))
    return {
        "seq_tps": tokens / np.median(t1s),
        "batch_tps": tokens / np.median(tbs),
        "ratio": float(np.median(ratios)),
        "range": (min(ratios), max(ratios)),
        "peak": r.peak_running,
        "bookkeeping": float(np.median([b for b, _ in shares])),
        "scheduler": float(np.median([c for _, c in shares])),
    }


def kda_inputs(rng, T: int, H: int, K: int):
    q = kda.l2norm(rng.standard_normal((T, H, K)))
    k = kda.l2norm(rng.standard_normal((T, H, K)))
    v = rng.standard_normal((T, H, K))
    g = kda.lowerbound_gate(rng.standard_normal((T, H, K)), np.zeros(H * K))
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((T, H))))
    return q, k, v, g, beta


def varlen_prefill(T: int, n: int, H: int, K: int, repeat: int, rounds: int) -> dict:
    """Speed of varlen over the single sequence (and of the per-sequence loop, for scale)."""
    rng = np.random.default_rng(1)
    q, k, v, g, beta = kda_inputs(rng, T, H, K)
    cuts = np.sort(rng.choice(np.arange(1, T), n - 1, replace=False))
    layouts = {"equal": np.arange(n + 1) * (T // n), "ragged": np.concatenate([[0], cuts, [T]])}
    S0 = rng.standard_normal((n, H, K, K)) * 0.1
    ratios: dict[str, list[float]] = {}
    for r in range(rounds):
        for name, cu in layouts.items():
            for fn, tag in ((varlen.chunked_varlen, ""), (varlen.chunked_varlen_naive, "_loop")):
                one, t = next_to_each_other(
                    lambda: kda.chunked(q, k, v, g, beta),
                    lambda fn=fn, cu=cu: fn(q, k, v, g, beta, cu, initial_states=S0),
                    repeat,
                    flip=r % 2 == 1,
                )
                ratios.setdefault(name + tag, []).append(one / t)
    return {key: float(np.median(val)) for key, val in ratios.items()} | {
        key + "_range": (min(val), max(val)) for key, val in ratios.items()
    }


def model_prefill(model: TinyHybrid, T: int, n: int, repeat: int) -> float:
    rng = np.random.default_rng(2)
    ids = [int(t) for t in rng.integers(0, 256, T)]
    per = T // n
    seqs = [ids[i * per : (i + 1) * per] for i in range(n)]
    t_one = best(lambda: model.forward(ids, model.new_state()), repeat)
    t_b = best(lambda: forward_batch(model, seqs, [model.new_state() for _ in seqs]), repeat)
    return t_one / t_b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and rounds")
    args = ap.parse_args(argv)
    rep = 1 if args.quick else 3
    model = TinyHybrid()
    ok = True
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} (a shared machine: compare ratios within one run)")
    print("== serving: 32 requests x (16 prompt + 64 new tokens)")
    s = serving(model, 32, 16, 64, 3 if args.quick else 5)
    print(
        f"tok/s (medians over rounds): one at a time {s['seq_tps']:6.0f} | batched "
        f"{s['batch_tps']:6.0f} | "
        f"ratio {s['ratio']:.2f}x (target >= 8x; rounds {s['range'][0]:.2f}x-"
        f"{s['range'][1]:.2f}x) | peak running {s['peak']}"
    )
    ok &= s["ratio"] >= 8
    print(
        f"bookkeeping {100 * s['bookkeeping']:.1f}% of the batched serve (target <= 10%), "
        f"of which the scheduler's schedule() {100 * s['scheduler']:.1f}%"
    )
    ok &= s["bookkeeping"] <= 0.10
    print("== varlen prefill: n sequences, 8192 tokens in all, vs one 8192-token sequence")
    for n, H, K in ((32, 4, 32), (32, 8, 128), (256, 4, 32)):
        v = varlen_prefill(8192, n, H, K, rep, 5 if args.quick else 7)
        span = {x: "-".join(f"{r:.2f}" for r in v[x + "_range"]) for x in ("equal", "ragged")}
        print(
            f"n={n:3d} H={H} K=V={K:3d}: equal lengths {v['equal']:.2f}x (rounds "
            f"{span['equal']}), ragged {v['ragged']:.2f}x ({span['ragged']}) the single "
            f"sequence's tokens/s (target >= 0.8x; per-sequence loop {v['equal_loop']:.2f}x / "
            f"{v['ragged_loop']:.2f}x)"
        )
        if n == 32:
            ok &= min(v["equal"], v["ragged"]) >= 0.8
    m = model_prefill(model, 8192, 32, rep)
    print(
        f"whole model, 32 x 256 tokens (forward_batch) vs one 8192 (forward): {m:.2f}x "
        f"(MLA attention is quadratic in the sequence: no target)"
    )
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
