"""SGLang 0.5.23 with speculative decoding against the lab's rules
(tests/sglang_spec_rules.py), on SGLang's own code on CPU:

* its radix tree cores, Python and Rust (the production binding SGLang ships), with
  ``is_eagle`` on and off: a hybrid (FULL + MAMBA) tree gives a repeated prompt the same hit
  with drafts as without (no bigram keys), a FULL-only tree matches one token less;
* ``SchedulerBatchResultProcessor._mamba_check_track_boundary`` on accepted runs (decode
  checkpoints), ``MambaComponent._select_finished_checkpoint`` (the finish-time fallback),
  ``validate_mamba_extra_buffer`` (the track-interval rule), ``MambaComponent.
  prepare_for_caching_req`` and ``_replayssm_track_flush_mask`` (the decode ReplaySSM ring).

Methods run unbound on stand-ins that hold only what they read, as in
tests/real/test_sglang_placement.py. Runs in the real-engine venv (tests/real/).
"""

from __future__ import annotations

import itertools
import random
import sys
import types
from array import array
from types import SimpleNamespace
from unittest import mock

import pytest

brp = pytest.importorskip("sglang.srt.managers.scheduler_components.batch_result_processor")
torch = pytest.importorskip("torch")

from sglang.srt.mem_cache import memory_pool as mp  # noqa: E402
from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams  # noqa: E402
from sglang.srt.mem_cache.radix_cache import RadixKey  # noqa: E402
from sglang.srt.mem_cache.unified_cache.components import mamba as mc  # noqa: E402
from sglang.srt.mem_cache.unified_cache.components.base import ComponentType  # noqa: E402
from sglang.test.kits.unified_radix_cache import fixtures as kit  # noqa: E402
from sglang.test.kits.unified_radix_cache.config import CacheConfig  # noqa: E402

from kda_core.cache import policy as policy_mod  # noqa: E402
from tests import sglang_spec_rules as S  # noqa: E402

kit.get_device = lambda: "cpu"
FULL, MAMBA = ComponentType.FULL, ComponentType.MAMBA


def _tree(backend: str, components: tuple, is_eagle: bool):
    cfg = CacheConfig(
        components=components,
        page_size=1,
        kv_size=1 << 15,
        mamba_cache_size=256,
        max_num_reqs=16,
        max_context_len=4096,
        is_eagle=is_eagle,
    )
    if backend == "python":
        return kit.build_fixture(cfg, tree_core_backend="python")
    # The kit wraps the Rust core in an inspection build SGLang does not ship; the production
    # binding it does ship (RustUnifiedTreeCore) is put in the wrapper's place.
    adapter = pytest.importorskip("sglang.srt.mem_cache.rust_tree_core.adapter")
    name = "sglang.test.kits.unified_radix_cache.rust_unified_tree_core_inspector"
    stub = types.ModuleType(name)
    stub.RustUnifiedTreeCoreInspector = adapter.RustUnifiedTreeCore
    with (
        mock.patch.dict(sys.modules, {name: stub}),
        mock.patch.object(kit, "UnifiedTreeCoreInspectionInterface", object),
        mock.patch.dict("os.environ", {"SGLANG_RUST_BUILD_MODE": "never"}),
    ):
        out = kit.build_fixture(cfg, tree_core_backend="rust")
    assert type(out[0].tree_core).__name__ == "RustUnifiedTreeCore"
    return out


def _repeat_hits(
    backend: str, components: tuple, is_eagle: bool, n: int, **policy: object
) -> tuple[tuple[int, ...], int]:
    """A prompt served twice more after a cold run, its states placed by ``make("sglang",
    **policy)`` (checked against SGLang by test_sglang_placement.py): the device prefix of each
    repeat's ``n - 1`` token lookup, and the match of the whole prompt."""
    cache, alloc, pool = _tree(backend, components, is_eagle)
    prompt = list(range(7, 7 + n))
    pol = policy_mod.make("sglang", **policy)
    hits = []
    for _ in range(3):
        m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", prompt[: n - 1]))))
        hits.append(m.device_prefix_len)
        match = SimpleNamespace(token_match=m.device_prefix_len, restore_at=m.device_prefix_len)
        for p in pol.checkpoint_positions(n, match, page_size=1):
            kw = {}
            if MAMBA in components:
                kw["mamba_value"] = pool.mamba_allocator.alloc(1).view(1)
            value = alloc.alloc(p)
            r = cache.insert(InsertParams(key=RadixKey(array("q", prompt[:p])), value=value, **kw))
            alloc.free(value[: r.prefix_len])
            if kw and r.mamba_exist:
                pool.mamba_allocator.free(kw["mamba_value"])
    whole = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", prompt))))
    return tuple(hits[1:]), whole.device_prefix_len


