"""What bounds a server's concurrency, read from its log, and the flag changes that lift it.

``sglang_verdict``: ``"state_slots"`` (the state cache caps running requests at
``slots // slots per request``; from the effective count alone, a slot range), ``"kv_tokens"``
(the KV pool fills first), ``"request_pool"`` (the request-pool estimate /
``--max-running-requests``), ``"other_model"`` (no TP and dtype print the state line for the
model) or ``"unknown"`` (the fragment pins no bound). ``vllm_verdict``:
``"prefix_inert"`` (the raised block size leaves prompts shorter than a block without prefix
hits), ``"max_num_seqs"`` or ``"kv_tokens"``. Per-batch lines and ``/metrics`` samples
(``observed``: SGLang's ``sglang:num_running_reqs`` / ``num_queue_reqs`` / ``full_token_usage``
/ ``mamba_usage``, vLLM's ``vllm:num_requests_running`` / ``num_requests_waiting`` /
``kv_cache_usage_perc`` / ``prefix_cache_hits`` / ``prefix_cache_queries``) back the verdict
with what the server did. A log that names another model than the one read against is
questioned. vLLM's levers are predicted with ``vllm_plan``; SGLang's are ``_fixes``.
docs/sizing.md.
"""

from __future__ import annotations

from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.logread._report import Fix, Reason
from kda_core.sizing.presets import ModelSpec
from kda_core.sizing.vllm import VllmPlan, vllm_plan

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
            names = {"kv_usage": "full_usage", "state_usage": "mamba_usage"}
            names.update(running="running", waiting="queue")
            sample = {k: float(f[n]) for k, n in names.items() if n in f}
        elif x.kind == "vllm.stats":
            sample = {"running": float(f["running"]), "waiting": float(f["waiting"])}
            sample["kv_usage"] = float(f["kv_usage"]) / 100
        elif x.kind.endswith(".metric") and f["metric"] in _METRICS:
            sample = {_METRICS[str(f["metric"])]: float(f["value"])}
        for k, v in sample.items():
            out[k] = max(out.get(k, v), v)
    return out


def seen(obs: dict[str, float], cap: float) -> tuple[Reason, ...]:
    """What the per-batch lines or metrics show, as reasons (none when nothing was seen)."""
    if "running" not in obs:
        return ()
    out = [Reason("seen", {"running": f"{obs['running']:.0f}"})]
    if "waiting" in obs:
        out.append(Reason("seen_waiting", {"waiting": f"{obs['waiting']:.0f}"}))
    if "kv_usage" in obs:
        out.append(Reason("seen_kv", {"kv": f"{obs['kv_usage']:.0%}"}))
    if obs["running"] >= cap:
        out.append(Reason("seen_at_cap"))
    return tuple(out)


def _named_other(name: object, spec: ModelSpec) -> bool:
    """Whether the model a log names is not ``spec`` (compared without case and punctuation;
    a spec named only by its ``model_type``, with no digit, is not compared)."""
    if not isinstance(name, str) or not any(c.isdigit() for c in spec.name):
        return False
    a = "".join(c for c in name.rsplit("/", 1)[-1].lower() if c.isalnum())
    b = "".join(c for c in spec.name.rsplit("/", 1)[-1].lower() if c.isalnum())
    return bool(a) and a not in b and b not in a


def model_question(spec: ModelSpec, flags: dict[str, object]) -> tuple[Reason, ...]:
    """ "Is it this model?" when the log names another one."""
    name = flags.get("model_named")
    if _named_other(name, spec):
        return (Reason("names_other", {"name": name, "model": spec.name}),)
    return ()


def sglang_verdict(
    spec: ModelSpec, lines: list[LogLine], flags: dict[str, object], run: dict[str, object]
) -> tuple[str, tuple[Reason, ...]]:
    """The bound on a SGLang server's concurrency and why (see the module doc); a log that
    names another model is questioned first (verdict "other_model")."""
    question = model_question(spec, flags)
    if flags.get("other_model"):
        return "other_model", (Reason("other_model", {"model": spec.name}), *question)
    verdict, why = _sglang_bound(lines, flags, run)
    return ("other_model" if question else verdict), (*question, *why)


