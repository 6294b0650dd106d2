"""kda_core.studies.exports: the CSV columns behind the apps' figures.

The builders only reshape a study result, so they are checked on small hand-made results
(``SimpleNamespace`` with the fields a study dataclass has): every row must name its grid cell
and carry exactly that cell's values; the expected cells are written out here by hand."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from kda_core.studies import exports


def _equal_lengths(cols: dict) -> int:
    lengths = {len(v) for v in cols.values()}
    assert len(lengths) == 1, lengths
    return lengths.pop()


def test_density_sweep_one_row_per_interval_and_budget():
    shape = (3, 2)  # 3 intervals x 2 budgets
    metrics = {
        m: np.arange(6, dtype=float).reshape(shape) + 10 * n
        for n, m in enumerate(exports._SWEEP_METRICS)
    }
    s = NS(
        intervals=np.array([1024, 2048, 4096]),
        budget_labels=("8 GiB", "unlimited"),
        optimum=np.array([2, 0]),
        pareto=np.array([[1, 0], [0, 0], [0, 1]], bool),
        **metrics,
    )
    cols = exports.columns("density_sweep", s)
    assert list(cols) == ["interval", "budget", *exports._SWEEP_METRICS, "optimum", "pareto"]
    assert _equal_lengths(cols) == 6
    # row 3 = interval 2048 (i=1), budget "unlimited" (j=1): flat index 1 * 2 + 1 = 3
    assert cols["interval"][3] == 2048 and cols["budget"][3] == "unlimited"
    assert cols["ttft_mean_s"][3] == 3.0 + 20  # metric n=2 of the tuple
    assert cols["optimum"] == [False, True, False, False, True, False]
    assert cols["pareto"] == [True, False, False, False, False, True]
    p = exports.columns("density_pareto", s)
    assert p["interval"] == [1024, 1024, 2048, 2048, 4096, 4096]
    assert p["budget"] == ["8 GiB", "unlimited"] * 3
    assert p["pareto"] == cols["pareto"]


def test_chunk_columns():
    grid = np.array([[1.0, 2.0], [3.0, 4.0]])
    a = NS(
        T_values=np.array([64, 128]),
        chunk_sizes=np.array([16, 32]),
        o_max_abs=grid,
        o_rel=grid / 10,
        S_max_abs=grid * 2,
        S_rel=grid * 3,
    )
    cols = exports.columns("chunk_agreement", a)
    assert cols["T"] == [64, 64, 128, 128] and cols["chunk_size"] == [16, 32, 16, 32]
    assert cols["S_max_abs"] == [2.0, 4.0, 6.0, 8.0]
    c = NS(
        T_values=np.array([64]),
        chunk_sizes=np.array([16, 32]),
        recurrent_steps=np.array([64]),
        chunked_steps=np.array([[4, 2]]),
        recurrent_flops=np.array([100]),
        chunked_flops=np.array([[150, 300]]),
        flops_ratio=np.array([[1.5, 3.0]]),
    )
    cost = exports.columns("chunk_cost", c)
    assert cost["recurrent_steps"] == [64, 64] and cost["chunked_steps"] == [4, 2]
    assert cost["flops_ratio"] == [1.5, 3.0]
    m = NS(M_true=np.array([[1.0, 2.0], [3.0, 4.0]]), M_swapped=np.zeros((2, 2)))
    maps = exports.columns("chunk_maps", m)
    assert maps["row"] == [0, 0, 1, 1] and maps["col"] == [0, 1, 0, 1]
    assert maps["M_true"] == [1.0, 2.0, 3.0, 4.0]


def test_context_parallel_columns():
    S_in = np.arange(12.0).reshape(2, 2, 3)  # 2 ranks, K=2, V=3
    d = NS(
        S_in=S_in,
        S_true=S_in + 0.5,
        scan="logdepth",
        bytes_sent=np.array([5, 7]),
        bytes_other=np.array([9, 11]),
        k3_scan_bytes={"logdepth": 70, "allgather": 90},
        kv_bytes=1000,
    )
    st = exports.columns("cp_state", d, 1)
    assert st["key"] == [0, 0, 0, 1, 1, 1] and st["value"] == [0, 1, 2, 0, 1, 2]
    assert st["S_in"] == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0] and st["S_true"][0] == 6.5
    b = exports.columns("cp_bytes", d, ("demo", "K3"))
    assert b["series"] == ["logdepth"] * 2 + ["allgather"] * 2 + ["mla_kv_allgather"]
    assert b["group"] == ["demo", "K3"] * 2 + ["K3"]  # the MLA all-gather: K3's layer only
    # demo: the scan run sent max 7, the other scan max 11; K3: the same messages at K3 size
    assert b["bytes"] == [7, 70, 11, 90, 1000]
    models = {
        8192: NS(P=np.array([1, 2]), speedup={"logdepth": [1.0, 1.9], "allgather": [1.0, 1.5]})
    }
    sp = exports.columns("cp_speedup", models)
    assert list(sp) == ["P", "speedup_logdepth_T8192", "speedup_allgather_T8192"]
    assert sp["speedup_allgather_T8192"] == [1.0, 1.5]


def test_int8_columns():
    z = np.arange(6.0).reshape(2, 3)
    e = NS(state=z, restored=z + 1, error=np.ones((2, 3)), bound=np.full((2, 3), 2.0))
    cols = exports.columns("int8_error_map", e)
    assert cols["key_channel"] == [0, 0, 0, 1, 1, 1] and cols["value_channel"] == [0, 1, 2] * 2
    assert cols["restored"][4] == 5.0

    def cap(model, n):
        return NS(
            model=model,
            labels=tuple(f"f{i}" for i in range(n)),
            state_bytes=np.arange(n),
            conv_bytes=np.arange(n),
            total_bytes=np.arange(n) * 2,
            capacity=np.arange(n) + 1,
            gain=np.ones(n),
        )

    rows = exports.columns("int8_capacity", cap("K3", 2), cap("tiny", 1))
    assert rows["model"] == ["K3", "K3", "tiny"] and rows["variant"] == ["f0", "f1", "f0"]
    assert rows["total_bytes"] == [0, 2, 0] and rows["capacity"] == [1, 2, 1]


def test_speculative_columns():
    v = NS(
        ring_len=3,
        pos_after_verify=np.array([5, 6, 7]),
        pos_after_commit=np.array([5, 6, -1]),
        kind_after_verify=np.array([1, 1, 2]),
        kind_after_commit=np.array([1, 1, -1]),
    )
    ring = exports.columns("spec_ring", v, ("after verify", "after commit"))
    assert ring["stage"] == ["after verify"] * 3 + ["after commit"] * 3
    assert ring["slot"] == [0, 1, 2, 0, 1, 2] and ring["position"] == [5, 6, 7, 5, 6, -1]
    from kda_core.studies import speculative as sp

    assert ring["kind"][2] == sp.SLOT_KINDS[2] and ring["kind"][5] == sp.SLOT_KINDS[-1]
    mem = NS(
        models=("K3", "tiny"),
        d_values=np.array([1, 4]),
        ring_len=np.array([2, 5]),
        ring_bytes=np.array([[10, 40], [1, 4]]),
        per_draft_state_bytes=np.ones((2, 2)),
        conv_window_bytes=np.zeros((2, 2)),
        ratio=np.array([[0.1, 0.2], [0.3, 0.4]]),
    )
    m = exports.columns("spec_memory", mem)
    assert m["model"] == ["K3", "K3", "tiny", "tiny"] and m["D"] == [1, 4, 1, 4]
    assert m["ring_bytes"] == [10, 40, 1, 4] and m["ratio"][2] == 0.3


def test_transfer_timeline_times_from_the_first_event():
    ev = [
        NS(t=2.0, instance="prefill", kind="publish", boundary=64, nbytes=10),
        NS(t=2.5, instance="decode", kind="fetch", boundary=64, nbytes=10),
    ]
    cols = exports.columns("transfer_timeline", NS(events=ev))
    assert cols["t_ms"] == [0.0, 500.0] and cols["instance"] == ["prefill", "decode"]
    assert exports.columns("transfer_timeline", NS(events=[]))["t_ms"] == []


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        exports.columns("no_such_figure")
    with pytest.raises(ValueError, match="data: columns\\('cp_state', ...\\): missing"):
        exports.columns("cp_state")


def test_prefix_replay_columns():
    pools = [
        NS(checkpoint_used=1, copies=0, donations=1, evicted_states=0, checkpoint_bytes=10),
        NS(checkpoint_used=2, copies=1, donations=1, evicted_states=1, checkpoint_bytes=20),
    ]
    res = NS(
        requests=[
            NS(pools=p, timeline=NS(segments=s, checkpoints=c))
            for p, s, c in zip(pools, ([(0, 4, "prefill")], [(0, 2, "restore")]), ([4], []))
        ]
    )
    for p, kv in zip(pools, (0, 3)):
        p.evicted_kv_tokens = kv
    cols = exports.columns("replay_pools", res)
    assert cols["request"] == [1, 2] and cols["COW copies (restores)"] == [0, 1]
    assert cols["checkpoint bytes"] == [10, 20] and cols["evicted KV tokens"] == [0, 3]
    tl = exports.columns("replay_timeline", res)
    assert tl == {
        "request": [1, 2, 1],
        "phase": ["prefill", "restore", "checkpoint"],
        "start": [0, 0, 4],
        "end": [4, 2, 4],
    }
    d = NS(
        exact=np.zeros(2),
        int8=np.array([0.1, 0.2]),
        inconsistent=np.array([1.0, 2.0]),
        uncached_tokens=(5, 6),
        inconsistent_tokens=(5, 7),
    )
    drift = exports.columns("replay_drift", d)
    assert drift["token"].tolist() == [1, 2] and drift["inconsistent_token"] == [5, 7]


def test_planner_columns():
    p = NS(
        context_lens=np.array([1024, 2048]),
        kv_bytes=np.array([10, 20]),
        state_bytes=np.array([7, 7]),
        ratios=np.array([0.5]),
        running_by_state=np.array([3]),
        running_by_kv=np.array([5]),
        max_running_by_ratio=np.array([3]),
        strategy_names=("no_buffer", "extra_buffer"),
        strategy_reserved=np.array([1, 2]),
        strategy_held=np.array([1, 3]),
        strategy_max_running=np.array([-1, 4]),
    )
    mem = exports.columns("plan_memory", p)
    assert list(mem) == ["context_tokens", "kv_bytes", "state_slot_bytes"]
    assert mem["kv_bytes"].tolist() == [10, 20]
    ratio = exports.columns("plan_ratio", p)
    assert ratio["max_running"].tolist() == [3] and ratio["running_by_kv"].tolist() == [5]
    strat = exports.columns("plan_strategies", p)
    assert strat["strategy"] == ["no_buffer", "extra_buffer"]
    assert strat["max_running_by_state"].tolist() == [-1, 4]
