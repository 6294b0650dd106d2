"""TinyHybrid: chunked prefill == token by token; snapshot/resume; tokenizer; validation."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import model as M
from kda_core import sizing

TEXT = "KDA keeps a fixed-size state. 状态大小固定，前缀命中不等于状态命中。" * 2


@pytest.fixture(scope="module")
def tiny() -> M.TinyHybrid:
    return M.TinyHybrid()


@pytest.fixture(scope="module")
def reference(tiny):
    st = tiny.new_state()
    logits = tiny.prefill(M.encode(TEXT), st)
    return logits, st


def test_layer_pattern_is_k3s(tiny):
    assert tiny.layer_kinds == ("kda",) * 3 + ("mla",) + ("kda",) * 3 + ("mla",)
    assert tiny.kda_layers == (0, 1, 2, 4, 5, 6) and tiny.mla_layers == (3, 7)
    k3 = sizing.preset("kimi-k3")  # the model it scales down: the same 3 : 1 interleave
    assert (k3.n_linear_layers, k3.n_attn_layers) == (69, 24)


def test_tokenizer_round_trip_incl_chinese():
    ids = M.encode("前缀 hit")
    assert ids[:3] == [0xE5, 0x89, 0x8D] and len(ids) == 10
    assert M.decode(ids) == "前缀 hit"
    assert len(M.TOKENIZER_FINGERPRINT) == 16


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_prefill_chunking_is_exact(tiny, reference, chunk):
    logits_ref, st_ref = reference
    st = tiny.new_state()
    logits = tiny.prefill(M.encode(TEXT), st, chunk_size=chunk)
    assert np.max(np.abs(logits - logits_ref)) <= 1e-12
    for a, b in zip(st.kda, st_ref.kda):
        assert np.max(np.abs(a.S - b.S)) <= 1e-12
        assert np.max(np.abs(a.conv - b.conv)) <= 1e-12
    assert np.max(np.abs(st.mla_kv - st_ref.mla_kv)) <= 1e-12
    assert st.boundary == len(M.encode(TEXT))


def test_snapshot_then_continue_equals_continuous_run(tiny, reference):
    logits_ref, st_ref = reference
    ids = M.encode(TEXT)
    st = tiny.new_state()
    first = tiny.prefill(ids[:57], st)
    snap = st.copy()
    tiny.prefill(ids[57:90], st)  # the original moves on; the snapshot must not
    assert snap.boundary == 57
    rest = tiny.prefill(ids[57:], snap)
    assert np.max(np.abs(np.vstack([first, rest]) - logits_ref)) <= 1e-12
    assert snap.kda_distance(st_ref) <= 1e-12


def test_state_shapes_and_sizes(tiny, reference):
    _, st = reference
    c = tiny.config
    assert len(st.kda) == 6 and st.kda[0].S.shape == (4, 32, 32)
    assert st.kda[0].conv.shape == (3, 3 * 4 * 32)
    assert st.mla_kv.shape == (st.boundary, 2, c.mla_latent)
    assert sum(s.nbytes for s in st.kda) == 6 * (4 * 32 * 32 + 3 * 384) * 8
    assert st.mla_kv.nbytes == st.boundary * 2 * 32 * 8


def test_generate_is_greedy_and_matches_decode_loop(tiny):
    ids = M.encode("Hello")
    out, logits = tiny.generate(ids, 12)
    assert len(out) == 12 and logits.shape == (12, 256)
    assert out == [int(np.argmax(row)) for row in logits]
    st = tiny.new_state()
    last = tiny.prefill(ids, st)[-1]
    for t in out:
        assert int(np.argmax(last)) == t
        last = tiny.decode_step(t, st)
    assert len(set(out)) > 1  # the model says something, not one repeated byte


def test_weights_are_deterministic_and_seeded():
    a, b, c = (M.TinyHybrid(weights="random", seed=s) for s in (0, 0, 1))
    assert np.array_equal(a.embed, b.embed) and a.version == b.version
    assert not np.array_equal(a.embed, c.embed) and a.version != c.version
    A = np.exp(a.blocks[0].mixer.A_log)
    assert np.all((A >= 1) & (A <= 16))  # fla: A_log = log U[1, 16]
    dt = np.logaddexp(0, a.blocks[0].mixer.dt_bias)  # softplus(dt_bias) = dt in [1e-3, 1e-1]
    assert np.all((dt >= 1e-3 - 1e-12) & (dt <= 1e-1 + 1e-12))


def test_lower_bound_gate_in_use(tiny):
    h = tiny.norm1(0, tiny.embed[M.encode(TEXT)])
    f = tiny.kda_features(0, h, np.zeros((3, 384)))
    assert f.g.min() >= -5.0 and f.g.max() <= 0
    assert np.allclose(np.linalg.norm(f.k, axis=-1), 1, atol=1e-5)


@pytest.mark.parametrize(
    "tokens, name",
    [
        ([], "tokens"),
        ([300], "tokens"),
        ([-1, 3], "tokens"),
        (["a"], "tokens"),
        (["65"], "tokens"),
        ([65.9, 66.2], "tokens"),
        ([True, False], "tokens"),
        (np.array([1.5]), "tokens"),
        ("hello", "tokens"),
        ([[1, 2]], "tokens"),
    ],
)
def test_bad_tokens(tiny, tokens, name):
    with pytest.raises(ValueError, match=name):
        tiny.prefill(tokens, tiny.new_state())


def test_integer_ids_of_any_integer_type_are_accepted(tiny):
    a = tiny.prefill(np.array([72, 105], dtype=np.int16), tiny.new_state())
    b = tiny.prefill([np.int64(72), 105], tiny.new_state())
    assert np.array_equal(a, b)


def test_bad_chunk_and_state(tiny):
    with pytest.raises(ValueError, match="chunk_size"):
        tiny.prefill([1, 2], tiny.new_state(), chunk_size=0)
    other = M.TinyHybrid(weights="random", seed=3).new_state()
    with pytest.raises(ValueError, match="state"):
        tiny.prefill([1, 2], other)
    with pytest.raises(ValueError, match="n_layers"):
        M.ModelConfig(n_layers=6)
    with pytest.raises(ValueError, match="max_new_tokens"):
        tiny.generate([1], -1)


def test_forward_without_a_state_is_the_logits_from_a_fresh_state(tiny):
    ids = M.encode(TEXT)
    logits = tiny.forward(ids)
    assert logits.shape == (len(ids), M.VOCAB)
    assert np.array_equal(logits, tiny.forward(ids, tiny.new_state())[0])
    with pytest.raises(ValueError, match="tokens"):
        tiny.forward([])


KIMI = M.ModelConfig(
    d_model=32,
    n_layers=3,
    n_heads=2,
    head_dim=8,
    conv_size=3,
    mla_heads=2,
    mla_head_dim=8,
    mla_latent=6 + 4,
    mlp_hidden=40,
    gate_lower_bound=None,
    variant="kimi-linear",
    layer_types=("kda", "mla", "kda"),
    mla_rope_dim=4,
    mla_v_dim=5,
)


@pytest.mark.parametrize("chunk", [1, 5, 40])
def test_kimi_linear_variant_chunked_prefill_and_resume_are_exact(chunk):
    """The state interface the engine relies on holds for the kimi-linear variant: chunked
    prefill equals one pass (the chunked KDA kernel from 16 tokens on, recurrent below), and a
    snapshot resumes to the same logits. The cached MLA row is the latent then the key part."""
    m = M.TinyHybrid(KIMI, weights="random", seed=2)
    ids = M.encode(TEXT)[:70]
    ref, st_ref = m.forward(ids, m.new_state())
    st = m.new_state()
    got = m.prefill(ids, st, chunk_size=chunk)
    assert np.max(np.abs(got - ref)) <= 1e-12 and st.boundary == 70
    assert st.mla_kv.shape == (70, 1, 10) and st.kda[0].S.shape == (2, 8, 8)
    assert st.kda[0].conv.shape == (2, 48)
    snap = st_ref.copy()
    more = M.encode("and on")
    np.testing.assert_allclose(m.prefill(more, snap), m.forward(ids + more)[70:], atol=1e-12)


def test_variants_validate_their_own_fields():
    with pytest.raises(ValueError, match="gate_lower_bound must be None"):
        M.ModelConfig(variant="kimi-linear")
    with pytest.raises(ValueError, match="mla_rope_dim must be 0"):
        M.ModelConfig(mla_rope_dim=4)
    with pytest.raises(ValueError, match="variant"):
        M.ModelConfig(variant="k2")
    with pytest.raises(ValueError, match="layer_types"):
        M.ModelConfig(n_layers=2, layer_types=("kda", "attention"))
    with pytest.raises(ValueError, match="mla_rope_dim must be in"):
        M.ModelConfig(variant="kimi-linear", gate_lower_bound=None, mla_rope_dim=32)


@pytest.mark.parametrize("kinds", [("kda", "kda"), ("mla",)])
def test_models_without_one_kind_of_layer_run(kinds):
    cfg = M.ModelConfig(
        d_model=16,
        n_layers=len(kinds),
        layer_types=kinds,
        n_heads=2,
        head_dim=8,
        mla_heads=2,
        mla_head_dim=8,
        mla_latent=8,
        mlp_hidden=16,
    )
    m = M.TinyHybrid(cfg, weights="random")
    st = m.new_state()
    a = m.prefill([1, 2, 3], st)
    b = m.decode_step(4, st)
    assert a.shape == (3, 256) and np.isfinite(b).all() and st.boundary == 4
    assert st.mla_kv.shape == (4, kinds.count("mla"), 8) and len(st.kda) == kinds.count("kda")
