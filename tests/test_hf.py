"""Kimi-Linear checkpoints without transformers: config mapping, refusals, the file format.

The parity against transformers' own ``KimiLinearForCausalLM`` is tests/test_hf_parity.py.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from kda_core import model as M
from kda_core.model import _hf as hf
from kda_core.model._arrays import KimiLinearKDAWeights

CFG = M.ModelConfig(
    d_model=32,
    n_layers=4,
    n_heads=2,
    head_dim=8,
    conv_size=4,
    mla_heads=2,
    mla_head_dim=8,
    mla_latent=8 + 4,
    mlp_hidden=48,
    gate_lower_bound=None,
    norm_eps=1e-5,
    variant="kimi-linear",
    layer_types=("kda", "kda", "mla", "kda"),
    mla_rope_dim=4,
    mla_v_dim=6,
)


def f32_model(cfg: M.ModelConfig = CFG, seed: int = 1) -> M.TinyHybrid:
    """A random kimi-linear model whose weights are float32 numbers (what a checkpoint holds)."""
    r = M.TinyHybrid(cfg, weights="random", seed=seed)
    return M.TinyHybrid(
        cfg, weights={k: v.astype(np.float32) for k, v in M.named_weights(r).items()}
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return M.export_hf(f32_model(), tmp_path_factory.mktemp("ckpt"))


def test_export_then_load_is_exact(folder):
    a, b = f32_model(), M.TinyHybrid.from_hf(folder)
    assert b.config == CFG and b.version.startswith("kimi-linear-")
    for (k, x), y in zip(M.named_weights(a).items(), M.named_weights(b).values()):
        assert np.array_equal(x, y), k
    ids = M.encode("Return the number of")
    assert np.array_equal(a.forward(ids), b.forward(ids))


def test_exported_files_use_transformers_names(folder):
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["architectures"] == ["KimiLinearForCausalLM"] and cfg["model_type"] == "kimi_linear"
    assert cfg["layer_types"] == ["linear_attention"] * 2 + ["full_attention", "linear_attention"]
    sd = hf.read_safetensors(folder / "model.safetensors")
    assert sd["model.layers.0.self_attn.conv1d.weight"].shape == (48, 1, 4)
    assert sd["model.layers.0.self_attn.forget_gate.A_log"].shape == (1, 1, 2, 1)
    assert sd["model.layers.2.self_attn.kv_a_proj_with_mqa.weight"].shape == (12, 32)
    assert sd["model.layers.2.self_attn.kv_b_proj.weight"].shape == (2 * (8 + 6), 8)
    assert sd["model.layers.2.self_attn.q_proj.weight"].shape == (2 * (8 + 4), 32)
    assert all(a.dtype == np.float32 for a in sd.values())


def test_the_kimi_linear_layers_are_transformers_formulas():
    """The gate, the low-rank output gate and the shared key part, written out independently."""
    m = f32_model()
    w = m.blocks[0].mixer
    h = m.norm1(0, m.embed[M.encode("If the timeout is None")])
    f = m.kda_features(0, h, np.zeros((3, 48)))
    pre = ((h @ w.f_a) @ w.f_b).reshape(-1, 2, 8) + w.dt_bias.reshape(2, 8)
    want = -np.exp(w.A_log)[:, None] * np.log1p(np.exp(pre))  # -exp(A_log) softplus(.)
    np.testing.assert_allclose(f.g, want, rtol=1e-12, atol=1e-15)
    assert isinstance(w, KimiLinearKDAWeights) and not hasattr(w, "w_gate")
    lat = m.mla_latent(2, h)
    z = h @ m.blocks[2].mixer.w_dkv
    assert lat.shape == (h.shape[0], 12) and np.array_equal(lat[:, 8:], z[:, 8:])  # not normed


def test_config_round_trip_and_the_checkpoint_form_of_the_layer_pattern():
    cfg = hf.config_to_hf(CFG)
    assert hf.config_from_hf(cfg) == CFG
    # Moonshot's own config.json: linear_attn_config with 1-based layer lists
    cfg2 = {k: v for k, v in cfg.items() if not k.startswith("linear_") and k != "layer_types"}
    cfg2["linear_attn_config"] = {
        "num_heads": 2,
        "head_dim": 8,
        "short_conv_kernel_size": 4,
        "kda_layers": [1, 2, 4],
        "full_attn_layers": [3],
    }
    assert hf.config_from_hf(cfg2) == CFG


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next"}, "Qwen3Next"),
        ({"hidden_size": None}, "missing field 'hidden_size'"),
        ({"layer_types": None}, "layer_types"),
        ({"linear_num_heads": None}, "linear_num_heads"),
        ({"mlp_layer_types": ["dense", "sparse", "sparse", "sparse"]}, "mlp_layer_types"),
        ({"mlp_layer_types": None}, "mlp_layer_types"),  # transformers' default: MoE after 1
        ({"q_lora_rank": 16}, "q_lora_rank"),
        ({"vocab_size": 163840}, "vocab_size"),
        ({"num_key_value_heads": 1}, "num_key_value_heads"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"hidden_size": 32.5}, "hidden_size"),
        ({"rms_norm_eps": "small"}, "rms_norm_eps"),
        ({"layer_types": ["linear_attention"] * 3}, "layer_types"),
    ],
)
def test_unsupported_or_incomplete_configs_are_refused_by_name(change, match):
    cfg = hf.config_to_hf(CFG) | change
    with pytest.raises(ValueError, match=match):
        hf.config_from_hf(cfg)


def test_k3_cannot_be_exported(tmp_path):
    with pytest.raises(ValueError, match="lower-bound gate"):
        M.export_hf(M.TinyHybrid(weights="random"), tmp_path)
    assert not (tmp_path / "config.json").exists()


def test_bad_folders_are_refused(tmp_path, folder):
    with pytest.raises(ValueError, match="no config.json"):
        M.TinyHybrid.from_hf(tmp_path)
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(ValueError, match="missing weight file"):
        M.TinyHybrid.from_hf(tmp_path)
    sd = hf.read_safetensors(folder / "model.safetensors")
    extra = sd | {"model.layers.1.mlp.experts.gate_up_proj": np.zeros((2, 2), np.float32)}
    _save(tmp_path / "model.safetensors", extra)
    with pytest.raises(ValueError, match="unexpected tensors"):
        M.TinyHybrid.from_hf(tmp_path)
    short = {k: v for k, v in sd.items() if "layers.3.self_attn.b_proj" not in k}
    _save(tmp_path / "model.safetensors", short)
    with pytest.raises(ValueError, match="missing tensor 'model.layers.3.self_attn.b_proj"):
        M.TinyHybrid.from_hf(tmp_path)
    bad = sd | {"model.norm.weight": np.zeros(31, np.float32)}
    _save(tmp_path / "model.safetensors", bad)
    with pytest.raises(ValueError, match="final_norm"):
        M.TinyHybrid.from_hf(tmp_path)


def _save(path: Path, sd: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file(sd, str(path))


def _raw_safetensors(path: Path, tensors: dict[str, tuple[str, tuple, bytes]]) -> None:
    """A .safetensors file written by hand (the format: header length, JSON header, data)."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)


