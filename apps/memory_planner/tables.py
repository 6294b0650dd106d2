"""memory_planner's tables in the language of ``t``: the plan's sizes, what limits the running
requests, this tab's plan history, the live run next to the planner, and SGLang next to vLLM for
one budget. Every number comes from ``studies.planner.Plan``, ``studies.planner_engines.VllmSide``
and ``studies.batch_view.BatchView``; the engines' own log lines and messages are shown as the
engines print them (English)."""

from __future__ import annotations

from kda_core import sizing
from kda_core.sizing.sglang import sglang_min_hit
from kda_core.studies import batch_view as bv
from kda_core.studies import planner as pl
from kda_core.studies import planner_engines as pe
from words.catalog import T


def _gib(n: float) -> str:
    return f"{n / sizing.GIB:.2f} GiB"


def _mib(n: float) -> str:
    return f"{n / sizing.MIB:.1f} MiB"


def _bytes(n: int) -> str:
    """A size in the unit that shows it: GiB, MiB, else bytes."""
    return _gib(n) if n >= sizing.GIB else _mib(n) if n >= sizing.MIB else f"{n:,} B"


def summary_markdown(p: pl.Plan, t: T) -> str:
    spr = f"{p.slots_per_request} / {p.slots_held}"
    rows = [
        (t("r_ssm"), _mib(p.ssm_bytes), t("r_layers", n=p.spec.n_kda_layers)),
        (t("r_conv"), _mib(p.conv_bytes), t("r_kernel", k=p.spec.conv_kernel)),
        (t("r_slot"), _mib(p.slot_bytes), t("r_outweighs", n=p.crossover_context)),
        (t("r_kv_token"), f"{p.kv_bytes_per_token:,} B", t("r_layers", n=p.spec.n_mla_layers)),
        (t("r_slots"), f"{p.state_slots:,}", _gib(p.split.state_bytes)),
        (t("r_kv_tokens"), f"{p.kv_tokens:,}", _gib(p.kv_tokens * p.kv_bytes_per_token)),
        (t("r_per_request"), spr, p.strategy),
        (t("r_max_running"), f"**{p.max_running:,}**", limit_note(p, t)),
        (t("r_balanced"), f"{p.balanced_ratio:.4g}", t("r_tokens_req", n=p.tokens_per_request)),
        (t("r_ckpts"), f"{p.checkpoints_per_request}", t("r_ckpts_n")),
    ]
    if p.draft_tokens:
        rows.append((t("r_rings"), _gib(sum(p.ring_bytes.values())), f"L={p.ring_len}"))
        rows.append((t("r_per_draft"), _gib(p.naive_draft_state_bytes), f"D={p.draft_tokens}"))
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return t("th") + "\n|---|---:|---|\n" + body


def limit_note(p: pl.Plan, t: T) -> str:
    """What limits the running requests; at 0, say plainly that one request does not fit (the
    admission cap is max_mamba_cache_size // slots *reserved* per request, not held)."""
    if p.max_running > 0:
        return t("limited", by=t(f"lim_{p.limited_by}"))
    if p.limited_by == "kv":
        return t("no_fit_kv", need=p.tokens_per_request, have=p.kv_tokens)
    return t("no_fit_state", spr=p.slots_per_request, held=p.slots_held, have=p.state_slots)


def log_text(p: pl.Plan) -> str:
    """SGLang's own log lines and capping message, as SGLang prints them."""
    lines = list(p.log_lines)
    if p.capping_message:
        lines.append(p.capping_message)
    return "\n".join(lines)


def history_markdown(hist: list, t: T) -> str:
    """One row per plan: [#, model, TP, GiB, ratio, slots (0: from the ratio), strategy, max
    running, limited by]."""
    rows = []
    for n, model, tp, gib, ratio, slots, strategy, running, by in hist:
        rs = t("n_slots", n=slots) if slots else ratio
        lim = t(f"lim_{by}")
        rows.append(f"| {n} | {model} | {tp} | {gib} | {rs} | {strategy} | {running} | {lim} |")
    return f"{t('hist_title')}\n\n{t('hist_th')}\n|" + "---|" * 8 + "\n" + "\n".join(rows)


def live_markdown(v: bv.BatchView | None, p: pl.Plan, t: T) -> str:
    """The live run next to the planner: peak running vs ``sizing.max_running_requests`` on
    the scaled pool, and this plan's own number at full scale."""
    if v is None:
        return t("live_none", s=p.strategy)
    same = "=" if v.peak_running == v.planner_max_running else "≠"
    lines = [
        t(
            "live",
            s=v.strategy,
            slots=v.state_slots,
            n=len(v.prompts),
            peak=v.peak_running,
            same=same,
            plan=v.planner_max_running,
            full=p.max_running,
            full_slots=p.state_slots,
        )
    ]
    if not p.overlap or p.skip_decode_lock:
        lines.append(t("live_lock"))
    if v.capping_message and v.capped:
        lines.append(f"{t('live_sglang')}\n\n> {v.capping_message}")
    return "\n\n".join(lines)


