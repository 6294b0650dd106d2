"""kda_core.studies.memory: workload replay through unified vs static pools (real K3 sizes)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kda_core import sizing
from kda_core.memory._pools import UnifiedPool
from kda_core.studies import memory as sm


@pytest.fixture(scope="module")
def mix() -> sm.Workload:
    return sm.shifting_mix(n_chat=1200, n_long=60, seed=1)


@pytest.fixture(scope="module")
def comparison(mix) -> sm.Comparison:
    return sm.compare(mix, ratios=np.geomspace(0.05, 3.0, 10))


def test_default_config_is_k3_tp8():
    cfg = sm.ReplayConfig()
    assert cfg.state_slot_bytes == 27_131_904 + 1_907_712
    assert cfg.kv_bytes_per_token == 27_648
    assert cfg.page_bytes == 64 * 27_648
    assert cfg.slots_per_request == 3  # extra_buffer: 1 live + 2 ping-pong
    c2 = sm.k3_config(strategy="no_buffer", kv_dtype="fp8_e4m3", ssm_dtype="float32")
    assert c2.slots_per_request == 1
    assert c2.kv_bytes_per_token == 13_824
    assert c2.state_slot_bytes == sizing.slot_bytes("kimi-k3", 8, "float32", "bfloat16")
    assert sm._k3_ratio_hint() == pytest.approx(29_039_616 / 27_648, rel=1e-15)


def test_unified_beats_static_on_a_shifting_mix(comparison):
    """The must-show: unified >= best static ratio in hindsight, > each phase-tuned ratio."""
    c = comparison
    u = c.unified.mean_concurrency
    assert c.phase_names == ("chat", "long-context")
    r_chat, r_long = c.phase_ratios
    assert r_chat > 1.0 > 0.1 > r_long  # short prompts want a big ratio, long ones a small one
    assert set(c.phase_ratios) <= set(c.ratios.tolist())
    assert u >= c.static_mean_concurrency.max()
    assert u >= c.best_static.mean_concurrency
    assert [r.ratio for r in c.static] == pytest.approx(c.ratios.tolist(), rel=1e-15)
    for res in c.phase_static:
        assert u > res.mean_concurrency
    # recorded numbers (seed 1, 1200 chat + 60 long requests, 28 GiB per GPU):
    # unified 89.6, best static 60.8 (r = 0.77), chat-tuned (r = 1.55) 51.4,
    # long-tuned (r = 0.050) 15.6
    assert u > 1.3 * c.best_static.mean_concurrency
    assert c.unified.makespan < c.best_static.makespan
    assert c.unified.mean_queue_delay < c.best_static.mean_queue_delay
    assert c.unified.completed and all(r.completed for r in c.phase_static)


def _naive_replay(w: sm.Workload, cfg: sm.ReplayConfig, kind: str, ratio: float):
    """Reservation-only scheduler in plain Python (no pool): admit / finish steps per request."""
    n = len(w)
    S, P, spr = cfg.state_slot_bytes, cfg.page_bytes, cfg.slots_per_request
    tot = [int(a + b) for a, b in zip(w.input_len, w.output_len)]
    pages = [-(-t // cfg.page_tokens) for t in tot]
    if kind == "static":
        budget = int(cfg.total_bytes * ratio / (1 + ratio))
        st_cap = budget // S
        kv_cap = (cfg.total_bytes - st_cap * S) // P
    admit, finish = [-1] * n, [-1] * n
    done = [0] * n
    running: list[int] = []
    head, step, res_b, res_s, res_p = 0, 0, 0, 0, 0
    while head < n or running:
        while head < n and w.arrival_step[head] <= step:
            if kind == "static":
                ok = res_s + spr <= st_cap and res_p + pages[head] <= kv_cap
            else:
                ok = res_b + spr * S + pages[head] * P <= cfg.total_bytes
            if not ok:
                break
            res_b += spr * S + pages[head] * P
            res_s += spr
            res_p += pages[head]
            admit[head] = step
            running.append(head)
            head += 1
        still = []
        for r in running:
            i = int(w.input_len[r])
            if done[r] < i:
                done[r] += min(cfg.prefill_chunk, i - done[r])
            else:
                done[r] += min(cfg.decode_tokens_per_step, tot[r] - done[r])
            if done[r] >= tot[r]:
                finish[r] = step
                res_b -= spr * S + pages[r] * P
                res_s -= spr
                res_p -= pages[r]
            else:
                still.append(r)
        running = still
        step += 1
    return np.array(admit), np.array(finish)


@pytest.mark.parametrize(("kind", "ratio"), [("eager", 0.9), ("lazy", 0.9), ("static", 0.3)])
def test_replay_agrees_with_naive_scheduler(kind, ratio):
    w = sm.shifting_mix(n_chat=150, n_long=8, seed=2, chat_rate=20.0, long_rate=1.0)
    cfg = sm.ReplayConfig(total_bytes=8 * sm.GIB)
    r = sm.replay(w, kind, ratio, cfg)
    a, f = _naive_replay(w, cfg, kind, ratio)
    np.testing.assert_array_equal(r.admit_step, a)
    np.testing.assert_array_equal(r.finish_step, f)
    tl = r.timeline
    steps = np.arange(r.makespan)
    running = ((a[None, :] <= steps[:, None]) & (f[None, :] >= steps[:, None])).sum(axis=1)
    np.testing.assert_array_equal(tl.running, running)
    assert r.mean_concurrency == pytest.approx(running.mean(), abs=1e-12)
    assert tl.tokens.sum() == int((w.input_len + w.output_len).sum())
    assert r.mean_queue_delay == pytest.approx(float((a - w.arrival_step).mean()), abs=1e-12)


def test_timeline_invariants(mix):
    cfg = sm.ReplayConfig()
    T = cfg.total_bytes
    per_req_state = cfg.slots_per_request * cfg.state_slot_bytes
    eager = sm.replay(mix, "eager")
    lazy = sm.replay(mix, "lazy")
    static = sm.replay(mix, "static", 0.5)
    for r in (eager, lazy, static):
        tl = r.timeline
        assert (tl.state_frontier <= tl.kv_frontier).all()
        assert (tl.state_bytes + tl.kv_bytes <= T).all()
        assert (tl.state_bytes + tl.kv_bytes <= tl.reserved_bytes).all()
        np.testing.assert_array_equal(tl.state_bytes, (tl.running - tl.finished) * per_req_state)
        assert tl.admitted.sum() == len(mix) and tl.finished.sum() == len(mix)
        assert (tl.queued >= 0).all()
        assert r.completed and r.dropped == 0
    # eager stays hole-free: frontiers hug the live bytes
    np.testing.assert_array_equal(eager.timeline.state_frontier, eager.timeline.state_bytes)
    np.testing.assert_array_equal(T - eager.timeline.kv_frontier, eager.timeline.kv_bytes)
    # lazy admits exactly the same requests but moves far fewer entries
    np.testing.assert_array_equal(lazy.timeline.running, eager.timeline.running)
    assert lazy.total_moves < eager.total_moves / 20
    # the static regions never cross
    assert (static.timeline.state_frontier <= static.state_capacity * cfg.state_slot_bytes).all()
    assert static.total_moves == 0
    # blocked steps: static at a long-context ratio is blocked during the chat phase
    long_tuned = sm.replay(mix, "static", sm.tuned_ratio(mix, cfg, 1))
    assert long_tuned.blocked_steps > eager.blocked_steps


def test_drops_requests_that_can_never_fit():
    cfg = sm.ReplayConfig(total_bytes=2 * sm.GIB)
    w = sm.from_lengths([1000, 200_000, 500], [10, 10, 10])  # 200k tokens = 5.1 GiB of MLA KV
    r = sm.replay(w, "eager", config=cfg)
    assert r.dropped == 1 and r.completed
    assert r.admit_step.tolist()[1] == -1 and r.finish_step[[0, 2]].min() >= 0


def test_from_trace_duck_typed():
    tr = SimpleNamespace(
        arrival_s=np.array([10.0, 10.5, 12.0]),
        input_len=np.array([100, 2000, 300]),
        output_len=np.array([5, 0, 7]),
    )
    w = sm.from_trace(tr, seconds_per_step=0.5)
    assert w.arrival_step.tolist() == [0, 1, 4]
    r = sm.replay(w)
    assert r.completed and r.timeline.tokens.sum() == 2412
    with pytest.raises(ValueError, match="arrival_s"):
        sm.from_trace(object())


def _pool_layout(pool: UnifiedPool) -> SimpleNamespace:
    """Segments of a pool's buffer (``start``, ``end``, ``side``: 0 state, 1 kv, 2 hole,
    ``vid``: -1 for holes) and the two frontiers, read through the pool's public methods."""
    starts, ends, sides, vids = [], [], [], []
    for code, side in enumerate(("state", "kv")):
        e = pool.entry_bytes(side)
        p = np.arange(pool.watermark(side), dtype=np.int64)
        v = pool.positions(side)
        off = p * e if side == "state" else pool.total_bytes - (p + 1) * e
        starts.append(off)
        ends.append(off + e)
        sides.append(np.where(v >= 0, code, 2))
        vids.append(v)
    cat = np.concatenate
    return SimpleNamespace(
        start=cat(starts),
        end=cat(ends),
        side=cat(sides),
        vid=cat(vids),
        state_frontier=pool.state_frontier,
        kv_frontier=pool.kv_frontier,
    )


