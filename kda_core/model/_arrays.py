"""TinyHybrid's parameters: the weight records and their init (``ModelConfig`` is ``params``).

`init_weights` draws fla's initialisation distributions from ``config.seed`` (the starting point
of training); `named_arrays` flattens the weights to the names of the weights file
(``embed``, ``blocks.3.mixer.w_uk``, ...); `weights_from_arrays` is its inverse and refuses a
file made for another architecture (every name and shape is checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.model.params import ModelConfig
from kda_core.model.tokenizer import VOCAB


@dataclass(slots=True)
class KDAWeights:
    w_qkv: np.ndarray  # [D, 3*H*K]  raw q|k|v projections
    conv_w: np.ndarray  # [3*H*K, W]
    w_beta: np.ndarray  # [D, H]
    f_a: np.ndarray  # [D, K]       low-rank gate input
    f_b: np.ndarray  # [K, H*K]
    A_log: np.ndarray  # [H]
    dt_bias: np.ndarray  # [H*K]
    w_gate: np.ndarray  # [D, H*V]    output gate
    norm_w: np.ndarray  # [V]         per-head RMSNorm weight
    w_o: np.ndarray  # [H*V, D]


@dataclass(slots=True)
class MLAWeights:
    w_dkv: np.ndarray  # [D, C]       down-projection to the cached latent
    norm_c: np.ndarray  # [C]
    w_q: np.ndarray  # [D, Hm*dh]
    w_uk: np.ndarray  # [C, Hm*dh]
    w_uv: np.ndarray  # [C, Hm*dv]
    w_gate: np.ndarray  # [D, Hm*dv]
    w_o: np.ndarray  # [Hm*dv, D]


@dataclass(slots=True)
class KimiLinearKDAWeights:
    """transformers' ``KimiLinearDeltaAttention``: KDAWeights with a low-rank output gate."""

    w_qkv: np.ndarray  # [D, 3*H*K]  q_proj | k_proj | v_proj
    conv_w: np.ndarray  # [3*H*K, W] conv1d (depthwise, one packed over q|k|v)
    w_beta: np.ndarray  # [D, H]      b_proj
    f_a: np.ndarray  # [D, K]         forget_gate.f_a_proj
    f_b: np.ndarray  # [K, H*K]       forget_gate.f_b_proj
    A_log: np.ndarray  # [H]
    dt_bias: np.ndarray  # [H*K]
    g_a: np.ndarray  # [D, K]         g_a_proj (output gate, low rank)
    g_b: np.ndarray  # [K, H*V]       g_b_proj
    norm_w: np.ndarray  # [V]         o_norm (gated per-head RMSNorm)
    w_o: np.ndarray  # [H*V, D]       o_proj


@dataclass(slots=True)
class KimiLinearMLAWeights:
    """transformers' ``KimiLinearAttention`` (q_lora_rank None): the cached row is the normed
    latent [C] then a key part [R] shared by all heads (kv_a_proj_with_mqa), no output gate."""

    w_dkv: np.ndarray  # [D, C+R]     kv_a_proj_with_mqa
    norm_c: np.ndarray  # [C]         kv_a_layernorm
    w_q: np.ndarray  # [D, Hm*(dh+R)] q_proj, per head [nope | rope]
    w_uk: np.ndarray  # [C, Hm*dh]    kv_b_proj's key rows
    w_uv: np.ndarray  # [C, Hm*dv]    kv_b_proj's value rows
    w_o: np.ndarray  # [Hm*dv, D]     o_proj


_Mixer = KDAWeights | MLAWeights | KimiLinearKDAWeights | KimiLinearMLAWeights


@dataclass(slots=True)
class BlockWeights:
    norm1: np.ndarray
    norm2: np.ndarray
    mixer: _Mixer
    w_up: np.ndarray  # [D, 2*F] (gate | up)
    w_down: np.ndarray  # [F, D]


def _kda_init(cfg: ModelConfig, rng: np.random.Generator, lin) -> _Mixer:
    """fla's KimiDeltaAttention init: A_log = log U[1, 16]; dt = exp U[log 1e-3, log 1e-1]
    clamped at 1e-4; dt_bias = inverse softplus(dt) (transformers' KimiLinear: the same)."""
    D, H, K, W = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.conv_size
    dt = np.maximum(np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H * K)), 1e-4)
    w_qkv = lin(D, 3 * H * K)
    if cfg.variant == "k3":
        conv_w = rng.uniform(-1, 1, (3 * H * K, W)) / np.sqrt(W)
    else:
        conv_w = lin(3 * H * K, W)
    shared = {
        "w_qkv": w_qkv,
        "conv_w": conv_w,
        "w_beta": lin(D, H),
        "f_a": lin(D, K),
        "f_b": lin(K, H * K),
        "A_log": np.log(rng.uniform(1, 16, H)),
        "dt_bias": dt + np.log(-np.expm1(-dt)),
    }
    if cfg.variant == "k3":
        return KDAWeights(**shared, w_gate=lin(D, H * K), norm_w=np.ones(K), w_o=lin(H * K, D))
    gate = {"g_a": lin(D, K), "g_b": lin(K, H * K)}
    return KimiLinearKDAWeights(**shared, **gate, norm_w=np.ones(K), w_o=lin(H * K, D))


