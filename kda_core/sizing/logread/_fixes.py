"""The levers toward a target concurrency on a SGLang server, each checked by sizing again.

Per lever the smallest change that reaches ``target`` running requests: ``--max-mamba-cache-size
target x slots per request``, the smallest ``--mamba-full-memory-ratio`` (three significant
digits, rounded up), ``--mamba-ssm-dtype bfloat16`` (alone, then with the two above when alone
it falls short), ``--mamba-radix-cache-strategy extra_buffer_lazy``,
``SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1`` and ``--disable-radix-cache``. Each is the log's
deployment changed and sized again with ``sglang.size_sglang`` at the budget the log pins
(``_budget.rest_of``), with the KV tokens it costs and the startup lines it will print
(``sglang.sglang_log_lines``); without a budget only the slot arithmetic is given.
"""

from __future__ import annotations

import math

from kda_core.sizing.deployment import Deployment
from kda_core.sizing.logread._budget import ratio_of, rest_of
from kda_core.sizing.logread._report import Fix, Reason
from kda_core.sizing.logread._running import configs_reserving
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sglang import sglang_log_lines, size_sglang
from kda_core.sizing.slots import resolve_auto, slots_per_request

_MAX_RATIO = 1e6  # the whole budget to the state cache (Deployment's ratio range)
_BY_SPR = {5: ("extra_buffer", True), 4: ("extra_buffer_lazy", True), 3: ("no_buffer", True)}
_BY_SPR[1] = ("radix_off", True)
_COSTS = {
    "bf16": Reason("cost_bf16"),
    "lazy": Reason("cost_lazy"),
    "skip": Reason("cost_skip"),
    "radix_off": Reason("cost_radix_off"),
}


def _deployment(spec: ModelSpec, flags: dict[str, object], rest: int, target: int) -> Deployment:
    strategy, overlap = str(flags["strategy"]), bool(flags["overlap"])
    if not flags["strategy_known"]:
        strategy, overlap = _BY_SPR.get(int(flags["slots_per_request"]), ("extra_buffer", True))
    return Deployment.build(
        rest_bytes=rest,
        tp=flags["tp"],
        ssm_dtype=flags["ssm_dtype"],
        kv_dtype=flags["kv_dtype"] or "bfloat16",
        ratio=ratio_of(spec, flags),
        max_mamba_cache_size=flags["slots_flag"],
        max_running_requests=target,
        page_size=flags["page_size"],
        strategy=strategy,
        overlap=overlap,
        replayssm=bool(flags["replayssm"]),
        ring_len=int(flags.get("ring_len", 16)),
    )


def _spr(d: Deployment) -> int:
    return slots_per_request(d.strategy, d.overlap, d.skip_decode_lock, d.page_size)


def _resized(
    spec: ModelSpec, d: Deployment, flag: str, target: int, before: int, costs: tuple
) -> Fix:
    """The lever ``flag`` as deployment ``d`` sized again."""
    s = size_sglang(spec, d)
    cap = s.max_mamba_cache_size // _spr(d)
    if d.ratio == _MAX_RATIO:  # no ratio reaches the target
        effect = Reason("fix_none", {"slots": s.max_mamba_cache_size})
        return Fix(flag, effect, False, cap, costs)
    starts = s.kv_tokens > 0 and s.max_mamba_cache_size > 0
    kv = (Reason("cost_kv", {"before": f"{before:,}", "after": f"{s.kv_tokens:,}"}),)
    if s.kv_tokens == before:
        kv = ()
    tokens = f"{s.kv_tokens:,}"
    effect = Reason("fix_split", {"slots": s.max_mamba_cache_size, "cap": cap, "tokens": tokens})
    lines = tuple(sglang_log_lines(spec, d, s)) if starts else ()
    kv = kv if starts else (Reason("cost_kv_none"),)
    return Fix(flag, effect, starts and cap >= target, cap, (*costs, *kv), lines)


def _ratio(spec: ModelSpec, d: Deployment, target: int) -> float | None:
    """The smallest ratio (three significant digits, up) whose slots give ``target``."""

    def cap(r: float) -> int:
        return size_sglang(spec, d.replace(ratio=r)).max_mamba_cache_size // _spr(d)

    lo, hi = 1e-6, _MAX_RATIO
    if cap(hi) < target:
        return None
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if cap(mid) >= target else (mid, hi)
    step = 10.0 ** (math.floor(math.log10(hi)) - 2)
    r = math.ceil(hi / step - 1e-9) * step
    return float(f"{r:.3g}") if cap(float(f"{r:.3g}")) >= target else hi


