"""Tests for kda_core.policy: placement by hand-worked cases, eviction against naive twins."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kda_core.cache import policy as P
from kda_core.cache.radix import RadixStateCache


def hit(token_match: int, restore_at: int) -> SimpleNamespace:
    return SimpleNamespace(token_match=token_match, restore_at=restore_at)


# ---------------------------------------------------------------- make / validation


def test_make_builds_every_policy_with_defaults():
    assert P.POLICY_NAMES == ("interval", "sglang", "marconi", "vllm")
    assert P.make("interval").params() == {"every": 256, "request_end": False}
    s = P.make("sglang")
    assert (s.grid, s.track_interval, s.chunked_prefill_size, s.request_end, s.buffer) == (
        64,
        256,
        8192,
        False,
        "extra_buffer",
    )
    assert s.cache_options() == {"state_touch": "node", "max_states_per_path": None}
    assert P.make("sglang", lru="path", max_states_per_path=3).cache_options() == {
        "state_touch": "path",
        "max_states_per_path": 3,
    }
    m = P.make("marconi")
    # the artifact starts at alpha 0 and tunes it (retention.md §1.5)
    assert (m.alpha, m.alpha_value, m.kv_bytes_per_token) == ("auto", 0.0, 4 * 4 * 4096)
    assert m.alpha_grid == tuple(round(0.1 * i, 1) for i in range(21))
    v = P.make("vllm", mode="all")
    assert (v.mode, v.retention, v.cache_options()["state_touch"]) == (
        "all",
        None,
        "path_tail_first",
    )
    for name in P.POLICY_NAMES:
        c = P.make(name).make_cache(1)
        assert isinstance(c, RadixStateCache)


@pytest.mark.parametrize(
    "name, params, arg",
    [
        ("lru", {}, "name"),
        ("interval", {"every": 0}, "every"),
        ("interval", {"every": 2.5}, "every"),
        ("interval", {"request_end": 1}, "request_end"),
        ("interval", {"evry": 4}, "evry"),
        ("sglang", {"grid": 0}, "grid"),
        ("sglang", {"track_interval": -1}, "track_interval"),
        ("sglang", {"max_states_per_path": 0}, "max_states_per_path"),
        ("sglang", {"lru": "lfu"}, "lru"),
        ("sglang", {"buffer": "lazy"}, "buffer"),
        ("marconi", {"alpha": -0.1}, "alpha"),
        ("marconi", {"alpha": "tuned"}, "alpha"),
        ("marconi", {"bootstrap": 0}, "bootstrap"),
        ("marconi", {"alpha_grid": ()}, "alpha_grid"),
        ("marconi", {"d_model": 0}, "d_model"),
        ("marconi", {"efficiency_fn": 3}, "efficiency_fn"),
        ("vllm", {"mode": "last"}, "mode"),
        ("vllm", {"retention": -64}, "retention"),
        ("vllm", {"block_size": 0}, "block_size"),
        ("vllm", {"match_unit": 0}, "match_unit"),
    ],
)
def test_bad_parameters_name_the_argument(name, params, arg):
    with pytest.raises(ValueError, match=arg):
        P.make(name, **params)


@pytest.mark.parametrize(
    "call, arg",
    [
        (lambda p: p.checkpoint_positions(0), "prompt_len"),
        (lambda p: p.checkpoint_positions(10, total_len=5), "total_len"),
        (lambda p: p.checkpoint_positions(10, hit(-1, 0)), "token_match"),
        (lambda p: p.checkpoint_positions(10, hit(5, 6)), "restore_at"),
        (lambda p: p.checkpoint_positions(10, object()), "match"),
        (lambda p: p.checkpoint_positions(10, page_size=0), "page_size"),
        (lambda p: p.checkpoint_positions(10, chunk_size=0), "chunk_size"),
        (lambda p: p.checkpoint_positions(P.MAX_LEN + 1), "prompt_len"),
        (lambda p: p.evict_states(None, 1), "cache"),
        (lambda p: p.evict_states(RadixStateCache(), -1), "num"),
    ],
)
def test_bad_call_arguments_name_the_argument(call, arg):
    for name in P.POLICY_NAMES:
        with pytest.raises(ValueError, match=arg):
            call(P.make(name))


def test_position_count_is_capped():
    with pytest.raises(ValueError, match="every"):
        P.make("interval", every=1).checkpoint_positions(P.MAX_LEN)
    with pytest.raises(ValueError, match="block_size"):
        P.make("vllm", mode="all", block_size=1).checkpoint_positions(P.MAX_LEN)


# ---------------------------------------------------------------- placement


def test_interval_positions():
    p = P.make("interval", every=256)
    assert p.checkpoint_positions(1000, hit(300, 100), total_len=1300) == (
        256,
        512,
        768,
        1024,
        1280,
    )
    assert p.checkpoint_positions(1000, hit(600, 512)) == (768,)
    p = P.make("interval", every=256, request_end=True)
    assert p.checkpoint_positions(1000, hit(300, 100), total_len=1300)[-2:] == (1280, 1300)
    p = P.make("interval", every=1024, request_end=True)
    assert p.checkpoint_positions(3000, None, page_size=512) == (1024, 2048, 2560)
    with pytest.raises(ValueError, match="every"):
        P.make("interval", every=100).checkpoint_positions(3000, page_size=512)


def test_sglang_seed_example_keeps_four_states():
    # The seed: 13,600 in, 512 out, chunked prefill 6,144, track interval 256 -> 4 states.
    # Prefill steps [0, 6144), [6144, 12288), [12288, 13600): each tracks
    # prefix + floor(extend / 64) * 64 (ScheduleBatch._mamba_radix_cache_v2_req_prepare_for_
    # extend), so 6144, 12288 and 12288 + 1280; decode consumes up to 13600 + 511 tokens and
    # crosses 13824 and 14080 (seq_len % 256 == 0, _mamba_prefix_cache_update), of which the
    # finished insert keeps only the last (MambaComponent.prepare_for_caching_req).
    p = P.make("sglang")
    pos = p.checkpoint_positions(13600, None, total_len=13600 + 512 - 1, chunk_size=6144)
    assert pos == (6144, 12288, 13568, 14080)
    # the same count as sizing's seed arithmetic
    from kda_core import sizing

    assert len(pos) == sizing.checkpoints_per_request(13600, 512, 6144, 256) == 4


def test_sglang_no_buffer_example():
    # no_buffer: the key length after every prefill step and at the finished insert
    # (prepare_for_caching_req without the extra buffer); 150 in, 80 out (229 consumed)
    p = P.make("sglang", buffer="no_buffer")
    assert p.checkpoint_positions(150, None, total_len=229, chunk_size=64) == (64, 128, 150, 229)
    # restored at 100: steps [100, 164) and [164, 200), no decode
    assert p.checkpoint_positions(200, hit(120, 100), chunk_size=64) == (164, 200)
    with pytest.raises(ValueError, match="page_size=1"):
        p.checkpoint_positions(1024, None, page_size=16)


def test_sglang_extra_buffer_steps_branch_and_decode():
    p = P.make("sglang")
    # steps of 256 from 0; the last step [768, 1000) extends 232 -> 768 + 192 = 960; decode
    # boundaries 1024 and 1280 in (1000, 1300]: only the last (1280) is inserted
    assert p.checkpoint_positions(1000, None, total_len=1300, chunk_size=256) == (
        256,
        512,
        768,
        960,
        1280,
    )
    # the track counts from the step start: restored at 100, steps [100, 356), [356, 612),
    # ... the last [868, 1000) extends 132 -> 868 + 128
    assert p.checkpoint_positions(1000, hit(100, 100), chunk_size=256) == (356, 612, 868, 996)
    # a step shorter than the grid (64) tracks nothing
    assert p.checkpoint_positions(1000, hit(990, 960), chunk_size=64) == ()
    # branch hint floor(300/64)*64 = 256 replaces the first step's track (512): it lies in
    # (0, 512] and (256 - 0) % 64 == 0
    assert p.checkpoint_positions(1000, hit(300, 0), chunk_size=512) == (256, 960)
    # one 8192 step by default
    assert p.checkpoint_positions(1000, hit(300, 0)) == (256,)
    assert P.make("sglang", branch=False).checkpoint_positions(1000, hit(300, 0)) == (960,)
    # from restore 100 the branch 256 is off the step's grid (156 % 64 != 0): not tracked
    assert p.checkpoint_positions(1000, hit(300, 100)) == (996,)
    # request_end (a lab extension) adds the request end
    assert P.make("sglang", request_end=True).checkpoint_positions(1000, None, total_len=1300) == (
        960,
        1280,
        1300,
    )
    # page 512: grid lcm(max(64, 512), 512) = 512, decode grid lcm(512, 256) = 512
    assert P.make("sglang", track_interval=512).checkpoint_positions(
        3000, hit(1500, 0), total_len=4000, page_size=512, chunk_size=8192
    ) == (1024, 3584)
    assert p.checkpoint_positions(3000, None, total_len=4200, page_size=512) == (2560, 4096)


def test_marconi_positions_are_branch_and_last_only():
    p = P.make("marconi")
    assert p.checkpoint_positions(1000, None, total_len=1300) == (1300,)
    assert p.checkpoint_positions(1000, hit(300, 100), total_len=1300) == (300, 1300)
    assert p.checkpoint_positions(1000, hit(300, 300), total_len=1300) == (1300,)
    assert p.checkpoint_positions(1000, hit(600, 0), page_size=512) == (512,)
    # a block match covering a partial last block is clipped to the prompt
    assert p.checkpoint_positions(1000, hit(1024, 1024), page_size=512) == ()
    assert p.checkpoint_positions(1000, hit(1024, 512), page_size=512) == ()
    assert p.checkpoint_positions(1100, hit(1024, 512), page_size=512) == (1024,)


def test_marconi_shared_prefix_is_reused_on_third_occurrence():
    p = P.make("marconi")
    cache = p.make_cache(1)
    system = list(range(100, 160))
    restores = []
    for q in range(4):
        prompt = system + [q] * 10
        m = cache.match(prompt)
        restores.append(m.restore_at)
        pos = p.checkpoint_positions(len(prompt), m)
        r = cache.insert(prompt, states=[(x, None, 1) for x in pos])
        assert r.new == pos
    assert restores == [0, 0, 60, 60]
    assert cache.n_states == 5  # 4 request ends + the branch point


def test_vllm_align_positions():
    p = P.make("vllm", block_size=64, max_num_batched_tokens=256, shared_prefix=False)
    # steps of 256 (block multiples); the last cacheable boundary floor(999/64)*64 = 960 is
    # a stop (Scheduler._mamba_block_aligned_split), the last chunk ends the prompt at 1000
    assert p.checkpoint_positions(1000, None) == (256, 512, 768, 960)
    # from an unaligned restore point the first chunk stops at the next block boundary
    assert p.checkpoint_positions(1000, hit(100, 100)) == (128, 384, 640, 896, 960)
    # decode block boundaries
    assert p.checkpoint_positions(1000, None, total_len=1100) == (256, 512, 768, 960, 1024, 1088)
    # a block-aligned prompt also stops at P - B: a resend hits at most P - 1 tokens
    assert p.checkpoint_positions(1024, None) == (256, 512, 768, 960, 1024)
    assert P.make("vllm", block_size=64).checkpoint_positions(256, None) == (192, 256)
    # the shared-prefix junction floor(330/64)*64 = 320 is a chunk stop: later chunks shift
    q = P.make("vllm", block_size=64, max_num_batched_tokens=256)
    assert q.checkpoint_positions(1000, hit(330, 0)) == (256, 320, 576, 832, 960)
    assert q.checkpoint_positions(1000, hit(330, 0), chunk_size=1024) == (320, 960)
    # a junction at or below the restore point changes nothing
    assert q.checkpoint_positions(1000, hit(330, 320)) == (576, 832, 960)
    # a chunk smaller than the block advances within the block and re-aligns
    assert p.checkpoint_positions(200, None, chunk_size=48) == (64, 128, 192)
    assert p.checkpoint_positions(100, None, chunk_size=16) == (64,)


def test_vllm_retention_keeps_the_replay_boundary_and_the_junction():
    # MambaManager.reachable_block_mask: retention 0 keeps only the replay boundary
    # floor((P - 1) / B) * B and the junction, not the latest position. P = 300, 500 consumed:
    # states at 256 (prefill stop), 320, 384, 448 (decode); vLLM keeps 256
    r0 = P.make("vllm", block_size=64, retention=0)
    assert r0.checkpoint_positions(300, None, total_len=500) == (256,)
    assert r0.checkpoint_positions(300, hit(200, 0), total_len=500) == (192, 256)
    # retention 128: multiples of 128 plus the replay boundary 576
    r2 = P.make("vllm", mode="all", block_size=64, retention=128, shared_prefix=False)
    assert r2.checkpoint_positions(600, None) == (128, 256, 384, 512, 576)
    assert r2.checkpoint_positions(600, None, total_len=700) == (128, 256, 384, 512, 576, 640)
    # retention == block: dense
    r1 = P.make("vllm", block_size=64, retention=64)
    assert r1.checkpoint_positions(300, None, total_len=500) == (256, 320, 384, 448)


def test_vllm_all_and_partial_hits():
    p = P.make("vllm", mode="all", block_size=64, shared_prefix=False)
    assert p.checkpoint_positions(300, hit(100, 64)) == (128, 192, 256)
    r0 = P.make("vllm", mode="all", block_size=64, retention=0)
    assert r0.checkpoint_positions(300, hit(100, 0)) == (64, 256)  # junction + replay point
    # fine-grained units of 16: junction floor(100/16)*16 = 96, tail floor(299/16)*16 = 288
    ph = P.make("vllm", mode="all", block_size=64, retention=0, partial_hits=True, match_unit=16)
    assert ph.checkpoint_positions(300, hit(100, 0)) == (96, 288)
    pa = P.make("vllm", block_size=64, partial_hits=True, match_unit=16, shared_prefix=False)
    assert pa.checkpoint_positions(300, None) == (256, 288)
    with pytest.raises(ValueError, match="retention"):
        P.make("vllm", retention=100, block_size=64).checkpoint_positions(300)
    with pytest.raises(ValueError, match="match_unit"):
        P.make("vllm", partial_hits=True, match_unit=24, block_size=64).checkpoint_positions(300)
    with pytest.raises(ValueError, match="block_size"):
        P.make("vllm", block_size=64).checkpoint_positions(3000, page_size=512)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(P.POLICY_NAMES),
    st.integers(1, 5000),
    st.integers(0, 3000),
    st.data(),
    st.sampled_from([1, 16, 64]),
    st.one_of(st.none(), st.integers(64, 4096)),
)
def test_positions_are_sorted_page_aligned_and_inside_the_request(
    name, prompt_len, extra, data, page, chunk
):
    tm = data.draw(st.integers(0, prompt_len))
    ra = data.draw(st.integers(0, tm)) // page * page
    total = prompt_len + extra
    pol = P.make(name)
    pos = pol.checkpoint_positions(
        prompt_len, hit(tm, ra), total_len=total, chunk_size=chunk, page_size=page
    )
    assert list(pos) == sorted(set(pos))
    assert all(ra < p <= total and p % page == 0 for p in pos)
    assert pos == pol.checkpoint_positions(
        prompt_len, hit(tm, ra), total_len=total, chunk_size=chunk, page_size=page
    )
    # and the cache accepts them as they are
    cache = pol.make_cache(page)
    key = list(range(total))
    r = cache.insert(key, states=[(p, None, 1) for p in pos])
    assert r.new == pos


# ---------------------------------------------------------------- eviction


def _naive_lru_victim(cache):
    """Independent LRU: walk the tree, the unprotected state with the oldest access time.
    Protected = state-locked, or a KV-locked leaf (radix.py module doc)."""
    best = None
    stack = [cache.root]
    while stack:
        nd = stack.pop()
        stack.extend(nd.children.values())
        if nd is cache.root or not nd.has_state:
            continue
        if nd.state_lock > 0 or (not nd.children and nd.kv_lock > 0):
            continue
        if best is None or nd.state_time < best.state_time:
            best = nd
    return best


class _WalkingLRU(P.IntervalPolicy):
    """Overrides choose_victim, so Policy.evict_states runs its general victim loop."""

    def choose_victim(self, cache):  # type: ignore[no-untyped-def]
        return _naive_lru_victim(cache)


def _random_cache(pol, ops):
    c = pol.make_cache(1)
    for key, pos, nbytes, touch, lock in ops:
        ps = sorted(p for p in pos if p <= len(key)) or [len(key)]
        c.insert(key, states=[(p, (tuple(key), p), nbytes + p) for p in ps])
        m = c.match(key[: max(1, len(key) * touch // 4)])
        if lock and m.restore_at:
            c.lock_state(m.node)
    return c


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=10),
            st.sets(st.integers(1, 10), min_size=1, max_size=3),
            st.integers(1, 50),
            st.integers(0, 4),
            st.booleans(),
        ),
        min_size=1,
        max_size=15,
    ),
    st.integers(0, 6),
    st.integers(0, 400),
    st.sampled_from(["interval", "sglang", "vllm", "walking"]),
)
def test_lru_eviction_agrees_with_an_independent_lru(ops, num, nbytes, name):
    # The policy's evict_states (the cache's fast path for the LRU policies, the general
    # victim loop for "walking") against a naive loop over _naive_lru_victim on a twin cache:
    # same victims in the same order, same totals, stopping as soon as both targets are met.
    pol = _WalkingLRU() if name == "walking" else P.make(name)
    got_c, want_c = _random_cache(pol, ops), _random_cache(pol, ops)
    got_log: list = []
    want_log: list = []
    got_c.on_free_state = lambda s, n: got_log.append((s, n))
    want_c.on_free_state = lambda s, n: want_log.append((s, n))
    r = pol.evict_states(got_c, num=num, nbytes=nbytes)
    states = freed = 0
    while states < num or freed < nbytes:
        v = _naive_lru_victim(want_c)
        if v is None:
            break
        states += 1
        freed += v.state_bytes
        want_c.evict_state_node(v)
    assert got_log == want_log
    assert (r.states, r.state_bytes) == (states, freed)
    assert freed == sum(n for _, n in want_log) and states == len(want_log)
    got_c.check_integrity()


def test_marconi_flops_formula():
    got = P.marconi_flops(
        np.array([10.0]),
        np.array([4.0]),
        d_model=2,
        d_state=3,
        n_ssm_layers=5,
        n_attn_layers=7,
        n_mlp_layers=11,
    )

    def attn(x):
        return 8 * x * 4 + 4 * x * x * 2

    ssm = 12 * 6 * 4 + 16 * 6 * 2 * 3 + 10 * 6 * 2
    exp = 5 * ssm + 7 * (attn(10) - attn(4)) + 11 * 16 * 6 * 4
    assert got[0] == pytest.approx(exp, rel=1e-15)


def _naive_marconi_victim(pol, cache):
    rows = []
    stack = [cache.root]
    while stack:
        nd = stack.pop()
        stack.extend(nd.children.values())
        if nd is cache.root or not nd.has_state or len(nd.children) > 1:
            continue
        if nd.state_lock > 0 or (not nd.children and nd.kv_lock > 0):
            continue
        anc = nd.parent
        while anc is not cache.root and not anc.has_state:
            anc = anc.parent
        L, Lp = float(nd.plen), float(anc.plen)
        D, N = float(pol.d_model), float(pol.d_state)

        def attn(x, D=D):
            return 8 * x * D * D + 4 * x * x * D

        own = L - Lp
        fl = (
            pol.n_ssm_layers * (12 * own * D * D + 16 * own * D * N + 10 * own * D)
            + pol.n_attn_layers * (attn(L) - attn(Lp))
            + pol.n_mlp_layers * 16 * own * D * D
        )
        eff = fl / max(nd.state_bytes + pol.kv_bytes_per_token * L, 1.0)
        rec = 1.0 / (1.0 + cache.clock - nd.state_time)
        rows.append((nd, rec, eff))
    if not rows:
        return None

    def norm(xs):
        lo, hi = min(xs), max(xs)
        return [1.0] * len(xs) if len(xs) <= 1 or hi <= lo else [(x - lo) / (hi - lo) for x in xs]

    rn = norm([r[1] for r in rows])
    en = norm([r[2] for r in rows])
    scored = [
        (rn[i] + pol.alpha_value * en[i], rows[i][0].state_time, rows[i][0])
        for i in range(len(rows))
    ]
    return min(scored, key=lambda t: (t[0], t[1]))[2]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=12),
            st.sets(st.integers(1, 12), min_size=1, max_size=3),
            st.integers(1, 10**7),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
)
def test_marconi_vectorised_victim_agrees_with_naive(ops, alpha):
    pol = P.make("marconi", alpha=alpha, d_model=64, d_state=16, kv_bytes_per_token=1000)
    cache = pol.make_cache(1)
    locked = []
    for key, pos, nbytes, lock in ops:
        ps = sorted(p for p in pos if p <= len(key)) or [len(key)]
        cache.insert(key, states=[(p, None, nbytes) for p in ps])
        m = cache.match(key[: len(key) // 2 + 1])
        if lock and m.restore_at:
            cache.lock_state(m.node)
            locked.append(m.node)
    while True:
        exp = _naive_marconi_victim(pol, cache)
        got = pol.choose_victim(cache)
        assert got is exp
        if got is None:
            break
        assert len(got.children) <= 1
        pol.evict_states(cache, num=1)
        cache.check_integrity()
    assert all(n.has_state for n in locked)


def test_marconi_alpha_trades_recency_for_flop_efficiency():
    # two candidate leaves: a long one (high FLOPs per byte) touched long ago and a short
    # recent one; alpha 0 evicts the old long one, a large alpha the recent short one
    def build(alpha):
        pol = P.make("marconi", alpha=alpha, d_model=256, d_state=16, kv_bytes_per_token=0)
        c = pol.make_cache(1)
        c.insert(list(range(4000)), states=[(4000, "long", 1000)])
        c.insert([-1] * 4, states=[(4, "short", 1000)])
        return pol, c

    pol, c = build(0.0)
    assert pol.choose_victim(c).state == "long"
    pol, c = build(2.0)
    assert pol.choose_victim(c).state == "short"
    rows, scores = pol.scores(c)
    assert rows.size == 2 and scores.min() >= 0 and scores.max() <= 3.0


def test_marconi_skips_forks_and_evicts_single_child_internal_as_tombstone():
    pol = P.make("marconi", alpha=0.0)
    c = pol.make_cache(1)
    c.insert(list(range(8)), states=[(4, "fork", 1), (8, "a", 1)])
    c.insert(list(range(4)) + [9, 9], states=[(6, "b", 1)])
    c.insert([50, 51, 52, 53], states=[(2, "single", 1), (4, "c", 1)])
    c.match([50, 51, 52, 53])  # c and its single-child parent are now the most recent
    order = []
    while (v := pol.choose_victim(c)) is not None:
        order.append(v.state)
        assert v.state != "fork" or len(v.children) <= 1
        pol.evict_states(c, num=1)
        c.check_integrity()
    # the fork is a candidate only once one of its two children is gone
    assert order.index("fork") > min(order.index("a"), order.index("b"))
    assert set(order) == {"fork", "a", "b", "single", "c"}


def test_marconi_auto_alpha_bootstrap_and_tune():
    pol = P.make("marconi", alpha="auto", bootstrap=5)
    assert pol.alpha_value == 0.0 and not pol.tuning_due()
    c = pol.make_cache(1)
    for i in range(3):
        pol.note_request()
        c.insert([i, i], states=[(2, None, 1)])
    pol.evict_states(c, num=1)  # first eviction after N0 = 3 requests
    for _ in range(11):
        pol.note_request()
        assert not pol.tuning_due()
    pol.note_request()  # 15 = 5 * 3
    assert pol.tuning_due()
    seen = []
    best = pol.tune(lambda a: seen.append(a) or -((a - 0.7) ** 2))
    assert best == 0.7 and pol.alpha_value == 0.7 and seen == list(P.ALPHA_GRID)
    assert not pol.tuning_due()
    fixed = pol.with_alpha(0.3)
    assert fixed.alpha_value == 0.3 and not fixed.tuning_due()
    assert pol.tune(lambda a: 1.0) == 0.0  # ties keep the smallest alpha
    with pytest.raises(ValueError, match="evaluate"):
        pol.tune(3)


def test_marconi_custom_efficiency_fn():
    calls = []

    def eff(length, anc, nbytes):
        calls.append((length.copy(), anc.copy(), nbytes.copy()))
        return -length.astype(float)  # prefer evicting the longest

    pol = P.make("marconi", alpha=100.0, efficiency_fn=eff)
    c = pol.make_cache(1)
    c.insert([1] * 10, states=[(10, "ten", 5)])
    c.insert([2] * 3, states=[(3, "three", 7)])
    assert pol.choose_victim(c).state == "ten"
    lengths, ancs, nb = calls[-1]
    assert sorted(zip(lengths.tolist(), ancs.tolist(), nb.tolist())) == [(3, 0, 7), (10, 0, 5)]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 1 << 22),
    st.integers(0, 1 << 22),
    st.integers(0, 1 << 40),
    st.integers(1, 8192),
    st.integers(1, 256),
)
def test_scalar_efficiency_twin_equals_vectorised(length, anc, nbytes, d_model, d_state):
    anc = min(anc, length - 1)
    pol = P.make("marconi", d_model=d_model, d_state=d_state)
    vec = pol.efficiency(np.array([length]), np.array([anc]), np.array([nbytes]))[0]
    assert pol._scalar_efficiency(float(length), float(anc), float(nbytes)) == vec


@pytest.mark.parametrize("name", P.POLICY_NAMES)
@pytest.mark.parametrize("page", [1, 16])
def test_repeat_request_restores_at_the_deepest_planned_checkpoint(name, page):
    pol = P.make(name)
    cache = pol.make_cache(page)
    rng = np.random.default_rng(7)
    for n in (100, 700, 1500, 3000):
        prompt = rng.integers(0, 1000, n).tolist()
        total = n + 300
        full = prompt + rng.integers(0, 1000, 300).tolist()
        m = cache.match(prompt[:-1])
        assert (m.token_match, m.restore_at) == (0, 0)
        plan = pol.checkpoint_positions(n, m, total_len=total, chunk_size=512, page_size=page)
        if plan:
            cache.insert(full, states=[(p, None, 1) for p in plan])
        # the same conversation continued: restore at the deepest checkpoint inside it
        again = full + [5] * 40
        m2 = cache.match(again[:-1])
        assert m2.restore_at == max(plan, default=0)
        assert m2.token_match == (max(plan) if plan else 0)
        cache.check_integrity()