POLICIES = [
    {"buffer": "extra_buffer", "track_interval": 256, "chunked_prefill_size": 8192},
    {"buffer": "extra_buffer", "track_interval": 64, "chunked_prefill_size": 100},
    {"buffer": "no_buffer", "chunked_prefill_size": 64},
    {"buffer": "no_buffer", "chunked_prefill_size": 8192},
]


@pytest.mark.parametrize("backend", ["python", "rust"])
@pytest.mark.parametrize("policy", POLICIES, ids=repr)
def test_drafts_do_not_change_a_hybrid_trees_hits(backend: str, policy: dict) -> None:
    hits = 0
    for n in (63, 64, 65, 128, 129, 200, 511, 512, 513, 1000):
        on = _repeat_hits(backend, (FULL, MAMBA), True, n, **policy)
        off = _repeat_hits(backend, (FULL, MAMBA), False, n, **policy)
        assert on == off
        hits += sum(off[0])
    assert S.tree_bigram_keys(True, True) is False
    # no_buffer keys a state only at chunk ends and the request end: an identical resend's
    # n - 1 lookup hits only when a chunk ended inside it (sgl-project/sglang#22935)
    assert (hits > 0) is (policy["chunked_prefill_size"] < 1000 or policy["buffer"] != "no_buffer")


@pytest.mark.parametrize("backend", ["python", "rust"])
def test_a_full_only_tree_keys_bigrams(backend: str) -> None:
    for n in (2, 64, 129):
        for eagle in (False, True):
            cache, alloc, _ = _tree(backend, (FULL,), eagle)
            prompt = list(range(7, 7 + n))
            cache.insert(InsertParams(key=RadixKey(array("q", prompt)), value=alloc.alloc(n)))
            m = cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", prompt[: n - 1]))))
            assert cache.tree_core.is_eagle is S.tree_bigram_keys(eagle, False)
            assert m.device_prefix_len == S.bigram_match(n - 1, S.tree_bigram_keys(eagle, False))


def _real_track(prompt: int, accepted: list[int], grid: int, monkeypatch) -> tuple[int, ...]:
    proc = SimpleNamespace(tree_cache=SimpleNamespace(page_size=1))
    batch = SimpleNamespace(spec_algorithm=SimpleNamespace(is_none=lambda: False))
    monkeypatch.setattr(brp, "mamba_track_grid", lambda page: grid)
    out, seqlen = [], prompt + 1  # the prefill sampled one token
    for a in accepted:
        seqlen += a + 1
        req = SimpleNamespace(seqlen=seqlen)
        result = SimpleNamespace(
            num_correct_drafts_per_req_cpu=[a],
            num_non_draft_tokens_per_req=1,
            grammar_retained_tokens=None,
        )
        hit, at = brp.SchedulerBatchResultProcessor._mamba_check_track_boundary(
            proc, req, batch, result, 0
        )
        if hit:
            out.append(at)
    return tuple(out)


def test_decode_checkpoints_across_accepted_runs(monkeypatch) -> None:
    rng = random.Random(0)
    n = lost = 0
    for grid, drafts, prompt in itertools.product((4, 8, 64), (1, 3, 4, 7), (1, 5, 63, 64, 100)):
        for _ in range(12):
            runs = [rng.randint(0, drafts) for _ in range(rng.randint(1, 40))]
            want = _real_track(prompt, runs, grid, monkeypatch)
            assert S.spec_track_points(prompt, runs, grid) == want
            one = S.track_points_one_token(prompt, sum(r + 1 for r in runs), grid)
            # runs no longer than the grid take every boundary one token a step takes
            if drafts + 1 <= grid:
                assert want == one
            lost += want != one
            n += 1
    assert n == 3 * 4 * 5 * 12
    assert lost > 0, "longer runs than the grid lose boundaries (why SGLang asserts the rule)"


