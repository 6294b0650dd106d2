"""The engine decoding speculatively (``Engine(speculative=...)``, ReplaySSM inside the one
serving loop): the greedy tokens, logits and final state; batched speculative requests that
hit and insert like any other and park the checkpoints plain decoding parks."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import model as M
from kda_core.cache import policy as P
from kda_core.cache.vllm_blocks import VLLMBlockCache
from kda_core.serve import spec
from kda_core.serve.engine import Engine, Request

PROMPT = "ReplaySSM 只保存轻量输入。"


@pytest.fixture(scope="module")
def tiny() -> M.TinyHybrid:
    return M.TinyHybrid()


@pytest.fixture(scope="module")
def greedy(tiny):
    st = tiny.new_state()
    ids, logits = tiny.generate(M.encode(PROMPT), 40, state=st)
    return ids, logits, st


@pytest.mark.parametrize("draft", ["noisy", "ngram", "perfect", "bad"])
def test_speculative_decoding_equals_greedy(tiny, greedy, draft):
    """The engine decoding speculatively: the greedy tokens and logits, and the state it ends
    at (inserted at the request end, read back from the cache) is the greedy run's."""
    ids, logits, st_ref = greedy
    if draft == "perfect":
        kw = {"draft": "noisy", "noise": 0.0}
    elif draft == "bad":  # a byte the greedy output never contains: no draft can be accepted
        never = next(t for t in range(256) if t not in ids)
        kw = {"draft": lambda hist, st, n: [never] * n}
    else:
        kw = {"draft": draft}
    end = P.make("interval", every=1 << 20, request_end=True)  # one checkpoint: the end
    e = Engine(model=tiny, policy=end, speculative={**kw, "draft_tokens": 8})
    out = e.generate(PROMPT, 40)
    assert out.tokens == ids
    assert np.max(np.abs(out.logits - logits)) <= 1e-12
    ck = e.cached_checkpoint(st_ref.tokens)
    assert ck is not None and out.checkpoints == (len(st_ref.tokens),)
    for j, y in enumerate(st_ref.kda):
        assert np.max(np.abs(ck.kda_state[j] - y.S)) <= 1e-12
        assert np.max(np.abs(ck.conv[j] - y.conv)) <= 1e-12
    # bookkeeping: every step commits 1 + accepted, and the stats add up
    steps = out.verify_steps
    assert sum(s.accepted + 1 for s in steps) == len(ids) - 1
    assert [s.start for s in steps[1:]] == [s.start + s.accepted + 1 for s in steps[:-1]]
    accepted, drafted = sum(s.accepted for s in steps), sum(len(s.inputs) - 1 for s in steps)
    if draft == "perfect":
        assert accepted == drafted and len(steps) == 5  # ceil(39 / 8)
    if draft == "bad":
        assert accepted == 0 and len(steps) == len(ids) - 1
    if draft == "noisy":  # some drafts accepted, some rejected
        assert 0 < accepted < drafted
    e.check_integrity()


def test_a_speculative_request_hits_and_inserts_like_any_other(tiny):
    """Batched speculative requests on the default policy: every one equals its uncached
    run, later ones restore what earlier ones inserted, and the verify windows are cut so
    each planned checkpoint (in prefill and decode) is parked exactly where plain decoding
    parks it."""
    system = "Speculative decoding in the engine: "
    prompts = [system + s for s in ("one", "two", "three", "four")]
    reqs = [Request(p, 50, arrival=3 * i) for i, p in enumerate(prompts)]
    fast = Engine(model=tiny, speculative={"draft": "ngram", "draft_tokens": 6})
    plain = Engine(model=tiny)
    a, b = fast.serve(reqs), plain.serve(reqs)
    for p, x, y in zip(prompts, a.reports, b.reports):
        ids, logits = tiny.generate(M.encode(p), 50)
        assert x.tokens == ids and np.max(np.abs(x.logits - logits)) <= 1e-9
        assert x.checkpoints == y.checkpoints and any(c > len(x.prompt) for c in x.checkpoints)
        assert x.verify_steps and not y.verify_steps
    assert sum(r.restore_at > 0 for r in a.reports) >= 3
    assert any(len(row.running) >= 2 and row.decode_tokens >= 2 for row in a.steps)
    fast.check_integrity()


def test_speculative_decoding_edge_cases(tiny):
    ids, _ = tiny.generate(M.encode("hi"), 3)
    assert Engine(model=tiny, speculative={"draft_tokens": 1}).generate("hi", 3).tokens == ids
    e = Engine(model=tiny, speculative={})
    for bad in (0, 5000, True, 2.0, "3", None):
        with pytest.raises(ValueError, match="max_new_tokens"):
            e.generate("hi", bad)
    with pytest.raises(ValueError, match="draft must be"):
        Engine(model=tiny, speculative={"draft": "eagle"})
    with pytest.raises(ValueError, match="speculative: depth is not one of"):
        Engine(model=tiny, speculative={"depth": 2})
    with pytest.raises(ValueError, match="draft must return 7 tokens"):
        Engine(model=tiny, speculative={"draft": lambda h, s, n: [1]}).generate("hi", 9)
    with pytest.raises(ValueError, match="noise"):
        spec.make_noisy_draft(tiny, noise=-1.0)
    with pytest.raises(ValueError, match="noise"):
        Engine(model=tiny, speculative={"noise": -1.0})
    with pytest.raises(ValueError, match="speculative: not with block_cache"):
        Engine(model=tiny, block_cache=VLLMBlockCache(16), speculative={})


def test_track_interval_holds_a_verify_window(tiny):
    """SGLang asserts ``mamba_track_interval >= speculative_num_draft_tokens`` at start-up with
    the radix cache and an extra-buffer strategy (``validate_mamba_extra_buffer``; run against
    the lab's rule in tests/real/test_spec_vs_sglang.py); the default policy tracks every 32."""
    with pytest.raises(ValueError, match="track_interval must be >= speculative_num_draft_tok"):
        Engine(model=tiny, speculative={"draft_tokens": 33})
    with pytest.raises(ValueError, match="track_interval must be >= speculative_num_draft_tok"):
        Engine(model=tiny, strategy="extra_buffer_lazy", speculative={"draft_tokens": 64})
    Engine(model=tiny, speculative={"draft_tokens": 32})
    Engine(model=tiny, strategy="no_buffer", speculative={"draft_tokens": 64})  # no such rule
    Engine(model=tiny, cache=False, speculative={"draft_tokens": 64})  # the rule needs the cache
    wide = P.make("sglang", grid=16, track_interval=64)
    Engine(model=tiny, policy=wide, speculative={"draft_tokens": 64})
