"""The blog figures draw exactly the arrays kda_core.studies returns (small study parameters:
``--quick``): series by gid, colours, labels, footers, in both languages."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from plot_helpers import MODULES, by_gid, figure, line, quick

from plots import style


def test_k3_memory_vs_context_draws_the_plan() -> None:
    p = quick("plot_k3_memory_vs_context")
    fig = figure("plot_k3_memory_vs_context")
    mla, kda = line(fig, "mla"), line(fig, "kda")
    np.testing.assert_array_equal(mla.get_xdata(), p.context_lens)
    np.testing.assert_array_equal(mla.get_ydata(), p.kv_bytes)
    np.testing.assert_array_equal(kda.get_ydata(), p.state_bytes)
    assert p.kv_bytes[0] == 24 * (512 + 64) * 2  # one token of K3's MLA latent, bf16
    assert set(p.state_bytes.tolist()) == {p.slot_bytes} and p.slot_bytes == 29_039_616
    assert p.context_lens[-1] == 1_000_000 and p.crossover_context == 1051


def test_chunk_agreement_draws_errors_and_cost() -> None:
    d = quick("plot_chunk_agreement")
    fig = figure("plot_chunk_agreement")
    ag, cost = d.agreement, d.cost
    for i, T in enumerate(ag.T_values.tolist()):
        ln = line(fig, f"T{T}")
        np.testing.assert_array_equal(ln.get_xdata(), ag.chunk_sizes)
        np.testing.assert_array_equal(ln.get_ydata(), ag.o_rel[i])
    assert ag.o_rel.max() < 1e-13  # float64 agreement
    np.testing.assert_array_equal(line(fig, "steps").get_ydata(), cost.steps_ratio[-1])
    np.testing.assert_array_equal(line(fig, "flops").get_ydata(), cost.flops_ratio[-1])
    # 65,536 tokens divide evenly: the step saving is exactly C; chunking costs more FLOPs
    np.testing.assert_array_equal(cost.steps_ratio[-1], cost.chunk_sizes)
    assert (cost.flops_ratio[-1] > 1).all()


def test_affine_composition_draws_groupings_and_orders() -> None:
    d = quick("plot_affine_composition")
    fig = figure("plot_affine_composition")
    g = [r.get_width() for r in by_gid(fig, "grouping")]
    o = [r.get_width() for r in by_gid(fig, "order")]
    np.testing.assert_array_equal(g, d.grouping_S_diff)
    np.testing.assert_array_equal(o, d.order_S_rel)
    assert max(g) < 1e-12 and o[0] < 1e-12 and min(o[1:]) > 1e-3
    (im,) = by_gid(fig, "b_A->B->C")
    np.testing.assert_array_equal(im.get_array(), d.b_true)


def test_int8_checkpoint_draws_error_capacity_and_divergence() -> None:
    d = quick("plot_int8_checkpoint")
    fig = figure("plot_int8_checkpoint")
    (im,) = by_gid(fig, "error")
    np.testing.assert_array_equal(im.get_array(), d.errors.error)
    caps = [r.get_width() for r in by_gid(fig, "capacity")]
    np.testing.assert_array_equal(caps, d.memory_k3.capacity)
    assert d.memory_k3.labels[:2] == ("native", "int8 / key channel")
    assert caps[1] > 1.8 * caps[0]  # INT8 nearly doubles the checkpoints per budget
    dv = d.divergence
    np.testing.assert_array_equal(line(fig, "state_once").get_ydata(), dv.park_once_state_dist)
    np.testing.assert_array_equal(line(fig, "state_every").get_ydata(), dv.every_step_state_dist)
    np.testing.assert_array_equal(line(fig, "logit_once").get_ydata(), dv.park_once_logit_diff)
    assert dv.every_step_state_dist[-1] > dv.park_once_state_dist[-1]


def test_unified_memory_draws_the_comparison() -> None:
    c = quick("plot_unified_memory")
    fig = figure("plot_unified_memory")
    np.testing.assert_array_equal(line(fig, "static").get_ydata(), c.static_mean_concurrency)
    np.testing.assert_array_equal(line(fig, "static").get_xdata(), c.ratios)
    assert line(fig, "unified_mean").get_ydata()[0] == c.unified.mean_concurrency
    run = line(fig, "running_eager_None").get_ydata()
    np.testing.assert_array_equal(run, c.unified.timeline.running)
    assert c.unified.mean_concurrency > c.best_static.mean_concurrency


def test_speculative_memory_draws_rings_and_states() -> None:
    m = quick("plot_speculative_memory")
    fig = figure("plot_speculative_memory")
    np.testing.assert_array_equal(line(fig, "per_draft").get_ydata(), m.per_draft_state_bytes[1])
    np.testing.assert_array_equal(line(fig, "rings").get_ydata(), m.ring_bytes[1])
    np.testing.assert_array_equal(line(fig, "conv").get_ydata(), m.conv_window_bytes[1])
    bars = [r.get_height() for r in by_gid(fig, "deploy")]
    assert bars == [m.deploy_ring_bytes, m.deploy_per_draft_bytes, m.deploy_conv_window_bytes]
    assert m.models == ("k3-mini", "kimi-k3")
    assert (m.ring_bytes < m.per_draft_state_bytes).all()


def test_spec_hits_draws_the_study() -> None:
    d = quick("plot_spec_hits")
    fig = figure("plot_spec_hits")
    for i, (on, drop) in enumerate(zip(d.lookahead, d.drop, strict=True)):
        np.testing.assert_array_equal(line(fig, f"off_{i}").get_ydata(), on.vllm_no_drafts)
        np.testing.assert_array_equal(line(fig, f"on_{i}").get_ydata(), on.vllm)
        np.testing.assert_array_equal(line(fig, f"drop_{i}").get_ydata(), drop.vllm)
    # the drop at block 768: floor(n / 768) * 768 - 768 for n = 1,537 (quick lengths)
    eagle_drop = d.drop[0]
    i = eagle_drop.prompt_len.tolist().index(1537)
    assert (eagle_drop.vllm[i], eagle_drop.vllm_no_drafts[i]) == (768, 1536)


def test_prefix_replay_draws_segments_replay_and_drift() -> None:
    d = quick("plot_prefix_replay")
    fig = figure("plot_prefix_replay")
    for i, req in enumerate(d.scenario.requests):
        for a, b, phase in req.timeline.segments:
            (bar,) = by_gid(fig, f"turn{i}_{phase}")
            assert (bar.get_x(), bar.get_width()) == (a, b - a)
    last = d.scenario.requests[-1]
    assert last.timeline.restore_at < last.timeline.token_match  # a real replay
    dist = line(fig, "dist").get_ydata()
    np.testing.assert_array_equal(dist, last.replay_steps.dist)
    assert dist[-1] == 0.0 and dist[0] > 0.1
    np.testing.assert_array_equal(line(fig, "exact").get_ydata(), d.drift.exact)
    np.testing.assert_array_equal(line(fig, "bad").get_ydata(), d.drift.inconsistent)
    assert d.drift.exact.max() < 1e-10 < d.drift.int8.min() and d.drift.inconsistent.min() > 0.1


# the scripts of this block: reader-facing footers, the palette rule, readable axes
MINE = (
    "plot_chunk_agreement",
    "plot_affine_composition",
    "plot_prefix_replay",
    "plot_int8_checkpoint",
    "plot_retention_policies",
    "plot_speculative_memory",
)


def _footer(fig) -> str:  # noqa: ANN001
    (text,) = [t for t in fig.texts if t.get_position()[1] < 0.02]  # new_figure's source line
    return text.get_text()


@pytest.mark.parametrize("name", MINE)
def test_footer_names_the_data_not_the_code(name: str) -> None:
    en, zh = _footer(figure(name)), _footer(figure(name, "zh"))
    for text in (en, zh):
        assert "kda_core" not in text and "()" not in text and "studies." not in text, text
    assert en.startswith("Data: ") and zh.startswith("数据：")
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh)  # translated, not the English line


def _color(artist) -> str:  # noqa: ANN001
    c = artist.get_color() if hasattr(artist, "get_color") else artist.get_facecolor()
    return matplotlib.colors.to_hex(c)


def test_categories_use_series_colours_in_order() -> None:
    """Palette rule: comparisons (park once vs every step, restore modes, models, metrics,
    same vs other map) take SERIES in a fixed order; concepts keep their COLORS."""
    s = style.SERIES
    fig = figure("plot_int8_checkpoint")
    for kind in ("state", "logit"):
        assert _color(line(fig, f"{kind}_once")) == s[0]
        assert _color(line(fig, f"{kind}_every")) == s[1]
    assert {_color(r) for r in by_gid(fig, "capacity")} == {style.COLORS["checkpoint"]}
    fig = figure("plot_speculative_memory")
    assert [_color(line(fig, f"ratio_{m}")) for m in ("k3-mini", "kimi-k3")] == [s[0], s[1]]
    assert _color(line(fig, "rings")) == style.COLORS["replay"]
    fig = figure("plot_prefix_replay")
    assert [_color(line(fig, k)) for k in ("exact", "int8", "bad")] == [s[0], s[1], s[2]]
    fig = figure("plot_chunk_agreement")
    assert [_color(line(fig, k)) for k in ("steps", "flops")] == [s[0], s[1]]
    fig = figure("plot_affine_composition")
    assert {_color(r) for r in by_gid(fig, "grouping")} == {s[0]}
    assert [_color(r) for r in by_gid(fig, "order")][:2] == [s[0], s[1]]


def test_prefix_replay_replay_axis_shows_positions_in_tokens() -> None:
    d = quick("plot_prefix_replay")
    fig = figure("plot_prefix_replay")
    bx = line(fig, "dist").axes
    fig.draw_without_rendering()
    ticks = [t.get_text() for t in bx.get_xticklabels() if t.get_text()]
    assert ticks and all(t.isdigit() for t in ticks)  # no raw bytes such as "\\xbd"
    lo, hi = bx.get_xlim()
    pos = d.scenario.requests[-1].replay_steps.positions
    assert lo < pos[0] and hi > pos[-1]  # every replayed position is in view
    tl = d.scenario.requests[-1].timeline
    xlabel = bx.get_xlabel()
    assert "(tokens)" in xlabel and f"{tl.restore_at} → {tl.token_match}" in xlabel


def test_int8_colour_bar_is_labelled() -> None:
    fig = figure("plot_int8_checkpoint")
    (im,) = by_gid(fig, "error")
    assert im.colorbar.ax.get_ylabel() == "dequantized − exact"
    (im,) = by_gid(figure("plot_int8_checkpoint", "zh"), "error")
    assert im.colorbar.ax.get_ylabel() == "反量化值 − 精确值"


def _drawn(name: str):  # noqa: ANN201
    """The figure drawn once on an Agg canvas (text extents need a real renderer)."""
    fig = figure(name)
    FigureCanvasAgg(fig).draw()
    return fig


def _overlaps(fig, a, b) -> bool:  # noqa: ANN001
    r = fig.canvas.get_renderer()
    return a.get_window_extent(r).overlaps(b.get_window_extent(r))


def test_labels_clear_legends_and_bars() -> None:
    # chunk_agreement: the step-saving labels ("128×") stay below the legend
    fig = _drawn("plot_chunk_agreement")
    bx = line(fig, "steps").axes
    labels = [t for t in bx.texts if t.get_text().endswith("×")]
    assert labels and not any(_overlaps(fig, t, bx.get_legend()) for t in labels)
    # affine_composition: the float64 ε label sits below the last bar
    fig = _drawn("plot_affine_composition")
    for gid in ("grouping", "order"):
        bars = by_gid(fig, gid)
        ax = bars[0].axes
        (eps,) = [t for t in ax.texts if t.get_text() == "float64 ε"]
        assert not any(_overlaps(fig, eps, b) for b in bars)


def test_checkpoint_density_draws_the_sweep() -> None:
    s = quick("plot_checkpoint_density")
    fig = figure("plot_checkpoint_density")
    for j in range(len(s.budget_labels)):
        np.testing.assert_array_equal(line(fig, f"mem{j}").get_ydata(), s.peak_state_bytes[:, j])
        np.testing.assert_array_equal(line(fig, f"ttft{j}").get_ydata(), s.ttft_mean_s[:, j])
        star = line(fig, f"opt{j}")
        assert star.get_xdata()[0] == s.intervals[s.optimum[j]]
    np.testing.assert_array_equal(line(fig, "an_mem").get_ydata(), s.analytic.state_bytes)
    assert s.trace_name.endswith(f"[:{MODULES['plot_checkpoint_density'].QUICK_REQUESTS}]")


def test_retention_policies_draws_the_sweep() -> None:
    s = quick("plot_retention_policies")
    fig = figure("plot_retention_policies")
    for i in range(len(s.labels)):
        np.testing.assert_array_equal(line(fig, f"hit{i}").get_ydata(), s.state_hit_rate[i])
        np.testing.assert_array_equal(line(fig, f"ck{i}").get_ydata(), s.checkpoints_stored[i])
    assert line(fig, "ideal").get_ydata()[0] == s.ideal_token_hit_rate
    assert (s.state_hit_rate <= s.ideal_token_hit_rate + 1e-12).all()  # token hit is the ceiling


# ---------------------------------------------------------------------------------------------
# style and runner


DENSITY_MEMORY = ("plot_checkpoint_density", "plot_k3_memory_vs_context", "plot_unified_memory")


@pytest.mark.parametrize("name", DENSITY_MEMORY)
def test_density_memory_footers_name_the_data(name: str) -> None:
    en, zh = _footer(figure(name)), _footer(figure(name, "zh"))
    for text in (en, zh):
        assert "kda_core" not in text and "()" not in text and "studies." not in text, text
    assert en.startswith("Data: ") and zh.startswith("数据：")


def test_checkpoint_density_one_analytic_replay_curve_and_note() -> None:
    """The plot's title and note are the app's (one catalog, ``words.phrases``)."""
    from kda_core.studies import density
    from words import phrases
    from words.checkpoint_density import MSG

    s = quick("plot_checkpoint_density")
    fig = figure("plot_checkpoint_density")
    np.testing.assert_array_equal(line(fig, "an_rep").get_ydata(), s.analytic.replay_curve)
    (note,) = by_gid(fig, "replay_note")
    notes, en = density.replay_notes(s), MSG.lang("en")
    assert note.get_text() == phrases.replay_note(notes, en, width=52, detail=False)
    for t in notes.trends:  # one line per curve, what that curve does
        assert f"{t.budget}: " in note.get_text()
    assert fig._suptitle.get_text().replace("\n", " ") == phrases.headline(notes, en)
    if not np.all(s.replay_slope >= 0.5):  # replay does not grow like K
        assert "replay ~K" not in fig._suptitle.get_text()


def test_k3_crossover_is_the_plans_value() -> None:
    p = quick("plot_k3_memory_vs_context")
    fig = figure("plot_k3_memory_vs_context")
    ax = line(fig, "mla").axes
    assert f"MLA > KDA from {p.crossover_context:,} tokens" in [t.get_text() for t in ax.texts]


def test_unified_memory_marks_the_cut_long_context_line() -> None:
    c = quick("plot_unified_memory")
    fig = _drawn("plot_unified_memory")
    x_end = 2 * c.unified.makespan
    cut = [res for res in (c.best_static, *c.phase_static) if res.makespan > x_end]
    marks = fig.findobj(lambda a: a.get_gid() == "cut0")
    assert len(marks) == (1 if cut else 0)
    if cut:
        assert marks[0].get_xdata()[0] == x_end
        texts = [t.get_text() for t in marks[0].axes.texts]
        assert f"→ runs to step {cut[0].makespan:,}" in texts
    # the buffer panel's legend sits below the panel, off the KV area
    top = line(fig, "kv").axes
    assert top.get_legend() is None
    r = fig.canvas.get_renderer()
    (leg,) = [a.get_legend() for a in fig.axes if a.get_legend() is not None and a is not top
              and "KDA" in a.get_legend().get_texts()[0].get_text()]  # fmt: skip
    assert leg.get_window_extent(r).y1 < top.get_window_extent(r).y0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_density_footer_and_unified_labels_stay_readable(lang: str) -> None:
    """checkpoint_density's source line fits the figure (it wraps); in
    unified_memory's ratio panel no two texts overlap (the phase lines are named in a legend,
    not by rotated text over the best-static label)."""
    fig = figure("plot_checkpoint_density", lang)
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    (foot,) = [t for t in fig.texts if t.get_position()[1] < 0.02]
    box = foot.get_window_extent(r)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width + 0.5, (box, fig.bbox.width)
    fig = figure("plot_unified_memory", lang)
    FigureCanvasAgg(fig).draw()
    cr = line(fig, "unified_mean").axes
    texts = [t for t in cr.texts if t.get_text().strip()]
    assert len(texts) >= 2
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            assert not _overlaps(fig, a, b), (a.get_text(), b.get_text())
        assert not _overlaps(fig, a, cr.get_legend()), a.get_text()
