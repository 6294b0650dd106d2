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
from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.logread._report import (
    INPUT,
    NOT_UNDERSTOOD,
    SKIPPED,
    LineVerdict,
    LogReport,
    compare,
    gib,
)
from kda_core.sizing.logread._verdict import implied_rest_interval, ratio_interval, sglang_verdict
from kda_core.sizing.logs import kv_allocation_log, mamba_allocation_log
from kda_core.sizing.presets import GIB, ModelSpec
from kda_core.sizing.sglang import split_memory
from kda_core.sizing.sizes import (
    conv_state_bytes,
    kda_state_bytes,
    kv_bytes_per_token,
    replayssm_ring_bytes,
)
from kda_core.sizing.slots import request_pool_estimate, slots_per_request

_TORCH_KV_DTYPES = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.float8_e4m3fn": "fp8_e4m3",
    "torch.float32": "float32",
}
_ARG_KV_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8_e4m3"}
_TPS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
_DEFAULT_RATIO = 0.9  # --mamba-full-memory-ratio when not given (ScheduleArgs fallback)


def _mamba_numbers(spec: ModelSpec, size: int, tp: int, ssm: str) -> tuple[float, float]:
    n = size + 1
    return gib(n * conv_state_bytes(spec, tp)), gib(n * kda_state_bytes(spec, tp, ssm))


def _sglang_tp_ssm_candidates(
    spec: ModelSpec, line: LogLine, tp: int | None = None
) -> list[tuple[int, str]]:
    """Every (TP, SSM dtype) whose state sizes print as the mamba line's conv and ssm GB, the
    config's declared SSM dtype (else SGLang's float32 default) first: several can fit (TP 2
    in bf16 and TP 4 in fp32 give one ssm size; a small conv prints as 0.00 or 0.01 GB)."""
    f = line.fields
    default = spec.sglang_ssm_dtype
    dtypes = [default] + [d for d in ("float32", "bfloat16", "float16") if d != default]
    tps = [tp] if tp else [t for t in _TPS if spec.linear_heads % t == 0]
    out = []
    for ssm in dtypes:
        for t in tps:
            try:
                conv, st = _mamba_numbers(spec, int(f["size"]), t, ssm)
            except ValueError:
                continue
            if (round(conv, 2), round(st, 2)) == (f["conv"], f["ssm"]):
                out.append((t, ssm))
    return out


def infer_sglang_tp_ssm(spec: ModelSpec, line: LogLine, tp: int | None) -> tuple[int, str]:
    """The first of ``sglang_tp_ssm_candidates``. With ``tp`` given and no dtype matching, the
    config's (or SGLang's float32 default) is kept and the line will read as different;
    without ``tp``, ValueError if nothing matches."""
    found = _sglang_tp_ssm_candidates(spec, line, tp)
    if found:
        return found[0]
    if tp:
        return tp, spec.sglang_ssm_dtype
    raise ValueError(
        f"no TP and SSM dtype give the mamba line's sizes for {spec.name}: is it this model?"
    )


def _first(lines: list[LogLine], kind: str) -> LogLine | None:
    return next((x for x in lines if x.kind == kind), None)


def _kv_dtype(lines: list[LogLine], args: dict[str, object]) -> tuple[str | None, bool]:
    """(KV dtype, whether the log printed it): the KV line's, "Using KV cache dtype", the
    ``kv_cache_dtype`` argument, else SGLang's default for a bf16 model (assumed)."""
    for kind in ("sglang.kv", "sglang.kv_dtype"):
        x = _first(lines, kind)
        if x is not None and "dtype" in x.fields:
            return _TORCH_KV_DTYPES.get(str(x.fields["dtype"])), True
    return _ARG_KV_DTYPES.get(str(args.get("kv_cache_dtype", "auto"))), False


def _strategy_spr(args: dict[str, object]) -> int:
    """Slots per request from the server arguments (SGLang's defaults where absent)."""
    if args.get("disable_radix_cache") is True:
        return 1
    strategy = str(args.get("mamba_radix_cache_strategy") or "extra_buffer")
    overlap = args.get("disable_overlap_schedule") is not True
    page = args.get("page_size")
    try:
        return slots_per_request(strategy, overlap, page_size=page if type(page) is int else 1)
    except ValueError:
        return slots_per_request()


