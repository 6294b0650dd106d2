"""Transfer benchmark: Mooncake Store put/get of K3-size state objects, and transfer vs recompute.

1. Throughput (GB/s) of put and get for a Kimi K3 object per GPU at TP8 (bf16 KDA state
   [69, 12, 128, 128] + conv window [69, 3, 4608] as a safetensors object: 29.0 MB, ~27.7 MiB)
   through Mooncake Store (TCP on loopback, a standalone storage node holding the pool) and,
   side by side, the embedded store (a directory of files; the in-process dict keeps a
   reference, so its "throughput" only shows that nothing is copied).
2. Transfer vs recompute, side by side in one run:
   * tiny model, both measured: fetching + validating + restoring the object at boundary B
     (``Instance.serve`` from the store) vs prefilling the B tokens it saves (``TinyHybrid``);
   * Kimi K3: the measured Mooncake get time of one 29 MB object vs the modelled time to
     recompute the prefix it saves (``costmodel.prefill_flops`` / ``TimeModel``: 3.2 PFLOP/s
     per TP8 instance), at several boundaries.
   A ratio > 1 means recomputing is slower than fetching: the transfer pays off.

Loopback TCP on a shared 2-core machine is far from RDMA (Mooncake's README: 190 GB/s on
8 x 400 Gbps RoCE); the K3 row also shows the modelled RDMA fetch for scale.

The clients run where the services are reachable (a private loopback namespace when root:
``MooncakeServices.client_argv``), so the measuring part is a subprocess (``--inner``).

Run: ``OPENBLAS_NUM_THREADS=1 python bench/bench_transfer.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from safetensors.numpy import save as st_save  # noqa: E402

RDMA_PER_GPU = 190e9 / 8


def k3_object() -> bytes:
    """A K3 per-GPU (TP8) state object's bytes: bf16 bit patterns as uint16 (random)."""
    rng = np.random.default_rng(0)
    S = rng.integers(0, 1 << 16, (69, 12, 128, 128), dtype=np.uint16)
    conv = rng.integers(0, 1 << 16, (69, 3, 3 * 12 * 128), dtype=np.uint16)
    return st_save({"kda_state": S, "conv_window": conv}, metadata={"format": "k3-bench"})


def _throughput(store, blobs: list[bytes], tag: str) -> dict:
    t0 = time.perf_counter()
    for i, b in enumerate(blobs):
        store.put(f"{i:08x}{tag}", b)
    t_put = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i, b in enumerate(blobs):
        got = store.get(f"{i:08x}{tag}")
        assert got is not None and len(got) == len(b)
    t_get = time.perf_counter() - t0
    n = sum(map(len, blobs))
    return {
        "put_GBps": n / t_put / 1e9,
        "get_GBps": n / t_get / 1e9,
        "get_s_each": t_get / len(blobs),
    }


def tiny_transfer_vs_recompute(store, boundaries: list[int], reps: int) -> list[dict]:
    from kda_core.model import TinyHybrid
    from kda_core.serve.engine import Engine
    from kda_core.transfer.instance import Instance
    from kda_core.transfer.pd import handoff_policy

    model = TinyHybrid()
    rows = []
    for b in boundaries:
        ids = [(7 * i + 3) % 256 for i in range(b + 1)]
        pre = Instance("prefill", engine=Engine(model=model, policy=handoff_policy()), store=store)
        pre.publish(pre.engine.generate(ids, 1))
        t_fetch, t_pre = [], []
        for _ in range(reps):
            dec = Instance("decode", engine=Engine(model=model), store=store)
            t0 = time.perf_counter()
            lk = dec.lookup(ids)
            assert lk.source == "store" and lk.boundary == b
            o = lk.obj
            dec.engine.adopt_checkpoint(list(o.tokens), o.mla_kv, o.kda_state, o.conv_window)
            t_fetch.append(time.perf_counter() - t0)
            st = model.new_state()
            t0 = time.perf_counter()
            model.prefill(ids[:b], st, chunk_size=64)
            t_pre.append(time.perf_counter() - t0)
        rows.append({"boundary": b, "fetch_s": min(t_fetch), "recompute_s": min(t_pre)})
    return rows


