"""A SGLang server's log read back: each pool line rebuilt from the config and inferred flags.

``read_sglang`` infers the TP and SSM dtype from the mamba line's sizes, the KV dtype from the KV
line (or "Using KV cache dtype"), and ``--page-size``, ``--mamba-full-memory-ratio``,
``--max-running-requests`` and the strategy from a ``server_args=`` line or the arguments. It
rebuilds the conv / ssm / ReplaySSM ring / KV sizes (SGLang 0.5.23's shapes,
``mem_cache/memory_pool.py``), the slot count from the ratio at the budget the two pool lines
pin (``KVCacheConfigurator._handle_max_mamba_cache``), the capping cap, the request cap of the
``max_total_num_tokens=`` line (``resolve_max_num_reqs``) and the per-batch usage fractions. A
number that needs the free GPU memory (the KV ``#tokens``, the slots when the ratio is not
known) is taken as input, and each line says which. docs/sizing.md.
"""

from __future__ import annotations

from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing._logs import kv_allocation_log, mamba_allocation_log
from kda_core.sizing.logread._budget import DEFAULT_RATIO, implied_rest_interval, ratio_interval
from kda_core.sizing.logread._fixes import assumptions, sglang_fixes, sized_for
from kda_core.sizing.logread._parse import LogLine, engine_of_line
from kda_core.sizing.logread._report import (
    INPUT,
    NOT_UNDERSTOOD,
    SKIPPED,
    LineVerdict,
    LogReport,
    Reason,
    compare,
    gib,
)
from kda_core.sizing.logread._running import held, running
from kda_core.sizing.logread._sglang_flags import first, mamba_numbers, missing, sglang_flags
from kda_core.sizing.logread._verdict import sglang_verdict
from kda_core.sizing.presets import GIB, ModelSpec
from kda_core.sizing.sglang import split_memory
from kda_core.sizing.sizes import kv_bytes_per_token, replayssm_ring_bytes
from kda_core.sizing.slots import request_pool_estimate


def _slots_check(spec: ModelSpec, flags: dict[str, object]) -> tuple[int, int] | str:
    """(slots, tokens) ``split_memory`` gives at the budget the pool lines pin, with the
    log's ratio; or why the slot count is taken as input instead."""
    if flags["slots_flag"] is not None:
        return "set by --max-mamba-cache-size"
    if flags["spec_buffers"]:
        return "speculative buffers: the draft count is not in the log"
    if "kv_tokens" not in flags or flags["kv_dtype"] is None:
        return "no KV line to pin the budget"
    lo, hi = implied_rest_interval(spec, flags)
    if flags["ratio"] is None:
        r_lo, r_hi = ratio_interval(spec, flags, lo, hi)
        flags["ratio_range"] = (r_lo, r_hi)
        default = ", SGLang's default 0.9 among them" if r_lo <= DEFAULT_RATIO < r_hi else ""
        return f"the ratio is not in the log: {r_lo:.4g} .. {r_hi:.4g} give it{default}"
    gdn_ring = flags["replayssm"] and LINEAR_KINDS[spec.linear_kind].ring == "gdn"
    if gdn_ring and flags["requested_running"] is None:
        return "a GDN ring needs --max-running-requests"
    s = split_memory(
        spec,
        (lo + hi) // 2,
        float(flags["ratio"]),
        int(flags["tp"]),
        str(flags["ssm_dtype"]),
        kv_dtype=str(flags["kv_dtype"]),
        replayssm=bool(flags["replayssm"]),
        ring_len=int(flags.get("ring_len", 16)),
        page_size=int(flags["page_size"]),
        max_running_requests=flags["requested_running"] if gdn_ring else None,
    )
    return s.max_mamba_cache_size, s.kv_tokens


def _sglang_mamba(spec: ModelSpec, line: LogLine, flags: dict[str, object]) -> LineVerdict:
    size, tp, ssm = int(line.fields["size"]), int(flags["tp"]), str(flags["ssm_dtype"])
    if flags.get("other_model") and not flags["tp_known"]:
        note = f"no TP and SSM dtype give these sizes for {spec.name}"
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note=note)
    conv, st = mamba_numbers(spec, size, tp, ssm)
    rebuilt = mamba_allocation_log(spec, size, tp, ssm, replayssm=False)[0]
    pairs = [("conv_state GB", line.fields["conv"], conv, 2)]
    pairs.append(("ssm_state GB", line.fields["ssm"], st, 2))
    check = _slots_check(spec, flags)
    if isinstance(check, str):
        return compare(line, rebuilt, pairs, ("max_mamba_cache_size",), check)
    pairs.append(("max_mamba_cache_size", size, check[0], 0))
    note = f"max_mamba_cache_size from --mamba-full-memory-ratio {flags['ratio']} at the budget "
    note += "the KV line pins (the free GPU memory is not in the log)"
    if flags["spec_buffers"]:
        note += "; intermediate buffers not rebuilt"
    return compare(line, rebuilt, pairs, (), note)


