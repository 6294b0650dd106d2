"""prefix_replay study: timelines, tree snapshots, pools panel, replay steps, restore drift."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from kda_core.model import TinyHybrid, encode
from kda_core.studies import prefix_replay as pr
from kda_core.studies.prefix_replay._scenarios import make_policy


@pytest.fixture(scope="module")
def default() -> pr.ScenarioResult:
    return pr.run_scenario()


def test_every_scenario_hits_and_replays() -> None:
    for name in pr.SCENARIOS:
        res = pr.run_scenario(name)
        assert len(res.requests) == len(pr.SCENARIOS[name].prompts)
        assert res.state_hits == len(res.requests) - 1  # every later request restores
        assert res.replayed_tokens > 0 and 0 < res.saved_fraction < 1
        assert res.restored_tokens == sum(v.timeline.restore_at for v in res.requests)
    assert any(b >= 0x80 for p in pr.SCENARIOS["multi_turn"].prompts for b in encode(p))


def test_timeline_segments(default: pr.ScenarioResult) -> None:
    for v in default.requests:
        tl = v.timeline
        assert tl.prompt_len == len(encode(v.prompt))
        assert 0 <= tl.restore_at <= tl.token_match < tl.prompt_len
        segs = tl.segments
        assert segs[0][0] == 0 and segs[-1][1] == tl.decode[1] == tl.prompt_len + 6
        assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))  # contiguous
        phases = [s[2] for s in segs]
        assert phases == [p for p in ("restore", "replay", "prefill", "decode") if p in phases]
        assert tl.replay == (tl.restore_at, tl.token_match)
        assert all(tl.restore_at < c <= tl.decode[1] for c in tl.checkpoints)
    second = default.requests[1].timeline
    assert second.restore_at > 0 and second.token_match > second.restore_at


def test_replay_trace_reaches_zero_at_the_match(default: pr.ScenarioResult) -> None:
    model = TinyHybrid()
    for v in default.requests[1:]:
        tr, tl = v.replay_steps, v.timeline
        n = tl.token_match - tl.restore_at + 1
        assert tr.positions.tolist() == list(range(tl.restore_at, tl.token_match + 1))
        assert tr.states.shape == (n, 6, 4, 32, 32) and tr.dist.shape == (n,)
        assert tr.dist[-1] == 0.0 and np.all(tr.dist[:-1] > 0)
        assert tr.dist[0] > 0.1  # restoring alone is far from the state at the match
        assert tr.uncached_error < 1e-12
        ids = encode(v.prompt)
        assert tr.tokens.tolist() == ids[tl.restore_at - 1 : tl.token_match]
        # the state at the match equals an independent uncached prefill there
        st = model.new_state()
        model.prefill(ids[: tl.token_match], st)
        np.testing.assert_allclose(
            tr.states[-1], np.stack([s.S for s in st.kda]), rtol=0, atol=1e-12
        )
        norms = np.sqrt(np.sum(tr.states**2, axis=(1, 2, 3, 4)))
        np.testing.assert_allclose(tr.state_norm, norms, rtol=1e-12)
    tr = default.requests[1].replay_steps
    h = pr.heatmap(tr, 0, layer=2, head=3)
    np.testing.assert_array_equal(h, tr.states[0, 2, 3])
    assert h.shape == (32, 32)
    assert np.all(pr.heatmap(tr, len(tr.dist) - 1, 1, 1, delta=True) == 0.0)
    first = default.requests[0].replay_steps
    assert first.states.shape[0] == 0  # nothing restored
    with pytest.raises(ValueError, match="no replay steps"):
        pr.heatmap(first, 0)


def test_tree_snapshots(default: pr.ScenarioResult) -> None:
    for i, v in enumerate(default.requests):
        for snap in (v.tree_during, v.tree_after):
            n = len(snap.node_id)
            assert snap.states + snap.tombstones == n - 1
            assert snap.parent[0] == -1 and snap.depth[0] == 0 and snap.label[0] == "root"
            assert np.all(snap.end[1:] > snap.start[1:])
            child = snap.parent[1:]
            idx = {int(k): j for j, k in enumerate(snap.node_id)}
            assert all(snap.start[j + 1] == snap.end[idx[int(p)]] for j, p in enumerate(child))
            assert np.all(snap.state_age[~snap.has_state] == -1)
            assert np.all(snap.is_leaf <= snap.has_state)  # every leaf holds a state
        assert int(v.tree_after.kv_lock.max()) == 0 and int(v.tree_after.state_lock.max()) == 0
        if i > 0:  # the restore node is locked while the request runs
            locked = v.tree_during.state_lock > 0
            assert locked.sum() == 1
            assert int(v.tree_during.end[locked][0]) == v.timeline.restore_at
    last = default.requests[-1].tree_after
    assert last.tombstones >= 1  # branch splits leave KV-only nodes


def test_pools_panel(default: pr.ScenarioResult) -> None:
    prev = None
    for v in default.requests:
        p = v.pools
        assert p.active_capacity == 256 and p.active_peak == 3  # one pool; 1 + 2 track slots
        assert p.checkpoint_used == v.tree_after.states
        assert p.checkpoint_bytes == p.checkpoint_used * p.checkpoint_slot_bytes
        if prev is not None:
            assert p.copies == prev.copies + v.copies
            assert p.donations == prev.donations + v.donations
        prev = p
    assert default.requests[1].copies == 1  # the COW restore
    assert sum(v.donations for v in default.requests) == prev.donations > 0


def test_int8_and_budget_options() -> None:
    q = pr.run_scenario("multi_turn", int8=True, checkpoint_slots=4)
    assert q.requests[-1].pools.int8 and q.requests[-1].pools.checkpoint_used <= 4
    assert q.requests[-1].pools.evicted_states > 0
    native = pr.run_scenario("multi_turn")
    assert (
        q.requests[0].pools.checkpoint_slot_bytes < native.requests[0].pools.checkpoint_slot_bytes
    )
    # INT8: the replay still ends at distance 0 from its own state at the match, but that state
    # is not the uncached one; uncached_error says by how much (naive twin: a fresh prefill)
    model = TinyHybrid()
    for v in q.requests[1:]:
        tr, tl = v.replay_steps, v.timeline
        assert tl.restore_at > 0 and tr.dist[-1] == 0.0
        st = model.new_state()
        model.prefill(encode(v.prompt)[: tl.token_match], st)
        S = np.stack([x.S for x in st.kda])
        naive = float(np.linalg.norm(tr.states[-1] - S) / np.linalg.norm(S))
        assert tr.uncached_error == pytest.approx(naive, rel=1e-9)
        # Per key channel INT8 errs by at most max|row| / 254 per element, so the parked
        # state's relative Frobenius error is at most sqrt(V) / 254 (0.022 at V = 32) when it
        # is restored. The replay then runs exact arithmetic on it: layer 0's update is a
        # contraction (alpha <= 1, ||I - beta k k^T|| <= 1), deeper layers see perturbed
        # inputs, so we allow twice the restore bound at the match (the twin above is exact).
        bound = np.sqrt(model.config.head_dim) / 254
        assert 0 < tr.uncached_error < 2 * bound


def test_restore_drift() -> None:
    d = pr.restore_drift(max_new_tokens=8)
    assert d.request == 2 and d.restore_at < d.token_match
    assert d.exact.shape == d.int8.shape == d.inconsistent.shape == (8,)
    assert d.exact.max() < 1e-9
    assert d.inconsistent.max() > 1e-3
    assert 1e-6 < d.int8.max() < 0.25
    assert d.exact_tokens == d.uncached_tokens
    assert 0 < d.int8_restore_error[1] <= np.sqrt(TinyHybrid().config.head_dim) / 254


def test_custom_prompts_and_policies() -> None:
    res = pr.run_scenario(prompts=("abc " * 20, "abc " * 20 + "def"), spacing=16, policy="sglang")
    assert res.name == "custom" and res.requests[1].timeline.restore_at > 0
    for name in pr.POLICIES:
        r = pr.run_scenario("system_tools_branches", policy=name, spacing=16, max_new_tokens=2)
        assert r.state_hits >= 1


@pytest.mark.parametrize(
    ("kw", "arg"),
    [
        (dict(name="nope"), "name"),
        (dict(policy="lru"), "policy"),
        (dict(spacing=0), "spacing"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(prompts=()), "prompts"),
        (dict(prompts=("",)), "prompts"),
        (dict(prompts="text"), "prompts"),
        (dict(checkpoint_slots=-1), "checkpoint_slots"),
        (dict(int8="yes"), "int8"),
    ],
)
def test_bad_input(kw: dict, arg: str) -> None:
    with pytest.raises(ValueError, match=arg):
        pr.run_scenario(**kw)


def test_bad_drift_and_heatmap_input(default: pr.ScenarioResult) -> None:
    with pytest.raises(ValueError, match="request"):
        pr.restore_drift(request=5)
    tr = default.requests[1].replay_steps
    with pytest.raises(ValueError, match="step"):
        pr.heatmap(tr, 999)
    with pytest.raises(ValueError, match="layer"):
        pr.heatmap(tr, 0, layer=6)
    with pytest.raises(ValueError, match="head"):
        pr.heatmap(tr, 0, head=-1)


# ---------------------------------------------------------------------------------------------
# incremental sessions (what the app's Send uses): identical to run_scenario


def _same(a: object, b: object, path: str = "") -> None:
    """Field-by-field equality of study dataclasses (arrays exactly; ``seconds`` is timing)."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif hasattr(a, "__dataclass_fields__"):
        assert type(a) is type(b), path
        for f in a.__dataclass_fields__:
            if f != "seconds":
                _same(getattr(a, f), getattr(b, f), f"{path}.{f}")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b and type(a) is type(b), (path, a, b)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(policy="sglang", spacing=16, int8=True),
        dict(policy="marconi", checkpoint_slots=3),  # evictions + the policy's counters
        dict(policy="vllm", spacing=16, strategy="no_buffer", max_new_tokens=3),
    ],
)
def test_incremental_session_equals_run_scenario(kw: dict) -> None:
    prompts = pr.SCENARIOS["multi_turn"].prompts + pr.SCENARIOS["system_tools_branches"].prompts
    s = pr.ServingSession.new(**kw)
    assert s.prompts == () and s.views == ()
    sent = [s.send(p) for p in prompts]
    ref = pr.run_scenario(prompts=prompts, **kw)
    res = s.result()
    assert res is s.result()  # built once per length
    _same(res, ref)
    assert res.state_hits >= 3 and res.replayed_tokens > 0
    assert tuple(sent) == res.requests and s.prompts == prompts
    assert [v.index for v in res.requests] == list(range(len(prompts)))
    if "checkpoint_slots" in kw:
        assert res.requests[-1].pools.evicted_states > 0
    s.engine.check_integrity()


