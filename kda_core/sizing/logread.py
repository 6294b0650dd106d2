"""A SGLang or vLLM server's startup log read back against a model's config.

``read_log(text, spec)`` parses every line it knows (``logparse``), infers the flags the log
implies (TP, state and KV dtypes, ReplaySSM, slots per request; vLLM's non-default args),
rebuilds each number from the config and those flags with the engine's own arithmetic
(``sizing.sglang`` / ``sizing.vllm``), marks each line ``reproduced``, ``different`` (with the
logged and rebuilt numbers), ``input`` (a count the rebuild starts from: the slots and KV tokens
SGLang prints, the memory vLLM profiled) or ``not understood``, and gives a verdict on what
bounds concurrency, with the flag changes that lift it (``logverdict``). Details:
docs/sizing.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kda_core.sizing.logparse import LogLine, engine_of, parse_log
from kda_core.sizing.logs import kv_allocation_log, mamba_allocation_log
from kda_core.sizing.presets import GIB, ModelSpec, as_spec
from kda_core.sizing.sizes import (
    conv_state_bytes,
    kda_state_bytes,
    kv_bytes_per_token,
    replayssm_ring_bytes,
)
from kda_core.sizing.slots import slots_per_request
from kda_core.sizing.vllm import VllmPlan, format_gib, vllm_plan

REPRODUCED, DIFFERENT, INPUT, NOT_UNDERSTOOD = "reproduced", "different", "input", "not understood"
TORCH_KV_DTYPES = {
    "torch.bfloat16": "bfloat16",
    "torch.float16": "float16",
    "torch.float8_e4m3fn": "fp8_e4m3",
    "torch.float32": "float32",
}
VLLM_KV_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8": "fp8_e4m3"}
VLLM_KV_DTYPES.update({"fp8_e4m3": "fp8_e4m3", "float16": "float16"})


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """One log line read back: ``status`` and, where rebuilt, the lab's line and the numbers
    that differ as ``(field, logged, rebuilt)``."""

    line_no: int
    text: str
    kind: str
    status: str
    rebuilt: str = ""
    diffs: tuple[tuple[str, float, float], ...] = ()
    note: str = ""


def _compare(
    line: LogLine, rebuilt: str, pairs: list[tuple[str, float, float, int]]
) -> LineVerdict:
    """``pairs`` of (field, logged, rebuilt, decimals): equal at the printed precision or not."""
    diffs = tuple((f, a, b) for f, a, b, nd in pairs if round(a, nd) != round(b, nd))
    status = DIFFERENT if diffs else REPRODUCED
    return LineVerdict(line.line_no, line.text, line.kind, status, rebuilt, diffs)


def _gb(n: int) -> float:
    return n / GIB


def _mamba_numbers(spec: ModelSpec, size: int, tp: int, ssm: str) -> tuple[float, float]:
    n = size + 1
    return _gb(n * conv_state_bytes(spec, tp)), _gb(n * kda_state_bytes(spec, tp, ssm))


def infer_sglang_tp_ssm(spec: ModelSpec, line: LogLine, tp: int | None) -> tuple[int, str]:
    """The (TP, SSM dtype) whose state sizes print as the mamba line's conv and ssm GB. With
    ``tp`` given and no dtype matching, the config's (or SGLang's float32 default) is kept and
    the line will read as different; without ``tp``, ValueError if nothing matches."""
    f = line.fields
    tps = [tp] if tp else [t for t in (1, 2, 4, 8, 16, 32, 64) if spec.kda_heads % t == 0]
    for t in tps:
        for ssm in ("float32", "bfloat16", "float16"):
            try:
                conv, st = _mamba_numbers(spec, int(f["size"]), t, ssm)
            except ValueError:
                continue
            if (round(conv, 2), round(st, 2)) == (f["conv"], f["ssm"]):
                return t, ssm
    if tp:
        return tp, spec.ssm_dtype or "float32"
    raise ValueError(
        f"no TP and SSM dtype give the mamba line's sizes for {spec.name}: is it this model?"
    )


def _sglang_mamba(spec: ModelSpec, line: LogLine, tp: int, ssm: str) -> LineVerdict:
    size = int(line.fields["size"])
    conv, st = _mamba_numbers(spec, size, tp, ssm)
    rebuilt = mamba_allocation_log(spec, size, tp, ssm, replayssm=False)[0]
    pairs = [("conv_state GB", line.fields["conv"], conv, 2)]
    pairs.append(("ssm_state GB", line.fields["ssm"], st, 2))
    v = _compare(line, rebuilt, pairs)
    return replace(v, note="max_mamba_cache_size taken as input")


def _sglang_ring(spec: ModelSpec, line: LogLine, size: int, tp: int) -> LineVerdict:
    if spec.linear_kind != "kda":
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note="GDN ring")
    ring_len = int(line.fields["ring_len"])
    r = replayssm_ring_bytes(spec, size + 1, tp, ring_len, "bfloat16")
    pairs = [(k, line.fields[k], _gb(r[k]), 3) for k in r if k in line.fields]
    rebuilt = mamba_allocation_log(spec, size, tp, ring_len=ring_len)[1]
    return _compare(line, rebuilt, pairs)


def _sglang_kv(spec: ModelSpec, line: LogLine, tp: int, page: int) -> LineVerdict:
    dtype = TORCH_KV_DTYPES.get(str(line.fields["dtype"]))
    if dtype is None:
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note="KV dtype")
    tokens = int(line.fields["tokens"])
    size = _gb((tokens + page) * kv_bytes_per_token(spec, tp, dtype))
    logged = line.fields.get("kv")
    if logged is None:
        logged = float(line.fields["k"]) + float(line.fields["v"])
    rebuilt = kv_allocation_log(spec, tokens, dtype, tp=tp, page_size=page)
    v = _compare(line, rebuilt, [("KV GB", float(logged), size, 1 if "k" in line.fields else 2)])
    return replace(v, note="#tokens taken as input")


@dataclass(frozen=True, slots=True)
class LogReport:
    """A log read back: per-line verdicts, the inferred flags and the concurrency verdict."""

    engine: str
    model: str
    lines: tuple[LineVerdict, ...]
    inferred: dict[str, object]
    verdict: str
    explanation: str
    remedies: tuple[tuple[str, str], ...]  # (flag change, predicted effect)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in (REPRODUCED, DIFFERENT, INPUT, NOT_UNDERSTOOD)}
        for v in self.lines:
            out[v.status] += 1
        return out


def _parse_sglang(spec: ModelSpec, lines: list[LogLine], tp: int | None, page: int) -> LogReport:
    from kda_core.sizing.logverdict import sglang_verdict

    mamba = next((x for x in lines if x.kind == "sglang.mamba"), None)
    if mamba is None:
        raise ValueError("log has no 'Mamba Cache is allocated' line to infer the state from")
    tp, ssm = infer_sglang_tp_ssm(spec, mamba, tp)
    size = int(mamba.fields["size"])
    ring = next((x for x in lines if x.kind == "sglang.ring"), None)
    capped = next((x for x in lines if x.kind == "sglang.capped"), None)
    spr = int(capped.fields["spr"]) if capped else slots_per_request()
    inferred: dict[str, object] = {"tp": tp, "ssm_dtype": ssm, "max_mamba_cache_size": size}
    inferred.update(slots_per_request=spr, page_size=page, replayssm=ring is not None)
    if ring is not None:
        inferred["ring_len"] = int(ring.fields["ring_len"])
    out = []
    for x in lines:
        if x.kind == "sglang.mamba":
            out.append(_sglang_mamba(spec, x, tp, ssm))
        elif x.kind == "sglang.ring":
            out.append(_sglang_ring(spec, x, size, tp))
        elif x.kind == "sglang.kv":
            out.append(_sglang_kv(spec, x, tp, page))
            inferred.setdefault("kv_dtype", TORCH_KV_DTYPES.get(str(x.fields["dtype"])))
            inferred.setdefault("kv_tokens", int(x.fields["tokens"]))
        elif x.kind == "sglang.capped":
            cap = size // spr
            pairs = [("cap", float(x.fields["cap"]), float(cap), 0)]
            pairs.append(("max_mamba_cache_size", float(x.fields["size"]), float(size), 0))
            out.append(_compare(x, f"capped to {cap}", pairs))
        elif x.kind == "sglang.usage":
            out.append(_usage(x, inferred.get("kv_tokens"), size))
        else:
            out.append(LineVerdict(x.line_no, x.text, x.kind, NOT_UNDERSTOOD))
    verdict, why, remedies = sglang_verdict(spec, lines, inferred)
    return LogReport("sglang", spec.name, tuple(out), inferred, verdict, why, remedies)


def _usage(line: LogLine, kv_tokens: object, size: int) -> LineVerdict:
    if not isinstance(kv_tokens, int) or kv_tokens <= 0:
        return LineVerdict(line.line_no, line.text, line.kind, NOT_UNDERSTOOD, note="no KV line")
    f = line.fields
    full, mamba = float(f["full"]) / kv_tokens, float(f["mamba"]) / size
    pairs = [
        ("full token usage", f["full_usage"], full, 2),
        ("mamba usage", f["mamba_usage"], mamba, 2),
    ]
    return _compare(line, f"full {full:.2f}, mamba {mamba:.2f}", pairs)


def _parse_vllm_flags(lines: list[LogLine], tp: int | None) -> dict[str, object]:
    args: dict[str, object] = {}
    for x in lines:
        if x.kind == "vllm.args":
            args.update(x.fields.get("args", {}))
    kv = VLLM_KV_DTYPES.get(str(args.get("kv_cache_dtype", "auto")))
    if kv is None:
        raise ValueError(f"kv_cache_dtype {args.get('kv_cache_dtype')!r} is not one the lab sizes")
    flags: dict[str, object] = {"tp": tp or int(args.get("tensor_parallel_size", 1))}
    flags.update(kv_dtype=kv, max_num_seqs=int(args.get("max_num_seqs", 256)))
    flags["prefix_caching"] = bool(args.get("enable_prefix_caching", True))
    ssm = args.get("mamba_ssm_cache_dtype")
    flags["ssm_dtype"] = None if ssm in (None, "auto") else ssm
    if "max_model_len" in args:
        flags["max_model_len"] = int(args["max_model_len"])
    return flags


def _vllm_blocks(p: VllmPlan, tokens: int, length: int) -> int | None:
    """The block count whose concurrency x max_model_len truncates to the logged tokens."""
    b = tokens * p.blocks_per_request // length
    for cand in (b - 1, b, b + 1, b + 2):
        if cand >= 0 and int(cand / p.blocks_per_request * length) == tokens:
            return cand
    return None


def _vllm_line(x: LogLine, p: VllmPlan, blocks_pinned: bool) -> LineVerdict:
    f = x.fields
    if x.kind == "vllm.block_size":
        return _compare(x, f"block {p.block_size}", [("block", f["block"], p.block_size, 0)])
    if x.kind == "vllm.padding":
        pct = p.mamba_padding_pct or 0.0
        return _compare(x, f"padding {pct:.2f}%", [("padding %", f["pct"], pct, 2)])
    if x.kind == "vllm.padding_layers":
        pads = [
            g * p.group_size - n
            for n, g in (
                (p.spec.n_mla_layers, p.attn_groups),
                (p.spec.n_kda_layers, p.mamba_groups),
            )
        ]
        pad = max(pads)
        return _compare(x, f"{pad} padding layers", [("layers", f["layers"], pad, 0)])
    if x.kind == "vllm.available":
        gib = float(f["gib"])
        lo, hi = int((gib - 0.005) * GIB), int((gib + 0.005) * GIB)
        ok = lo // p.bytes_per_block <= p.num_blocks <= hi // p.bytes_per_block
        gib_rebuilt = format_gib(p.available_bytes)
        rebuilt = f"{p.num_blocks} blocks of {p.bytes_per_block:,} B = {gib_rebuilt} GiB"
        diffs = () if ok else (("blocks", float(hi // p.bytes_per_block), float(p.num_blocks)),)
        return LineVerdict(
            x.line_no, x.text, x.kind, DIFFERENT if diffs else REPRODUCED, rebuilt, diffs
        )
    if x.kind in ("vllm.kv_size", "vllm.concurrency"):
        pairs = []
        if "conc" in f:
            pairs.append(("concurrency", f["conc"], p.max_concurrency, 2))
            pairs.append(("max_model_len", f["len"], p.max_model_len, 0))
        if "tokens" in f:
            pairs.append(("tokens", f["tokens"], p.kv_cache_tokens, 0))
        v = _compare(x, f"{p.kv_cache_tokens:,} tokens, {p.max_concurrency:.2f}x", pairs)
        if "tokens" in f and blocks_pinned and not v.diffs and "conc" not in f:
            return replace(v, status=INPUT, note="pins the block count")
        return v
    if x.kind == "vllm.max_num_seqs":
        return _compare(x, f"{p.num_blocks} blocks", [("blocks", f["blocks"], p.num_blocks, 0)])
    if x.kind in ("vllm.args", "vllm.version"):
        return LineVerdict(x.line_no, x.text, x.kind, INPUT)
    return LineVerdict(x.line_no, x.text, x.kind, NOT_UNDERSTOOD)


def _parse_vllm(
    spec: ModelSpec, lines: list[LogLine], tp: int | None, **plan_kw: object
) -> LogReport:
    from kda_core.sizing.logverdict import vllm_verdict

    flags = _parse_vllm_flags(lines, tp)
    kv = next((x for x in lines if x.kind == "vllm.kv_size"), None)
    conc = next((x for x in lines if "conc" in x.fields), None)
    length = flags.get("max_model_len") or (conc.fields["len"] if conc else spec.context_len)
    flags["max_model_len"] = length
    mode = "align" if flags["prefix_caching"] else "none"
    kw = dict(max_model_len=length, mamba_cache_mode=mode, max_num_seqs=flags["max_num_seqs"])
    kw.update(plan_kw)
    args = (spec, 0, flags["tp"], flags["kv_dtype"], "bfloat16", flags["ssm_dtype"])
    p0 = vllm_plan(*args, **kw)
    blocks = _vllm_blocks(p0, int(kv.fields["tokens"]), int(length)) if kv else None
    if blocks is None:
        avail = next((x for x in lines if x.kind == "vllm.available"), None)
        if avail is None:
            raise ValueError(
                "log has neither a 'GPU KV cache size' nor an 'Available KV cache memory' line"
            )
        blocks = int(float(avail.fields["gib"]) * GIB) // p0.bytes_per_block
    plan = vllm_plan(spec, blocks * p0.bytes_per_block, *args[2:], **kw)
    flags.update(num_blocks=blocks, block_size=plan.block_size, ssm_dtype=plan.ssm_dtype)
    out = tuple(_vllm_line(x, plan, kv is not None) for x in lines)
    verdict, why, remedies = vllm_verdict(spec, plan)
    return LogReport("vllm", spec.name, out, flags, verdict, why, remedies)


def read_log(
    text: str,
    spec: ModelSpec | str,
    *,
    tp: int | None = None,
    page_size: int = 1,
    **vllm_kw: object,
) -> LogReport:
    """Read a SGLang or vLLM startup log (and per-batch lines) back against ``spec``.

    ``tp`` is inferred when None (SGLang: from the state sizes; vLLM: from the non-default
    args, else 1). ``page_size`` is SGLang's ``--page-size`` (the KV line's padding rows).
    ``vllm_kw`` are ``vllm_plan`` knobs a vLLM log does not print (``kernel_block_size``,
    ``prefill_checkpoint_blocks``, ...). ValueError for a malformed log (``parse_log``).
    """
    spec = as_spec(spec)
    lines = parse_log(text)
    if engine_of(lines) == "sglang":
        return _parse_sglang(spec, lines, tp, page_size)
    return _parse_vllm(spec, lines, tp, **vllm_kw)
