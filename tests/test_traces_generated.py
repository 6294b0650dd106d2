"""Conversation JSONL (turns share their history, token for token) and SGLang's
generated-shared-prefix workload (shape of ``sample_generated_shared_prefix_requests``,
sgl-project/sglang ``python/sglang/bench_serving.py`` and its later home
``python/sglang/benchmark/datasets/generated_shared_prefix.py``; defaults from the ``--gsp-*``
flags: 64 groups x 16 prompts, system prompt 2048, question 128, output 256, seed 1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from trace_checks import validate

from kda_core import workloads as W
from kda_core.model.tokenizer import encode
from kda_core.workloads._conversations import _TURN_GAP_S
from kda_core.workloads._shared_prefix import GSP_DEFAULTS, generated_shared_prefix


def _naive_ids(seq: list[int], lo: int, hi: int, b: int) -> list[tuple[int, ...]]:
    """Naive twin of the block hasher: block j is named by every token up to its end."""
    return [tuple(seq[: min((j + 1) * b, len(seq))]) for j in range(lo, hi)]


def _same_partition(a: list[list[int]], b: list[list[object]]) -> bool:
    """True when ``a`` and ``b`` name the same blocks equal (a bijection between the names)."""
    fa = [x for r in a for x in r]
    fb = [x for r in b for x in r]
    return len(fa) == len(fb) and len(set(fa)) == len(set(zip(fa, fb))) == len(set(fb))


def _tokens(role: str, text: str) -> list[int]:
    """The documented rendering: ``<|role|>`` + content, byte tokens."""
    return encode(f"<|{role}|>{text}")


CHAT = [
    {"role": "system", "content": "You are terse. " * 3},
    {"role": "user", "content": "What is a KDA state?"},
    {"role": "assistant", "content": "A fixed-size matrix per head, updated every token."},
    {"role": "user", "content": [{"type": "text", "text": "And a "},
                                 {"type": "text", "text": "checkpoint?"}]},
    {"role": "assistant", "content": "The state saved at a block boundary, with the conv window."},
    {"role": "user", "content": "Thanks, 再见"},
]  # fmt: skip


def test_conversation_turns_share_their_history(tmp_path: Path) -> None:
    sharegpt = {"id": "x", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello there"}]}  # fmt: skip
    lines = [{"messages": CHAT, "timestamp": 1000, "session_id": "c1"}, sharegpt]
    p = tmp_path / "chats.jsonl"
    p.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n")
    t = W.load_trace(p, block_size=16)
    assert t.source_format == "conversations" and t.has_prefix_info
    # what the requests must be, from the messages
    toks = [_tokens(m["role"], m["content"] if isinstance(m["content"], str) else
                    "".join(x["text"] for x in m["content"])) for m in CHAT]  # fmt: skip
    p1 = toks[0] + toks[1]
    p2 = p1 + toks[2] + toks[3]
    p3 = p2 + toks[4] + toks[5]
    p4 = _tokens("user", "hi")
    prompts, outs = [p1, p4, p2, p3], [toks[2], _tokens("assistant", "hello there"), toks[4], []]
    assert t.input_len.tolist() == [len(x) for x in prompts]
    assert t.output_len.tolist() == [len(x) for x in outs]
    gap = _TURN_GAP_S
    assert t.arrival_s.tolist() == [1.0, 1.0, 1.0 + gap, 1.0 + 2 * gap]  # sorted by arrival
    assert t.session.tolist() == [0, 1, 0, 0]
    # token level: each turn's prompt starts with the previous prompt + its answer
    assert (
        p2[: len(p1) + len(toks[2])] == p1 + toks[2]
        and p3[: len(p2) + len(toks[4])] == p2 + toks[4]
    )
    # block ids (input, then output blocks): equal exactly where the naive prefix-tuple
    # names are equal; the output blocks of a turn are the next turn's blocks
    got, want = [], []
    for i, (pr, out) in enumerate(zip(prompts, outs)):
        got += [t.block_ids(i).tolist(), t.out_block_ids(i).tolist()]
        n = -(-len(pr) // 16)
        want += [
            _naive_ids(pr, 0, n, 16),
            _naive_ids(pr + out, len(pr) // 16, (len(pr) + len(out)) // 16, 16),
        ]
    assert _same_partition(got, want)
    full = len(p1) // 16
    assert (
        t.out_block_ids(0).tolist()
        == t.block_ids(2)[full : (len(p1) + len(toks[2])) // 16].tolist()
    )
    assert t.out_block_ids(3).size == 0 and t.out_block_ids(0).size > 0
    validate(t)


def test_conversation_timestamps_and_bad_conversations(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "a", "timestamp": 5000},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c", "timestamp": 7000},
        {"role": "assistant", "content": "d"},
    ]
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"messages": msgs}) + "\n")
    assert W.load_trace(p).arrival_s.tolist() == [5.0, 7.0]
    bad = [
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages\\[0\\].*open with"),
        ({"messages": [{"role": "user"}]}, "messages\\[0\\] must be an object"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages\\[0\\].content",
        ),
        ({"messages": [{**msgs[2], "timestamp": 100}, msgs[1], msgs[0]]}, "before the previous"),
        ({"messages": []}, "non-empty list"),
    ]
    for obj, msg in bad:
        p.write_text(json.dumps({"messages": msgs}) + "\n" + json.dumps(obj) + "\n")
        with pytest.raises(ValueError, match=f"c.jsonl: line 2: .*{msg}"):
            W.load_trace(p, "conversations")


def test_generated_shared_prefix_has_sglangs_shape() -> None:
    t = generated_shared_prefix(4, 5, 1024, 100, 64, block_size=256, seed=3)
    assert len(t) == 20 and t.has_prefix_info
    assert t.input_len.tolist() == [1124] * 20 and t.output_len.tolist() == [64] * 20
    assert t.arrival_s.tolist() == [0.0] * 20  # request rate inf: all at once
    groups = t.session
    assert sorted(np.bincount(groups).tolist()) == [5] * 4
    assert groups.tolist() != sorted(groups.tolist())  # shuffled (SGLang: random.shuffle)
    for g in range(4):
        rows = [t.block_ids(i).tolist() for i in np.flatnonzero(groups == g)]
        assert all(r[:4] == rows[0][:4] for r in rows)  # the system prompt: 4 shared blocks
        assert len({r[4] for r in rows}) == 5  # each question is its own
    firsts = {tuple(t.block_ids(i)[:4].tolist()) for i in range(20)}
    assert len(firsts) == 4  # groups share nothing
    validate(t)
    ordered = generated_shared_prefix(4, 5, 1024, 100, 64, block_size=256, ordered=True)
    assert ordered.session.tolist() == sorted(ordered.session.tolist())
    assert (
        generated_shared_prefix(seed=3).input_len.tolist()
        == generated_shared_prefix(seed=3).input_len.tolist()
    )


def test_generated_shared_prefix_random_lengths_follow_compute_random_lens() -> None:
    """``compute_random_lens(full, r, num)`` = ``np.random.randint(max(int(full*r), 1),
    full + 1, size=num)``: system prompts, then questions, then outputs, one seeded RNG."""
    t = generated_shared_prefix(3, 4, 900, 50, 40, range_ratio=0.5, ordered=True, seed=9,
                                  block_size=64)  # fmt: skip
    rs = np.random.RandomState(9)
    sys_l = rs.randint(450, 901, size=3)
    q_l = rs.randint(25, 51, size=12).reshape(3, 4)
    o_l = rs.randint(20, 41, size=12).reshape(3, 4)
    assert t.input_len.tolist() == (sys_l[:, None] + q_l).ravel().tolist()
    assert t.output_len.tolist() == o_l.ravel().tolist()
    rated = generated_shared_prefix(2, 50, 10, 10, 1, request_rate=4.0, seed=2)
    gaps = np.diff(rated.arrival_s)
    assert rated.arrival_s[0] == 0 and np.all(gaps >= 0) and 0.15 < gaps.mean() < 0.35


def test_gsp_settings_file_and_its_checks(tmp_path: Path) -> None:
    p = tmp_path / "gsp.json"
    p.write_text(json.dumps({"dataset_name": "generated-shared-prefix", "gsp_num_groups": 2,
                             "gsp_prompts_per_group": 3, "seed": 5}, indent=2))  # fmt: skip
    t = W.load_trace(p)
    assert t.source_format == "sglang-gsp" and len(t) == 6
    assert t.input_len.tolist() == [2048 + 128] * 6 and t.output_len.tolist() == [256] * 6
    assert len(W.load_trace(p, limit=4)) == 4
    d = GSP_DEFAULTS
    flags = ("gsp_num_groups", "gsp_prompts_per_group", "gsp_system_prompt_len",
             "gsp_question_len", "gsp_output_len", "seed")  # fmt: skip
    assert [d[k] for k in flags] == [64, 16, 2048, 128, 256, 1]
    assert len(generated_shared_prefix()) == 1024
    for bad, msg in [({"gsp_num_group": 2}, "unknown setting 'gsp_num_group'"),
                     ({"gsp_num_groups": 0}, "num_groups must be"),
                     ({"gsp_range_ratio": 2}, "range_ratio"),
                     ({"dataset_name": "random"}, "dataset_name"),
                     ({"request_rate": -1}, "request_rate")]:  # fmt: skip
        p.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=f"gsp.json: .*{msg}"):
            W.load_trace(p, "sglang-gsp")
    with pytest.raises(ValueError, match="system_prompt_len \\+ question_len"):
        generated_shared_prefix(1, 1, 0, 0)