def engines_markdown(p: pl.Plan, v: pe.VllmSide, t: T) -> str:
    """SGLang next to vLLM for one budget: slots, slots per request, running, KV, block size."""
    q = v.plan
    hit = t("eng_tokens", n=q.min_prefix_hit_tokens) if q.min_prefix_hit_tokens else None
    rows = [
        (t("eng_slots"), f"{p.state_slots:,}", f"{q.num_blocks:,}"),
        (
            t("eng_per_req"),
            f"{p.slots_per_request}",
            t("eng_per_req_v", m=v.mamba_blocks_per_request, a=v.attn_blocks_per_request),
        ),
        (
            t("eng_running"),
            f"**{p.max_running:,}**",
            f"**{v.max_running:,}**" if not q.max_num_seqs_error else t("eng_refuses"),
        ),
        (t("eng_kv"), f"{p.kv_tokens:,}", f"{q.kv_cache_tokens:,}"),
        (t("eng_block"), t("eng_page", n=p.page_size), f"{q.block_size:,}"),
        (t("eng_hit"), sglang_hit(p, t), hit or t("eng_hit_off")),
    ]
    rows[2:2] = _layer_rows(p.spec, t)
    rows += _draft_rows(p, v, t)
    body = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return f"{t('eng_th')}\n|---|---:|---:|\n{body}\n\n{t('eng_note', n=q.max_model_len)}"


def _layer_rows(spec: sizing.ModelSpec, t: T) -> list[tuple[str, str, str]]:
    """Each engine's layer split, when a trailing partial layer group makes them differ (the
    command line's header says it too): SGLang's counts are the spec's, vLLM turns the tail's
    ``vllm_tail_attn_layers`` linear layers into attention layers."""
    tail = spec.vllm_tail_attn_layers
    if not tail:
        return []
    kind, akind = spec.linear_kind.upper(), spec.attn_kind.upper()
    lin, attn = spec.n_linear_layers, spec.n_attn_layers
    sg = t("eng_layers_v", lin=lin, kind=kind, attn=attn, akind=akind)
    vl = t("eng_layers_v", lin=lin - tail, kind=kind, attn=attn + tail, akind=akind)
    return [(t("eng_layers"), sg, vl)]


def _draft_rows(p: pl.Plan, v: pe.VllmSide, t: T) -> list[tuple[str, str, str]]:
    """The MTP drafter's share per engine (when chosen) and vLLM's RecoverSSM records."""
    q = v.plan
    rows = []
    if p.mtp:
        layers = q.draft_attn_layers
        per_req = t("eng_draft_v", n=layers, mib=_mib(q.draft_kv_bytes_per_request))
        unpriced = _gib(p.draft_unpriced_bytes) if p.draft_unpriced_bytes else t("eng_none")
        rows += [
            (t("eng_spec"), f"{p.draft_tokens}", f"{q.num_speculative_tokens}"),
            (t("eng_draft_kv"), t("eng_draft_s", b=p.draft_kv_bytes_per_token), per_req),
            (t("eng_kv_alone"), f"{p.kv_tokens_without_draft:,}", f"{v.kv_tokens_without_draft:,}"),
            (t("eng_unpriced"), unpriced, t("eng_unpriced_v")),
        ]
    if p.deployment.eagle is not None:
        rows += _eagle_rows(p, v, t)
    if q.recoverssm_records_bytes:
        rows.append((t("eng_recover"), t("eng_none"), _gib(q.recoverssm_records_bytes)))
    return rows


def _eagle_rows(p: pl.Plan, v: pe.VllmSide, t: T) -> list[tuple[str, str, str]]:
    """The bundled EAGLE3 drafter's memory per engine: SGLang's priced share and its own pool
    (and what the pool takes beyond the budget, or the budget reserves beyond the pool); vLLM's
    draft layers, their block and group, per request."""
    q, s = v.plan, p.split
    own = t("eng_eagle_own") if q.draft_groups else t("eng_eagle_joins")
    beyond = s.draft_unpriced_bytes
    if beyond >= 0:
        sg_beyond = t("eng_beyond", gib=_bytes(beyond))
    else:
        sg_beyond = t("eng_over", gib=_bytes(-beyond))
    per_req = t("eng_draft_v", n=q.draft_attn_layers, mib=_mib(q.draft_kv_bytes_per_request))
    return [
        (t("eng_spec"), f"{p.draft_tokens}", f"{q.num_speculative_tokens}"),
        (t("eng_eagle_kv"), t("eng_draft_s", b=p.draft_kv_bytes_per_token), per_req),
        (t("eng_eagle_where"), t("eng_eagle_pool", gib=_bytes(s.draft_pool_bytes)), own),
        (t("eng_eagle_block"), t("eng_none"), f"{q.draft_block_size:,}"),
        (t("eng_kv_alone"), f"{p.kv_tokens_without_draft:,}", f"{v.kv_tokens_without_draft:,}"),
        (t("eng_unpriced"), sg_beyond, t("eng_unpriced_v")),
    ]


def sglang_hit(p: pl.Plan, t: T) -> str:
    """SGLang's shortest prompt that can hit the prefix cache, with why (``sglang_min_hit``)."""
    n, _ = sglang_min_hit(p.spec, p.deployment)
    if n is None:
        return t("hit_radix_off")
    if n == 2 and p.strategy == "no_buffer":
        return t("hit_no_buffer", n=n)
    return t("hit_grid", n=n, grid=n - 1, chunk=p.spec.mamba_chunk_size or 64)


def vllm_log_text(v: pe.VllmSide) -> str:
    """vLLM's own startup lines for this plan, as vLLM prints them."""
    return "\n".join(v.log_lines)
