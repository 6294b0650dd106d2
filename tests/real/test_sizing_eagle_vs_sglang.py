"""An EAGLE3 drafter with its own config in SGLang 0.5.23's pool sizing, against SGLang's code.

The draft's ``config.json`` is written to a folder and read by SGLang's own ``ModelConfig``
(``is_draft_model=True``), which the real ``_resolve_eagle_aux_hidden_state`` reads for the
draft path; the real ``DefaultPoolConfigurator.__init__`` prices the draft into the target's
cell and ``calculate_pool_sizes`` turns a budget into tokens; the real
``_compute_model_num_layers`` gives the draft worker's layer count and a real
``MHATokenToKVPool`` (built on the CPU at a small size, its rows read off its buffers) its bytes
per row. Claimed equal: ``sizing.split_memory(..., eagle=draft)``'s priced share, KV tokens,
the draft pool's bytes and what it allocates beyond the budget. Targets: the Qwen3-Next and
Qwen3.5 / 3.6 configs (SGLang captures EAGLE3 hidden states for those families only).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kda_core import sizing as sz
from kda_core.sizing._eagle import read_eagle_draft, shipped_drafts

torch = pytest.importorskip("torch")
mt = pytest.importorskip("test_sizing_mtp_vs_sglang")
sc, fc, aux = mt.sc, mt.fc, mt.aux
ls = pytest.importorskip("sglang.srt.model_executor.model_runner_components.layer_setup")
mp = pytest.importorskip("sglang.srt.mem_cache.memory_pool")
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402

GIB = 1 << 30
SHIPPED = "qwen3-next-80b-a3b-eagle3"
NAMES = [n for n in fc.CONFIGS if fc.spec(n).family in ("qwen3_next", "qwen3_5_text")]
NAMES += [n for n in fc.CONFIGS if fc.spec(n).family == "qwen3_5_moe_text"]
# (num_key_value_heads, head_dim, num_hidden_layers, num_nextn_predict_layers) beside the
# shipped draft's (2, 256, 1, absent); nextn 0 is what some EAGLE3 drafts carry
DRAFTS = [None, (4, 128, 1, None), (8, 128, 2, None), (2, 256, 1, 0), (1, 64, 3, 1)]


def _draft_folder(tmp_path, shape) -> tuple[str, dict]:
    raw = dict(shipped_drafts()[SHIPPED]["config"])
    if shape is not None:
        heads, dim, layers, nextn = shape
        raw.update(num_key_value_heads=heads, head_dim=dim, num_hidden_layers=layers)
        if nextn is not None:
            raw["num_nextn_predict_layers"] = nextn
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return str(tmp_path), raw


def _priced_layers(monkeypatch, cfg, path: str) -> int | None:
    """``eagle_draft_num_layers`` from the real ``_resolve_eagle_aux_hidden_state`` with a
    draft path, the draft read by SGLang's own ``ModelConfig``."""
    target = SimpleNamespace(
        num_nextn_predict_layers=getattr(cfg, "num_nextn_predict_layers", None),
        is_hybrid_swa=False,
    )

    def draft_config(_sa, model_path, model_revision=None, is_draft_model=False):
        return ModelConfig(model_path, is_draft_model=is_draft_model)

    return mt.resolved_draft_layers(monkeypatch, target, path, draft_config, True)


def _pool_bytes_per_row(path: str, tp: int, kv: str, page: int) -> int:
    """The draft worker's ``MHATokenToKVPool`` (layers from the real
    ``_compute_model_num_layers``, heads and head sizes from the draft's ``ModelConfig``)
    built at a small size on the CPU: bytes of one of its ``size + page_size`` rows."""
    mc = ModelConfig(path, is_draft_model=True)
    layers = ls._compute_model_num_layers(
        model=SimpleNamespace(), model_config=mc, is_draft_worker=True
    )
    size = 2 * page + 7
    pool = mp.MHATokenToKVPool(
        size=size,
        page_size=page,
        dtype=sc.TORCH[kv] if kv == "bfloat16" else torch.uint8,
        head_num=mc.get_num_kv_heads(tp),
        head_dim=mc.head_dim,
        layer_num=layers,
        device="cpu",
        enable_memory_saver=False,
        v_head_dim=mc.v_head_dim,
    )
    rows = pool.k_buffer[0].shape[0]
    assert rows == size + page and len(pool.k_buffer) == layers
    k, v = pool.get_kv_size_bytes()
    return int(k + v) // rows


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", DRAFTS)
@pytest.mark.parametrize("kv, page", [("bfloat16", 1), ("fp8_e4m3", 64)])
def test_eagle_draft_cell_tokens_and_pool_are_sglangs(monkeypatch, tmp_path, name, shape, kv, page):
    path, raw = _draft_folder(tmp_path, shape)
    draft = read_eagle_draft(raw, "draft")
    spec = fc.spec(name)
    rest = 21 * GIB + 987_654_321
    for tp in fc.tps(name, 4):
        with sc.runtime_tp(monkeypatch, tp):
            cfg = mt._config(name, fc.raw(name))
            priced = _priced_layers(monkeypatch, cfg, path)
            real = mt._configurator(monkeypatch, cfg, spec, tp, kv, priced)
            base = sc.cell_size(cfg, spec, tp, kv)
        ours = sz.split_memory(
            spec, rest, 0.9, tp, None, "bfloat16", kv, page_size=page, eagle=draft
        )
        assert ours.draft_cell_bytes == real._cell_size - base
        tokens = real.calculate_pool_sizes(ours.kv_bytes, page).max_total_num_tokens
        assert ours.kv_tokens == tokens
        row = _pool_bytes_per_row(path, tp, kv, page)
        assert ours.draft_pool_bytes == row * (tokens + page)
        assert ours.draft_unpriced_bytes == row * (tokens + page) - ours.draft_cell_bytes * tokens
