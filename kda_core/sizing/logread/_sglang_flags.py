"""The flags a SGLang log (or a fragment of one) implies: each from the first line that pins it.

TP and SSM dtype: the state sizes of the "Mamba Cache is allocated" line (the config's default
dtype first; several can fit, the others are ``also_fits``), else the ``server_args`` echo, else
the caller's ``tp`` / SGLang's default dtype (assumed: named in ``missing``). The slot count:
the mamba line, else the capping line, else ``--max-mamba-cache-size``. Slots per request: the
capping line, else the strategy of the arguments (SGLang's defaults where absent: auto with the
overlap scheduler, 5). The KV tokens: the KV line, else ``max_total_num_tokens=``. Requested
``--max-running-requests``: the echo (or the caller's); effective: the ready line or the cap.
"""

from __future__ import annotations

from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.logread._report import Reason, gib
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sizes import conv_state_bytes, kda_state_bytes
from kda_core.sizing.slots import slots_per_request

_TORCH_KV_DTYPES = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.float8_e4m3fn": "fp8_e4m3",
    "torch.float32": "float32",
}
_ARG_KV_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8_e4m3"}
_TPS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


def first(lines: list[LogLine], kind: str) -> LogLine | None:
    return next((x for x in lines if x.kind == kind), None)


def mamba_numbers(spec: ModelSpec, size: int, tp: int, ssm: str) -> tuple[float, float]:
    """(conv GB, ssm GB) of ``size + 1`` slots, as the mamba line prints them."""
    n = size + 1
    return gib(n * conv_state_bytes(spec, tp)), gib(n * kda_state_bytes(spec, tp, ssm))


def tp_ssm_candidates(spec: ModelSpec, line: LogLine, tp: int | None) -> list[tuple[int, str]]:
    """Every (TP, SSM dtype) whose state sizes print as the mamba line's conv and ssm GB, the
    config's default SSM dtype first: several can fit (TP 2 in bf16 and TP 4 in fp32 give one
    ssm size; a small conv prints as 0.00 or 0.01 GB)."""
    f = line.fields
    default = spec.sglang_ssm_dtype
    dtypes = [default] + [d for d in ("float32", "bfloat16", "float16") if d != default]
    tps = [tp] if tp else [t for t in _TPS if spec.linear_heads % t == 0]
    out = []
    for ssm in dtypes:
        for t in tps:
            try:
                conv, st = mamba_numbers(spec, int(f["size"]), t, ssm)
            except ValueError:
                continue
            if (round(conv, 2), round(st, 2)) == (f["conv"], f["ssm"]):
                out.append((t, ssm))
    return out


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _float_or_none(v: object) -> float | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    return float(v) if ok else None


def _strategy(args: dict[str, object]) -> tuple[str, bool, int | None]:
    """(strategy, overlap, slots per request) of the arguments; the count None when the
    arguments do not name the strategy (SGLang's auto with the overlap scheduler then gives
    5)."""
    overlap = args.get("disable_overlap_schedule") is not True
    if args.get("disable_radix_cache") is True:
        return "radix_off", overlap, 1
    strategy = str(args.get("mamba_radix_cache_strategy") or "auto")
    page = args.get("page_size")
    try:
        spr = slots_per_request(strategy, overlap, page_size=page if type(page) is int else 1)
    except ValueError:
        return "auto", overlap, None
    known = "mamba_radix_cache_strategy" in args or "disable_overlap_schedule" in args
    return strategy, overlap, spr if known else None


def _kv_dtype(lines: list[LogLine], args: dict[str, object]) -> tuple[str | None, bool]:
    """(KV dtype, whether the log printed it)."""
    for kind in ("sglang.kv", "sglang.kv_dtype"):
        x = first(lines, kind)
        if x is not None and "dtype" in x.fields:
            return _TORCH_KV_DTYPES.get(str(x.fields["dtype"])), True
    return _ARG_KV_DTYPES.get(str(args.get("kv_cache_dtype", "auto"))), False


def _slots_of_usage(lines: list[LogLine]) -> int | None:
    """The pool size per-batch lines imply (``mamba usage = mamba num / size``, printed to two
    decimals; a size within one step of every line): the one size they all agree on, else
    None."""
    sizes: set[int] | None = None
    for x in lines:
        f = x.fields
        if x.kind != "sglang.usage" or not f.get("mamba") or not f["mamba_usage"]:
            continue
        n, u = int(f["mamba"]), float(f["mamba_usage"])
        lo, hi = int(n / (u + 0.0101)), int(n / max(u - 0.0101, 1e-6)) + 1
        fit = {s for s in range(max(lo, n), min(hi, n * 1000) + 1) if abs(n / s - u) <= 0.0101}
        sizes = fit if sizes is None else sizes & fit
    return min(sizes) if sizes and len(sizes) == 1 else None