def test_pool_layout_segments():
    pool = UnifiedPool(240, 8, 24, mode="lazy")
    s = pool.alloc("state", 3)
    pool.alloc("kv", 4)
    pool.free("state", s[1:2])
    lay = _pool_layout(pool)
    assert lay.side.tolist() == [0, 2, 0, 1, 1, 1, 1]
    assert lay.start[:3].tolist() == [0, 24, 48] and lay.end[2] == lay.state_frontier == 72
    assert lay.start[3:].tolist() == [232, 224, 216, 208] and lay.kv_frontier == 208
    assert lay.vid[1] == -1


def test_bad_inputs():
    with pytest.raises(ValueError, match="kind must be one of"):
        sm.replay(sm.from_lengths([10], [1]), "dynamic")
    with pytest.raises(ValueError, match="input_len must be >= 1"):
        sm.from_lengths([0], [1])
    with pytest.raises(ValueError, match="non-decreasing"):
        sm.from_lengths([5, 5], [1, 1], [3, 1])
    with pytest.raises(ValueError, match="equal length"):
        sm.from_lengths([5, 5], [1])
    with pytest.raises(ValueError, match="n_chat"):
        sm.shifting_mix(n_chat=10**7)
    with pytest.raises(ValueError, match="max_steps"):
        sm.ReplayConfig(max_steps=10**9)
    with pytest.raises(ValueError, match="total_bytes"):
        sm.ReplayConfig(total_bytes=1 << 50)
    with pytest.raises(ValueError, match="ratios"):
        sm.compare(sm.from_lengths([10], [1]), ratios=[0.0])