def _sglang_bound(
    lines: list[LogLine], flags: dict[str, object], run: dict[str, object]
) -> tuple[str, tuple[Reason, ...]]:
    obs = observed(lines)
    slots, spr = flags["max_mamba_cache_size"], int(flags["slots_per_request"])
    eff, bounds = run.get("effective"), run.get("bounds", {})
    cap = int(slots) // spr if slots is not None else eff if isinstance(eff, int) else None
    said = seen(obs, cap if cap is not None else float("inf"))
    if obs.get("kv_usage", 0.0) >= _FULL > obs.get("state_usage", 1.0):
        return "kv_tokens", (Reason("kv_tokens"), *said)
    if run.get("won") == "kv" and flags.get("kv_reduced"):
        p = {"tokens": flags["kv_tokens"], "cap": eff}
        return "kv_tokens", (Reason("kv_reduced", p), *said)
    if slots is not None:
        others = [v for k, v in dict(bounds).items() if k != "state"]
        if not others or cap <= min(others) or run.get("won") == "state":
            p = {"slots": slots, "spr": spr, "cap": cap}
            return "state_slots", (Reason("state_slots", p), *said)
        p = {"bound": min(others), "cap": cap}
        return "request_pool", (Reason("request_pool", p), *said)
    if "slots_range" in run:
        lo, hi = run["slots_range"]  # type: ignore[misc]
        p = {"cap": eff, "spr": spr, "lo": lo, "hi": hi}
        return "state_slots", (Reason("state_slots_range", p), *said)
    return "unknown", (Reason("unknown"), *said)


def _vllm_fixes(spec: ModelSpec, p: VllmPlan) -> tuple[Fix, ...]:
    out: list[Fix] = []
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
        effect = Reason("vllm_bf16", {"block": q.block_size, "conc": f"{q.max_concurrency:.2f}"})
        out.append(Fix("--mamba-ssm-cache-dtype bfloat16", effect))
    if p.max_num_seqs_error:
        out.append(Fix(f"--max-num-seqs {p.num_blocks}", Reason("vllm_seqs_start")))
    out.append(Fix("--mamba-block-size", Reason("vllm_mamba_block")))
    return tuple(out)


def vllm_verdict(
    spec: ModelSpec, p: VllmPlan, lines: list[LogLine], flags: dict[str, object]
) -> tuple[str, tuple[Reason, ...], tuple[Fix, ...]]:
    """The bound on a vLLM server: prefix caching inert below one block, ``max_num_seqs``, or
    the KV blocks; what the stats lines and metrics show is added, and "is it this model?"
    when the args name another one or a rebuilt number differs (``flags["differs"]``)."""
    obs = observed(lines)
    fixes = _vllm_fixes(spec, p)
    said = seen(obs, p.max_num_seqs)
    if "queries" in obs and obs["queries"] > 0:
        hits = f"{obs.get('hits', 0.0) / obs['queries']:.1%}"
        said += (Reason("seen_hits", {"hits": hits}),)
    question = model_question(spec, flags)
    if flags.get("differs") and not question:
        question = (Reason("other_model", {"model": spec.name}),)
    verdict, why = _vllm_bound(p, obs, said)
    if question:
        return "other_model", (*question, *why), fixes
    if verdict == "max_num_seqs":
        conc = {"conc": f"{p.max_concurrency:.2f}"}
        fixes = (
            Fix(f"--max-num-seqs {2 * p.max_num_seqs}", Reason("vllm_more_seqs", conc)),
            *fixes,
        )
    return verdict, why, fixes


def _vllm_bound(
    p: VllmPlan, obs: dict[str, float], said: tuple[Reason, ...]
) -> tuple[str, tuple[Reason, ...]]:
    length = f"{p.max_model_len:,}"
    conc = f"{p.max_concurrency:.2f}"
    if obs.get("running", 0) >= p.max_num_seqs and obs.get("kv_usage", 1.0) < _FULL:
        return "max_num_seqs", (Reason("vllm_max_num_seqs", {"seqs": p.max_num_seqs}), *said)
    if p.mamba_cache_mode == "align" and p.block_size_raised:
        q = {"block": p.block_size, "hit": p.min_prefix_hit_tokens, "conc": conc, "length": length}
        return "prefix_inert", (Reason("vllm_prefix_inert", q), *said)
    q = {"blocks": p.num_blocks, "conc": conc, "length": length}
    return "kv_tokens", (Reason("vllm_kv_tokens", q), *said)