def test_bfloat16_and_float16_checkpoints_are_widened_exactly(tmp_path):
    x = np.array([1.0, -2.5, 3.140625, 1e-3], dtype=np.float32)
    bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation: exact for these values
    _raw_safetensors(
        tmp_path / "a.safetensors",
        {
            "b": ("BF16", (2, 2), bf16.tobytes()),
            "h": ("F16", (4,), x.astype(np.float16).tobytes()),
            "i": ("I64", (1,), b"\0" * 8),
        },
    )
    with pytest.raises(ValueError, match="dtype I64"):
        hf.read_safetensors(tmp_path / "a.safetensors")
    _raw_safetensors(
        tmp_path / "a.safetensors",
        {"b": ("BF16", (2, 2), bf16.tobytes()), "h": ("F16", (4,), x.astype(np.float16).tobytes())},
    )
    sd = hf.read_safetensors(tmp_path / "a.safetensors")
    want_b = (bf16.astype(np.uint32) << 16).view(np.float32).reshape(2, 2)
    assert sd["b"].dtype == np.float32 and np.array_equal(sd["b"], want_b)
    assert np.array_equal(sd["b"].reshape(-1)[:3], x[:3])
    assert np.array_equal(sd["h"], x.astype(np.float16).astype(np.float32))
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(ValueError, match="not a safetensors file"):
        hf.read_safetensors(tmp_path / "junk.safetensors")