def sglang_flags(
    spec: ModelSpec,
    lines: list[LogLine],
    tp: int | None,
    page: int | None,
    ratio: float | None,
) -> dict[str, object]:
    """The flags the log implies (``inferred`` of the report)."""
    mamba = _first(lines, "sglang.mamba")
    if mamba is None:
        raise ValueError("log has no 'Mamba Cache is allocated' line to infer the state from")
    args: dict[str, object] = {}
    for x in lines:
        if x.kind == "sglang.args":
            args.update(x.fields.get("args", {}))
    tp, ssm = infer_sglang_tp_ssm(spec, mamba, tp or _int_or_none(args.get("tp_size")))
    kv_dtype, printed = _kv_dtype(lines, args)
    capped, ring = _first(lines, "sglang.capped"), _first(lines, "sglang.ring")
    flags: dict[str, object] = {"tp": tp, "ssm_dtype": ssm, "kv_dtype": kv_dtype}
    others = [c for c in _sglang_tp_ssm_candidates(spec, mamba, tp) if c != (tp, ssm)]
    if others:
        flags["also_fits"] = others  # pass tp= to pick another
    flags["kv_dtype_printed"] = printed
    flags["max_mamba_cache_size"] = int(mamba.fields["size"])
    flags["spec_buffers"] = "issm" in mamba.fields
    spr = int(capped.fields["spr"]) if capped else _strategy_spr(args)
    flags.update(slots_per_request=spr, page_size=page or _int_or_none(args.get("page_size")) or 1)
    arg_ratio = args.get("mamba_full_memory_ratio")
    flags["ratio"] = ratio if ratio is not None else _float_or_none(arg_ratio)
    flags["requested_running"] = _int_or_none(args.get("max_running_requests"))
    flags["slots_flag"] = _int_or_none(args.get("max_mamba_cache_size"))
    flags["replayssm"] = ring is not None
    if ring is not None:
        flags["ring_len"] = int(ring.fields["ring_len"])
    kv = _first(lines, "sglang.kv")
    if kv is not None:
        flags["kv_tokens"] = int(kv.fields["tokens"])
    return flags


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _float_or_none(v: object) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    return float(v) if ok else None


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
        default = ", SGLang's default 0.9 among them" if r_lo <= _DEFAULT_RATIO < r_hi else ""
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
    conv, st = _mamba_numbers(spec, size, tp, ssm)
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
    pool, capped = _first(lines, "sglang.pool"), _first(lines, "sglang.capped")
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


def _sglang_pool(line: LogLine, flags: dict[str, object]) -> LineVerdict:
    """``max_total_num_tokens=T, ..., max_running_requests=N, context_len=C``."""
    f, pairs = line.fields, []
    tokens = flags.get("kv_tokens")
    if isinstance(tokens, int):
        pairs.append(("max_total_num_tokens", f["tokens"], tokens, 0))
    if isinstance(tokens, int) and "context_len" in f:
        req = flags["requested_running"]
        n = req if isinstance(req, int) else request_pool_estimate(tokens, int(f["context_len"]))
        size, spr = int(flags["max_mamba_cache_size"]), int(flags["slots_per_request"])
        pairs.append(("max_running_requests", f["running"], min(n, tokens // 2, size // spr), 0))
    return compare(line, "pool sizes", pairs, ("context_len",) if "context_len" in f else ())


def _usage(line: LogLine, flags: dict[str, object]) -> LineVerdict:
    kv_tokens, size = flags.get("kv_tokens"), int(flags["max_mamba_cache_size"])
    if not isinstance(kv_tokens, int) or kv_tokens <= 0:
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note="no KV line")
    f = line.fields
    full, mamba = float(f["full"]) / kv_tokens, float(f["mamba"]) / size
    pairs = [
        ("full token usage", f["full_usage"], full, 2),
        ("mamba usage", f["mamba_usage"], mamba, 2),
    ]
    names = {"running": "#running-req", "full": "#full token", "mamba": "mamba num"}
    names["queue"] = "#queue-req"
    inputs = tuple(name for k, name in names.items() if k in f)
    return compare(line, f"full {full:.2f}, mamba {mamba:.2f}", pairs, inputs)


_INPUT_KINDS = {
    "sglang.weights": ("avail mem", "mem usage"),
    "sglang.kv_dtype": ("dtype",),
    "sglang.args": ("server args",),
    "sglang.metric": ("value",),
}


def _line(
    spec: ModelSpec, x: LogLine, lines: list[LogLine], flags: dict[str, object]
) -> LineVerdict:
    if x.kind == "sglang.mamba":
        return _sglang_mamba(spec, x, flags)
    if x.kind == "sglang.ring":
        return _sglang_ring(spec, x, lines, flags)
    if x.kind == "sglang.kv":
        return _sglang_kv(spec, x, flags)
    if x.kind == "sglang.capped":
        size, spr = int(flags["max_mamba_cache_size"]), int(x.fields["spr"])
        pairs = [("cap", float(x.fields["cap"]), float(size // spr), 0)]
        pairs.append(("max_mamba_cache_size", float(x.fields["size"]), float(size), 0))
        return compare(x, f"capped to {size // spr}", pairs)
    if x.kind == "sglang.pool":
        return _sglang_pool(x, flags)
    if x.kind == "sglang.usage":
        return _usage(x, flags)
    if x.kind in _INPUT_KINDS:
        return LineVerdict(x.line_no, x.text, x.kind, INPUT, inputs=_INPUT_KINDS[x.kind])
    return LineVerdict(x.line_no, x.text, x.kind, SKIPPED)


def read_sglang(
    spec: ModelSpec,
    lines: list[LogLine],
    tp: int | None,
    page: int | None,
    ratio: float | None,
) -> LogReport:
    """The report of a SGLang log (``read_log`` dispatches here)."""
    flags = sglang_flags(spec, lines, tp, page, ratio)
    out = tuple(_line(spec, x, lines, flags) for x in lines)
    verdict, why, remedies = sglang_verdict(spec, lines, flags)
    return LogReport("sglang", spec.name, out, flags, verdict, why, remedies)
