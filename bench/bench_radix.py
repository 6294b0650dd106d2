"""Radix cache benchmark (the radix part of bench_cache): linear cost and request throughput.

1. match + insert cost against prompt length at page size 1: a cache holding one prompt of
   L tokens (checkpoints every 64 tokens, or only at its end) serves a prompt that shares the
   first half and diverges; time(2L) / time(L) at L = 8k and 64k (linear means ~2).
2. requests/s for 10k requests of 2k tokens with a 50% shared prefix (16 system prompts of
   1k tokens + 1k unique tokens) at page sizes 1 and 64: match, SGLang placement, insert,
   then eviction to a budget (4096 states, 4M KV tokens).
3. the bundled Mooncake conversation trace (12,031 requests, block keys, page 512): one full
   pass per policy (match, placement, insert, evict to a 2000-state budget), GC on / off.

Times are CPU seconds (``time.process_time``): the machine is shared.

Run: ``python -m bench.bench_radix [--quick]``. Prints one table with ratios side by side.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import numpy as np

from kda_core.cache import policy as P
from kda_core.cache.radix import RadixStateCache


def _median_time(fn, reps: int) -> float:
    """Median CPU seconds of ``reps`` calls, GC off during each call (as ``timeit`` does)."""
    times = []
    for _ in range(reps):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
        finally:
            gc.enable()
    return statistics.median(times)


def linear_cost(L: int, every: int | None, reps: int) -> float:
    """Median seconds for match + insert of a 2nd prompt sharing L/2 tokens with a cached one."""
    rng = np.random.default_rng(L)
    base = rng.integers(0, 1 << 20, L).tolist()
    q = base[: L // 2] + rng.integers(1 << 20, 1 << 21, L - L // 2).tolist()
    pos_base = list(range(every, L + 1, every)) if every else [L]
    if pos_base[-1] != L:
        pos_base.append(L)
    caches = []
    for _ in range(reps):
        c = RadixStateCache(page_size=1)
        c.insert_prefix(base, states=[(p, None, 1) for p in pos_base])
        caches.append(c)
    it = iter(caches)

    def run() -> None:
        c = next(it)
        m = c.match_prefix(q)
        pos = [p for p in range(every or L, L + 1, every or L) if p > m.restore_at] or [L]
        if pos[-1] != L:
            pos.append(L)
        c.insert_prefix(q, states=[(p, None, 1) for p in pos])

    return _median_time(run, reps)


def throughput(page: int, n_req: int, seed: int = 0) -> tuple[float, dict]:
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, 50000, 1024).tolist() for _ in range(16)]
    pol = P.make("sglang")
    cache = RadixStateCache(page, **pol.cache_options())
    groups = rng.integers(0, 16, n_req)
    uniq = rng.integers(0, 50000, (n_req, 1024))
    hits = 0
    t0 = time.process_time()
    for i in range(n_req):
        prompt = systems[groups[i]] + uniq[i].tolist()
        m = cache.match_prefix(prompt)
        hits += m.restore_at
        pos = pol.checkpoint_positions(len(prompt), m, page_size=page)
        cache.insert_prefix(prompt, states=[(p, None, 1) for p in pos])
        if cache.n_states > 4096:
            cache.evict(states=cache.n_states - 4096)
        if cache.kv_tokens > 4_000_000:
            cache.evict(cache.kv_tokens - 4_000_000)
    dt = time.process_time() - t0
    cache.check_integrity()
    st = cache.stats()
    info = {
        "restored_frac": hits / (n_req * 2048),
        "states": st.states,
        "evicted_states": st.evicted_states,
        "nodes": st.nodes,
    }
    return n_req / dt, info


TRACE = Path(__file__).resolve().parent.parent / "assets" / "traces"
TRACE = TRACE / "mooncake_conversation_trace.jsonl"


def load_trace(path: Path = TRACE) -> list[tuple[list[int], int]]:
    """(hash_ids, input_length) per request of a Mooncake JSONL trace."""
    with open(path, encoding="utf-8") as f:
        return [(r["hash_ids"], r["input_length"]) for r in map(json.loads, f)]


def trace_pass(
    reqs: list[tuple[list[int], int]], policy: str, budget: int | None, gc_off: bool
) -> tuple[float, float, int]:
    """One full pass: match, placement, insert, evict to ``budget`` states.
    Returns (CPU seconds, state hit rate, checkpoints inserted)."""
    pol = P.make("interval", every=4096) if policy == "interval" else P.make(policy)
    cache = RadixStateCache(512, block_keys=True, **pol.cache_options())
    restored = total = 0
    if gc_off:
        gc.disable()
    try:
        t0 = time.process_time()
        for key, n in reqs:
            m = cache.match_prefix(key)
            restored += min(m.restore_at, n)
            total += n
            pos = pol.checkpoint_positions(n, m, page_size=512)
            if pos:
                cache.insert_prefix(key, states=[(p, None, 1) for p in pos])
            if budget is not None and cache.n_states > budget:
                cache.evict(states=cache.n_states - budget)
        dt = time.process_time() - t0
    finally:
        gc.enable()
    cache.check_integrity()
    return dt, restored / total, cache.stats().states_inserted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests and repetitions")
    args = ap.parse_args()
    reps = 3 if args.quick else 7
    n_req = 2000 if args.quick else 10000

    print("1. match + insert vs prompt length (page 1), median of", reps)
    print(f"{'checkpoints':<14}{'L':>8}{'t(L) ms':>10}{'t(2L) ms':>10}{'t(2L)/t(L)':>12}")
    for every, label in ((64, "every 64"), (None, "end only")):
        for L in (8192, 65536):
            a = linear_cost(L, every, reps)
            b = linear_cost(2 * L, every, reps)
            print(f"{label:<14}{L:>8}{a * 1e3:>10.2f}{b * 1e3:>10.2f}{b / a:>12.2f}")

    print(f"\n2. {n_req} requests x 2k tokens, 50% shared prefix (sglang placement)")
    print(f"{'page':>6}{'req/s':>10}{'tokens/s':>12}{'restored':>10}{'states':>8}{'evicted':>9}")
    rates = {}
    for page in (1, 64):
        rps, info = throughput(page, n_req)
        rates[page] = rps
        print(
            f"{page:>6}{rps:>10.0f}{rps * 2048:>12.3g}{info['restored_frac']:>10.3f}"
            f"{info['states']:>8}{info['evicted_states']:>9}"
        )
    print(f"page 64 / page 1 throughput: {rates[64] / rates[1]:.2f}x")

    if not TRACE.is_file():
        print(f"\n3. skipped: {TRACE} not found")
        return
    reqs = load_trace()
    if args.quick:
        reqs = reqs[:3000]
    print(f"\n3. Mooncake conversation trace, {len(reqs)} requests, block keys (page 512)")
    print("   one full pass, CPU seconds with the cyclic GC on / off")
    print(
        f"{'policy':<10}{'budget':>8}{'gc on s':>9}{'gc off s':>10}{'on/off':>8}"
        f"{'req/s':>8}{'hit':>7}{'inserted':>10}"
    )
    for name in ("interval", "sglang", "marconi", "vllm"):
        for budget in (None, 2000):
            on, hit, ins = trace_pass(reqs, name, budget, gc_off=False)
            off, _, _ = trace_pass(reqs, name, budget, gc_off=True)
            print(
                f"{name:<10}{str(budget):>8}{on:>9.2f}{off:>10.2f}{on / off:>8.2f}"
                f"{len(reqs) / on:>8.0f}{hit:>7.3f}{ins:>10}"
            )


if __name__ == "__main__":
    main()
