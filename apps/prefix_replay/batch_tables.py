"""prefix_replay's batch summary in the language of ``t`` (``studies.batch_view.BatchView``): peak
running against the cap, SGLang's capping message when it bites, retractions, rejections (said
once), restores, and the two engine options (one byte buffer, captured decode sizes). SGLang's
messages are shown as SGLang prints them (English)."""

from __future__ import annotations

import numpy as np

from apps.prefix_replay.tables import count
from kda_core.studies import batch_view as bv
from words.catalog import T


def batch_markdown(v: bv.BatchView, t: T) -> str:
    """Peak vs cap, the capping message when it bites, retractions, rejections (said once),
    restores."""
    kv = "" if v.kv_tokens is None else t("b_kv", tokens=count("tok", v.kv_tokens, t))
    lines = [
        t(
            "b_head",
            reqs=count("req", len(v.prompts), t),
            steps=count("step", v.n_steps, t),
            strategy=v.strategy,
            slots=v.state_slots,
            kv=kv,
            peak=v.peak_running,
            cap=v.max_running,
            plan=v.planner_max_running,
        ),
    ]
    if v.n_steps == 0 and v.rejected:  # nothing ran: one sentence, not one per request
        return "\n\n".join([*lines, *_all_rejected(v, t)])
    if v.capped:  # as SGLang prints it, in English
        lines.append(f"{t('b_capped')}\n\n> {v.capping_message or ''}")
    else:
        lines.append(t("b_no_cap", n=v.max_running))
    restored = [f"#{i + 1}: {int(r)}" for i, r in enumerate(v.restore_at) if r > 0]
    if restored:
        lines.append(t("b_restored", list=", ".join(restored)))
    if v.retractions.sum():
        lines.append(t("b_retractions", n=int(v.retractions.sum()), s=v.retracted_steps))
    lines += _rejected(v, t)
    return "\n\n".join(lines + _option_lines(v, t))


def _needs(v: bv.BatchView, rows: list[int], t: T) -> str:
    """The KV tokens each of ``rows`` needs: '171, 157' (the sentence says "tokens")."""
    need = v.kv_needed if v.kv_needed is not None else np.zeros(len(v.prompts), np.int64)
    return t.join(str(int(need[i])) for i in rows)


def _all_rejected(v: bv.BatchView, t: T) -> list[str]:
    """Every request rejected: said once, with the smallest KV pool that admits one (the
    study's) and SGLang's message for that request."""
    need = v.kv_needed if v.kv_needed is not None else np.zeros(len(v.prompts), np.int64)
    i = int(np.argmin(need))
    if v.kv_tokens is None:
        head = t("b_all_rejected_buffer")
    else:
        head = t(
            "b_all_rejected",
            tokens=count("tok", v.kv_tokens, t),
            needs=_needs(v, sorted(v.rejected), t),
            least=count("tok", v.smallest_kv_pool, t),
            i=i + 1,
        )
    return [head, f"> {v.rejected.get(i, next(iter(v.rejected.values())))}"]


def _rejected(v: bv.BatchView, t: T) -> list[str]:
    """Some requests rejected: one line naming them, SGLang's message for the first once."""
    rows = sorted(v.rejected)
    if not rows:
        return []
    first = rows[0]
    if len(rows) == 1:
        need = 0 if v.kv_needed is None else int(v.kv_needed[first])
        head = t("b_rejected_1", n=first + 1, needs=count("tok", need, t))
    else:
        which = t("b_requests", list=t.join(f"#{i + 1}" for i in rows))
        head = t("b_rejected", which=which, needs=_needs(v, rows, t), n=first + 1)
    return [head, f"> {v.rejected[first]}"]


def _option_lines(v: bv.BatchView, t: T) -> list[str]:
    """The byte buffer (size, who waited for it) and the captured decode sizes."""
    out = []
    if v.buffer_bytes is not None:
        out.append(
            t(
                "b_buffer",
                kib=v.buffer_bytes // 1024,
                slot=v.slot_bytes // 1024,
                kvb=v.kv_token_bytes,
                ratio=v.slot_bytes // v.kv_token_bytes,
                slots=v.state_slots,
                cap=v.max_running,
            )
        )
        held = v.held_for_memory[v.held_for_memory >= 0]
        for i in sorted(set(held.tolist())):
            out.append(t("b_held", n=i + 1, k=int(np.count_nonzero(held == i))))
        if held.size == 0:
            out.append(t("b_no_held"))
        out.append(t("b_refuses"))
    if v.graph_bs is not None and v.graph_padded is not None and v.graph_batch is not None:
        sizes = ", ".join(map(str, v.graph_bs))
        steps = int(np.count_nonzero(v.graph_padded))
        pad = int((v.graph_padded - v.graph_batch).sum())
        out.append(t("b_graphs", sizes=sizes, n=steps, pad=pad, top=v.graph_bs[-1]))
    return out
