"""Cache benchmark: the real engine with the cache on vs off, plus the radix-tree costs.

1. Engine (TinyHybrid, float64, one request at a time): a prefix-heavy stream - 8 system
   prompts of ~200 tokens (tools, instructions), each request one of them plus a short user
   turn (~20 tokens), some multi-turn follow-ups - served with the cache off and on (several
   policies, native and INT8 checkpoints). Tokens/s = (prompt + generated tokens) / CPU
   seconds; speed-up vs cache off; the fraction of prompt tokens restored (not prefilled);
   tokens actually computed; max |logit - uncached logit| (0 up to rounding unless INT8).
2. Radix tree (from bench/bench_radix.py): match + insert cost at L and 2L (linear: ~2) and
   requests/s for 2k-token requests with a 50% shared prefix at page sizes 1 and 64.

Times are CPU seconds (``time.process_time``): the machine is shared. Set
OPENBLAS_NUM_THREADS=1 (the tiny model's matmuls are faster single-threaded).

Exit status 1 if any cache-on configuration is not faster than the cache off (speed-up <= 1)
on the engine stream: the cache must pay for itself.

Run: ``OPENBLAS_NUM_THREADS=1 python -m bench.bench_cache [--quick] [--engine-only]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from kda_core.cache import policy as P  # noqa: E402
from kda_core.model import TinyHybrid, encode  # noqa: E402
from kda_core.serve.engine import Engine  # noqa: E402

TOOLS = (
    "weather(city)",
    "calc(expr)",
    "search(query)",
    "translate(text, lang)",
    "calendar(date)",
    "email(to, body)",
    "maps(from, to)",
    "stocks(ticker)",
)
QUESTIONS = (
    "What's the weather in Paris?",
    "Compute 17*23.",
    "Find papers on KDA.",
    "把这句话翻译成英文。",
    "Am I free on Friday?",
    "Email Bob the notes.",
    "Route to the station?",
    "How is MSFT doing?",
)


def prefix_heavy_stream(n: int, seed: int = 0) -> list[tuple[list[int], int]]:
    """(prompt ids, max_new_tokens): shared ~200-token system prompts + short user turns."""
    rng = np.random.default_rng(seed)
    systems = [
        f"System {i}: You are assistant #{i}. Be brief and exact. Use tools when needed.\n"
        f"Tools: {', '.join(TOOLS[i:] + TOOLS[:i])}.\n"
        "Rules: never invent facts; cite the tool output; answer in the user's language.\n"
        for i in range(8)
    ]
    out: list[tuple[list[int], int]] = []
    last: list[str] = []
    for _ in range(n):
        if last and rng.random() < 0.3:  # follow-up turn of a recent conversation
            base = last[int(rng.integers(len(last)))]
            text = base + " OK.\nUser: " + QUESTIONS[int(rng.integers(8))] + "\nAssistant:"
            if len(encode(text)) > 400:
                text = base
        else:
            text = (
                systems[int(rng.integers(8))]
                + "User: "
                + QUESTIONS[int(rng.integers(8))]
                + "\nAssistant:"
            )
        last = (last + [text])[-8:]
        out.append((encode(text), 4))
    return out


def serve(engine: Engine, stream: list[tuple[list[int], int]]) -> tuple[float, list]:
    t0 = time.process_time()
    reps = [engine.generate(ids, n) for ids, n in stream]
    return time.process_time() - t0, reps


def bench_engine(n: int) -> list[tuple[str, float]]:
    """Serve the stream under every config; returns (config, speed-up vs cache off) for the
    cache-on configs."""
    model = TinyHybrid()
    stream = prefix_heavy_stream(n)
    n_prompt = sum(len(ids) for ids, _ in stream)
    n_tokens = n_prompt + sum(k for _, k in stream)
    configs = [
        ("cache off", dict(cache=False)),
        ("sglang grid16 (default)", dict()),
        ("interval 32", dict(policy=P.make("interval", every=32))),
        ("interval 32, INT8", dict(policy=P.make("interval", every=32), int8_checkpoints=True)),
        ("marconi", dict(policy=P.make("marconi"))),
        ("vllm all, block 16", dict(policy=P.make("vllm", mode="all", block_size=16))),
        ("sglang, 8 ckpt slots", dict(checkpoint_slots=8)),
    ]
    print(f"1. engine: {n} requests, {n_prompt} prompt tokens, prefix-heavy stream")
    head = (
        f"{'config':<26}{'CPU s':>7}{'tok/s':>8}{'speed-up':>9}{'restored':>9}"
        f"{'computed':>9}{'hits':>6}{'copies':>7}{'donated':>8}{'evicted':>8}{'max|dlogit|':>12}"
        f"{'same tok':>9}"
    )
    print(head)
    base_t = None
    base_logits = None
    base_tokens = None
    speedups: list[tuple[str, float]] = []
    for name, kw in configs:
        eng = Engine(model=model, **kw)
        dt, reps = serve(eng, stream)
        if base_t is None:
            base_t, base_logits = dt, [r.logits for r in reps]
            base_tokens = [r.tokens for r in reps]
        diff = max(float(np.max(np.abs(r.logits - b))) for r, b in zip(reps, base_logits))
        same = np.mean([r.tokens == b for r, b in zip(reps, base_tokens)])
        st = eng.stats()
        computed = (st.replayed_tokens + st.prefilled_tokens) / n_prompt if eng.cache_on else 1.0
        print(
            f"{name:<26}{dt:>7.2f}{n_tokens / dt:>8.0f}{base_t / dt:>8.2f}x"
            f"{st.prefill_saved_fraction:>9.3f}{computed:>9.3f}{st.state_hits:>6}"
            f"{st.copies:>7}{st.donations:>8}{st.evicted_states:>8}{diff:>12.2e}{same:>9.3f}"
        )
        if eng.cache_on:
            eng.check_integrity()
            speedups.append((name, base_t / dt))
    return speedups


def bench_radix(quick: bool) -> None:
    from bench.bench_radix import linear_cost, throughput

    reps = 3 if quick else 5
    print("\n2. radix tree: match + insert vs prompt length (page 1, ckpt every 64)")
    print(f"   median of {reps}")
    print(f"{'L':>8}{'t(L) ms':>10}{'t(2L) ms':>10}{'t(2L)/t(L)':>12}")
    for L in (8192, 65536):
        a = linear_cost(L, 64, reps)
        b = linear_cost(2 * L, 64, reps)
        print(f"{L:>8}{a * 1e3:>10.2f}{b * 1e3:>10.2f}{b / a:>12.2f}")
    n_req = 2000 if quick else 10000
    print(f"   {n_req} requests x 2k tokens, 50% shared prefix (sglang placement)")
    print(f"{'page':>8}{'req/s':>10}{'restored':>10}")
    for page in (1, 64):
        rps, info = throughput(page, n_req)
        print(f"{page:>8}{rps:>10.0f}{info['restored_frac']:>10.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests")
    ap.add_argument("--engine-only", action="store_true", help="skip the radix part")
    ap.add_argument("--requests", type=int, default=None, help="engine stream length")
    args = ap.parse_args()
    n = args.requests or (60 if args.quick else 200)
    if not 1 <= n <= 5000:
        raise ValueError(f"--requests must be in [1, 5000], got {n}")
    speedups = bench_engine(n)
    slow = [(name, x) for name, x in speedups if not x > 1.0]
    if not args.engine_only:
        bench_radix(args.quick)
    if slow:
        for name, x in slow:
            print(f"FAIL: {name} is not faster than the cache off ({x:.2f}x)", file=sys.stderr)
        sys.exit(1)
    worst = min(x for _, x in speedups)
    print(f"OK: every cache config is faster than the cache off (min {worst:.2f}x)")


if __name__ == "__main__":
    main()
