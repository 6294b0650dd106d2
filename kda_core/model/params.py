"""TinyHybrid's configuration: ModelConfig and the variants (the weight records and their
init are the package's own, ``_arrays``).

Left out: the real K3 sizes (``kda_core.sizing.preset("kimi-k3")``; docs/sizing.md).
"""

from __future__ import annotations

from dataclasses import dataclass

VARIANTS: tuple[str, ...] = ("k3", "kimi-linear")
_LAYER_TYPES: tuple[str, ...] = ("kda", "mla")


@dataclass(slots=True, frozen=True)
class ModelConfig:
    """Sizes and variant. ``k3`` (the default, k3-mini): K3's lower-bound gate, a full-rank
    output gate, a gated NoPE MLA. ``kimi-linear``: every layer as transformers'
    ``KimiLinearForCausalLM`` (softplus gate, low-rank output gate, MLA with a shared key part
    beside the latent, no MLA gate); its checkpoints load with ``TinyHybrid.from_hf``."""

    d_model: int = 128
    n_layers: int = 8
    n_heads: int = 4  # KDA heads (H = HV)
    head_dim: int = 32  # K = V
    conv_size: int = 4  # W
    mla_heads: int = 4
    mla_head_dim: int = 32  # q / k width per head up-projected from the latent (qk_nope_head_dim)
    # the cached row per token per MLA layer: the normed latent, then (kimi-linear) the shared
    # key part of mla_rope_dim (K3: 512 + 64)
    mla_latent: int = 32
    mlp_hidden: int = 256
    gate_lower_bound: float | None = -5.0  # K3's gate; None for kimi-linear (no lower bound)
    norm_eps: float = 1e-6
    seed: int = 0
    variant: str = "k3"
    layer_types: tuple[str, ...] | None = None  # "kda" / "mla" per layer; None: 3 KDA : 1 MLA
    mla_rope_dim: int = 0  # kimi-linear's qk_rope_head_dim (k3: 0)
    mla_v_dim: int | None = None  # value width per head (None: mla_head_dim)

    def __post_init__(self) -> None:
        for name in (
            "d_model",
            "n_heads",
            "head_dim",
            "conv_size",
            "mla_heads",
            "mla_head_dim",
            "mla_latent",
            "mlp_hidden",
        ):
            if not 1 <= getattr(self, name) <= 4096:
                raise ValueError(f"{name} must be in [1, 4096], got {getattr(self, name)}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.layer_types is None:
            if not 4 <= self.n_layers <= 64 or self.n_layers % 4:
                raise ValueError(
                    f"n_layers must be a multiple of 4 in [4, 64], got {self.n_layers}"
                )
        elif len(self.layer_types) != self.n_layers or not 1 <= self.n_layers <= 64:
            raise ValueError(
                f"layer_types must name n_layers = {self.n_layers} (1..64) layers, "
                f"got {len(self.layer_types)}"
            )
        elif any(t not in _LAYER_TYPES for t in self.layer_types):
            raise ValueError(f"layer_types must hold {_LAYER_TYPES}, got {self.layer_types}")
        if self.mla_v_dim is not None and not 1 <= self.mla_v_dim <= 4096:
            raise ValueError(f"mla_v_dim must be None or in [1, 4096], got {self.mla_v_dim}")
        if self.variant == "k3":
            lb = self.gate_lower_bound
            if lb is None or not -50 <= lb < 0:
                raise ValueError(f"gate_lower_bound must be in [-50, 0), got {lb}")
            if self.mla_rope_dim:
                raise ValueError(
                    f"mla_rope_dim must be 0 for variant 'k3', got {self.mla_rope_dim}"
                )
        else:
            if self.gate_lower_bound is not None:
                raise ValueError(
                    "gate_lower_bound must be None for variant 'kimi-linear' (its softplus gate "
                    f"has no lower bound), got {self.gate_lower_bound}"
                )
            if not 0 <= self.mla_rope_dim < self.mla_latent:
                raise ValueError(
                    f"mla_rope_dim must be in [0, mla_latent = {self.mla_latent}), "
                    f"got {self.mla_rope_dim}"
                )

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        if self.layer_types is not None:
            return tuple(self.layer_types)
        return tuple("mla" if i % 4 == 3 else "kda" for i in range(self.n_layers))

    @property
    def mla_kv_rank(self) -> int:
        """The normed latent's width (transformers' kv_lora_rank)."""
        return self.mla_latent - self.mla_rope_dim

    @property
    def mla_value_dim(self) -> int:
        return self.mla_head_dim if self.mla_v_dim is None else self.mla_v_dim
