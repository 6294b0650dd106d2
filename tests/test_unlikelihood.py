"""kda_core.model.unlikelihood: the repeat mask, the loss, greedy decoding and a short run.

Skipped without torch (the optional `[train]` extra); CI installs torch. The shipped fine-tune
(minutes of CPU) never runs here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the optional [train] extra")

from kda_core import model as M  # noqa: E402
from kda_core.model import _torch_net as N  # noqa: E402
from kda_core.model import _weights as W  # noqa: E402
from kda_core.model import corpus  # noqa: E402
from kda_core.model import train as T  # noqa: E402
from kda_core.model import unlikelihood as U  # noqa: E402


def _naive_repeated(data: bytes, n: int) -> list[bool]:
    """Byte t is marked when some n-gram covering it equals an n-gram starting earlier."""
    starts = range(len(data) - n + 1)
    earlier = [any(data[j : j + n] == data[i : i + n] for j in range(i)) for i in starts]
    return [any(earlier[i] for i in starts if i <= t < i + n) for t in range(len(data))]


@pytest.mark.parametrize(
    ("text", "n", "marked"),
    [
        ("abcabc", 3, "...xxx"),
        ("abcabc", 4, "......"),
        ("aaaa", 2, ".xxx"),  # overlapping occurrences count
        ("the cat the dog", 4, "........xxxx..."),
        ("ab", 3, ".."),  # shorter than n: nothing to repeat
    ],
)
def test_repeated_positions_by_hand(text, n, marked):
    got = U._repeated_positions(np.frombuffer(text.encode(), np.uint8)[None], n)[0]
    assert "".join("x" if m else "." for m in got) == marked


def test_repeated_positions_agrees_with_the_naive_twin_and_first_repeat():
    rng = np.random.default_rng(5)
    rows = rng.integers(97, 100, (200, 40)).astype(np.uint8)  # 3 letters: repeats are common
    for n in (1, 3, 6):
        got = U._repeated_positions(rows, n)
        for row, mask in zip(rows, got):
            data = bytes(row.tolist())
            assert mask.tolist() == _naive_repeated(data, n)
            first = corpus.first_repeat(data, n)
            assert mask.any() == (first is not None)
            if first is not None:
                assert int(np.argmax(mask)) == first[1]
    assert 0 < U._repeated_positions(rows, 6).any(axis=1).mean() < 1  # both kinds of row occur
    with pytest.raises(ValueError, match=r"n must be in \[1, 64\], got 0"):
        U._repeated_positions(rows, 0)


def test_torch_greedy_equals_the_numpy_model_on_the_sample_prompts():
    tiny = M.TinyHybrid()
    p = N.params_from(tiny)
    for prompt in corpus.SAMPLE_PROMPTS:
        ids = M.encode(prompt)
        got = U._greedy(p, torch.tensor([ids]), 24, tiny.config)[0, len(ids) :].tolist()
        assert got == tiny.generate(ids, 24)[0], prompt


def test_unlikelihood_loss_is_minus_log_one_minus_p_on_the_repeated_bytes():
    tiny = M.TinyHybrid()
    text = "the state of the state of"
    ids = M.encode(text)
    prefix = 4
    mask = U._repeated_positions(np.array([ids[prefix:]]), 6)[0]
    logits = tiny.prefill(ids, tiny.new_state())  # float64, [T, vocab]
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    p_written = probs[np.arange(prefix - 1, len(ids) - 1), ids[prefix:]]
    want = -np.log1p(-p_written[mask]).mean()
    loss, count = U._unlikelihood_loss(
        N.params_from(tiny), torch.tensor([ids]), prefix, 6, tiny.config
    )
    assert count == mask.sum() == len("state of")  # the second one (the prompt is "the ")
    assert loss.item() == pytest.approx(want, rel=1e-4)


def test_descending_the_loss_lowers_the_repeated_bytes_probability():
    tiny = M.TinyHybrid()
    p = N.params_from(tiny)
    ids = torch.tensor([M.encode("the string of the string of the")])
    mask = torch.from_numpy(U._repeated_positions(ids[:, 4:].numpy(), 8))

    def mean_p() -> float:
        with torch.no_grad():
            logp = N.forward(p, ids[:, :-1], tiny.config)[:, 3:].log_softmax(-1)
        return logp.gather(-1, ids[:, 4:, None])[..., 0].exp()[mask].mean().item()

    before = mean_p()
    opt = N.optimizer(p, 1e-3, 0.0)
    for _ in range(3):
        loss, _ = U._unlikelihood_loss(p, ids, 4, 8, tiny.config)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert mean_p() < before - 0.05


def _short_run(check_every: int = 100) -> tuple[dict, list[dict]]:
    cfg = U._UnlikelihoodConfig(
        steps=4,
        batch=2,
        seq_len=32,
        prefix=8,
        continuation=24,
        log_every=2,
        check_every=check_every,
    )
    return U.finetune(cfg, W.load()[0], text=corpus.load("train")[:20000], log=lambda _row: None)


def test_four_steps_are_bit_for_bit_reproducible_and_alternate():
    a, rows_a = _short_run()
    b, rows_b = _short_run()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    untimed = [
        [{k: v for k, v in r.items() if k != "seconds"} for r in rows] for rows in (rows_a, rows_b)
    ]
    assert untimed[0] == untimed[1]
    assert [r["kind"] for r in rows_a] == ["likelihood", "unlikelihood"] * 2
    assert any(not np.array_equal(a[k], v) for k, v in W.load()[0].items())  # it trained
    checked, rows_c = _short_run(check_every=1)  # the loop check changes nothing in the run
    assert all(np.array_equal(a[k], checked[k]) for k in a)
    assert [r["steps_done"] for r in rows_c if "looping_prompts" in r] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("steps", 0, r"steps must be in \[1, 100000\]"), ("ngram", 65, r"ngram must be in \[1, 64\]")],
)
def test_config_refuses_out_of_range_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        U._UnlikelihoodConfig(**{field: value})


# the shipped fine-tune, stage by stage (make train): the defaults from the likelihood-trained
# base, then 400 more steps with sampler seed 1 (docs/model.md: why a second stage)
SHIPPED_STAGES = (U._UnlikelihoodConfig(seed=1, steps=400), U._UnlikelihoodConfig())


def test_the_shipped_weights_are_this_module_s_fine_tunes_of_the_training_default():
    """The shipped file: `train`'s defaults from the random initialisation, then this module's
    SHIPPED_STAGES (so `make train` reproduces it), all from the frozen corpus."""
    _, meta = W.load()
    for stage in SHIPPED_STAGES:
        assert U._UnlikelihoodConfig(**meta["unlikelihood_config"]) == stage
        assert T._TrainConfig(**meta["train_config"]) == T._TrainConfig()
        assert meta["model_config"] == dataclasses.asdict(M.ModelConfig())
        assert meta["init"] == "random"
        meta = meta["base"]
    assert "unlikelihood_config" not in meta  # the base: likelihood training only
    assert T._TrainConfig(**meta["train_config"]) == T._TrainConfig()
    assert W.load()[1]["corpus"] == corpus.manifest()["files"]


def test_a_short_run_logs_which_sample_prompts_loop():
    cfg = U._UnlikelihoodConfig(
        steps=2, batch=1, seq_len=16, prefix=8, continuation=8, check_every=2
    )
    _, rows = U.finetune(cfg, W.load()[0], text=corpus.load("train")[:5000], log=lambda _r: None)
    checks = [r for r in rows if "looping_prompts" in r]
    assert [r["steps_done"] for r in checks] == [2]
    assert set(checks[0]["looping_prompts"]) <= set(corpus.SAMPLE_PROMPTS)
    base = M.TinyHybrid(weights=W.load()[0])
    looping = [
        q
        for q in corpus.SAMPLE_PROMPTS
        if corpus.first_repeat(bytes(base.generate(M.encode(q), 64)[0]))
    ]
    assert U._looping_prompts(N.params_from(base), base.config) == looping
