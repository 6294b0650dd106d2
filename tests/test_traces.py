"""load_trace: every format loads from a small file written here, with the values it holds.

Sources of the formats (cited in the loaders): Mooncake FAST25 traces
(github.com/kvcache-ai/Mooncake ``FAST25-release/traces``) and NVIDIA aiperf's
``mooncake_trace`` (ai-dynamo/aiperf ``src/aiperf/dataset/loader/models.py``, ``MooncakeTrace``:
``hash_ids``, ``output_length``, ``timestamp`` optional); BurstGPT (github.com/HPMLL/BurstGPT
``data/BurstGPT_1.csv`` header); Azure LLM inference traces 2023 / 2024
(github.com/Azure/AzurePublicDataset ``AzureLLMInferenceDataset2023.md`` / ``2024.md``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from trace_checks import trace_stats, validate

from kda_core import sim
from kda_core import workloads as W

FIELDS = ("arrival_s", "input_len", "output_len", "offsets", "blocks", "session", "kind")


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _jsonl(tmp_path: Path, rows: list[object], name: str = "t.jsonl") -> Path:
    return _write(tmp_path, name, [json.dumps(r) for r in rows])


def test_bundled_trace_through_load_trace_is_load_mooncakes(tmp_path: Path) -> None:
    for name, file in W.BUNDLED_TRACES.items():
        ref = W.bundled_trace(name)
        got = W.load_trace(W.TRACES_DIR / file)
        for f in FIELDS:
            a, b = getattr(got, f), getattr(ref, f)
            assert a.dtype == b.dtype and np.array_equal(a, b), (name, f)
        prov = ("has_prefix_info", "skipped_rows", "skip_reasons", "source_format")
        assert [getattr(got, f) for f in prov] == [getattr(ref, f) for f in prov]
        assert got.source_format == "mooncake" and got.has_prefix_info and got.skipped_rows == 0
        assert (got.name, got.block_size, got.kind_names) == (ref.name, 512, ref.kind_names)
    # the simulator's answer on it is the same, request by request
    conv = W.load_trace(W.TRACES_DIR / W.BUNDLED_TRACES["conversation"])
    a = sim.simulate(conv, "sglang", 32 << 30)
    b = sim.simulate(W.bundled_trace(), "sglang", 32 << 30)
    for f in dataclasses.fields(a.series):
        assert np.array_equal(getattr(a.series, f.name), getattr(b.series, f.name)), f.name
    keep = [f.name for f in dataclasses.fields(a) if f.name not in ("series", "elapsed_s")]
    assert [getattr(a, k) for k in keep] == [getattr(b, k) for k in keep]
    # and it is the answer the bundled trace has always given (a loader change that moved
    # any of these would be a regression)
    assert (a.replayed_tokens, a.checkpoints_stored, a.evictions) == (13_968_896, 18_782, 17_599)
    assert (int(a.series.token_match.sum()), int(a.series.restore_at.sum())) == (
        49_950_720,
        35_981_824,
    )


def test_mooncake_with_aiperf_fields(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [3, 4],
         "type": "mooncake_trace", "session_id": "s1", "extra": {"temperature": 0}},
        {"timestamp": 1500.5, "input_length": 1025, "output_length": 7, "hash_ids": [3, 4, 9]},
        {"input_length": 512, "hash_ids": [3], "session_id": "s1", "delay": 250},
    ]  # fmt: skip
    t = W.load_trace(_jsonl(tmp_path, rows))
    assert t.source_format == "mooncake" and t.has_prefix_info
    assert t.arrival_s.tolist() == [0.0, 1.5005, 1.7505]  # absent timestamp: previous + delay
    assert t.input_len.tolist() == [600, 1025, 512]
    assert t.output_len.tolist() == [5, 7, 0]  # absent output_length: 0
    assert t.blocks.tolist() == [3, 4, 3, 4, 9, 3]
    assert t.session.tolist() == [0, -1, 0]
    assert W.ideal_prefix_tokens(t).tolist() == [0, 1024, 512]
    validate(t)


def test_mooncake_without_hash_ids_has_no_prefix_information(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 5},
        {"timestamp": 10, "input_length": 600, "output_length": 5},
    ]
    t = W.load_trace(_jsonl(tmp_path, rows))
    assert not t.has_prefix_info
    assert t.blocks.tolist() == [0, 1, 2, 3]  # fresh ids: identical lengths share nothing
    with pytest.raises(ValueError, match="cannot be computed from trace 't'.*lengths only"):
        W.ideal_prefix_tokens(t)
    st = trace_stats(t)
    assert math.isnan(st.ideal_token_hit_rate) and st.total_input_tokens == 1200
    # memory and concurrency views still work from the lengths
    r = sim.simulate(t, "sglang")
    assert r.n_requests == 2 and r.input_tokens == 1200
    # rows with and without ids: fresh ids go above every id of the file
    mixed = W.load_trace(
        _jsonl(tmp_path, [*rows, {"input_length": 3, "hash_ids": [77]}], "m.jsonl")
    )
    assert not mixed.has_prefix_info
    assert mixed.blocks.tolist() == [78, 79, 80, 81, 77]


def test_burstgpt_csv(tmp_path: Path) -> None:
    lines = [
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
        "5,ChatGPT,472,18,490,Conversation log",
        "45,ChatGPT,1087,0,1087,Conversation log",  # a failed request: 0 response tokens
        "110.5,GPT-4,417,505,922,API log",
        "",
    ]
    t = W.load_trace(_write(tmp_path, "BurstGPT_1.csv", lines), block_size=256)
    assert t.source_format == "burstgpt" and not t.has_prefix_info
    assert t.arrival_s.tolist() == [5.0, 45.0, 110.5]  # seconds, as in the file
    assert t.input_len.tolist() == [472, 1087, 417]
    assert t.output_len.tolist() == [18, 0, 505]
    assert t.kind_names == ("Conversation log", "API log")
    assert t.kind.tolist() == [0, 0, 1]
    assert np.diff(t.offsets).tolist() == [2, 5, 2] and np.unique(t.blocks).size == 9
    validate(t)
    # the newer files' extra columns, in any order, and a quoted field
    lines = [
        "Session ID,Timestamp,Request tokens,Model,Response tokens,Total tokens,Log Type,"
        "Elapsed time",
        'a1,0.5,10,"GPT-4, 0613",3,13,Conversation log,1.2',
        "a1,2,20,GPT-4,4,24,Conversation log,0.9",
        ",3,30,GPT-4,5,35,API log,0.3",
    ]  # fmt: skip
    t = W.load_trace(_write(tmp_path, "BurstGPT_3.csv", lines))
    assert t.input_len.tolist() == [10, 20, 30] and t.session.tolist() == [0, 0, -1]


def test_azure_2023_and_2024_csv(tmp_path: Path) -> None:
    lines = [
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2023-11-16 18:15:46.6805900,374,44",
        "2023-11-16 18:15:50.9951690,396,109",
        "2023-11-16 18:15:46.9805900,879,55",  # out of order: sorted by arrival
    ]
    t = W.load_trace(_write(tmp_path, "AzureLLMInferenceTrace_conv.csv", lines))
    assert t.source_format == "azure" and not t.has_prefix_info
    assert t.arrival_s == pytest.approx([0.0, 0.3, 4.314579], abs=1e-6)
    assert t.input_len.tolist() == [374, 879, 396] and t.output_len.tolist() == [44, 55, 109]
    validate(t)
    lines = [
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2024-05-12 00:00:00+00:00,1452,3",
        "2024-05-12 00:00:00.041683+00:00,584,3",
        "2024-05-12 01:00:01.5+01:00,862,38",  # another zone: 00:00:01.5 UTC
        "2024-05-12 00:00:02.25,10,1",  # no zone: UTC
    ]
    t = W.load_trace(_write(tmp_path, "AzureLLMInferenceTrace_code_1week.csv", lines))
    assert t.arrival_s == pytest.approx([0.0, 0.041683, 1.5, 2.25], abs=1e-6)


def _prefix_ids(seqs: list[list[int]], b: int) -> list[list[int]]:
    """Naive twin of the block hasher: block j's id numbers the tuple of every token up to
    the end of block j (partial last blocks included), in order of first appearance."""
    table: dict[tuple[int, ...], int] = {}
    out = []
    for s in seqs:
        out.append([table.setdefault(tuple(s[: min(j + b, len(s))]), len(table))
                    for j in range(0, len(s), b)])  # fmt: skip
    return out


def test_token_id_rows_share_blocks_by_their_tokens(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 150_000, 40).tolist()
    seqs = [base[:37], base[:16] + [7] * 5, base[:40], [1, 2, 3], base[:32]]
    rows: list[object] = [{"token_ids": s, "output_length": 4, "timestamp": 10 * i}
                          for i, s in enumerate(seqs[:-1])]  # fmt: skip
    rows.append(seqs[-1])  # a bare list of ids
    t = W.load_trace(_jsonl(tmp_path, rows), block_size=8)
    assert t.source_format == "token-ids" and t.has_prefix_info
    assert t.input_len.tolist() == [len(s) for s in seqs]
    assert t.output_len.tolist() == [4, 4, 4, 4, 0]
    got = [t.block_ids(i).tolist() for i in range(len(t))]
    assert got == _prefix_ids(seqs, 8)
    assert got[0][:2] == got[1][:2] and got[0][2] != got[1][2]  # diverge inside block 2
    assert got[4] == got[2][:4]  # 32 tokens: exactly the four full blocks of the longer one
    assert got[0][4] != got[2][4]  # a partial block is not the full block it starts
    validate(t)


def test_refined_splits_each_block_into_its_pages_by_hand():
    """``Trace.refined(g)``: block b of 512 tokens becomes pages 2b', 2b'+1 of 256 (b' a dense
    renumbering); a partial last block keeps ceil(rest / g) pages; a bad g is refused."""
    from kda_core.workloads.traces import make_trace

    t = make_trace(
        "t",
        512,
        np.zeros(2),
        np.array([1024, 700]),
        np.zeros(2, dtype=np.int64),
        np.array([0, 2, 4]),
        np.array([70, 71, 70, 99]),
        np.full(2, -1),
        np.zeros(2, dtype=np.int64),
        ("k",),
    )
    fine = t.refined(256)
    assert fine.block_size == 256 and fine.offsets.tolist() == [0, 4, 7]
    # dense ids: 70 -> 0, 71 -> 1, 99 -> 2; 700 tokens = 2 pages of block 70 + 1 of block 99
    assert fine.blocks.tolist() == [0, 1, 2, 3, 0, 1, 4]
    assert t.refined(512) is t
    with pytest.raises(ValueError, match="g must divide the block size 512"):
        t.refined(300)
