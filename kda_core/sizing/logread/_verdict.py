"""What bounds a server's concurrency, read from its log, and the flag changes that lift it.

``sglang_verdict``: ``"state_slots"`` (the state cache caps running requests at
``slots // slots per request``), ``"kv_tokens"`` (the KV pool fills first) or
``"request_pool"`` (the request-pool estimate / ``--max-running-requests``). ``vllm_verdict``:
``"prefix_inert"`` (the raised block size leaves prompts shorter than a block without prefix
hits), ``"max_num_seqs"`` or ``"kv_tokens"``. Per-batch lines and ``/metrics`` samples
(``observed``: SGLang's ``sglang:num_running_reqs`` / ``num_queue_reqs`` / ``full_token_usage``
/ ``mamba_usage``, vLLM's ``vllm:num_requests_running`` / ``num_requests_waiting`` /
``kv_cache_usage_perc`` / ``prefix_cache_hits`` / ``prefix_cache_queries``) back the verdict
with what the server did. Each remedy is predicted with the same engine arithmetic
(``split_memory`` at the budget the log implies, or ``vllm_plan``). docs/sizing.md.
"""

from __future__ import annotations

from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.sglang import split_memory
from kda_core.sizing.sizes import kv_bytes_per_token, replayssm_ring_bytes, slot_bytes
from kda_core.sizing.slots import request_pool_estimate
from kda_core.sizing.vllm import VllmPlan, vllm_plan

Remedies = tuple[tuple[str, str], ...]
_FULL = 0.9  # a pool this full binds
_METRICS = {
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "waiting",
    "sglang:full_token_usage": "kv_usage",
    "sglang:token_usage": "kv_usage",
    "sglang:mamba_usage": "state_usage",
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:prefix_cache_hits_total": "hits",
    "vllm:prefix_cache_hits": "hits",
    "vllm:prefix_cache_queries_total": "queries",
    "vllm:prefix_cache_queries": "queries",
}


def observed(lines: list[LogLine]) -> dict[str, float]:
    """What the server did, from per-batch lines and ``/metrics`` samples: the most running
    and waiting requests seen, the KV and state usage (fractions) at that point, and vLLM's
    prefix hits and queries."""
    out: dict[str, float] = {}
    for x in lines:
        f = x.fields
        sample: dict[str, float] = {}
        if x.kind == "sglang.usage":
            sample = {"kv_usage": float(f["full_usage"]), "state_usage": float(f["mamba_usage"])}
            sample.update(
                {
                    k: float(f[n])
                    for k, n in (("running", "running"), ("waiting", "queue"))
                    if n in f
                }
            )
        elif x.kind == "vllm.stats":
            sample = {"running": float(f["running"]), "waiting": float(f["waiting"])}
            sample["kv_usage"] = float(f["kv_usage"]) / 100
        elif x.kind.endswith(".metric") and f["metric"] in _METRICS:
            sample = {_METRICS[str(f["metric"])]: float(f["value"])}
        for k, v in sample.items():
            out[k] = max(out.get(k, v), v)
    return out


def _per_slot(spec: ModelSpec, flags: dict[str, object]) -> tuple[int, int]:
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
    per, fixed = _per_slot(spec, flags)
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
    per, fixed = _per_slot(spec, flags)
    size = int(flags["max_mamba_cache_size"])
    f_lo, f_hi = ((size + 1) * per + fixed) / hi, min(((size + 2) * per + fixed) / lo, 0.999999)
    return f_lo / (1 - f_lo), f_hi / (1 - f_hi)


def _split(spec: ModelSpec, flags: dict[str, object], rest: int, **kw: object) -> str:
    """'N slots -> cap C, T KV tokens' for ``split_memory`` with the log's flags and ``kw``."""
    args = dict(tp=flags["tp"], ssm_dtype=flags["ssm_dtype"], kv_dtype=flags["kv_dtype"])
    args.update(kw)
    spr = int(args.pop("spr", flags["slots_per_request"]))
    s = split_memory(spec, rest, page_size=int(flags["page_size"]), **args)
    cap = s.max_mamba_cache_size // spr
    return f"{s.max_mamba_cache_size} slots -> cap {cap}, {s.kv_tokens:,} KV tokens"


