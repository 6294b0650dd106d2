"""KDA throughput, side by side in one run: chunked vs the per-token loop vs fla's torch references.

    python bench/bench_kda.py [--T 4096] [--H 8] [--K 128] [--repeat 3]

Prints a table of median wall seconds, median CPU seconds (time.process_time, all threads of
this process), tokens/s and wall-time ratios, and the fraction of this machine's numpy GEMM peak
(same dtype) that `chunked` reaches (its matmul FLOPs / wall time / measured GEMM FLOP/s).
Targets: chunked float32 >= 3x the per-token loop, >= 2.5x fla's naive_recurrent_kda, and
>= 35% of the 2-thread GEMM peak at T = 4096, H = 8, K = V = 128, float32. `chunked` splits
large inputs' heads over every available core (KDA_THREADS to choose); the "1 thread" row
forces KDA_THREADS=1.
``--quick`` skips the slow rows (per-token loop, fla) and float64; ``--rounds N`` repeats the
peak / chunked pair N times in this run (the machine is shared: compare the ratios, and look
at their spread).

BLAS threads matter: `chunked` makes thousands of 64..128-sized GEMM calls and keeps each below
OpenBLAS's threading threshold (a threaded small product costs more than it gains, and its
waiting workers burn CPU); ``--quick`` prints the OpenBLAS workers' CPU per call, 0 when that
holds. The header says which OPENBLAS_NUM_THREADS a run used.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from pathlib import Path

import numpy as np

from kda_core import kda
from kda_core.kda import kda_threads

TARGET_FRACTION = 0.35  # of the 2-thread GEMM peak, T = 4096, H = 8, K = V = 128, float32


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median (wall seconds, CPU seconds) of `repeat` calls after one warm-up call."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def gemm_peak(dtype, n: int = 2048, repeat: int = 3) -> float:
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    return 2 * n**3 / timed(lambda: a @ a, repeat)[0]


def _task_cpu_ticks() -> dict[int, int]:
    """CPU clock ticks (user + system) per thread of this process, from /proc (Linux)."""
    ticks = {}
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        ticks[int(task.name)] = int(fields[11]) + int(fields[12])
    return ticks


def foreign_cpu(fn, repeat: int = 3) -> float | None:
    """CPU seconds that threads other than the caller and `chunked`'s own pool spent while
    ``fn`` ran ``repeat`` times: OpenBLAS's workers, busy only if some product went
    multi-threaded (it then costs more than it gains; see docs/kda.md). None without /proc."""
    if not Path("/proc/self/task").exists():
        return None
    import threading

    fn()
    before = _task_cpu_ticks()
    for _ in range(repeat):
        fn()
    after = _task_cpu_ticks()
    ours = {threading.get_native_id()} | {
        t.native_id for t in threading.enumerate() if t.name.startswith("kda-chunked")
    }
    ticks = sum(after[t] - before.get(t, 0) for t in after if t not in ours)
    return ticks / os.sysconf("SC_CLK_TCK") / repeat


def load_fla_naive():
    spec = importlib.util.find_spec("fla")
    if spec is None or importlib.util.find_spec("torch") is None:
        return None
    path = Path(spec.origin).parent / "ops" / "kda" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


def inputs(T: int, H: int, K: int, dtype):
    rng = np.random.default_rng(0)
    q = kda.l2norm(rng.random((T, H, K)))
    k = kda.l2norm(rng.random((T, H, K)))
    v = rng.standard_normal((T, H, K))
    g = kda.lowerbound_gate(rng.standard_normal((T, H, K)), np.full(H * K, -4.0), -5.0)
    beta = 1 / (1 + np.exp(-rng.standard_normal((T, H))))
    return [x.astype(dtype) for x in (q, k, v, g, beta)]


def one_thread(fn):
    """``fn`` with KDA_THREADS=1 (chunked reads it per call)."""

    def run():
        old = os.environ.get("KDA_THREADS")
        os.environ["KDA_THREADS"] = "1"
        try:
            return fn()
        finally:
            if old is None:
                del os.environ["KDA_THREADS"]
            else:
                os.environ["KDA_THREADS"] = old

    return run


def bench_dtype(dtype, T: int, H: int, K: int, repeat: int, fla, quick: bool = False):
    q, k, v, g, beta = inputs(T, H, K, dtype)
    rows = {
        "chunked (numpy, C=64)": timed(lambda: kda.chunked(q, k, v, g, beta), repeat),
        "chunked (C=64, 1 thread)": timed(
            one_thread(lambda: kda.chunked(q, k, v, g, beta)), repeat
        ),
    }
    if quick:
        return rows
    rows |= {
        "chunked (numpy, C=16)": timed(
            lambda: kda.chunked(q, k, v, g, beta, chunk_size=16), repeat
        ),
        "recurrent loop (numpy)": timed(lambda: kda.recurrent(q, k, v, g, beta), 1),
    }
    if fla is not None:
        import torch

        tq, tk, tv, tg, tb = (torch.from_numpy(x)[None] for x in (q, k, v, g, beta))
        rows["fla naive_recurrent_kda"] = timed(
            lambda: fla.naive_recurrent_kda(tq, tk, tv, tg, tb), 1
        )
        rows["fla naive_chunk_kda"] = timed(lambda: fla.naive_chunk_kda(tq, tk, tv, tg, tb), 1)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=4096)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="float32 chunked rows only")
    ap.add_argument("--rounds", type=int, default=1, help="peak / chunked pairs (--quick)")
    args = ap.parse_args()
    T, H, K = args.T, args.H, args.K
    fla = load_fla_naive()
    threads = os.environ.get("OPENBLAS_NUM_THREADS", f"unset (all {os.cpu_count()} cores)")
    print(
        f"KDA forward, T={T} H={H} K=V={K}; median of {args.repeat}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"OPENBLAS_NUM_THREADS={threads}; KDA_THREADS -> {kda_threads()} thread(s)")
    if args.quick:
        quick_rounds(T, H, K, args.repeat, args.rounds)
        return
    print(f"{'dtype':8} {'impl':28} {'wall s':>9} {'cpu s':>9} {'tok/s':>10} {'chunked is':>11}")
    for dtype in (np.float32, np.float64):
        rows = bench_dtype(dtype, T, H, K, args.repeat, fla)
        base = rows["chunked (numpy, C=64)"][0]
        name = np.dtype(dtype).name
        for impl, (sec, cpu) in rows.items():
            print(f"{name:8} {impl:28} {sec:9.3f} {cpu:9.3f} {T / sec:10.0f} {sec / base:10.2f}x")
        peak = gemm_peak(dtype)
        frac = kda.chunked_flops(T, H, K, K) / base / peak
        print(f"{name:8} GEMM peak {peak / 1e9:.1f} GFLOP/s; chunked reaches {100 * frac:.1f}%")
    if fla is None:
        print("(fla-core/torch not installed: fla rows skipped)")


def quick_rounds(T: int, H: int, K: int, repeat: int, rounds: int) -> None:
    """float32 only: per round chunked (threads), chunked (1 thread), then the GEMM peak."""
    q, k, v, g, beta = inputs(T, H, K, np.float32)
    flops = kda.chunked_flops(T, H, K, K)
    fracs = []
    for r in range(rounds):
        # chunked before the peak: OpenBLAS's own threads spin for a while after a big GEMM
        wall, cpu = timed(lambda: kda.chunked(q, k, v, g, beta), repeat)
        wall1, _ = timed(one_thread(lambda: kda.chunked(q, k, v, g, beta)), repeat)
        peak = gemm_peak(np.float32)
        time.sleep(0.5)  # ... and the next round's chunked must not run beside that spinning
        fracs.append(flops / wall / peak)
        print(
            f"round {r + 1}: GEMM peak {peak / 1e9:6.1f} GFLOP/s; chunked {wall:.3f} s "
            f"(cpu {cpu:.3f} s) = {100 * fracs[-1]:.1f}% of peak; 1 thread {wall1:.3f} s "
            f"= {100 * flops / wall1 / peak:.1f}%; load {os.getloadavg()[0]:.1f}"
        )
    spent = foreign_cpu(lambda: kda.chunked(q, k, v, g, beta))
    if spent is not None:
        print(
            f"OpenBLAS worker CPU per chunked call: {1000 * spent:.0f} ms (0 unless a product "
            "went multi-threaded)"
        )
    if rounds > 1:
        print(
            f"chunked float32: {100 * min(fracs):.1f}% .. {100 * max(fracs):.1f}% of the "
            f"GEMM peak, median {100 * statistics.median(fracs):.1f}% "
            f"(target: >= {100 * TARGET_FRACTION:.0f}%)"
        )


if __name__ == "__main__":
    main()
