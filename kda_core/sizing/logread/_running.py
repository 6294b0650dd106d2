"""Requested vs effective ``max_running_requests`` and held vs reserved slots, from a SGLang log.

SGLang 0.5.23 ``KVCacheConfigurator.resolve_max_num_reqs`` (``mem_cache/kv_cache_configurator
.py``): the requested ``--max-running-requests`` (else the request-pool estimate, tokens /
context x 512 in [2048, 4096]) under the KV tokens // 2, then under the state cache's
``max_mamba_cache_size // slots per request`` (the capping warning; the KV bound has its own
"was reduced from the requested" warning). The CUDA graphs are not a bound: their batch sizes
are clamped to the request pool (``model_executor/runner/base_cuda_graph_runner.py``
``get_batch_sizes_to_capture``). Held slots are the per-batch ``mamba num`` (``PoolStatsObserver``:
pool size - available - evictable, so live states, track slots and locked prefix states) over
``#running-req``.
"""

from __future__ import annotations

from statistics import median

from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.logread._report import Reason
from kda_core.sizing.slots import request_pool_estimate, request_slots

_OPTIONS: tuple[tuple[str, bool, bool], ...] = (
    ("extra_buffer", True, False),
    ("extra_buffer", True, True),
    ("extra_buffer", False, False),
    ("extra_buffer", False, True),
    ("extra_buffer_lazy", True, False),
    ("extra_buffer_lazy", True, True),
    ("no_buffer", True, False),
    ("radix_off", True, False),
)
"""(strategy, overlap, skip decode lock) sets whose reservations differ (no_buffer and the
radix cache off reserve the same with or without the other two)."""


def _label(strategy: str, overlap: bool, skip: bool) -> str:
    out = "--disable-radix-cache" if strategy == "radix_off" else strategy
    if not overlap:
        out += " --disable-overlap-schedule"
    if skip:
        out += " SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1"
    return out


def configs_reserving(n: int) -> str:
    """The strategies and flags that reserve ``n`` slots per request (SGLang's
    ``_calculate_mamba_ratio``, ``slots.request_slots``), named with their flags."""
    names = [_label(*o) for o in _OPTIONS if request_slots(*o).reserved == n]
    return " / ".join(names) or "none"


def _bounds(flags: dict[str, object]) -> dict[str, int]:
    out: dict[str, int] = {}
    req, tokens, ctx = flags["requested_running"], flags.get("kv_tokens"), flags.get("context_len")
    if isinstance(req, int):
        out["cli"] = req
    elif isinstance(tokens, int) and isinstance(ctx, int):
        out["pool"] = request_pool_estimate(tokens, ctx)
    if isinstance(tokens, int):
        out["kv"] = tokens // 2
    if flags["max_mamba_cache_size"] is not None:
        out["state"] = int(flags["max_mamba_cache_size"]) // int(flags["slots_per_request"])
    return out


def _bound_reasons(b: dict[str, int], flags: dict[str, object]) -> list[Reason]:
    out = []
    if "state" in b:
        slots, spr = flags["max_mamba_cache_size"], flags["slots_per_request"]
        out.append(Reason("bound_state", {"slots": slots, "spr": spr, "cap": b["state"]}))
    if "kv" in b:
        out.append(Reason("bound_kv", {"tokens": f"{flags['kv_tokens']:,}", "cap": f"{b['kv']:,}"}))
    if "cli" in b:
        out.append(Reason("bound_cli", {"cap": b["cli"]}))
    if "pool" in b:
        p = {"tokens": f"{flags['kv_tokens']:,}", "context": f"{flags['context_len']:,}"}
        p["cap"] = b["pool"]
        out.append(Reason("bound_pool", p))
    return out


def running(flags: dict[str, object]) -> tuple[dict[str, object], tuple[Reason, ...]]:
    """``running`` of the report (requested, effective, the bounds, the one that won, a slot
    range when only the effective count pins the state cache) and its sentences."""
    b = _bounds(flags)
    req, eff = flags["requested_running"], flags.get("effective_running")
    complete = "state" in b and "kv" in b and ("cli" in b or "pool" in b)
    if eff is None and complete:
        eff = min(b.values())
    out: dict[str, object] = {"requested": req, "effective": eff, "bounds": b}
    reasons = _bound_reasons(b, flags)
    if isinstance(eff, int):
        won = [k for k in ("state", "kv", "cli", "pool") if b.get(k) == eff]
        others = [v for k, v in b.items() if k != "state"]
        if "state" not in b and others and eff < min(others):
            spr = int(flags["slots_per_request"])
            out["slots_range"] = (eff * spr, eff * spr + spr - 1)
            lo, hi = out["slots_range"]
            p = {"cap": eff, "spr": spr, "lo": lo, "hi": hi}
            reasons.insert(0, Reason("bound_state_range", p))
            won = ["state"]
        if flags.get("kv_reduced"):
            won = ["kv"]
        out["won"] = won[0] if won else ""
        head = Reason("running", {"requested": req, "effective": eff})
        if req is None:
            head = Reason("running_effective", {"effective": eff})
        reasons.insert(0, head)
        if out["won"]:
            reasons.append(Reason(f"won_{out['won']}"))
        if isinstance(req, int) and eff < req:
            reasons.append(Reason("bound_graph"))
    return out, tuple(reasons)


def held(lines: list[LogLine], flags: dict[str, object]) -> tuple[Reason, ...]:
    """Held vs reserved: the slots a running request holds ('mamba num' / '#running-req',
    the median over the per-batch lines) against the slots per request SGLang reserves, the
    share of the pool left free at the cap, and the flag sets that reserve each count."""
    per = [
        int(x.fields["mamba"]) / int(x.fields["running"])
        for x in lines
        if x.kind == "sglang.usage" and x.fields.get("running") and "mamba" in x.fields
    ]
    slots = flags["max_mamba_cache_size"]
    if not per or slots is None:
        return ()
    h, spr = median(per), int(flags["slots_per_request"])
    cap = int(slots) // spr
    free = int(slots) - round(cap * h)
    p = {"held": f"{h:.3g}", "samples": len(per), "spr": spr, "cap": cap, "free": free}
    p.update(slots=slots, share=f"{free / int(slots):.0%}")
    out = [Reason("held", p)]
    if round(h) != spr:
        q = {"spr": spr, "reserving": configs_reserving(spr), "held": round(h)}
        q["matching"] = configs_reserving(round(h))
        out.append(Reason("held_pattern", q))
    return tuple(out)
