"""load_trace on bad input: malformed rows refused or skipped by line (file, line, field), caps
enforced, the format detected or the ambiguity refused, the chain rule checked in bulk exactly
as the one-id-at-a-time check (``trace_checks.check_chain``, the naive twin) decides."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from trace_checks import check_chain, validate

from kda_core import workloads as W
from kda_core.workloads import _accumulator, _chains, _loader, _rows

MOON = {"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}
BURST = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens"


def _write(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _moon(**kw: object) -> str:
    return json.dumps({k: v for k, v in {**MOON, **kw}.items() if v is not ...})


BAD_ROWS = [
    ("mooncake", _moon(input_length=0, hash_ids=[]), "'input_length' must be in \\[1,"),
    ("mooncake", _moon(input_length=1.5), "'input_length' must be an integer"),
    ("mooncake", _moon(hash_ids=[0, True]), "'hash_ids' must be non-negative ints"),
    ("mooncake", _moon(hash_ids=[0, 2**64]), "'hash_ids' must be non-negative ints"),
    ("mooncake", _moon(hash_ids=[0, -4]), "'hash_ids' must be non-negative ints"),
    ("mooncake", _moon(hash_ids=[0]), "'hash_ids' has 1 ids, input_length 600 needs"),
    ("mooncake", _moon(timestamp="now"), "'timestamp' must be a finite number"),
    ("mooncake", _moon(input_length=..., text_input="hi"), "rows with 'text_input' carry text"),
    ("mooncake", _moon(session_id=[1]), "'session_id' must be a string"),
    ("mooncake", '{"input_length": 3', "invalid JSON"),
    ("mooncake", "[1, 2]", "expected a JSON object"),
    ("token-ids", '{"token_ids": []}', "'token_ids' must hold 1 to"),
    ("token-ids", '{"token_ids": [1, 2.5]}', "'token_ids' must be non-negative ints"),
    ("burstgpt", "5,ChatGPT,0,18,18,API log", "'Request tokens' must be in \\[1,"),
    ("burstgpt", "x,ChatGPT,10,18,28,API log", "'Timestamp' must be a number"),
    ("burstgpt", "5,ChatGPT,10,18", "4 fields where the header has 6"),
    ("azure", "2023-11-16 18:15:46,12,3.5", "'GeneratedTokens' must be an integer"),
    ("azure", "16/11/2023 18:15,12,3", "'TIMESTAMP' must be a date-time"),
    ("azure", "2023-02-30 18:15:46,12,3", "'TIMESTAMP' is not a valid date-time"),
]


def _good_and_bad(fmt: str, bad: str) -> list[str]:
    good = {
        "mooncake": [_moon(), _moon(timestamp=5)],
        "token-ids": ['{"token_ids": [1, 2, 3]}', "[4, 5]"],
        "burstgpt": [BURST, "1,ChatGPT,10,2,12,API log", "2,ChatGPT,11,3,14,API log"],
        "azure": [AZURE, "2023-11-16 18:15:46,12,3", "2023-11-16 18:15:47,13,4"],
    }[fmt]
    return [*good[:-1], bad, good[-1]]


@pytest.mark.parametrize(("fmt", "bad", "msg"), BAD_ROWS)
def test_a_bad_row_is_refused_or_skipped_by_line(
    tmp_path: Path, fmt: str, bad: str, msg: str
) -> None:
    lines = _good_and_bad(fmt, bad)
    lineno = lines.index(bad) + 1
    p = _write(tmp_path, lines, "trace.csv" if fmt in ("burstgpt", "azure") else "t.jsonl")
    with pytest.raises(ValueError, match=f"^{re.escape(str(p))}: line {lineno}: {msg}"):
        W.load_trace(p, fmt)
    t = W.load_trace(p, fmt, on_error="skip")
    assert len(t) == 2
    assert t.skipped_rows == 1 and len(t.skip_reasons) == 1
    assert t.skip_reasons[0].startswith(f"line {lineno}: ")


def test_skip_counts_every_bad_row_and_keeps_the_first_reasons(tmp_path: Path) -> None:
    lines = [_moon(timestamp=i, input_length=0 if i % 3 == 0 else 600).encode() for i in range(40)]
    lines.insert(7, b"\xff\xfe")  # line 8: not UTF-8
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    t = W.load_trace(p, on_error="skip")
    assert t.skipped_rows == 14 + 1 and len(t) == 40 - 14
    # one entry per distinct reason, its lines folded: the 14 zero lengths (lines 1, 4, 7,
    # then 11, 14, ..., 41 past the inserted line 8) are one reason, 8 lines named
    assert [r.split(":")[0] for r in t.skip_reasons] == [
        "lines 1, 4, 7, 11, 14, 17, 20, 23 and 6 more",
        "line 8",
    ]
    assert "'input_length' must be in" in t.skip_reasons[0]
    assert t.skip_reasons[1] == "line 8: the line is not UTF-8 text (byte 0)"
    h = t.head(3)  # the provenance travels with the requests
    assert (h.skipped_rows, h.skip_reasons, h.source_format) == (15, t.skip_reasons, "mooncake")
    validate(h)
    with pytest.raises(ValueError, match="line 1: 'input_length' must be in"):
        W.load_trace(p)
    everything_bad = _write(tmp_path, [_moon(input_length=0)] * 3, "bad.jsonl")
    with pytest.raises(ValueError, match="no requests; 3 rows skipped: lines 1-3: 'input_len"):
        W.load_trace(everything_bad, on_error="skip")
    one_bad = _write(tmp_path, [_moon(input_length=0)], "one.jsonl")
    with pytest.raises(ValueError, match="no requests; 1 row skipped: line 1: 'input_length'"):
        W.load_trace(one_bad, on_error="skip")


def test_caps_are_enforced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path, [_moon(timestamp=i) for i in range(5)])
    with pytest.raises(ValueError, match="line 4: more than max_requests=3 requests"):
        W.load_trace(p, max_requests=3)
    assert len(W.load_trace(p, limit=3)) == 3
    monkeypatch.setattr(_accumulator, "MAX_TRACE_BLOCKS", 7)
    with pytest.raises(ValueError, match="line 4: more than 7 block ids"):
        W.load_trace(p)
    monkeypatch.setattr(_loader, "MAX_TRACE_FILE_BYTES", 100)
    with pytest.raises(ValueError, match="bytes; the cap is 100 bytes"):
        W.load_trace(p)
    monkeypatch.undo()
    monkeypatch.setattr(_rows, "MAX_LINE_BYTES", 40)
    monkeypatch.setattr(_rows, "_READ_BYTES", 32)
    short = '{"input_length": 5}'
    q = _write(tmp_path, [short, short, _moon()], "long.jsonl")
    with pytest.raises(ValueError, match="line 3 is longer than 40 bytes"):
        W.load_trace(q)
    monkeypatch.undo()
    for kw, msg in [({"format": "csv"}, "format must be"), ({"on_error": "ignore"}, "on_error"),
                    ({"block_size": 0}, "block_size"), ({"limit": 0}, "limit"),
                    ({"max_requests": 10**8}, "max_requests")]:  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            W.load_trace(p, **kw)
    with pytest.raises(ValueError, match="path must be an existing file"):
        W.load_trace(tmp_path / "nope.jsonl")


def test_reading_in_blocks_keeps_every_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_moon(timestamp=i, input_length=400 + i, hash_ids=[0]) for i in range(30)]
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode())  # a BOM, CRLF, no last newline
    ref = W.load_trace(p)
    monkeypatch.setattr(_rows, "_READ_BYTES", 17)  # lines split across many blocks
    got = W.load_trace(p)
    assert got.input_len.tolist() == ref.input_len.tolist() == list(range(400, 430))


def test_detection_and_ambiguity(tmp_path: Path) -> None:
    cases = {
        "mooncake": [_moon()], "burstgpt": [BURST], "azure": ["", AZURE],
        "token-ids": ["[1, 2, 3]"], "conversations": ['{"messages": []}'],
        "sglang-gsp": ["{", '  "gsp_num_groups": 2', "}"],
    }  # fmt: skip
    for fmt, lines in cases.items():
        assert _loader.detect_format(_write(tmp_path, lines, f"{fmt}.x")) == fmt
    both = _write(tmp_path, ['{"token_ids": [1], "input_length": 1}'], "both.jsonl")
    with pytest.raises(ValueError, match="line 1 fits mooncake and token-ids; pass format="):
        W.load_trace(both)
    assert len(W.load_trace(both, "token-ids")) == 1
    for lines, msg in [(["a,b,c"], "line 1 fits none"), (['{"x": 1}'], "fits none"),
                       ([" ", ""], "no rows"), (["[{", "}]"], "one JSON array")]:  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            W.load_trace(_write(tmp_path, lines, "u.txt"))


def _sequential_reference(reqs: list[list[int]]) -> list[int]:
    """Indices of the requests a one-at-a-time check keeps (the dict naive twin)."""
    parent: dict[int, int] = {}
    kept = []
    for i, ids in enumerate(reqs):
        trial = dict(parent)
        try:
            check_chain(trial, ids, -1, "id")
        except ValueError:
            continue
        parent = trial
        kept.append(i)
    return kept


def _admit_in_two(reqs: list[list[int]], split: int) -> list[int]:
    """Indices kept when ``ChainTable.admit`` sees the requests in two batches."""
    table, kept = _chains.ChainTable(), []
    for lo, hi in ((0, split), (split, len(reqs))):
        part = reqs[lo:hi]
        if not part:
            continue
        flat = np.array([h for r in part for h in r], dtype=np.int64)
        starts = np.cumsum([0] + [len(r) for r in part[:-1]])
        report = table.admit(flat, starts)
        for r, h, here, before in report:  # (request, id, its parent here, parent recorded)
            assert h in part[r] and here != before
        refused = {r for r, *_ in report}
        kept += [lo + i for i in range(len(part)) if i not in refused]
    return kept


@pytest.mark.parametrize("spread", [1, 10**15])  # dense ids, and ids too sparse for dense
def test_chain_table_agrees_with_the_dict_check(spread: int) -> None:
    rng = np.random.default_rng(spread % 97)
    for trial in range(40):
        n_req = int(rng.integers(1, 40))
        reqs = [
            (rng.integers(0, 12, int(rng.integers(1, 6))) * spread).tolist() for _ in range(n_req)
        ]
        split = int(rng.integers(0, n_req + 1))
        assert _admit_in_two(reqs, split) == _sequential_reference(reqs), trial


def test_chain_errors_come_in_file_order_and_skip_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_moon(hash_ids=[0, 1]), _moon(hash_ids=[5, 1]), "{oops", _moon(hash_ids=[0, 1])]
    p = _write(tmp_path, lines)
    msg = "line 2: 'hash_ids': id 1 comes after id 5 here but came after id 0 earlier"
    with pytest.raises(ValueError, match=msg):
        W.load_trace(p)  # the chain error (found in bulk) before the JSON error after it
    t = W.load_trace(p, on_error="skip")
    assert t.skipped_rows == 2 and t.blocks.tolist() == [0, 1, 0, 1]
    # many small batches and refused rows: the same rows as the one-at-a-time reference
    monkeypatch.setattr(_accumulator, "_FLUSH_ROWS", 4)
    monkeypatch.setattr(_accumulator, "_MIN_FLUSH_ROWS", 2)
    rng = np.random.default_rng(7)
    reqs = [(rng.integers(0, 9, int(rng.integers(1, 4))) + 100).tolist() for _ in range(60)]
    q = _write(tmp_path, [_moon(input_length=512 * len(r), hash_ids=r) for r in reqs], "r.jsonl")
    got = W.load_trace(q, on_error="skip")
    keep = _sequential_reference(reqs)
    assert got.blocks.tolist() == [h for i in keep for h in reqs[i]]
    assert got.skipped_rows == len(reqs) - len(keep)
