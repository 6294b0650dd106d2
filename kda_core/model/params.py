"""TinyHybrid's configuration and parameters: ModelConfig, the weight records, their init.

`init_weights` draws fla's initialisation distributions from ``config.seed`` (the starting point
of training); `named_arrays` flattens the weights to the names of the weights file
(``embed``, ``blocks.3.mixer.w_uk``, ...); `weights_from_arrays` is its inverse and refuses a
file made for another architecture (every name and shape is checked).

Left out: the real K3 sizes (``K3_REFERENCE`` records them; ``kda_core.sizing`` sizes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.model.tokenizer import VOCAB

# The real model this one scales down (docs/sizing.md, "Model configs"; sizes in kda_core.sizing).
K3_REFERENCE = {
    "layers": 93,
    "kda_layers": 69,
    "mla_layers": 24,
    "hidden_size": 7168,
    "kda_heads": 96,
    "head_dim": 128,
    "conv_kernel": 4,
    "gate_lower_bound": -5.0,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
}


@dataclass(slots=True, frozen=True)
class ModelConfig:
    d_model: int = 128
    n_layers: int = 8
    n_heads: int = 4  # KDA heads (H = HV)
    head_dim: int = 32  # K = V
    conv_size: int = 4  # W
    mla_heads: int = 4
    mla_head_dim: int = 32
    mla_latent: int = 32  # the cached latent per token per MLA layer (K3: 512 + 64 rope)
    mlp_hidden: int = 256
    gate_lower_bound: float = -5.0
    norm_eps: float = 1e-6
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "head_dim", "conv_size", "mla_heads", "mla_head_dim"):
            if not 1 <= getattr(self, name) <= 1024:
                raise ValueError(f"{name} must be in [1, 1024], got {getattr(self, name)}")
        if not 4 <= self.n_layers <= 64 or self.n_layers % 4:
            raise ValueError(f"n_layers must be a multiple of 4 in [4, 64], got {self.n_layers}")
        if not -50 <= self.gate_lower_bound < 0:
            raise ValueError(f"gate_lower_bound must be in [-50, 0), got {self.gate_lower_bound}")

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        return tuple("mla" if i % 4 == 3 else "kda" for i in range(self.n_layers))


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
    w_uv: np.ndarray  # [C, Hm*dh]
    w_gate: np.ndarray  # [D, Hm*dh]
    w_o: np.ndarray  # [Hm*dh, D]


@dataclass(slots=True)
class BlockWeights:
    norm1: np.ndarray
    norm2: np.ndarray
    mixer: KDAWeights | MLAWeights
    w_up: np.ndarray  # [D, 2*F] (gate | up)
    w_down: np.ndarray  # [F, D]


def init_weights(
    cfg: ModelConfig,
) -> tuple[np.ndarray, list[BlockWeights], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(cfg.seed)
    D, H, K, W = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.conv_size

    def lin(n_in: int, n_out: int) -> np.ndarray:
        return rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)

    embed = rng.standard_normal((VOCAB, D))
    blocks = []
    for kind in cfg.layer_kinds:
        if kind == "kda":
            # fla's KimiDeltaAttention init: A_log = log U[1, 16]; dt = exp U[log 1e-3, log 1e-1]
            # clamped at 1e-4; dt_bias = inverse softplus(dt).
            dt = np.maximum(np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H * K)), 1e-4)
            mixer: KDAWeights | MLAWeights = KDAWeights(
                w_qkv=lin(D, 3 * H * K),
                conv_w=rng.uniform(-1, 1, (3 * H * K, W)) / np.sqrt(W),
                w_beta=lin(D, H),
                f_a=lin(D, K),
                f_b=lin(K, H * K),
                A_log=np.log(rng.uniform(1, 16, H)),
                dt_bias=dt + np.log(-np.expm1(-dt)),
                w_gate=lin(D, H * K),
                norm_w=np.ones(K),
                w_o=lin(H * K, D),
            )
        else:
            Hd = cfg.mla_heads * cfg.mla_head_dim
            mixer = MLAWeights(
                w_dkv=lin(D, cfg.mla_latent),
                norm_c=np.ones(cfg.mla_latent),
                w_q=lin(D, Hd),
                w_uk=lin(cfg.mla_latent, Hd),
                w_uv=lin(cfg.mla_latent, Hd),
                w_gate=lin(D, Hd),
                w_o=lin(Hd, D),
            )
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
