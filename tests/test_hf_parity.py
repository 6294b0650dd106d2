"""The kimi-linear variant against transformers' own KimiLinearForCausalLM, both directions.

lab -> transformers: a lab model is exported (`export_hf`) and loaded with
``AutoModelForCausalLM.from_pretrained``; transformers -> lab: a model initialised by
transformers is saved with ``save_pretrained`` and loaded with `TinyHybrid.from_hf`. Logits agree
to 1e-5 (transformers computes in float32 on CPU through its pure-torch fallbacks of the KDA
and conv kernels; the lab in float64) on a prefill longer than one KDA chunk, on cached
one-token decodes, on a multi-token prefill continuing a cache, and greedy generation picks the
same tokens. Skipped without torch / transformers (the ``[hf]`` extra; CI installs both).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the optional [train] / [hf] extra")
transformers = pytest.importorskip("transformers", reason="transformers is the optional [hf] extra")

from kda_core import model as M  # noqa: E402
from tests.test_hf import f32_model  # noqa: E402

TOL = 1e-5
IDS = [int(t) for t in np.random.default_rng(7).integers(0, 256, 96)]


def _hf_logits(hf_model, ids: list[int], split: list[int]) -> np.ndarray:
    """transformers' logits of ids fed in pieces (lengths ``split``) through its cache."""
    out, cache, start = [], None, 0
    with torch.no_grad():
        for n in split:
            o = hf_model(
                torch.tensor([ids[start : start + n]]), past_key_values=cache, use_cache=True
            )
            cache, start = o.past_key_values, start + n
            out.append(o.logits[0].double().numpy())
    return np.concatenate(out)


def _lab_logits(model: M.TinyHybrid, ids: list[int], split: list[int]) -> np.ndarray:
    st, out, start = model.new_state(), [], 0
    for n in split:
        out.append(model.prefill(ids[start : start + n], st))
        start += n
    return np.concatenate(out)


SPLITS = {
    "prefill": [96],  # longer than transformers' 64-token KDA chunk
    "cached decode": [40] + [1] * 12,
    "prefill continuing a cache": [40, 24, 1, 1],
}


def _agree(lab: M.TinyHybrid, hf_model) -> None:
    for name, split in SPLITS.items():
        ids = IDS[: sum(split)]
        want = _hf_logits(hf_model, ids, split)
        got = _lab_logits(lab, ids, split)
        assert got.shape == want.shape == (len(ids), 256)
        err = np.abs(got - want).max()
        assert err <= TOL, (name, err)
        assert np.abs(want).max() > 0.1  # the logits are not all near zero
    prompt = M.encode("If the timeout is")
    with torch.no_grad():
        gen = hf_model.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False)
    assert gen[0, len(prompt) :].tolist() == lab.generate(prompt, 16)[0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = M.export_hf(f32_model(), tmp_path_factory.mktemp("lab"))
    return folder, transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


def test_lab_export_loads_in_transformers_with_the_same_logits(exported):
    folder, hf_model = exported
    assert type(hf_model).__name__ == "KimiLinearForCausalLM"
    assert hf_model.config.layer_types == ["linear_attention"] * 2 + ["full_attention"] + [
        "linear_attention"
    ]
    assert sum(p.numel() for p in hf_model.parameters()) == sum(
        a.size for a in M.named_weights(f32_model()).values()
    )
    _agree(f32_model(), hf_model)


def test_a_transformers_checkpoint_loads_in_the_lab_with_the_same_logits(tmp_path):
    """transformers' own init and save_pretrained; the layer pattern from the checkpoint form
    (linear_attn_config, 1-based), sizes unlike the lab's: no shared key part (rope 0) is
    covered by the lab export above, here qk_rope_head_dim = 8 and v_head_dim > nope."""
    cfg = transformers.KimiLinearConfig(
        vocab_size=256,
        hidden_size=48,
        intermediate_size=80,
        num_hidden_layers=5,
        num_attention_heads=3,
        num_key_value_heads=3,
        kv_lora_rank=10,
        qk_rope_head_dim=8,
        qk_nope_head_dim=6,
        v_head_dim=12,
        rms_norm_eps=1e-6,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
        mlp_layer_types=["dense"] * 5,
        linear_attn_config={
            "num_heads": 3,
            "head_dim": 12,
            "short_conv_kernel_size": 3,
            "kda_layers": [1, 3, 4],
            "full_attn_layers": [2, 5],
        },
    )
    torch.manual_seed(0)
    hf_model = transformers.KimiLinearForCausalLM(cfg).eval()
    hf_model.save_pretrained(tmp_path)
    lab = M.TinyHybrid.from_hf(tmp_path)
    assert lab.layer_kinds == ("kda", "mla", "kda", "kda", "mla")
    assert (lab.config.n_heads, lab.config.head_dim, lab.config.conv_size) == (3, 12, 3)
    _agree(lab, hf_model)


def test_the_benchs_transformers_model_with_k3_gates_is_k3_mini():
    """bench/bench_hf.py times transformers' model holding k3-mini's weights with K3's gates
    swapped in; it must compute k3-mini (float32: 1e-4, the training twin's bound)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "bench_hf.py"
    spec = importlib.util.spec_from_file_location("bench_hf", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lab = M.TinyHybrid()
    hf_model = bench.k3_in_transformers(lab)
    for split in SPLITS.values():
        ids = IDS[: sum(split)]
        err = np.abs(_hf_logits(hf_model, ids, split) - _lab_logits(lab, ids, split)).max()
        assert err <= 1e-4, (split, err)
