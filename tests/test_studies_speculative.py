"""kda_core.studies.speculative: the speculative_replay app's data is exact and consistent."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core import sizing
from kda_core.studies import speculative as sp
from kda_core.studies._spec_memory import spec_memory


@pytest.fixture(scope="module")
def step() -> sp.VerifyStudy:
    return sp.verify_step()


def test_default_step_accepts_a_partial_prefix(step):
    D = step.draft_tokens
    assert D == 8 and step.ring_len == 16
    # partial: the noisy draft's first token is right (trained weights: 4 of 8), a later one not
    assert 1 <= step.natural_accept == step.n_accept < D
    # accepted drafts equal the target's greedy tokens; the next one does not
    a = step.n_accept
    assert np.array_equal(step.inputs[1:a], step.targets[: a - 1])
    assert step.inputs[a] != step.targets[a - 1]


def test_ring_contents_and_slots(step):
    D, L = step.draft_tokens, step.ring_len
    start = step.prompt_tokens
    assert step.ring["d"].shape == (D, 32) and step.ring["beta"].shape == (D,)
    assert np.array_equal(step.ring_slot, (start + np.arange(D)) % L)
    assert np.array_equal(step.pos_after_verify[step.ring_slot], start + np.arange(D))
    kept = step.pos_after_commit[step.pos_after_commit >= 0]
    assert sorted(kept.tolist()) == list(range(start, start + step.n_accept))
    # k is the L2-normalised rawk (eps 1e-6 inside the sqrt, as SGLang's replay kernel
    # kda_replayssm_exact_fold_kernel); g is a log decay in (-5, 0]; beta in (0, 1)
    rawk = step.ring["rawk"]
    k_from_raw = rawk / np.sqrt(np.sum(rawk**2, axis=1, keepdims=True) + 1e-6)
    assert np.max(np.abs(k_from_raw - step.ring["k"])) <= 1e-15
    assert np.all(step.ring["g"] <= 0) and np.all(step.ring["g"] > -5)
    assert np.all((step.ring["beta"] > 0) & (step.ring["beta"] < 1))
    assert step.ring_norms.shape == (6, D)
    assert np.allclose(step.ring_norms[1], 2.0, atol=1e-6)  # 4 heads of unit keys


def test_conv_windows_roll_by_one_token(step):
    W1 = step.conv_windows.shape[1]
    for t in range(1, step.draft_tokens):
        assert np.array_equal(step.conv_windows[t, : W1 - 1], step.conv_windows[t - 1, 1:])
    assert step.committed_window == step.n_accept - 1


def test_exactness_figures(step):
    assert step.logits_error <= 1e-12
    assert step.reconstruct_error <= 1e-12
    assert step.commit_error.shape == (step.draft_tokens + 1,)
    assert np.max(step.commit_error) <= 1e-12
    assert np.max(step.fold_error) <= 1e-12
    # a bf16 d in an open-loop fold drifts far beyond round-off; exact replay does not
    assert step.fold_bf16_error[0] == 0.0 and np.min(step.fold_bf16_error[1:]) > 1e-5


def test_memory_of_the_run(step):
    mem32 = spec_memory(sizing.tiny_spec(), step.draft_tokens, dtype="float32")
    assert step.ring_bytes == 2 * mem32.ring_total
    assert step.per_draft_state_bytes == 2 * mem32.per_draft_state_bytes
    assert step.conv_window_bytes == 2 * mem32.conv_window_bytes


@pytest.mark.parametrize("n_accept", [0, 8])
def test_forced_acceptance(n_accept):
    st = sp.verify_step(n_accept=n_accept, draft_tokens=8)
    assert st.n_accept == n_accept and st.committed_window == n_accept - 1
    assert (st.pos_after_commit >= 0).sum() == n_accept


def test_verify_step_validation():
    with pytest.raises(ValueError, match=r"n_accept must be in \[0, 4\]"):
        sp.verify_step(draft_tokens=4, n_accept=5)
    with pytest.raises(ValueError, match="layer must be in"):
        sp.verify_step(layer=6)
    with pytest.raises(ValueError, match="head must be in"):
        sp.verify_step(head=4)
    with pytest.raises(ValueError, match="ring_len must be a power of two"):
        sp.verify_step(ring_len=24)
    with pytest.raises(ValueError, match="prompt: at most 512"):
        sp.verify_step("x" * 513)


def test_memory_over_d():
    m = sp.memory_over_d(range(1, 17))
    assert m.models == ("k3-mini", "kimi-k3")
    assert m.ring_len.tolist() == [sizing.default_ring_len(d) for d in range(1, 17)]
    for i, d in enumerate(range(1, 17)):
        for r, (name, tp) in enumerate(((sizing.tiny_spec(), 1), ("kimi-k3", 8))):
            ref = spec_memory(name, d, None, tp, "bfloat16")
            assert m.ring_bytes[r, i] == ref.ring_total
            assert m.per_draft_state_bytes[r, i] == ref.per_draft_state_bytes
            assert m.conv_window_bytes[r, i] == ref.conv_window_bytes
    # per-draft states grow linearly in D, rings step at powers of two
    assert np.array_equal(m.per_draft_state_bytes[:, 7], 8 * m.per_draft_state_bytes[:, 0])
    i8 = 7
    assert m.ratio[1, i8] == pytest.approx(8 * 128 * 128 * 2 / (16 * (4 * 128 * 2 + 128 * 4 + 4)))
    assert np.all(m.ratio[1] > m.ratio[0])  # bigger heads, bigger saving
    # the K3 write-up's deployment: 119 (+1) slots, 23 running, conv windows 0.34 GB as logged
    assert m.deploy_max_running == 23
    assert round(m.deploy_conv_window_bytes / sizing.GIB, 2) == 0.34
    assert m.deploy_per_draft_bytes == 24 * 8 * sizing.kda_state_bytes("kimi-k3", 8)
    assert m.deploy_ring_bytes == 120 * m.ring_bytes[1, i8]
    with pytest.raises(ValueError, match="draft_tokens"):
        sp.memory_over_d([0, 8])


def test_generation_equals_greedy_and_counts():
    g = sp.generation(max_new_tokens=24)
    assert g.equals_greedy and g.logits_error <= 1e-12
    assert len(g.tokens) == 24 and g.greedy_passes == 23
    assert g.verify_passes == len(g.start) and g.committed.sum() == 23
    assert np.array_equal(g.committed, g.accepted + 1)
    assert g.acceptance_rate == pytest.approx(g.accepted.sum() / g.drafted.sum())
    assert np.array_equal(np.diff(g.start), g.committed[:-1])
    with pytest.raises(ValueError, match="draft must be"):
        sp.generation(draft="eagle")
    with pytest.raises(ValueError, match="max_new_tokens"):
        sp.generation(max_new_tokens=0)


def test_acceptance_falls_with_noise():
    c = sp.acceptance_vs_noise((0.0, 0.3), max_new_tokens=16)
    assert c.all_equal_greedy
    assert c.acceptance_rate[0] == 1.0 and c.acceptance_rate[1] < 1.0
    assert c.tokens_per_step[0] > c.tokens_per_step[1]


def test_slot_kinds_match_the_ring_positions(step):
    """The per-slot kinds (drawn by the app) against a naive reading of the positions."""
    D, L, a, p0 = step.draft_tokens, step.ring_len, step.n_accept, step.prompt_tokens
    for pos, kind, stage in (
        (step.pos_after_verify, step.kind_after_verify, "verify"),
        (step.pos_after_commit, step.kind_after_commit, "commit"),
    ):
        naive = []
        for slot in range(L):
            p = int(pos[slot])
            if p < 0:
                naive.append(-1)
            elif p0 <= p < p0 + D:
                naive.append(1 if p - p0 < a else 2)
            else:
                naive.append(0)
        assert kind.tolist() == naive, stage
    assert int((step.kind_after_verify == 1).sum()) == a
    assert int((step.kind_after_verify == 2).sum()) == D - a
    assert int((step.kind_after_commit == 2).sum()) == 0  # rejected slots are freed
    assert step.committed.tolist() == [True] * a + [False] * (D - a)
    assert sp.SLOT_KINDS[1] == "accepted step" and sp.SLOT_KINDS[-1] == "empty"
    assert step.memory_ratio == step.per_draft_state_bytes / step.ring_bytes > 1


def test_generation_text_is_readable():
    g = sp.generation(sp.DEFAULT_PROMPT, 8, draft_tokens=4, noise=0.1, seed=2)
    assert g.readable == sp.readable(g.tokens.tolist())
    assert "\ufffd" not in g.readable and all(c.isprintable() for c in g.readable)
    assert sp.readable([0xE4, 0xB8, 0xAD, 0x0F, 0xFF, 0x0A, 0x41]) == "中\\x0f\\xff⏎A"