def test_fork_is_independent_and_equal() -> None:
    prompts = pr.SCENARIOS["long_document"].prompts
    base = pr.serve("long_document")  # a private fork of the cached served session
    assert base.result() is pr.run_scenario("long_document")
    a, b = base.fork(), copy.deepcopy(base)  # deepcopy == fork: the weights are shared
    assert b.engine.model is base.engine.model and b.engine is not base.engine
    assert b.engine.cache is not base.engine.cache and b.views is base.views
    extra = prompts[0].replace("decay act on", "state hold")
    va, vb = a.send(extra), b.send(extra)
    _same(va, vb)
    assert va.timeline.restore_at > 0 and va.index == 3
    assert len(base.views) == 3 and base.engine.stats().requests == 3  # untouched
    base.engine.check_integrity()
    a.engine.check_integrity()
    assert a.result().name == "long_document"
    _same(a.fork("custom").result(), pr.run_scenario(prompts=(*prompts, extra)))
    # the cached run is untouched by sends on forks
    assert len(pr.run_scenario("long_document").requests) == 3
    assert len(pr.serve("long_document").views) == 3


def test_forked_sessions_keep_checkpoints_read_only() -> None:
    """The app serves every session through forks: a fork's stored checkpoints must be as
    read-only as the original's (numpy's deepcopy alone returns writable arrays)."""
    base = pr.serve("long_document")
    for fork in (base.fork(), copy.deepcopy(base)):
        pool = fork.engine.pools.checkpoints
        assert pool.owned(), "the scenario stores checkpoints"
        for slot in pool.owned():
            for arr in pool.raw(slot):
                assert not arr.flags.writeable
        fork.engine.check_integrity()


