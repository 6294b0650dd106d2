"""What bounds a server's concurrency, read from its log, and the flag changes that lift it.

``sglang_verdict``: ``"state_slots"`` (the state cache caps running requests at
``slots // slots per request``), ``"kv_tokens"`` (the KV pool fills first) or
``"request_pool"`` (the request-pool estimate / ``--max-running-requests``). ``vllm_verdict``:
``"prefix_inert"`` (the raised block size leaves prompts shorter than a block without prefix
hits) or ``"kv_tokens"``. Each remedy is predicted with the same engine arithmetic
(``split_memory`` at the budget the log implies, or ``vllm_plan``). docs/sizing.md.
"""

from __future__ import annotations

from kda_core.sizing.logparse import LogLine
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sglang import split_memory
from kda_core.sizing.sizes import kv_bytes_per_token, slot_bytes
from kda_core.sizing.slots import request_pool_estimate
from kda_core.sizing.vllm import VllmPlan, vllm_plan

Remedies = tuple[tuple[str, str], ...]


def implied_rest_bytes(spec: ModelSpec, inferred: dict[str, object]) -> int:
    """The profiled rest the log implies: the state pool plus the KV tokens it printed."""
    tp, ssm, kv = inferred["tp"], inferred["ssm_dtype"], inferred["kv_dtype"]
    per_slot = slot_bytes(spec, tp, ssm)
    state = (int(inferred["max_mamba_cache_size"]) + 1) * per_slot
    cell = kv_bytes_per_token(spec, tp, kv)
    return state + int(inferred["kv_tokens"]) * cell


def _split(spec: ModelSpec, inferred: dict[str, object], rest: int, **kw: object) -> str:
    """'N slots -> cap C, T KV tokens' for ``split_memory`` with the log's flags and ``kw``."""
    args = dict(tp=inferred["tp"], ssm_dtype=inferred["ssm_dtype"], kv_dtype=inferred["kv_dtype"])
    args.update(kw)
    spr = int(args.pop("spr", inferred["slots_per_request"]))
    s = split_memory(spec, rest, page_size=int(inferred["page_size"]), **args)
    cap = s.max_mamba_cache_size // spr
    return f"{s.max_mamba_cache_size} slots -> cap {cap}, {s.kv_tokens:,} KV tokens"


def _sglang_remedies(spec: ModelSpec, inferred: dict[str, object]) -> Remedies:
    size, spr = int(inferred["max_mamba_cache_size"]), int(inferred["slots_per_request"])
    out: list[tuple[str, str]] = []
    if "kv_tokens" in inferred and inferred.get("kv_dtype"):
        rest = implied_rest_bytes(spec, inferred)
        per_slot = slot_bytes(spec, inferred["tp"], inferred["ssm_dtype"])
        ratio = (size + 1.5) * per_slot / (rest - (size + 1.5) * per_slot)
        for r in (2 * ratio, 4 * ratio):
            out.append(
                (f"--mamba-full-memory-ratio {r:.3g}", _split(spec, inferred, rest, ratio=r))
            )
        if inferred["ssm_dtype"] == "float32":
            eff = _split(spec, inferred, rest, ratio=ratio, ssm_dtype="bfloat16")
            out.append(("--mamba-ssm-dtype bfloat16", eff))
        cell = kv_bytes_per_token(spec, inferred["tp"], inferred["kv_dtype"])
        target = 2 * size
        kv_left = max(rest - (target + 1) * per_slot, 0) // cell
        out.append(
            (f"--max-mamba-cache-size {target}", f"cap {target // spr}, {kv_left:,} KV tokens")
        )
    if spr > 1:
        out.append(("SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1", f"cap {size // (spr - 1)}"))
    if spr == 5:
        out.append(("--mamba-radix-cache-strategy extra_buffer_lazy", f"cap {size // 4}"))
        out.append(("--mamba-radix-cache-strategy no_buffer", f"cap {size // 3}"))
    return tuple(out)


def sglang_verdict(
    spec: ModelSpec, lines: list[LogLine], inferred: dict[str, object]
) -> tuple[str, str, Remedies]:
    """The bound on a SGLang server's concurrency and the remedies (see the module doc)."""
    size, spr = int(inferred["max_mamba_cache_size"]), int(inferred["slots_per_request"])
    cap = size // spr
    tokens = inferred.get("kv_tokens")
    pool = next((x for x in lines if x.kind == "sglang.pool"), None)
    usage = [x for x in lines if x.kind == "sglang.usage"]
    capped = any(x.kind == "sglang.capped" for x in lines)
    estimate = None
    if isinstance(tokens, int) and pool is not None and "context_len" in pool.fields:
        estimate = min(request_pool_estimate(tokens, int(pool.fields["context_len"])), tokens // 2)
    if usage and float(usage[-1].fields["full_usage"]) >= 0.9 > float(
        usage[-1].fields["mamba_usage"]
    ):
        why = "the KV pool is full while state slots are free: concurrency is bound by KV tokens"
        r = inferred.get("slots_per_request")
        return (
            "kv_tokens",
            why,
            (
                (
                    "lower --mamba-full-memory-ratio",
                    f"more KV tokens, fewer than {size} slots ({r} per request)",
                ),
            ),
        )
    if capped or estimate is None or cap < estimate:
        why = (
            f"{size} state slots / {spr} reserved per request = {cap} running requests at most: "
            "concurrency is bound by the state slots"
        )
        return "state_slots", why, _sglang_remedies(spec, inferred)
    why = f"the request-pool estimate ({estimate}) binds before the state slots ({cap})"
    return "request_pool", why, (("--max-running-requests", f"up to {cap} (the state cap)"),)


def vllm_verdict(spec: ModelSpec, p: VllmPlan) -> tuple[str, str, Remedies]:
    """The bound on a vLLM server: prefix caching inert below one block, or the KV blocks."""
    out: list[tuple[str, str]] = []
    if p.ssm_dtype == "float32":
        q = vllm_plan(
            spec,
            p.available_bytes,
            p.tp,
            p.kv_dtype,
            p.conv_dtype,
            "bfloat16",
            max_model_len=p.max_model_len,
            mamba_cache_mode=p.mamba_cache_mode,
            max_num_seqs=p.max_num_seqs,
        )
        out.append(
            ("--mamba-ssm-cache-dtype bfloat16", f"block {q.block_size}, {q.max_concurrency:.2f}x")
        )
    if p.max_num_seqs_error:
        out.append((f"--max-num-seqs {p.num_blocks}", "starts (one mamba block per sequence)"))
    out.append(
        ("--mamba-block-size", "no effect in align mode: vLLM 0.33 sets it to the block size")
    )
    if p.mamba_cache_mode == "align" and p.block_size_raised:
        why = (
            f"the attention block was raised to {p.block_size} tokens, so a prompt needs at least "
            f"{p.min_prefix_hit_tokens} tokens to hit the prefix cache; "
            f"{p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens fit"
        )
        return "prefix_inert", why, tuple(out)
    why = (
        f"{p.num_blocks} blocks hold {p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens"
    )
    return "kv_tokens", why, tuple(out)