def _levers(spec: ModelSpec, d: Deployment, flags: dict[str, object], target: int) -> list:
    """(flag, deployment, costs) of every lever that applies, sized later."""
    out: list[tuple[str, Deployment, tuple]] = []
    spr = _spr(d)
    out.append(
        (f"--max-mamba-cache-size {target * spr}", d.replace(max_mamba_cache_size=target * spr), ())
    )
    if flags["slots_flag"] is None:
        r = _ratio(spec, d, target)
        flag = "--mamba-full-memory-ratio" + (f" {r:g}" if r is not None else "")
        out.append((flag, d.replace(ratio=r or _MAX_RATIO), ()))
    if d.state_dtype(spec, "sglang") == "float32":
        bf = d.replace(ssm_dtype="bfloat16")
        out.append(("--mamba-ssm-dtype bfloat16", bf, (_COSTS["bf16"],)))
        if flags["slots_flag"] is None:
            r = _ratio(spec, bf, target)
            if r is not None:
                flag = f"--mamba-ssm-dtype bfloat16 --mamba-full-memory-ratio {r:g}"
                out.append((flag, bf.replace(ratio=r), (_COSTS["bf16"],)))
        flag = f"--mamba-ssm-dtype bfloat16 --max-mamba-cache-size {target * spr}"
        out.append((flag, bf.replace(max_mamba_cache_size=target * spr), (_COSTS["bf16"],)))
    strategy = resolve_auto(d.overlap, d.page_size) if d.strategy == "auto" else d.strategy
    if strategy == "extra_buffer" and d.overlap:
        flag = "--mamba-radix-cache-strategy extra_buffer_lazy"
        out.append((flag, d.replace(strategy="extra_buffer_lazy"), (_COSTS["lazy"],)))
    if strategy in ("extra_buffer", "extra_buffer_lazy") and not d.skip_decode_lock:
        flag = "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1"
        out.append((flag, d.replace(skip_decode_lock=True), (_COSTS["skip"],)))
    if strategy != "radix_off":
        out.append(
            ("--disable-radix-cache", d.replace(strategy="radix_off"), (_COSTS["radix_off"],))
        )
    return out


def _arithmetic(flags: dict[str, object], target: int) -> tuple[Fix, ...]:
    """The levers by slot arithmetic only (the paste does not pin the budget)."""
    slots, spr = int(flags["max_mamba_cache_size"]), int(flags["slots_per_request"])
    unknown = Reason("cost_kv_unknown")
    out = [
        Fix(
            f"--max-mamba-cache-size {target * spr}",
            Reason("fix_cap", {"cap": target}),
            True,
            target,
            (unknown,),
        )
    ]
    for flag, n, key in (
        ("--mamba-radix-cache-strategy extra_buffer_lazy", 4, "lazy"),
        ("SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1", spr - 1, "skip"),
        ("--disable-radix-cache", 1, "radix_off"),
    ):
        if 0 < n < spr:
            cap = slots // n
            out.append(
                Fix(
                    flag,
                    Reason("fix_cap", {"cap": cap}),
                    cap >= target,
                    cap,
                    (_COSTS[key], unknown),
                )
            )
    return tuple(out)


def sized_for(flags: dict[str, object], target: int) -> tuple[Reason, ...]:
    """When the slot count is ``target x k`` for another reservation ``k`` than the server's:
    the pool was sized for another strategy (a launch script's ``N x 4`` under extra_buffer)."""
    slots, spr = flags["max_mamba_cache_size"], int(flags["slots_per_request"])
    if slots is None or not target:
        return ()
    for k in (1, 3, 4, 5):
        if k != spr and int(slots) == target * k:
            p = {"slots": slots, "target": target, "k": k, "which": configs_reserving(k)}
            p.update(spr=spr, reserving=configs_reserving(spr), cap=int(slots) // spr)
            return (Reason("sized_for", p),)
    return ()


def assumptions(spec: ModelSpec, flags: dict[str, object]) -> tuple[Reason, ...]:
    """What every fix is sized on that the paste does not pin: a budget inferred from the slot
    count alone, speculative buffers not rebuilt."""
    if flags["max_mamba_cache_size"] is None:
        return ()
    how = rest_of(spec, flags)[1]
    out = (how,) if how else ()
    return out + ((Reason("cost_drafts"),) if flags["spec_buffers"] else ())


def sglang_fixes(spec: ModelSpec, flags: dict[str, object], target: int) -> tuple[Fix, ...]:
    """Every lever toward ``target`` (module doc); () when the slot count is unknown."""
    if flags["max_mamba_cache_size"] is None:
        return ()
    rest = rest_of(spec, flags)[0]
    if rest is None:
        return _arithmetic(flags, target)
    d = _deployment(spec, flags, rest, target)
    before = flags.get("kv_tokens")
    if not isinstance(before, int):
        now = flags["requested_running"] or flags.get("effective_running") or target
        before = size_sglang(spec, d.replace(max_running_requests=now)).kv_tokens
    return tuple(
        _resized(spec, dd, flag, target, before, costs)
        for flag, dd, costs in _levers(spec, d, flags, target)
    )
