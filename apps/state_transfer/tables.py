"""state_transfer's tables in the language of ``t``: the object header, the prefill -> decode
summary and the refusals (an instance's refusal is program output: shown as code)."""

from __future__ import annotations

from kda_core.studies import transfer as st
from words.catalog import T


def _clip(text: str, n: int, t: T) -> str:
    """``text`` cut to ``n`` characters, its full length said in closed parentheses."""
    return text if len(text) <= n else t("clipped", text=text[: n - 1], n=len(text))


def _code(text: str) -> str:
    return "`" + text.replace("`", "'").replace("|", "¦") + "`"


def metadata_markdown(a: st.Anatomy, t: T) -> str:
    rows = "\n".join(f"| `{k}` | `{_clip(v, 90, t)}` |" for k, v in a.metadata)
    shapes = ", ".join(
        f"{p} {list(s)} {d}" for p, s, d in zip(a.parts, a.tiny_shapes, a.tiny_dtypes)
    )
    head = t("meta_title", n=a.file_bytes, shapes=_code(shapes))
    return f"{head}\n\n{t('meta_th')}\n|---|---|\n{rows}"


def pd_markdown(r: st.PDRun, t: T) -> str:
    same = t("same_yes") if r.tokens == r.reference_tokens else t("same_no")
    return t(
        "pd_md",
        source=t.word("src", r.source),
        at=r.restore_at,
        n=r.prompt_len,
        pub=list(r.published),
        moved=r.bytes_moved,
        same=same,
        d=r.max_dlogit,
    )


def refusals_markdown(m: st.Refusals, t: T) -> str:
    """The instance's refusal message is program output: shown as it prints it, as code."""
    rows = "\n".join(
        f"| {t.word('mis', k)} | `{f or '—'}` | {_code(_clip(msg, 110, t))} | "
        f"{'✓' if ok else '✗'} |"
        for k, f, msg, ok in zip(m.kinds, m.fields, m.messages, m.served_ok)
    )
    return f"{t('mis_th')}\n|---|---|---|---|\n{rows}"


def tiers_note(r: st.TierRates, t: T) -> str:
    """What the host tier holds, and why "+ host" adds nothing when it has no hit."""
    i = r.setups.index("device+host")
    host_hits = int(r.hits[i, 1])
    if host_hits:
        return t("tiers_why_some", h=r.host_ckpts, k=host_hits)
    return t("tiers_why_none", h=r.host_ckpts, w=int(r.bytes_written[i, 0]) // r.checkpoint_bytes)