def _sglang_remedies(spec: ModelSpec, flags: dict[str, object]) -> Remedies:
    size, spr = int(flags["max_mamba_cache_size"]), int(flags["slots_per_request"])
    out: list[tuple[str, str]] = []
    if "kv_tokens" in flags and flags.get("kv_dtype"):
        rest = implied_rest_interval(spec, flags)[0]
        per = slot_bytes(spec, flags["tp"], flags["ssm_dtype"])
        ratio = flags.get("ratio") or (size + 1.5) * per / (rest - (size + 1.5) * per)
        for r in (2 * ratio, 4 * ratio):
            out.append((f"--mamba-full-memory-ratio {r:.3g}", _split(spec, flags, rest, ratio=r)))
        if flags["ssm_dtype"] == "float32":
            eff = _split(spec, flags, rest, ratio=ratio, ssm_dtype="bfloat16")
            out.append(("--mamba-ssm-dtype bfloat16", eff))
        cell = kv_bytes_per_token(spec, flags["tp"], flags["kv_dtype"])
        target = 2 * size
        kv_left = max(rest - (target + 1) * per, 0) // cell
        out.append(
            (f"--max-mamba-cache-size {target}", f"cap {target // spr}, {kv_left:,} KV tokens")
        )
    if spr > 1:
        out.append(("SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK=1", f"cap {size // (spr - 1)}"))
    if spr == 5:
        out.append(("--mamba-radix-cache-strategy extra_buffer_lazy", f"cap {size // 4}"))
        out.append(("--mamba-radix-cache-strategy no_buffer", f"cap {size // 3}"))
    return tuple(out)


def _seen(obs: dict[str, float], cap: int) -> str:
    """What the per-batch lines or metrics show, as a clause ('' when nothing was seen)."""
    if "running" not in obs:
        return ""
    s = f"; seen: {obs['running']:.0f} running"
    if "waiting" in obs:
        s += f", {obs['waiting']:.0f} waiting"
    if "kv_usage" in obs:
        s += f", KV pool {obs['kv_usage']:.0%} used"
    return s + (" (at the cap)" if obs["running"] >= cap else "")


def sglang_verdict(
    spec: ModelSpec, lines: list[LogLine], flags: dict[str, object]
) -> tuple[str, str, Remedies]:
    """The bound on a SGLang server's concurrency and the remedies (see the module doc)."""
    size, spr = int(flags["max_mamba_cache_size"]), int(flags["slots_per_request"])
    cap = size // spr
    tokens = flags.get("kv_tokens")
    pool = next((x for x in lines if x.kind == "sglang.pool"), None)
    obs = observed(lines)
    capped = any(x.kind == "sglang.capped" for x in lines)
    estimate = None
    if isinstance(tokens, int) and pool is not None and "context_len" in pool.fields:
        estimate = min(request_pool_estimate(tokens, int(pool.fields["context_len"])), tokens // 2)
    requested = flags.get("requested_running")
    if obs.get("kv_usage", 0.0) >= _FULL > obs.get("state_usage", 1.0):
        why = "the KV pool is full while state slots are free: concurrency is bound by KV tokens"
        effect = f"more KV tokens, fewer than {size} slots ({spr} per request)"
        return "kv_tokens", why + _seen(obs, cap), (("lower --mamba-full-memory-ratio", effect),)
    bound = requested if isinstance(requested, int) else estimate
    if capped or bound is None or cap < bound:
        why = (
            f"{size} state slots / {spr} reserved per request = {cap} running requests at most: "
            "concurrency is bound by the state slots"
        )
        return "state_slots", why + _seen(obs, cap), _sglang_remedies(spec, flags)
    why = f"the request cap ({bound}) binds before the state slots ({cap})" + _seen(obs, cap)
    return "request_pool", why, (("--max-running-requests", f"up to {cap} (the state cap)"),)


def _vllm_remedies(spec: ModelSpec, p: VllmPlan) -> Remedies:
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
    return tuple(out)


def vllm_verdict(
    spec: ModelSpec, p: VllmPlan, lines: list[LogLine] | None = None
) -> tuple[str, str, Remedies]:
    """The bound on a vLLM server: prefix caching inert below one block, ``max_num_seqs``, or
    the KV blocks; what the stats lines and metrics show is added."""
    obs = observed(lines or [])
    remedies = _vllm_remedies(spec, p)
    seen = _seen(obs, p.max_num_seqs)
    if "queries" in obs and obs["queries"] > 0:
        seen += f"; prefix cache hits {obs.get('hits', 0.0) / obs['queries']:.1%} of queried tokens"
    if obs.get("running", 0) >= p.max_num_seqs and obs.get("kv_usage", 1.0) < _FULL:
        why = f"max_num_seqs ({p.max_num_seqs}) is reached while the KV blocks are not full"
        more = (
            f"--max-num-seqs {2 * p.max_num_seqs}",
            f"up to {p.max_concurrency:.2f} at full length",
        )
        return "max_num_seqs", why + seen, (more, *remedies)
    if p.mamba_cache_mode == "align" and p.block_size_raised:
        why = (
            f"the attention block was raised to {p.block_size} tokens, so a prompt needs at least "
            f"{p.min_prefix_hit_tokens} tokens to hit the prefix cache; "
            f"{p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens fit"
        )
        return "prefix_inert", why + seen, remedies
    why = (
        f"{p.num_blocks} blocks hold {p.max_concurrency:.2f} requests of {p.max_model_len:,} tokens"
    )
    return "kv_tokens", why + seen, remedies
