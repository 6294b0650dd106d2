"""vLLM's block table drawn from ``VLLMBlockCache.export()`` (``studies.block_table``): the
seed's two partial hits and a physical block serving several logical prefixes. The rules are
vLLM 0.33's (``kda_core.cache.vllm_blocks``, checked block by block against vLLM in
tests/real/test_vllm_blocks.py); the values here follow from them by hand."""

from __future__ import annotations

import pytest

from kda_core.studies.block_table import PRESETS, block_table


def test_96_of_a_128_token_block():
    t = block_table(**PRESETS["96 of a 128-token block"])
    # A's 97-token prompt stops its first chunk at the last 32-token boundary before its last
    # token, 96, where both groups register a key; block-only keys exist at 128 only
    assert (t.hit.tokens, t.hit.partial, t.hit.table_index) == (96, True, 0)
    assert (t.coarse_hit.tokens, t.coarse_hit.state_block) == (0, None)
    assert (t.steps_a[0].start, t.steps_a[0].end) == (0, 96)
    # B resumes at 96 and copies the partly used KV block and the state block before writing
    assert t.steps_b[0].start == 96
    assert {src for src, _ in t.steps_b[0].copies} == {t.hit.kv_blocks[-1], t.hit.state_block}
    # one physical KV block serves two logical prefixes: [0, 96) and [0, 128) of A
    assert t.shared_blocks == ((t.hit.kv_blocks[0], 0, (96, 128)),)
    keys = {(e.group, e.tokens, e.block_id) for e in t.after_a.entries}
    assert (0, 96, t.hit.kv_blocks[0]) in keys and (0, 128, t.hit.kv_blocks[0]) in keys
    assert [e[0] for e in t.events][:2] == ["A", "A"] and t.events[-1][0] == "B"


def test_4480_inside_4096_token_blocks():
    t = block_table(**PRESETS["4,480 inside 4,096-token blocks"])
    assert [s.end for s in t.steps_a] == [2048, 4096, 4480, 4481, 4482, 4483]
    # with 64-token keys B resumes inside the second block (index 1), with block keys at 4096
    assert (t.hit.tokens, t.hit.partial, t.hit.table_index) == (4480, True, 1)
    assert (t.coarse_hit.tokens, t.coarse_hit.partial, t.coarse_hit.table_index) == (4096, False, 0)
    assert len(t.hit.kv_blocks) == 2 and len(t.coarse_hit.kv_blocks) == 1
    assert t.b_len == 4480 + 40


def test_block_aligned_units_never_hit_inside_a_block():
    t = block_table(64, 64, 150, 10, 140)
    assert t.hit.tokens % 64 == 0 and not t.hit.partial
    assert t.hit == t.coarse_hit


@pytest.mark.parametrize(
    "kw",
    [
        {"unit": 48},  # does not divide 128
        {"unit": 256},
        {"prompt": 1},
        {"shared": 0},
        {"shared": 97 + 40 + 1},
        {"outputs": 10_000},
        {"block_size": 0},
    ],
)
def test_bad_input_is_refused(kw):
    with pytest.raises(ValueError):
        block_table(**{**PRESETS["96 of a 128-token block"], **kw})
