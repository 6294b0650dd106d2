"""One colour palette shared by the apps (plotly) and the figures (matplotlib).

Plain hex strings only: kda_core never imports a UI library.
"""

from __future__ import annotations

COLORS: dict[str, str] = {
    "kv": "#1f77b4",  # MLA latent KV (grows per token)
    "state": "#d62728",  # KDA recurrent state (fixed size)
    "conv": "#ff7f0e",  # short-conv window
    "replay": "#9467bd",  # tokens replayed from a checkpoint to the match
    "prefill": "#2ca02c",  # fresh prefill
    "decode": "#17becf",  # decode
    "hit": "#8c564b",  # cached / reused tokens
    "free": "#c7c7c7",  # free memory
    "checkpoint": "#e377c2",  # checkpoint markers
    "neutral": "#7f7f7f",
}

# Categorical colours (budgets, policies, formats, configurations, accepted vs rejected ...):
# hues that none of the semantic colours above use, so a category never reads as "KV" or
# "state". Colour-blind safe (Paul Tol's muted scheme, reordered for contrast).
SERIES: tuple[str, ...] = (
    "#332288",  # indigo
    "#999933",  # olive
    "#882255",  # wine
    "#DDAA33",  # sand
    "#004949",  # dark teal
    "#CC6677",  # rose
    "#44AA99",  # teal
    "#661100",  # dark brown
)