def test_the_checkpoint_layout_loads_as_the_module_layout(tmp_path, folder):
    """Moonshot's layout (what save_pretrained writes): the forget gate's weights directly under
    self_attn, one conv weight per q / k / v, the MLP as block_sparse_moe."""
    sd = hf.read_safetensors(folder / "model.safetensors")
    ckpt = {}
    for name, a in sd.items():
        name = name.replace("forget_gate.", "").replace(".mlp.", ".block_sparse_moe.")
        if name.endswith("conv1d.weight"):
            for part, x in zip(("q", "k", "v"), np.split(a, 3)):
                ckpt[name.replace("conv1d", f"{part}_conv1d")] = x
        else:
            ckpt[name] = a
    assert (
        "model.layers.0.self_attn.A_log" in ckpt
        and "model.layers.3.self_attn.v_conv1d.weight" in ckpt
    )
    _save(tmp_path / "model.safetensors", ckpt)
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    m = M.TinyHybrid.from_hf(tmp_path)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(M.named_weights(m).values(), M.named_weights(f32_model()).values())
    )
    del ckpt["model.layers.1.self_attn.k_conv1d.weight"]
    _save(tmp_path / "model.safetensors", ckpt)
    with pytest.raises(ValueError, match="q/k/v_conv1d"):
        M.TinyHybrid.from_hf(tmp_path)


def test_sharded_checkpoints_load(tmp_path, folder):
    sd = hf.read_safetensors(folder / "model.safetensors")
    names = sorted(sd)
    half = len(names) // 2
    _save(tmp_path / "a.safetensors", {k: sd[k] for k in names[:half]})
    _save(tmp_path / "b.safetensors", {k: sd[k] for k in names[half:]})
    shard = {k: "a.safetensors" if i < half else "b.safetensors" for i, k in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shard}))
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    m = M.TinyHybrid.from_hf(tmp_path)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(M.named_weights(m).values(), M.named_weights(f32_model()).values())
    )


def test_the_environment_variable_makes_the_default_model_a_checkpoint(monkeypatch, folder):
    monkeypatch.setenv(M.tiny._CHECKPOINT_ENV, str(folder))
    m = M.TinyHybrid()
    assert m.config == CFG and np.array_equal(m.embed, f32_model().embed)
    assert M.TinyHybrid(weights="random").config.variant == "k3"  # explicit choices win
    monkeypatch.delenv(M.tiny._CHECKPOINT_ENV)
    assert M.TinyHybrid().config.variant == "k3"


def test_the_kimi_linear_variant_serves_single_requests_through_the_engine(folder):
    """The engine's one-request path (radix cache, checkpoints, replay) runs on the model's own
    prefill / decode, so it serves the kimi-linear variant as it serves k3-mini."""
    from kda_core.engine import Engine

    lab = M.TinyHybrid.from_hf(folder)
    eng = Engine(model=lab)
    first = eng.generate("Return the number of items", max_new_tokens=6)
    again = eng.generate("Return the number of items in", max_new_tokens=6)
    assert again.restore_at > 0  # a checkpoint of the first request was restored
    assert first.tokens == lab.generate(M.encode("Return the number of items"), 6)[0]
    ids = M.encode("Return the number of items in")
    np.testing.assert_allclose(again.logits, lab.generate(ids, 6)[1], atol=1e-9, rtol=0)


def test_the_kimi_linear_variant_serves_a_batch_through_the_engine(folder):
    """Engine.serve with requests sharing prefixes and arriving together: every request of the
    kimi-linear variant gets the tokens and logits of its own uncached run."""
    from kda_core.engine import Engine, Request

    lab = M.TinyHybrid.from_hf(folder)
    prompts = ["Return the number of items", "Return the number of items in", "If the timeout"]
    reqs = [Request(p, max_new_tokens=5, arrival=i // 2) for i, p in enumerate(prompts * 2)]
    out = Engine(model=lab).serve(reqs)
    assert out.rejected == {} and out.peak_running >= 2
    for req, rep in zip(reqs, out.reports):
        tokens, logits = lab.generate(M.encode(req.prompt), 5)
        assert rep is not None and rep.tokens == tokens
        np.testing.assert_allclose(rep.logits, logits, atol=1e-9, rtol=0)