def _state_flags(spec: ModelSpec, lines: list[LogLine], args: dict, tp: int | None) -> dict:
    """TP, SSM dtype and the slot count, and whether the mamba line fits the model."""
    mamba, capped = first(lines, "sglang.mamba"), first(lines, "sglang.capped")
    tp = tp or _int_or_none(args.get("tp_size"))
    declared = args.get("mamba_ssm_dtype")
    out: dict[str, object] = {"tp_known": tp is not None, "ssm_known": declared is not None}
    out["tp"], out["ssm_dtype"] = tp or 1, declared or spec.sglang_ssm_dtype
    slots = _int_or_none(args.get("max_mamba_cache_size"))
    if capped is not None:
        slots = int(capped.fields["size"])
    if mamba is not None:
        slots = int(mamba.fields["size"])
        found = tp_ssm_candidates(spec, mamba, tp)
        if found:
            out["tp"], out["ssm_dtype"] = found[0]
            out["tp_known"] = out["ssm_known"] = True
            if found[1:]:
                out["also_fits"] = found[1:]  # pass tp= to pick another
        else:
            out["other_model"] = True  # no TP and dtype print this line for the model
    if slots is None:
        slots = _slots_of_usage(lines)
        out["slots_from_usage"] = slots is not None
    out["max_mamba_cache_size"] = slots
    out["spec_buffers"] = mamba is not None and "issm" in mamba.fields
    return out


def sglang_flags(
    spec: ModelSpec,
    lines: list[LogLine],
    tp: int | None,
    page: int | None,
    ratio: float | None,
    requested: int | None = None,
) -> dict[str, object]:
    """The flags the log implies (``inferred`` of the report; see the module doc)."""
    args: dict[str, object] = {}
    for x in lines:
        if x.kind == "sglang.args":
            args.update(x.fields.get("args", {}))
    flags = _state_flags(spec, lines, args, tp)
    kv_dtype, printed = _kv_dtype(lines, args)
    flags.update(kv_dtype=kv_dtype, kv_dtype_printed=printed)
    capped, ring = first(lines, "sglang.capped"), first(lines, "sglang.ring")
    strategy, overlap, spr = _strategy(args)
    flags.update(strategy=strategy, overlap=overlap, strategy_known=spr is not None)
    flags["spr_known"] = capped is not None or spr is not None
    flags["slots_per_request"] = int(capped.fields["spr"]) if capped else spr or 5
    flags["page_size"] = page or _int_or_none(args.get("page_size")) or 1
    flags["ratio"] = (
        ratio if ratio is not None else _float_or_none(args.get("mamba_full_memory_ratio"))
    )
    flags["requested_running"] = _int_or_none(args.get("max_running_requests")) or requested
    flags["slots_flag"] = _int_or_none(args.get("max_mamba_cache_size"))
    flags["replayssm"] = ring is not None
    if ring is not None:
        flags["ring_len"] = int(ring.fields["ring_len"])
    kv, pool = first(lines, "sglang.kv"), first(lines, "sglang.pool")
    if kv is not None:
        flags.update(kv_tokens=int(kv.fields["tokens"]), kv_tokens_from="KV line")
    elif pool is not None:
        flags.update(kv_tokens=int(pool.fields["tokens"]), kv_tokens_from="ready line")
    if pool is not None:
        flags["effective_running"] = int(pool.fields["running"])
        if "context_len" in pool.fields:
            flags["context_len"] = int(pool.fields["context_len"])
    elif capped is not None:
        flags["effective_running"] = int(capped.fields["cap"])
    reduced = first(lines, "sglang.reduced")
    if reduced is not None:
        flags["kv_reduced"] = True
        flags["requested_running"] = flags["requested_running"] or int(reduced.fields["requested"])
        flags.setdefault("effective_running", int(reduced.fields["running"]))
    names = [str(args[k]) for k in ("served_model_name", "model_path") if args.get(k)]
    if names:
        flags["model_named"] = names[0]
    return flags


def missing(flags: dict[str, object]) -> tuple[Reason, ...]:
    """What the paste cannot pin, named (the fragment's gaps)."""
    out = []
    if flags["max_mamba_cache_size"] is None:
        out.append(Reason("needs_slots"))
    if not flags["tp_known"]:
        out.append(Reason("needs_tp", {"tp": flags["tp"]}))
    if not flags["spr_known"]:
        out.append(Reason("needs_spr", {"spr": flags["slots_per_request"]}))
    if not flags["ssm_known"]:
        out.append(Reason("needs_dtype", {"dtype": flags["ssm_dtype"]}))
    if "kv_tokens" not in flags or flags["max_mamba_cache_size"] is None:
        out.append(Reason("needs_budget"))
    if flags["requested_running"] is None:
        out.append(Reason("needs_requested"))
    if "effective_running" not in flags:
        out.append(Reason("needs_running"))
    return tuple(out)