def _ring_running(lines: list[LogLine], flags: dict[str, object]) -> int | None:
    """SGLang's ``max_running_requests`` (a GDN ring's request count): the pool line's, the
    capping cap, or the requested count under the state and token caps."""
    pool, capped = first(lines, "sglang.pool"), first(lines, "sglang.capped")
    if pool is not None:
        return int(pool.fields["running"])
    if capped is not None:
        return int(capped.fields["cap"])
    req, tokens = flags["requested_running"], flags.get("kv_tokens")
    if isinstance(req, int) and isinstance(tokens, int):
        size, spr = int(flags["max_mamba_cache_size"]), int(flags["slots_per_request"])
        return min(req, tokens // 2, size // spr)
    return None


def _sglang_ring(
    spec: ModelSpec, line: LogLine, lines: list[LogLine], flags: dict[str, object]
) -> LineVerdict:
    """The ring line: KDA rings cover every slot (``size + 1``), bf16 tensors; a GDN
    spec-verify ring covers ``max_running_requests + 1`` requests in the activation dtype with
    low parts (printed as rawv / rawk), a GDN decode ring every slot in the SSM dtype."""
    f, tp, size = line.fields, int(flags["tp"]), int(flags["max_mamba_cache_size"])
    ring_len = int(f["ring_len"])
    kda = LINEAR_KINDS[spec.linear_kind].ring == "kda"
    names = {} if kda else {"rawv": "d_low", "rawk": "k_low"}
    if kda:
        cands = [(size + 1, "bfloat16", "slots")]
    else:
        running = _ring_running(lines, flags)
        cands = [(size + 1, str(flags["ssm_dtype"]), "slots")]
        if running is not None:
            cands.insert(0, (running + 1, "bfloat16", "requests"))
        else:
            per = replayssm_ring_bytes(spec, 1, tp, ring_len, "bfloat16")["d"]
            cands.insert(0, (round(float(f["d"]) * GIB / per), "bfloat16", "requests (input)"))
    verdicts = []
    for n, dtype, what in cands:
        r = replayssm_ring_bytes(spec, n, tp, ring_len, dtype)
        pairs = [(k, f[k], gib(r[names.get(k, k)]), 3) for k in f if names.get(k, k) in r]
        inputs = ("ring requests",) if what.endswith("(input)") else ()
        verdicts.append(compare(line, f"{n} {what} x ring {ring_len}", pairs, inputs))
    return min(verdicts, key=lambda v: len(v.diffs))


def _sglang_kv(spec: ModelSpec, line: LogLine, flags: dict[str, object]) -> LineVerdict:
    dtype, tp, page = flags["kv_dtype"], int(flags["tp"]), int(flags["page_size"])
    if dtype is None:
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note="KV dtype")
    tokens = int(line.fields["tokens"])
    size = gib((tokens + page) * kv_bytes_per_token(spec, tp, str(dtype)))
    rebuilt = kv_allocation_log(spec, tokens, str(dtype), tp=tp, page_size=page)
    if "kv" in line.fields:
        pairs = [("KV GB", line.fields["kv"], size, 2)]
    else:
        pairs = [("K GB", line.fields["k"], size / 2, 2), ("V GB", line.fields["v"], size / 2, 2)]
    note = "#tokens taken as input (it needs the free GPU memory)"
    if not flags["kv_dtype_printed"]:
        note += f"; dtype not printed, {dtype} assumed"
    return compare(line, rebuilt, pairs, ("#tokens",), note)