def _finisher(last: int | None, prev: int | None, size: int):
    real = mp.HybridReqToTokenPool
    pool = SimpleNamespace(mamba_ping_pong_track_buffer_size=size)
    pool.get_mamba_ping_pong_other_idx = lambda i: real.get_mamba_ping_pong_other_idx(pool, i)
    pool.get_mamba_ping_pong_keep_idx = lambda r: real.get_mamba_ping_pong_keep_idx(pool, r)
    comp = SimpleNamespace(cache=SimpleNamespace(req_to_token_pool=pool))
    kv = SimpleNamespace(
        mamba_last_track_seqlen=last, mamba_prev_track_seqlen=prev, mamba_last_track_idx=0
    )
    return comp, SimpleNamespace(kv=kv)


def test_the_finish_time_fallback() -> None:
    values = (None, 0, 64, 128, 192)
    keys = (0, 63, 64, 127, 128, 200)
    for last, prev, key, size in itertools.product(values, values, keys, (1, 2)):
        comp, req = _finisher(last, prev, size)
        real = mc.MambaComponent._select_finished_checkpoint(comp, req, key)
        assert (real[0] if real else None) == S.finished_checkpoint(last, prev, key, size)


def test_the_track_interval_rule(monkeypatch) -> None:
    hook = pytest.importorskip("sglang.srt.arg_groups.mamba_hook")
    monkeypatch.setattr(hook, "supports_mamba_cache_extra_buffer", lambda v, c: True)
    monkeypatch.setattr(hook, "_platform_supports_mamba_cache_extra_buffer", lambda: True)
    grid = itertools.product((1, 3, 4, 8, 64, 256), (None, 1, 4, 8), (1, 4, 64))
    for interval, drafts, page in grid:
        view = SimpleNamespace(
            mamba_radix_cache_strategy="extra_buffer",
            mamba_track_interval=interval,
            speculative_num_draft_tokens=drafts,
            page_size=page,
            chunked_prefill_size=8192,
            disaggregation_mode="null",
        )
        try:
            hook.validate_mamba_extra_buffer(view, None, mamba_cache_chunk_size_of=lambda: 64)
            real_ok = True
        except AssertionError:
            real_ok = False
        try:
            S.check_track_interval(interval, drafts, page)
            lab_ok = True
        except ValueError:
            lab_ok = False
        assert lab_ok == real_ok, (interval, drafts, page)


def test_replayssm_finish_cap() -> None:
    for key, ring in itertools.product((65, 80, 100, 130), (4, 16)):
        write_pos = torch.zeros(8, dtype=torch.int32)
        lab = S.replayssm_finish_len(key, 64, ring, is_kda=True)
        write_pos[3] = key - lab
        pool = SimpleNamespace(mamba_pool=SimpleNamespace(replayssm_write_pos=write_pos))
        cache = SimpleNamespace(enable_mamba_extra_buffer=False, req_to_token_pool=pool)
        comp = SimpleNamespace(cache=cache, int8_ckpt_pool=None)
        req = SimpleNamespace(kv=SimpleNamespace(mamba_pool_idx=torch.tensor(3)))
        params = SimpleNamespace(mamba_value=None, mamba_keep_idx=None)
        got = mc.MambaComponent.prepare_for_caching_req(comp, req, params, key, True)
        assert got == lab and int(write_pos[3]) == 0  # capped at the flush, cursor reset
        assert key - lab == (key - 64) % ring  # KDA: the ring wraps every ring_len steps


def test_replayssm_gdn_flush_mask(monkeypatch) -> None:
    # hybrid_linear_attn_backend.py, MambaAttnBackendBase._replayssm_track_flush_mask (the
    # module imports the HTTP server stack: uvicorn is in requirements-shims.txt for it)
    from sglang.srt.layers.attention import hybrid_linear_attn_backend as attn

    exec_ctx = SimpleNamespace(mamba=SimpleNamespace(mamba_track_interval=8))
    monkeypatch.setattr(attn, "get_exec", lambda: exec_ctx)
    seq = torch.arange(60, 80)
    mask = attn.MambaAttnBackendBase._replayssm_track_flush_mask(None, seq, len(seq))
    assert [int(s) for s, m in zip(seq, mask, strict=True) if m] == [64, 72]
    # GDN flushes on those steps too: a key just past one donates the state there
    assert S.replayssm_finish_len(66, 60, 16, is_kda=False, interval=8) == 64