def test_session_bad_input_leaves_it_unchanged() -> None:
    s = pr.ServingSession.new()
    with pytest.raises(ValueError, match="the session is empty"):
        s.result()
    for bad in ("", "x" * (pr.MAX_PROMPT_TOKENS + 1), None):
        with pytest.raises(ValueError, match="prompt"):
            s.send(bad)  # type: ignore[arg-type]
    assert s.views == () and s.engine.stats().requests == 0
    for i in range(pr.MAX_PROMPTS):
        s.send(f"q{i}")
    with pytest.raises(ValueError, match=f"at most {pr.MAX_PROMPTS} requests"):
        s.send("one more")
    assert len(s.result().requests) == pr.MAX_PROMPTS
    for kw, arg in (
        (dict(name="nope"), "name"),
        (dict(policy="lru"), "policy"),
        (dict(spacing=2000), "spacing"),
        (dict(int8=1), "int8"),
        (dict(checkpoint_slots=0), "checkpoint_slots"),
        (dict(max_new_tokens=65), "max_new_tokens"),
        (dict(strategy="ring"), "strategy"),
    ):
        with pytest.raises(ValueError, match=arg):
            pr.ServingSession.new(**kw)


def test_restore_drift_takes_the_session_settings() -> None:
    """The drift under sglang / 4 slots / INT8 parking; naive twin: three fresh engines."""
    from kda_core.serve.engine import Engine

    kw = dict(policy="sglang", spacing=16, checkpoint_slots=4)
    d = pr.restore_drift("multi_turn", max_new_tokens=6, int8=True, **kw)
    assert (d.policy, d.spacing, d.checkpoint_slots, d.inconsistent_int8) == ("sglang", 16, 4, True)
    ps = pr.SCENARIOS["multi_turn"].prompts
    model = TinyHybrid()

    def naive(q: bool, **gen: object):
        e = Engine(make_policy("sglang", 16), int8_checkpoints=q, checkpoint_slots=4, model=model)
        for p in ps[:2]:
            e.generate(p, 6)
        return e.generate(ps[2], 6, reference=True, **gen)

    exact, q, bad = naive(False), naive(True), naive(True, restore="inconsistent")
    assert d.restore_at == exact.restore_at > 0 and d.token_match == exact.token_match
    for got, r in ((d.exact, exact), (d.int8, q), (d.inconsistent, bad)):
        assert r.ref_logits is not None
        np.testing.assert_allclose(got, np.abs(r.logits - r.ref_logits).max(1), rtol=0, atol=1e-12)
    assert d.exact.max() < 1e-9 < 1e-3 < d.inconsistent.max()
    native = pr.restore_drift("multi_turn", max_new_tokens=6, **kw)
    assert not native.inconsistent_int8
    assert not np.array_equal(native.inconsistent, d.inconsistent)  # INT8 parking shows
    np.testing.assert_array_equal(native.exact, d.exact)
    with pytest.raises(ValueError, match="policy"):
        pr.restore_drift(policy="lru")
    with pytest.raises(ValueError, match="checkpoint_slots"):
        pr.restore_drift(checkpoint_slots=0)


