"""Tests for kda_core.policy: placement by hand-worked cases, eviction against naive twins."""

from __future__ import annotations

from types import SimpleNamespace

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
    # the artifact starts at alpha 0 and tunes it (docs/policies.md, marconi)
    assert (m.alpha, m.alpha_value, m.kv_bytes_per_token) == ("auto", 0.0, 4 * 4 * 4096)
    assert m.alpha_grid == tuple(round(0.1 * i, 1) for i in range(21))
    v = P.make("vllm", mode="all")
    assert (v.mode, v.retention, v.cache_options()["state_touch"]) == (
        "all",
        None,
        "path_tail_first",
    )
    for name in P.POLICY_NAMES:
        c = RadixStateCache(1, **P.make(name).cache_options())
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
    # The K3 write-up: 13,600 in, 512 out, chunked prefill 6,144, track interval 256 -> 4 states.
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
    cache = RadixStateCache(1, **p.cache_options())
    system = list(range(100, 160))
    restores = []
    for q in range(4):
        prompt = system + [q] * 10
        m = cache.match_prefix(prompt)
        restores.append(m.restore_at)
        pos = p.checkpoint_positions(len(prompt), m)
        r = cache.insert_prefix(prompt, states=[(x, None, 1) for x in pos])
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
    # sub-block hits only in align mode (kv_cache_utils.partial_hash_hits_enabled)
    with pytest.raises(ValueError, match="partial_hits needs mode='align'"):
        P.make("vllm", mode="all", block_size=64, partial_hits=True, match_unit=16)
    # fine-grained units of 16, retention 0: the junction floor(100/16)*16 = 96 and the tail
    # floor(299/16)*16 = 288 are keyed whatever the retention; the replay boundary's block
    # (288 floored to the block: 256) is kept by the mask, the chunk end 128 is not
    ph = P.make("vllm", block_size=64, retention=0, partial_hits=True, match_unit=16)
    assert ph.checkpoint_positions(300, hit(100, 0)) == (96, 256, 288)
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
    cache = RadixStateCache(page, **pol.cache_options())
    key = list(range(total))
    r = cache.insert_prefix(key, states=[(p, None, 1) for p in pos])
    assert r.new == pos
