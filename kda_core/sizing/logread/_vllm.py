"""A vLLM 0.33 server's log read back: the non-default args give the flags, the "GPU KV cache
size" line (else "Available KV cache memory") pins the block count, and every other number is
rebuilt with ``sizing.vllm`` (block size, padding, groups, concurrency). docs/sizing.md.
"""

from __future__ import annotations

from dataclasses import replace

from kda_core.sizing.logread._parse import LogLine, engine_of_line
from kda_core.sizing.logread._report import (
    DIFFERENT,
    INPUT,
    NOT_UNDERSTOOD,
    SKIPPED,
    LineVerdict,
    LogReport,
    Reason,
    compare,
)
from kda_core.sizing.logread._verdict import model_question, observed, seen, vllm_verdict
from kda_core.sizing.presets import GIB, ModelSpec
from kda_core.sizing.vllm import VllmPlan, format_gib, vllm_plan

_VLLM_KV_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8": "fp8_e4m3"}
_VLLM_KV_DTYPES.update({"fp8_e4m3": "fp8_e4m3", "float16": "float16"})


def _parse_vllm_flags(lines: list[LogLine], tp: int | None) -> dict[str, object]:
    args: dict[str, object] = {}
    for x in lines:
        if x.kind == "vllm.args":
            args.update(x.fields.get("args", {}))
    kv = _VLLM_KV_DTYPES.get(str(args.get("kv_cache_dtype", "auto")))
    if kv is None:
        raise ValueError(f"kv_cache_dtype {args.get('kv_cache_dtype')!r} is not one the lab sizes")
    flags: dict[str, object] = {"tp": tp or int(args.get("tensor_parallel_size", 1))}
    flags.update(kv_dtype=kv, max_num_seqs=int(args.get("max_num_seqs", 256)))
    flags["prefix_caching"] = bool(args.get("enable_prefix_caching", True))
    ssm = args.get("mamba_ssm_cache_dtype")
    flags["ssm_dtype"] = None if ssm in (None, "auto") else ssm
    if "max_model_len" in args:
        flags["max_model_len"] = int(args["max_model_len"])
    if isinstance(args.get("model"), str):
        flags["model_named"] = args["model"]
    return flags


def _vllm_blocks(p: VllmPlan, tokens: int, length: int) -> int | None:
    """The block count whose concurrency x max_model_len truncates to the logged tokens."""
    b = tokens * p.blocks_per_request // length
    for cand in (b - 1, b, b + 1, b + 2):
        if cand >= 0 and int(cand / p.blocks_per_request * length) == tokens:
            return cand
    return None


_PINS = "pins the block count (the profiled memory is not rebuilt)"
_VLLM_INPUTS = {
    "vllm.args": ("non-default args",),
    "vllm.version": ("version",),
    "vllm.stats": ("running", "waiting", "KV cache usage"),
    "vllm.metric": ("value",),
}


