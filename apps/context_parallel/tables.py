"""context_parallel's summary in the language of ``t``: the run's errors and the bytes sent
against an MLA KV all-gather."""

from __future__ import annotations

from kda_core.studies import context_parallel as cps
from words.catalog import T


def summary_markdown(d: cps.Demo, seed: int, t: T) -> str:
    n = d.cu_seqlens.size - 1
    docs = t("docs_1") if n == 1 else t("docs_n", n=n)
    worst, sent = float(d.o_rel.max()), int(d.bytes_sent.max())
    return t(
        "s_run",
        P=d.P,
        T=d.T,
        seed=seed,
        docs=docs,
        worst=worst,
        final=d.S_final_rel,
        sent=sent,
        k3=d.k3_scan_bytes[d.scan],  # like with like: both at K3 scale
        kv=d.kv_bytes,
    )