def test_readable_tokens_and_outputs():
    """Generated bytes are shown as decoded text, escapes only outside valid UTF-8."""
    assert pr.readable(list("héllo\n中".encode())) == "héllo⏎中"
    assert pr.readable([0xE4, 0xB8, 0x41, 0x0F, 0xFF]) == "\\xe4\\xb8A\\x0f\\xff"
    res = pr.run_scenario()
    for r in res.requests:
        assert len(r.output_tokens) == r.timeline.decode[1] - r.timeline.decode[0] == 6
        assert r.output == bytes(r.output_tokens).decode("utf-8", errors="replace")
        assert r.output_readable == pr.readable(r.output_tokens)
        assert all(c.isprintable() for c in r.output_readable)
        for snap in (r.tree_during, r.tree_after):
            assert all("\ufffd" not in lab and lab.isprintable() for lab in snap.label)
        assert all(len(t) in (1, 4) for t in r.replay_steps.token_text)  # a char or \xNN
    assert [r.timeline.replayed for r in res.requests] == [
        r.timeline.token_match - r.timeline.restore_at for r in res.requests
    ]


def test_drift_agreement_is_a_token_comparison():
    d = pr.restore_drift(request=2)
    assert pr.ARMS == ("exact", "int8", "inconsistent") and d.replayed == 7
    for arm in pr.ARMS:
        toks = getattr(d, f"{arm}_tokens")
        naive = [a == b for a, b in zip(toks, d.uncached_tokens)]
        assert d.agree(arm).tolist() == naive and d.same_tokens(arm) == sum(naive)
    assert d.same_tokens("exact") == len(d.uncached_tokens)  # exact restore: same greedy text
    with pytest.raises(ValueError, match="arm must be one of"):
        d.agree("bogus")
