"""prefix_replay's tables and labels in the language of ``t``: the inspected request's numbers,
a settings label ("sglang grid 32, INT8"), counts and a prompt cut to one line (the reader's
text shown as typed). Long prose about the concept: docs/prefix_replay.md."""

from __future__ import annotations

from apps.ui.catalog import verbatim
from kda_core.studies import prefix_replay as pr
from words.catalog import T


def short(text: str, n: int = 28) -> str:
    """One line, at most ``n`` characters (the tail kept: prompts differ at the end)."""
    t = text.replace("\n", "⏎")
    return t if len(t) <= n else "…" + t[-(n - 1) :]


def count(kind: str, n: int, t: T) -> str:
    """'1 tombstone', '2 tombstones' (``kind``: ckpt, tomb, branch, req, step, tok)."""
    return t(f"cnt_{kind}_1") if n == 1 else t(f"cnt_{kind}_n", n=n)


def settings_label(policy: str, spacing: int, slots: int | None, int8: bool, t: T) -> str:
    """'interval 32', 'sglang grid 32', 'vllm block 32', 'marconi' + slots + INT8."""
    text = t(f"set_{policy}", k=spacing)
    if slots is not None:
        text = t("set_slots", s=text, n=slots)
    return t("set_int8", s=text) if int8 else text


def summary_markdown(res: pr.ScenarioResult, req: int, slots: int | None, policy: str, t: T) -> str:
    """The inspected request's numbers (``slots``: the reader's checkpoint budget or None)."""
    r = res.requests[req]
    tl, p = r.timeline, r.pools
    cap = str(p.checkpoint_capacity) if slots else t("r_default", n=p.checkpoint_capacity)
    replayed = t("r_replayed_n", a=tl.restore_at, b=tl.token_match)
    decoded = tl.decode[1] - tl.decode[0]
    shown = "`" + r.output_readable.replace("`", "'").replace("|", "¦") + "`"
    output = t("r_output", out=shown, n=len(r.output_tokens))
    parked = f"{p.checkpoint_bytes / 1024:.0f} KiB{' INT8' if p.int8 else ''}"
    evicted = t("r_kv_tokens", n=p.evicted_kv_tokens)
    session = t("r_session_n", h=res.state_hits, r=res.replayed_tokens, s=res.saved_fraction)
    rows = [
        (t("r_prompt"), t("r_tokens", n=tl.prompt_len), verbatim(short(r.prompt, 60))),
        (t("r_match"), f"{tl.token_match}", t("r_match_n")),
        (t("r_restore"), f"**{tl.restore_at}**", t("r_restore_n")),
        (t("r_replayed"), f"**{tl.token_match - tl.restore_at}**", replayed),
        (t("r_prefilled"), f"{tl.prompt_len - tl.token_match} / {decoded}", output),
        (t("r_parked"), f"{len(tl.checkpoints)}", ", ".join(map(str, tl.checkpoints))),
        (t("r_uncached"), f"{r.replay_steps.uncached_error:.1e}", t("r_relative")),
        (t("r_active"), t("r_peak", a=p.active_peak, b=p.active_capacity), t(f"pol_{policy}")),
        (t("r_ckpt_slots"), f"{p.checkpoint_used} / {cap}", parked),
        (t("r_cow"), f"{p.copies} / {p.donations}", t("r_track", n=p.track_writes)),
        (t("r_evictions"), t("r_states", n=p.evicted_states), evicted),
        (t("r_session"), count("req", len(res.requests), t), session),
    ]
    body = "\n".join(f"| {a} | {b}<br><small>{c}</small> |" for a, b, c in rows)
    return f"{t('s_request', n=req + 1)}\n\n{t('th')}\n|---|---|\n" + body
