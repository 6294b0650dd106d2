"""fleet_routing's routers table in the language of ``t`` (``kda_core.studies.fleet``), and a
router's, an engine's and a reason's code in words (``words.fleet_routing``)."""

from __future__ import annotations

from apps.ui.figures import compact
from kda_core.studies.fleet import FleetStudy
from words.catalog import T


def engine_name(engine: str, t: T) -> str:
    return t(f"en_{engine}")


def router_name(router: str, t: T) -> str:
    return t(f"r_{router}")


def reason_name(reason: str, t: T) -> str:
    return t(f"g_{reason}")


def summary_markdown(s: FleetStudy, t: T) -> str:
    """The routers' table and the state-aware router's gain."""
    n = len(s.chosen.input_len)
    head = t(
        "s_head", trace=s.trace_name, n=n, k=s.replicas, engine=engine_name(s.engine, t), w=s.weight
    )
    rows = [t("s_cols"), "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in s.routers:
        v = {k: s.rate(r, k) for k in ("state_hit_rate", "expected_hit_rate", "load_skew")}
        over, regret = (compact(s.rate(r, k)) for k in ("over_promised_tokens", "regret_tokens"))
        rows.append(
            f"| {router_name(r, t)} | {v['state_hit_rate']:.1%} | {v['expected_hit_rate']:.1%} "
            f"| {over} | {v['load_skew']:.2f} | {regret} "
            f"| {s.rate(r, 'ttft_p50_s'):.1f} / {s.rate(r, 'ttft_p99_s'):.1f} |"
        )
    # percentage points of input tokens restored
    gain = 100 * (s.rate("state_aware", "state_hit_rate") - s.rate("kv_events", "state_hit_rate"))
    over = s.rate("kv_events", "over_promised_tokens") - s.rate(
        "state_aware", "over_promised_tokens"
    )
    return "\n".join(
        [head, "", *rows, "", t("s_gain", gain=gain, over=f"{over:,.0f}"), "", t("s_note")]
    )


__all__ = ["engine_name", "reason_name", "router_name", "summary_markdown"]