def _vllm_line(x: LogLine, p: VllmPlan | None, blocks_pinned: bool) -> LineVerdict:
    f = x.fields
    if x.kind == "cut":
        note = Reason("cut", {"what": str(f["of"]).split(".")[1]}).text()
        return LineVerdict(x.line_no, x.text, x.kind, NOT_UNDERSTOOD, note=note)
    if engine_of_line(x) != "vllm":
        return LineVerdict(x.line_no, x.text, x.kind, SKIPPED, note="a SGLang line")
    if x.kind in _VLLM_INPUTS or p is None:
        return LineVerdict(x.line_no, x.text, x.kind, INPUT, inputs=_VLLM_INPUTS.get(x.kind, ()))
    if x.kind == "vllm.block_size":
        return compare(x, f"block {p.block_size}", [("block", f["block"], p.block_size, 0)])
    if x.kind == "vllm.padding":
        pct = p.mamba_padding_pct or 0.0
        return compare(x, f"padding {pct:.2f}%", [("padding %", f["pct"], pct, 2)])
    if x.kind == "vllm.padding_layers":
        pads = [
            g * p.group_size - n
            for n, g in (
                (p.spec.n_attn_layers, p.attn_groups),
                (p.spec.n_linear_layers, p.mamba_groups),
            )
        ]
        pad = max(pads)
        return compare(x, f"{pad} padding layers", [("layers", f["layers"], pad, 0)])
    if x.kind == "vllm.available":
        logged = float(f["gib"])
        lo, hi = int((logged - 0.005) * GIB), int((logged + 0.005) * GIB)
        ok = lo // p.bytes_per_block <= p.num_blocks <= hi // p.bytes_per_block
        rebuilt = f"{p.num_blocks} blocks of {p.bytes_per_block:,} B = "
        rebuilt += f"{format_gib(p.available_bytes)} GiB"
        # the profiled memory holds whole blocks: the blocks it holds must be the plan's
        held = float(p.num_blocks if ok else hi // p.bytes_per_block)
        return compare(x, rebuilt, [("blocks", held, float(p.num_blocks), 0)])
    if x.kind in ("vllm.kv_size", "vllm.concurrency"):
        pairs = []
        if "conc" in f:
            pairs.append(("concurrency", f["conc"], p.max_concurrency, 2))
            pairs.append(("max_model_len", f["len"], p.max_model_len, 0))
        if "tokens" in f:
            pairs.append(("tokens", f["tokens"], p.kv_cache_tokens, 0))
        v = compare(x, f"{p.kv_cache_tokens:,} tokens, {p.max_concurrency:.2f}x", pairs)
        if "tokens" in f and blocks_pinned and not v.diffs and "conc" not in f:
            return replace(v, status=INPUT, checks=(), inputs=("tokens",), note=_PINS)
        return v
    return compare(x, f"{p.num_blocks} blocks", [("blocks", f["blocks"], p.num_blocks, 0)])


def _blocks(lines: list[LogLine], p0: VllmPlan, length: int) -> tuple[int | None, bool]:
    """(the block count the log pins, whether the KV-size line pinned it)."""
    kv = next((x for x in lines if x.kind == "vllm.kv_size"), None)
    blocks = _vllm_blocks(p0, int(kv.fields["tokens"]), length) if kv else None
    if blocks is not None:
        return blocks, True
    avail = next((x for x in lines if x.kind == "vllm.available"), None)
    if avail is None:
        return None, False
    return int(float(avail.fields["gib"]) * GIB) // p0.bytes_per_block, False


def read_vllm(
    spec: ModelSpec, lines: list[LogLine], tp: int | None, **plan_kw: object
) -> LogReport:
    """The report of a vLLM log or fragment (``read_log`` dispatches here)."""
    known = [x for x in lines if x.kind != "unknown"]
    flags = _parse_vllm_flags(known, tp)
    conc = next((x for x in known if "conc" in x.fields), None)
    length = flags.get("max_model_len") or (conc.fields["len"] if conc else spec.context_len)
    flags["max_model_len"] = length
    mode = "align" if flags["prefix_caching"] else "none"
    kw = dict(max_model_len=length, mamba_cache_mode=mode, max_num_seqs=flags["max_num_seqs"])
    kw.update(plan_kw)
    args = (spec, 0, flags["tp"], flags["kv_dtype"], "bfloat16", flags["ssm_dtype"])
    p0 = vllm_plan(*args, **kw)  # the bytes of a block do not depend on the budget
    blocks, pinned = _blocks(known, p0, int(length))
    skipped = len(lines) - len(known)
    if blocks is None:
        out = tuple(_vllm_line(x, None, False) for x in known)
        why = (*model_question(spec, flags), Reason("unknown"), *seen(observed(known), 1e18))
        gap = (Reason("needs_blocks"),)
        return LogReport("vllm", spec.name, out, flags, "unknown", why, (), skipped, gap)
    plan = vllm_plan(spec, blocks * p0.bytes_per_block, *args[2:], **kw)
    flags.update(num_blocks=blocks, block_size=plan.block_size, ssm_dtype=plan.ssm_dtype)
    out = tuple(_vllm_line(x, plan, pinned) for x in known)
    flags["differs"] = any(v.status == DIFFERENT for v in out)
    verdict, why, fixes = vllm_verdict(spec, plan, known, flags)
    return LogReport("vllm", spec.name, out, flags, verdict, why, fixes, skipped)
