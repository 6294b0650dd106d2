"""The GPU budget a SGLang log pins: the profiled rest the state pool and the KV pool share.

The two pool lines pin it to one page: ``(slots + 1) x per slot (+ rings) + tokens x KV cell``
(``implied_rest_interval``), and the ratio that split it to a range (``ratio_interval``). A
fragment with the slot count only (the capping line) pins it at an assumed ratio (the log's,
else SGLang's default 0.9): ``rest_of`` says which.
"""

from __future__ import annotations

from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.logread._report import Reason
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sizes import kv_bytes_per_token, replayssm_ring_bytes, slot_bytes

DEFAULT_RATIO = 0.9  # --mamba-full-memory-ratio when not given (ScheduleArgs fallback)


def per_slot(spec: ModelSpec, flags: dict[str, object]) -> tuple[int, int]:
    """(bytes per slot incl. a KDA ring, fixed GDN ring bytes) under the log's flags."""
    tp, ring_len = int(flags["tp"]), int(flags.get("ring_len", 16))
    per = slot_bytes(spec, tp, str(flags["ssm_dtype"]))
    ring_kind = LINEAR_KINDS[spec.linear_kind].ring
    if not flags.get("replayssm") or not ring_kind:
        return per, 0
    ring = sum(replayssm_ring_bytes(spec, 1, tp, ring_len, "bfloat16").values())
    if ring_kind == "kda":
        return per + ring, 0
    req = flags.get("requested_running")
    return per, ring * ((req if isinstance(req, int) else 0) + 1)


def implied_rest_interval(spec: ModelSpec, flags: dict[str, object]) -> tuple[int, int]:
    """The profiled rest ``[lo, hi)`` the pool lines pin: the state pool (``size + 1`` slots,
    rings) plus the printed KV tokens, up to one page more (SGLang rounds tokens down to pages)."""
    per, fixed = per_slot(spec, flags)
    state = (int(flags["max_mamba_cache_size"]) + 1) * per + fixed
    cell = kv_bytes_per_token(spec, int(flags["tp"]), str(flags["kv_dtype"]))
    lo = state + int(flags["kv_tokens"]) * cell
    return lo, lo + int(flags["page_size"]) * cell


def ratio_interval(
    spec: ModelSpec, flags: dict[str, object], lo: int, hi: int
) -> tuple[float, float]:
    """The ``--mamba-full-memory-ratio`` range ``[r_lo, r_hi)`` that gives the log's slot
    count from a rest in ``[lo, hi)``: ``(S + 1) per + fixed <= rest r / (1 + r) < (S + 2) per
    + fixed``."""
    per, fixed = per_slot(spec, flags)
    size = int(flags["max_mamba_cache_size"])
    f_lo, f_hi = ((size + 1) * per + fixed) / hi, min(((size + 2) * per + fixed) / lo, 0.999999)
    return f_lo / (1 - f_lo), f_hi / (1 - f_hi)


def rest_of(spec: ModelSpec, flags: dict[str, object]) -> tuple[int | None, Reason | None]:
    """(the rest the fixes are sized at, how it was inferred): pinned by the two pool lines,
    else from the slot count at the log's ratio (or SGLang's default), else None."""
    slots = flags["max_mamba_cache_size"]
    if slots is None or flags["slots_flag"] is not None and "kv_tokens" not in flags:
        return None, None
    if "kv_tokens" in flags and flags.get("kv_dtype"):
        lo, hi = implied_rest_interval(spec, flags)
        return (lo + hi) // 2, None
    if flags["slots_flag"] is not None:
        return None, None
    per, fixed = per_slot(spec, flags)
    r = float(flags["ratio"] or DEFAULT_RATIO)
    state = (int(slots) + 1.5) * per + fixed  # mid of the slot count's budget range
    return int(state * (1 + r) / r), Reason("cost_rest", {"slots": slots, "ratio": f"{r:g}"})


def ratio_of(spec: ModelSpec, flags: dict[str, object]) -> float:
    """The ratio the log ran with: given, else the middle of the range the two pool lines
    pin, else SGLang's default."""
    if flags["ratio"] is not None:
        return float(flags["ratio"])  # type: ignore[arg-type]
    ok = flags["max_mamba_cache_size"] is not None and flags["slots_flag"] is None
    if ok and "kv_tokens" in flags and flags.get("kv_dtype"):
        r_lo, r_hi = ratio_interval(spec, flags, *implied_rest_interval(spec, flags))
        return (r_lo + r_hi) / 2
    return DEFAULT_RATIO
