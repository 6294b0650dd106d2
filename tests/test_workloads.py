from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from trace_checks import trace_stats, validate

from kda_core import workloads as W
from kda_core.workloads import _synthetic as S


@pytest.fixture(scope="module")
def conv() -> W.Trace:
    return W.bundled_trace("conversation")


def _line(**kw: object) -> str:
    base: dict[str, object] = {
        "timestamp": 0,
        "input_length": 600,
        "output_length": 5,
        "hash_ids": [0, 1],
    }
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


def test_bundled_files_are_the_published_bytes() -> None:
    want = {
        "mooncake_conversation_trace.jsonl": (
            "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df"
        ),
        "mooncake_synthetic_trace.jsonl": (
            "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131"
        ),
    }
    for name, sha in want.items():
        data = (W.TRACES_DIR / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == sha
    assert (W.TRACES_DIR / "LICENSE-APACHE-2.0.txt").is_file()
    assert "Mooncake" in (W.TRACES_DIR / "README.md").read_text()


def test_conversation_trace_facts(conv: W.Trace) -> None:
    assert len(conv) == 12_031
    assert conv.block_size == 512
    assert conv.arrival_s[0] == 0.0 and conv.arrival_s[-1] == pytest.approx(3536.999)
    assert int(conv.input_len.max()) == 126_195
    assert np.array_equal(np.diff(conv.offsets), -(-conv.input_len // 512))
    assert np.all(conv.blocks[conv.offsets[:-1]] == 0)  # a shared first block everywhere
    validate(conv)
    # the CSR view agrees with the raw JSON line by line (first and last 50 lines)
    lines = (W.TRACES_DIR / W.BUNDLED_TRACES["conversation"]).read_text().splitlines()
    for i in [*range(50), *range(len(lines) - 50, len(lines))]:
        obj = json.loads(lines[i])
        assert conv.block_ids(i).tolist() == obj["hash_ids"]
        assert conv.input_len[i] == obj["input_length"]
        assert conv.output_len[i] == obj["output_length"]
        assert conv.arrival_s[i] == obj["timestamp"] / 1000.0


def test_ideal_prefix_matches_tuple_prefix_set(conv: W.Trace) -> None:
    sub = conv.head(3000)
    seen: set[tuple[int, ...]] = set()
    want = []
    for i in range(len(sub)):
        ids = tuple(sub.block_ids(i).tolist())
        m = 0
        while m < len(ids) and ids[: m + 1] in seen:
            m += 1
        want.append(min(m * 512, int(sub.input_len[i])))
        seen.update(ids[: j + 1] for j in range(len(ids)))
    assert W.ideal_prefix_tokens(sub).tolist() == want
    st = trace_stats(conv)
    assert st.ideal_token_hit_rate == pytest.approx(0.3736, abs=5e-4)
    assert st.distinct_blocks == 182_790


def test_trace_is_read_only(conv: W.Trace) -> None:
    with pytest.raises(ValueError):
        conv.blocks[0] = 5
    with pytest.raises(ValueError):
        conv.block_ids(len(conv))


@pytest.mark.parametrize(
    ("line", "msg"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        (_line(timestamp=...), "missing field 'timestamp'"),
        (_line(input_length=...), "missing field 'input_length'"),
        (_line(output_length=...), "missing field 'output_length'"),
        (_line(hash_ids=...), "missing field 'hash_ids'"),
        (_line(input_length=-3), "'input_length' must be in"),
        (_line(input_length=0, hash_ids=[]), "'input_length' must be in"),
        (_line(output_length=-1), "'output_length' must be in"),
        (_line(input_length=1.5), "must be an integer"),
        (_line(input_length=True), "must be a number"),
        (_line(timestamp=-1), "'timestamp' must be >= 0"),
        (_line(hash_ids=[0, 1, 2]), "needs"),
        (_line(hash_ids=[0]), "needs"),
        (_line(hash_ids=[0, -1]), "non-negative ints"),
        (_line(hash_ids=[0, "a"]), "non-negative ints"),
        (_line(hash_ids="01"), "must be a list"),
        ("  x  ", "invalid JSON"),
    ],
)
def test_bad_lines_name_the_line_number(line: str, msg: str) -> None:
    good = _line(hash_ids=[0, 1])
    with pytest.raises(ValueError, match=r"line 2: .*" + msg.replace("(", r"\(")):
        W.parse_mooncake_lines([good, line])


def test_chain_and_order_violations() -> None:
    a = _line(hash_ids=[0, 1])
    with pytest.raises(ValueError, match="line 2: 'hash_ids': id 1 comes after id 7 here"):
        W.parse_mooncake_lines([a, _line(hash_ids=[7, 1])])
    with pytest.raises(ValueError, match="line 2: 'timestamp' 5 is before"):
        W.parse_mooncake_lines([_line(timestamp=10), _line(timestamp=5)])
    with pytest.raises(ValueError, match="no requests"):
        W.parse_mooncake_lines([])
    with pytest.raises(ValueError, match="max_requests"):
        W.parse_mooncake_lines([a, a, a], max_requests=2)
    with pytest.raises(ValueError, match="path"):
        W.load_mooncake("/nonexistent/trace.jsonl")


def test_load_mooncake_roundtrip(tmp_path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        "\n".join(
            [
                _line(timestamp=0, input_length=512, hash_ids=[0]),
                _line(timestamp=1500, input_length=1025, hash_ids=[0, 1, 2]),
            ]
        )
        + "\n"
    )
    t = W.load_mooncake(p)
    assert len(t) == 2
    assert t.arrival_s.tolist() == [0.0, 1.5]
    assert t.offsets.tolist() == [0, 1, 4]
    assert t.blocks.tolist() == [0, 0, 1, 2]
    assert W.ideal_prefix_tokens(t).tolist() == [0, 512]
    # blank lines (a trailing one, a blank one in between, whitespace) are skipped
    q = tmp_path / "blank.jsonl"
    q.write_text(p.read_text().replace("\n", "\n\n", 1) + "\n  \n")
    t2 = W.load_mooncake(q)
    assert len(t2) == 2 and t2.blocks.tolist() == t.blocks.tolist()
    assert t2.arrival_s.tolist() == t.arrival_s.tolist()
    # a malformed line after blank lines still fails, with its line number in the file
    bad = tmp_path / "bad.jsonl"
    bad.write_text(q.read_text() + _line(timestamp=2000, hash_ids=[0]) + "\n")
    with pytest.raises(ValueError, match="line 6: .*needs"):
        W.load_mooncake(bad)
    with pytest.raises(ValueError, match="no requests"):
        W.parse_mooncake_lines(["", "  ", "\n"])


def _check_synthetic(t: W.Trace) -> None:
    validate(t)
    assert np.all(t.input_len >= 1)


def test_chat_prompts_extend_history() -> None:
    t = W.workload("chat", n_sessions=30, turns=6, block_size=32, seed=3)
    _check_synthetic(t)
    for s in np.unique(t.session)[:10]:
        idx = np.flatnonzero(t.session == s)
        for a, b in zip(idx[:-1], idx[1:]):
            # next prompt = previous prompt + answer + new message: all full blocks of the
            # previous prompt reappear as a prefix of the next one
            pa, pb = t.block_ids(int(a)), t.block_ids(int(b))
            full = int(t.input_len[a]) // 32
            assert np.array_equal(pb[:full], pa[:full])
            assert t.input_len[b] > t.input_len[a] + t.output_len[a]
    # the system prompt (1500 tokens) is shared by every session
    first = t.blocks[t.offsets[:-1]]
    assert np.unique(first).size == 1


def test_agentic_collapse_rewrites_history() -> None:
    t = S.agentic(20, steps=12, keep_observations=2, branch_prob=0.0, block_size=32, seed=1)
    _check_synthetic(t)
    idx = np.flatnonzero(t.session == t.session[0])
    assert idx.size >= 5
    # with collapse, some later prompt does NOT contain the whole previous prompt
    diverged = 0
    for a, b in zip(idx[:-1], idx[1:]):
        full = int(t.input_len[a]) // 32
        pa, pb = t.block_ids(int(a)), t.block_ids(int(b))
        if pb.size < full or not np.array_equal(pb[:full], pa[:full]):
            diverged += 1
    assert diverged >= 1
    # without collapse (large window) the history only grows
    t2 = S.agentic(5, steps=6, keep_observations=100, branch_prob=0.0, block_size=32, seed=1)
    idx = np.flatnonzero(t2.session == t2.session[0])
    for a, b in zip(idx[:-1], idx[1:]):
        full = int(t2.input_len[a]) // 32
        assert np.array_equal(t2.block_ids(int(b))[:full], t2.block_ids(int(a))[:full])


def test_documents_have_no_reuse_and_mix_has_all_kinds() -> None:
    d = S.one_shot_documents(50, doc_tokens=4000, seed=2)
    _check_synthetic(d)
    assert W.ideal_prefix_tokens(d).sum() == 0
    m = S.mix(chat_sessions=10, agent_sessions=5, documents=10, duration_s=100.0, seed=4)
    _check_synthetic(m)
    assert set(np.unique(m.kind).tolist()) == {0, 1, 2}
    assert m.kind_names[:3] == ("chat", "agent", "document")


def test_uniform_prefix_match_points_are_uniform() -> None:
    t = S.uniform_prefix(300, doc_tokens=8192, block_size=16, seed=5)
    _check_synthetic(t)
    ideal = W.ideal_prefix_tokens(t)[1:]
    assert ideal.max() <= 8192
    # uniform over [0, 8192] at 16-token granularity: mean ~ 4096 (std of mean ~ 137)
    assert abs(ideal.mean() - 4096) < 600
    assert np.all(ideal % 16 == 0)


def test_generators_are_deterministic_and_seeded() -> None:
    for name in ("chat", "agentic", "documents", "mix"):
        a = W.workload(name, seed=7, block_size=128)
        b = W.workload(name, seed=7, block_size=128)
        c = W.workload(name, seed=8, block_size=128)
        assert np.array_equal(a.blocks, b.blocks) and np.array_equal(a.arrival_s, b.arrival_s)
        assert not np.array_equal(a.input_len[: len(c)], c.input_len[: len(a)])


def test_caps_and_bad_params() -> None:
    with pytest.raises(ValueError, match="n_sessions"):
        W.workload("chat", n_sessions=0)
    with pytest.raises(ValueError, match="block_size"):
        W.workload("chat", n_sessions=5, block_size=0)
    with pytest.raises(ValueError, match="blocks"):
        S.one_shot_documents(2000, doc_tokens=100_000, block_size=1, max_doc=3_000_000)
    with pytest.raises(ValueError, match="name"):
        W.workload("nope")
    with pytest.raises(ValueError, match="params"):
        W.workload("conversation", seed=1)
    with pytest.raises(ValueError, match="branch_prob"):
        S.agentic(3, branch_prob=1.5)
    assert math.isfinite(trace_stats(W.workload("chat", n_sessions=3)).mean_input)


def test_head(conv: W.Trace) -> None:
    h = conv.head(10)
    assert len(h) == 10 and h.offsets[-1] == h.blocks.size
    assert np.array_equal(h.block_ids(9), conv.block_ids(9))
    assert len(conv.head(10**9)) == len(conv)


def test_output_blocks_reappear_in_the_next_turn() -> None:
    t = W.workload("chat", n_sessions=20, turns=6, block_size=32, seed=5)
    validate(t)
    checked = 0
    for s in np.unique(t.session)[:10]:
        idx = np.flatnonzero(t.session == s)
        for a, b in zip(idx[:-1], idx[1:]):
            full = int(t.input_len[a]) // 32
            out = t.out_block_ids(int(a))
            assert out.size == (int(t.input_len[a] + t.output_len[a])) // 32 - full
            # prompt b = prompt a + answer a + new message: the decoded blocks are its blocks
            assert np.array_equal(t.block_ids(int(b))[full : full + out.size], out)
            checked += out.size
    assert checked > 0
    a = S.agentic(5, steps=5, block_size=32, seed=2)
    validate(a)
    assert a.out_blocks is not None and a.out_blocks.size > 0
    assert W.bundled_trace().out_blocks is None
    assert W.bundled_trace().out_block_ids(0).size == 0
    h = t.head(7)
    assert h.out_offsets is not None and h.out_offsets[-1] == h.out_blocks.size
