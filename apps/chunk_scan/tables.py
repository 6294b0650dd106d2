"""chunk_scan's summary in the language of ``t``: agreement, groupings and orders, prefix
compositions and the cost of one K3 layer, from the study's numbers."""

from __future__ import annotations

import numpy as np

from kda_core.studies import chunk_scan as cs
from words import phrases
from words.catalog import T


def summary_markdown(s: cs.ChunkScanStudy, m: cs.Composition, t: T) -> str:
    a = s.agreement
    C = s.chunk_size
    ja = int(np.flatnonzero(a.chunk_sizes == C)[0])  # the study puts C in both grids
    i = int(np.argmax(s.cost.T_values))
    j = int(np.flatnonzero(s.cost.chunk_sizes == C)[0])
    lines = [
        t(
            "s_agreement",
            source=phrases.input_source(a.source, t),
            C=C,
            o=a.o_max_abs[:, ja].max(),
            S=a.S_max_abs[:, ja].max(),
            Cs=a.chunk_sizes.tolist(),
            Ts=a.T_values.tolist(),
            o_all=a.o_max_abs.max(),
            S_all=a.S_max_abs.max(),
        ),
        t(
            "s_groupings",
            dM=m.grouping_M_diff.max(),
            db=m.grouping_b_diff.max(),
            lo=m.order_S_rel[1:].min(),
            hi=m.order_S_rel[1:].max(),
        ),
        t("s_prefix", bounds=m.boundary_tokens.tolist(), d=m.boundary_S_diff.max()),
        t(
            "s_cost",
            T=int(s.cost.T_values[i]),
            C=C,
            steps=int(s.cost.chunked_steps[i, j]),
            rec=int(s.cost.recurrent_steps[i]),
            ratio=s.cost.flops_ratio[i, j],
        ),
    ]
    return "\n".join(lines)