def inner(master: str | None, quick: bool) -> dict:
    from kda_core.transfer.store import EmbeddedStore

    n_obj = 3 if quick else 8
    blob = k3_object()
    blobs = [blob] * n_obj
    out: dict = {"object_bytes": len(blob), "n_objects": n_obj, "stores": {}}
    stores = {"embedded (in-process)": EmbeddedStore()}  # a dict: put keeps a reference
    tmp = tempfile.TemporaryDirectory()
    stores["embedded (directory)"] = EmbeddedStore(tmp.name)
    if master:
        from kda_core.transfer.mooncake import MooncakeStore

        stores["mooncake (TCP loopback)"] = MooncakeStore(master, local_buffer_bytes=256 << 20)
    for name, s in stores.items():
        out["stores"][name] = _throughput(s, blobs, "b0")
    tiny_store = stores.get("mooncake (TCP loopback)", stores["embedded (in-process)"])
    reps = 1 if quick else 3
    out["tiny"] = tiny_transfer_vs_recompute(
        tiny_store, [128, 512] if quick else [128, 512, 2048], reps
    )
    out["tiny_store"] = getattr(tiny_store, "name", "?")
    for s in stores.values():
        if hasattr(s, "close"):
            s.close()
    tmp.cleanup()
    return out


def report(res: dict) -> None:
    from kda_core.sim import costmodel

    mb = res["object_bytes"] / 1e6
    print(f"== put/get of a Kimi K3 TP8 state object ({mb:.1f} MB), {res['n_objects']} objects")
    print(f"{'store':28s} {'put GB/s':>9s} {'get GB/s':>9s} {'get ms/object':>14s}")
    for name, r in res["stores"].items():
        print(f"{name:28s} {r['put_GBps']:9.2f} {r['get_GBps']:9.2f} {1e3 * r['get_s_each']:14.1f}")
    print(f"\n== tiny model: fetch + validate + restore vs recompute (store: {res['tiny_store']})")
    print(f"{'boundary':>9s} {'fetch ms':>9s} {'recompute ms':>13s} {'recompute/fetch':>16s}")
    for r in res["tiny"]:
        ratio = r["recompute_s"] / r["fetch_s"]
        print(
            f"{r['boundary']:9d} {1e3 * r['fetch_s']:9.2f} {1e3 * r['recompute_s']:13.2f}"
            f" {ratio:15.1f}x"
        )
    name = (
        "mooncake (TCP loopback)"
        if "mooncake (TCP loopback)" in res["stores"]
        else "embedded (in-process)"
    )
    get_s = res["stores"][name]["get_s_each"]
    spec = costmodel.cost_spec("kimi-k3")
    tm = costmodel.TimeModel()
    rdma_s = res["object_bytes"] / RDMA_PER_GPU
    print(
        f"\n== Kimi K3 TP8: fetch one object ({name}: {1e3 * get_s:.1f} ms measured; "
        f"RDMA 23.75 GB/s/GPU: {1e3 * rdma_s:.2f} ms) vs recompute the prefix (3.2 PFLOP/s)"
    )
    print(
        f"{'prefix tokens':>13s} {'recompute ms':>13s} {'/ measured fetch':>17s}"
        f" {'/ RDMA fetch':>13s}"
    )
    for b in (512, 2048, 8192, 32768):
        rec = float(tm.seconds(costmodel.prefill_flops(spec, 0, b)))
        print(f"{b:13d} {1e3 * rec:13.2f} {rec / get_s:16.2f}x {rec / rdma_s:12.1f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-mooncake", action="store_true")
    a = ap.parse_args(argv)
    if a.inner is not None:
        print(json.dumps(inner(a.inner or None, a.quick)))
        return 0
    from kda_core.transfer.mooncake import MooncakeServices, mooncake_available

    ok, why = mooncake_available()
    if a.no_mooncake or not ok:
        if not a.no_mooncake:
            print(f"(Mooncake unavailable: {why}; embedded stores only)")
        report(inner(None, a.quick))
        return 0
    with MooncakeServices(segment_bytes=1 << 30) as svc:
        argv2 = [sys.executable, str(Path(__file__).resolve()), "--inner", svc.master_address]
        argv2 += ["--quick"] if a.quick else []
        r = subprocess.run(
            svc.client_argv(argv2),
            env=svc.client_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        where = "in a private loopback network namespace" if svc.isolated else "unisolated"
        print(f"(Mooncake master {svc.master_address}, storage node 1 GiB, {where})")
        report(json.loads(r.stdout.strip().splitlines()[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
