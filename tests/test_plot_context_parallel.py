"""plots/plot_context_parallel.py draws exactly what kda_core.studies.context_parallel returns
(the file, determinism and translation checks run in tests/test_plots.py for every script)."""

from __future__ import annotations

import numpy as np

from plots import plot_context_parallel as mod
from plots import style


def _one(fig, gid: str):  # noqa: ANN001, ANN202
    (art,) = fig.findobj(lambda a: a.get_gid() == gid)
    return art


def test_context_parallel_draws_the_study() -> None:
    d = mod.compute(quick=True)
    with style.rc(40, "en"):
        fig = mod.make_figure(d)
    b = d.bytes
    np.testing.assert_array_equal(_one(fig, "bytes_kv").get_ydata(), b.kv_bytes)
    assert set(_one(fig, "bytes_logdepth").get_ydata()) == {b.scan_bytes["logdepth"]}
    assert b.kv_bytes[-1] > 100 * b.scan_bytes["logdepth"]  # 1M tokens of KV vs a few maps
    for scan in ("logdepth", "allgather"):
        np.testing.assert_array_equal(_one(fig, f"speedup_{scan}").get_ydata(),
                                      d.model.speedup[scan])  # fmt: skip
    heights = [r.get_height() for r in fig.findobj(lambda a: a.get_gid() == "phase_local")]
    shares = d.model.phases["logdepth"]["local"] / d.model.wall_s["logdepth"]
    np.testing.assert_allclose(heights, shares, rtol=1e-12)
    exact = [r.get_height() for r in fig.findobj(lambda a: a.get_gid() == "exact")]
    np.testing.assert_array_equal(exact, np.maximum(d.demo.o_rel, 1e-18))
    assert max(d.demo.o_rel) <= 1e-10


def test_chinese_labels() -> None:
    d = mod.compute(quick=True)
    with style.rc(40, "zh"):
        fig = mod.make_figure(d, lang="zh")
    texts = [ax.get_title(loc="left") for ax in fig.axes] + [ax.get_xlabel() for ax in fig.axes]
    assert "模型加速比，T = 32k" in texts and "上下文长度 T（token）" in texts