def _sglang_pool(line: LogLine, flags: dict[str, object], run: dict) -> LineVerdict:
    """``max_total_num_tokens=T, ..., max_running_requests=N, context_len=C``."""
    f, pairs, inputs = line.fields, [], ["context_len"] if "context_len" in line.fields else []
    tokens = flags.get("kv_tokens")
    if flags.get("kv_tokens_from") == "KV line" and isinstance(tokens, int):
        pairs.append(("max_total_num_tokens", f["tokens"], tokens, 0))
    else:
        inputs.append("max_total_num_tokens")
    bounds = dict(run.get("bounds", {}))
    if "state" in bounds and isinstance(tokens, int):
        req = flags["requested_running"]
        n = req if isinstance(req, int) else request_pool_estimate(tokens, int(f["context_len"]))
        pairs.append(
            ("max_running_requests", f["running"], min(n, tokens // 2, bounds["state"]), 0)
        )
    else:
        inputs.append("max_running_requests")
    return compare(line, "pool sizes", pairs, tuple(inputs))


def _usage(line: LogLine, flags: dict[str, object]) -> LineVerdict:
    f, pairs, rebuilt = line.fields, [], []
    tokens, size = flags.get("kv_tokens"), flags["max_mamba_cache_size"]
    if isinstance(tokens, int) and tokens > 0 and "full" in f and "full_usage" in f:
        full = float(f["full"]) / tokens
        pairs.append(("full token usage", f["full_usage"], full, 2))
        rebuilt.append(f"full {full:.2f}")
    if size and "mamba" in f and not flags.get("slots_from_usage"):
        mamba = float(f["mamba"]) / int(size)
        pairs.append(("mamba usage", f["mamba_usage"], mamba, 2))
        rebuilt.append(f"mamba {mamba:.2f}")
    names = {"running": "#running-req", "full": "#full token", "mamba": "mamba num"}
    names["queue"] = "#queue-req"
    inputs = tuple(name for k, name in names.items() if k in f)
    return compare(line, ", ".join(rebuilt), pairs, inputs)


def _capped(x: LogLine, flags: dict[str, object]) -> LineVerdict:
    """``capped to C (max_mamba_cache_size=S, R state slots per request)``: C = S // R, and S
    the mamba line's."""
    size, spr = int(flags["max_mamba_cache_size"]), int(x.fields["spr"])
    pairs = [("cap", float(x.fields["cap"]), float(int(x.fields["size"]) // spr), 0)]
    pairs.append(("max_mamba_cache_size", float(x.fields["size"]), float(size), 0))
    return compare(x, f"capped to {size // spr} = {size} // {spr}", pairs)


def _reduced(x: LogLine, flags: dict[str, object]) -> LineVerdict:
    tokens = flags.get("kv_tokens")
    if not isinstance(tokens, int):
        return LineVerdict(x.line_no, x.text, x.kind, INPUT, inputs=("requested", "running"))
    pairs = [("running", x.fields["running"], tokens // 2, 0)]
    return compare(x, f"{tokens:,} // 2 = {tokens // 2}", pairs, ("requested",))


_INPUT_KINDS = {
    "sglang.weights": ("avail mem", "mem usage"),
    "sglang.kv_dtype": ("dtype",),
    "sglang.args": ("server args",),
    "sglang.metric": ("value",),
}


def _line(
    spec: ModelSpec, x: LogLine, lines: list[LogLine], flags: dict[str, object], run: dict
) -> LineVerdict:
    if x.kind == "cut":
        note = Reason("cut", {"what": str(x.fields["of"]).split(".")[1]}).text()
        return LineVerdict(x.line_no, x.text, x.kind, NOT_UNDERSTOOD, note=note)
    if engine_of_line(x) != "sglang":
        return LineVerdict(x.line_no, x.text, x.kind, SKIPPED, note="a vLLM line")
    if x.kind == "sglang.mamba":
        return _sglang_mamba(spec, x, flags)
    if x.kind == "sglang.ring":
        return _sglang_ring(spec, x, lines, flags)
    if x.kind == "sglang.kv":
        return _sglang_kv(spec, x, flags)
    if x.kind == "sglang.capped":
        return _capped(x, flags)
    if x.kind == "sglang.reduced":
        return _reduced(x, flags)
    if x.kind == "sglang.pool":
        return _sglang_pool(x, flags, run)
    if x.kind == "sglang.usage":
        return _usage(x, flags)
    return LineVerdict(x.line_no, x.text, x.kind, INPUT, inputs=_INPUT_KINDS.get(x.kind, ()))


def _target(run: dict[str, object], cap: object, target: int | None) -> tuple[int | None, tuple]:
    """The target the fixes are sized for: the caller's, else the requested count when the
    cap falls short of it, else twice the cap."""
    if target is not None:
        return target, (Reason("target", {"target": target}),)
    req = run.get("requested")
    if not isinstance(cap, int) or cap <= 0:
        return None, ()
    if isinstance(req, int) and req > cap:
        return req, (Reason("target_requested", {"target": req}),)
    return 2 * cap, (Reason("target_default", {"target": 2 * cap}),)


def read_sglang(
    spec: ModelSpec,
    lines: list[LogLine],
    tp: int | None,
    page: int | None,
    ratio: float | None,
    requested: int | None = None,
    target: int | None = None,
) -> LogReport:
    """The report of a SGLang log or fragment (``read_log`` dispatches here)."""
    known = [x for x in lines if x.kind != "unknown"]
    flags = sglang_flags(spec, known, tp, page, ratio, requested)
    run, bounds = running(flags)
    out = tuple(_line(spec, x, known, flags, run) for x in known)
    verdict, why = sglang_verdict(spec, known, flags, run)
    cap = dict(run.get("bounds", {})).get("state")
    goal, aims = _target(run, cap, target)
    fixes = () if goal is None or verdict == "other_model" else sglang_fixes(spec, flags, goal)
    run["target"] = goal
    notes = sized_for(flags, goal) if goal else ()
    return LogReport(
        "sglang",
        spec.name,
        out,
        flags,
        verdict,
        (*why, *notes),
        fixes,
        len(lines) - len(known),
        (*missing(flags), *(assumptions(spec, flags) if fixes else ())),
        run,
        (*bounds, *aims),
        held(known, flags),
    )