def test_buffer_at_partitions_every_buffer(comparison):
    c = comparison
    slot = sm.ReplayConfig().state_slot_bytes
    pools = (c.unified, *c.static)
    step = sm.busiest_step(c)
    assert step == int(np.argmax(c.unified.timeline.running))
    assert c.unified.timeline.running[step] == c.unified.peak_concurrency
    for st in (0, step, c.unified.makespan - 1, c.unified.makespan + 5):
        b = sm.buffer_at(c, st, slot)
        assert b.kinds == tuple(r.kind for r in pools) and b.step == st
        parts = b.state_live + b.state_holes + b.free + b.kv_holes + b.kv_live
        for i, res in enumerate(pools):
            tl = res.timeline
            if st < tl.running.shape[0]:  # naive twin: read the timeline directly
                assert parts[i] == res.total_bytes
                assert b.state_live[i] == tl.state_bytes[st] and b.kv_live[i] == tl.kv_bytes[st]
                assert b.free[i] == tl.kv_frontier[st] - tl.state_frontier[st]
                assert b.running[i] == tl.running[st] and b.queued[i] == tl.queued[st]
            else:  # finished: all free
                assert b.free[i] == res.total_bytes and b.running[i] == 0
        assert np.isnan(b.state_edge[0])
        np.testing.assert_array_equal(b.state_edge[1:], [r.state_capacity * slot for r in c.static])
    with pytest.raises(ValueError, match="step"):
        sm.buffer_at(c, -1, slot)