def _mla_init(cfg: ModelConfig, lin) -> _Mixer:
    D, Hm, dh, dv = cfg.d_model, cfg.mla_heads, cfg.mla_head_dim, cfg.mla_value_dim
    C, R = cfg.mla_kv_rank, cfg.mla_rope_dim
    if cfg.variant == "k3":
        return MLAWeights(
            w_dkv=lin(D, C),
            norm_c=np.ones(C),
            w_q=lin(D, Hm * dh),
            w_uk=lin(C, Hm * dh),
            w_uv=lin(C, Hm * dv),
            w_gate=lin(D, Hm * dv),
            w_o=lin(Hm * dv, D),
        )
    return KimiLinearMLAWeights(
        w_dkv=lin(D, C + R),
        norm_c=np.ones(C),
        w_q=lin(D, Hm * (dh + R)),
        w_uk=lin(C, Hm * dh),
        w_uv=lin(C, Hm * dv),
        w_o=lin(Hm * dv, D),
    )


def init_weights(
    cfg: ModelConfig,
) -> tuple[np.ndarray, list[BlockWeights], np.ndarray, np.ndarray]:
    """Random weights from ``cfg.seed``: k3 draws matrices N(0, 1/n_in) and embeddings N(0, 1);
    kimi-linear draws them as transformers' ``_init_weights`` does, N(0, 0.02^2) (its
    ``initializer_range``), conv taps included. Gates: fla's init (`_kda_init`); norms one."""
    rng = np.random.default_rng(cfg.seed)
    D = cfg.d_model
    k3 = cfg.variant == "k3"

    def lin(n_in: int, n_out: int) -> np.ndarray:
        x = rng.standard_normal((n_in, n_out))
        return x / np.sqrt(n_in) if k3 else x * 0.02

    embed = rng.standard_normal((VOCAB, D))
    if not k3:
        embed *= 0.02
    blocks = []
    for kind in cfg.layer_kinds:
        mixer = _kda_init(cfg, rng, lin) if kind == "kda" else _mla_init(cfg, lin)
        blocks.append(
            BlockWeights(
                norm1=np.ones(D),
                norm2=np.ones(D),
                mixer=mixer,
                w_up=lin(D, 2 * cfg.mlp_hidden),
                w_down=lin(cfg.mlp_hidden, D),
            )
        )
    return embed, blocks, np.ones(D), lin(D, VOCAB)


def named_arrays(embed, blocks, final_norm, lm_head) -> dict[str, np.ndarray]:
    out = {"embed": embed, "final_norm": final_norm, "lm_head": lm_head}
    for i, b in enumerate(blocks):
        for f in ("norm1", "norm2", "w_up", "w_down"):
            out[f"blocks.{i}.{f}"] = getattr(b, f)
        for f in b.mixer.__slots__:
            out[f"blocks.{i}.mixer.{f}"] = getattr(b.mixer, f)
    return out


def weights_from_arrays(
    cfg: ModelConfig, arrays: dict[str, np.ndarray]
) -> tuple[np.ndarray, list[BlockWeights], np.ndarray, np.ndarray]:
    """Named arrays -> the model's weights (float64 copies); every name and shape is checked
    against the config's own initialisation, so a file for another architecture is refused."""
    embed, blocks, final_norm, lm_head = init_weights(cfg)  # the structure, then overwritten
    ref = named_arrays(embed, blocks, final_norm, lm_head)
    missing, extra = ref.keys() - arrays.keys(), arrays.keys() - ref.keys()
    if missing or extra:
        raise ValueError(
            f"weights do not fit this config: missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(extra)[:3]}"
        )
    for k, r in ref.items():
        a = np.asarray(arrays[k])
        if a.shape != r.shape or not np.all(np.isfinite(a)):
            raise ValueError(f"weights[{k!r}] must be finite with shape {r.shape}, got {a.shape}")
        r[...] = a  # float64 copy in place
    return embed, blocks, final_norm, lm_head
