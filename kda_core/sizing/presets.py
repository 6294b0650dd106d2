"""The shape facts that size a hybrid model's caches: ModelSpec, the real presets, dtypes.

``preset("kimi-k3")`` (69 KDA + 24 MLA layers, 96 heads) and ``preset("kimi-linear-48b")``
(20 + 7, 32 heads); `tiny_spec` is TinyHybrid as a spec; ``sizing.from_hf_config`` builds a spec
from any supported hybrid ``config.json`` (KDA, Gated DeltaNet or Mamba2 linear layers; MLA or
GQA attention). Left out: MoE and attention shapes that do not size a cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from kda_core._checks import check_int as _check_int
from kda_core.model.params import ModelConfig

GIB: int = 1 << 30
MIB: int = 1 << 20

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8_e4m3": 1,
    "int8": 1,
}
TORCH_DTYPE_NAME: dict[str, str] = {
    "float32": "torch.float32",
    "bfloat16": "torch.bfloat16",
    "float16": "torch.float16",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "int8": "torch.int8",
}
MAX_DIM: int = 1 << 16  # cap on layers, heads, head dims, latent ranks
MAX_COUNT: int = 1 << 40  # cap on slots, tokens, byte budgets given as counts
_LINEAR_KINDS: tuple[str, ...] = ("kda", "gdn", "mamba2")
_ATTN_KINDS: tuple[str, ...] = ("mla", "gqa")


def dtype_bytes(dtype: str, name: str = "dtype") -> int:
    """Bytes per element of ``dtype`` (one of ``DTYPE_BYTES``); ValueError otherwise."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"{name} must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shape facts that size a hybrid model's caches.

    Linear (recurrent) layers: ``n_kda_layers`` of them, of ``linear_kind`` ``"kda"`` (Kimi Delta
    Attention), ``"gdn"`` (Gated DeltaNet) or ``"mamba2"``, each with ``kda_heads`` value heads of
    ``head_v_dim`` and ``linear_k_heads`` key heads (0 = ``kda_heads``) of ``head_k_dim``, and a
    short conv of kernel ``conv_kernel`` (window W-1). Mamba2 maps onto the same fields:
    ``kda_heads`` = ``mamba_num_heads``, ``head_v_dim`` = ``mamba_head_dim``, ``head_k_dim`` =
    ``ssm_state_size``, ``linear_k_heads`` = ``n_groups``. Attention layers: ``n_mla_layers`` of
    ``attn_kind`` ``"mla"`` (``kv_lora_rank + qk_rope_head_dim`` latent values per token) or
    ``"gqa"`` (K and V of ``attn_head_dim`` for each of ``attn_kv_heads`` KV heads).
    ``mla_heads`` is informational. ``ssm_dtype`` is the config's declared ``mamba_ssm_dtype``
    ("" when it declares none); ``context_len`` its maximum context (0 when not given).
    """

    name: str
    n_kda_layers: int
    n_mla_layers: int
    kda_heads: int
    head_k_dim: int = 128
    head_v_dim: int = 128
    conv_kernel: int = 4
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    mla_heads: int = 0
    linear_kind: str = "kda"
    linear_k_heads: int = 0
    attn_kind: str = "mla"
    attn_kv_heads: int = 0
    attn_head_dim: int = 0
    ssm_dtype: str = ""
    context_len: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string, got {self.name!r}")
        _check_int("n_kda_layers", self.n_kda_layers, 0, MAX_DIM)
        _check_int("n_mla_layers", self.n_mla_layers, 0, MAX_DIM)
        _check_int("kda_heads", self.kda_heads, 1, MAX_DIM)
        _check_int("head_k_dim", self.head_k_dim, 1, MAX_DIM)
        _check_int("head_v_dim", self.head_v_dim, 1, MAX_DIM)
        _check_int("conv_kernel", self.conv_kernel, 1, 64)
        _check_int("kv_lora_rank", self.kv_lora_rank, 0, MAX_DIM)
        _check_int("qk_rope_head_dim", self.qk_rope_head_dim, 0, MAX_DIM)
        _check_int("mla_heads", self.mla_heads, 0, MAX_DIM)
        _check_int("linear_k_heads", self.linear_k_heads, 0, MAX_DIM)
        _check_int("attn_kv_heads", self.attn_kv_heads, 0, MAX_DIM)
        _check_int("attn_head_dim", self.attn_head_dim, 0, MAX_DIM)
        _check_int("context_len", self.context_len, 0, MAX_COUNT)
        if self.n_kda_layers + self.n_mla_layers == 0:
            raise ValueError("n_kda_layers + n_mla_layers must be >= 1")
        if self.linear_kind not in _LINEAR_KINDS:
            raise ValueError(
                f"linear_kind must be one of {_LINEAR_KINDS}, got {self.linear_kind!r}"
            )
        if self.attn_kind not in _ATTN_KINDS:
            raise ValueError(f"attn_kind must be one of {_ATTN_KINDS}, got {self.attn_kind!r}")
        if (
            self.attn_kind == "gqa"
            and self.n_mla_layers
            and not (self.attn_kv_heads and self.attn_head_dim)
        ):
            raise ValueError("attn_kv_heads and attn_head_dim must be >= 1 for GQA attention")
        if self.ssm_dtype and self.ssm_dtype not in DTYPE_BYTES:
            raise ValueError(f"ssm_dtype must be '' or one of {sorted(DTYPE_BYTES)}")

    @property
    def n_layers(self) -> int:
        return self.n_kda_layers + self.n_mla_layers

    @property
    def n_linear_layers(self) -> int:
        """Linear (recurrent) layers: the KDA / GDN / Mamba2 layers (``n_kda_layers``)."""
        return self.n_kda_layers

    @property
    def n_attn_layers(self) -> int:
        """Attention layers, MLA or GQA (``n_mla_layers``)."""
        return self.n_mla_layers

    @property
    def k_heads(self) -> int:
        """Key heads of a linear layer (Mamba2: groups)."""
        return self.linear_k_heads or self.kda_heads

    @property
    def mla_latent_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim


PRESETS: dict[str, ModelSpec] = {
    # 93 layers = 23 x (3 KDA + 1 MLA) + a final MLA: 69 KDA + 24 MLA.
    "kimi-k3": ModelSpec(
        name="kimi-k3",
        n_kda_layers=69,
        n_mla_layers=24,
        kda_heads=96,
        head_k_dim=128,
        head_v_dim=128,
        conv_kernel=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        mla_heads=96,
    ),
    # 27 layers: 20 KDA + 7 MLA (docs/sizing.md, "Model configs").
    "kimi-linear-48b": ModelSpec(
        name="kimi-linear-48b",
        n_kda_layers=20,
        n_mla_layers=7,
        kda_heads=32,
        head_k_dim=128,
        head_v_dim=128,
        conv_kernel=4,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        mla_heads=32,
    ),
}


def check_knobs(
    model: object = "kimi-k3", overlap: bool = True, skip_decode_lock: bool = False, **dtypes: str
) -> None:
    """ValueError naming the argument unless ``model`` is a preset name or a ModelSpec, the
    flags are bools and each ``dtypes`` value (keyword = argument name) a known dtype: the
    checks a study entry point runs once before it calls the sizing functions."""
    if isinstance(model, str) and model not in PRESETS:
        raise ValueError(f"model must be one of {sorted(PRESETS)} or a ModelSpec, got {model!r}")
    if not isinstance(model, (str, ModelSpec)):
        raise ValueError("model must be a preset name or a ModelSpec")
    for name, flag in (("overlap", overlap), ("skip_decode_lock", skip_decode_lock)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    for name, dtype in dtypes.items():
        dtype_bytes(dtype, name)


def preset(name: str) -> ModelSpec:
    """The ModelSpec of a real model: ``"kimi-k3"`` or ``"kimi-linear-48b"``."""
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]


def as_spec(spec: ModelSpec | str) -> ModelSpec:
    """``spec`` itself, or the preset it names."""
    if isinstance(spec, str):
        return preset(spec)
    if not isinstance(spec, ModelSpec):
        raise ValueError(f"spec must be a ModelSpec or a preset name, got {type(spec).__name__}")
    return spec


def local_heads(spec: ModelSpec | str, tp: int = 1) -> int:
    """KDA heads per GPU at tensor-parallel size ``tp`` (which must divide the head count)."""
    spec = as_spec(spec)
    tp = _check_int("tp", tp, 1, MAX_DIM)
    if spec.kda_heads % tp:
        raise ValueError(
            f"tp must divide the KDA head count {spec.kda_heads} of {spec.name}, got tp={tp}"
        )
    return spec.kda_heads // tp


def tiny_spec(config: ModelConfig | None = None) -> ModelSpec:
    """TinyHybrid's config (default ``ModelConfig()``) as a ModelSpec, so its serving bytes use
    the same formulas as the real models. The one place the tiny model's shape becomes a spec."""
    c = ModelConfig() if config is None else config
    kinds = c.layer_kinds
    return ModelSpec(
        name="k3-mini",
        n_kda_layers=kinds.count("kda"),
        n_mla_layers=kinds.count("mla"),
        kda_heads=c.n_heads,
        head_k_dim=c.head_dim,
        head_v_dim=c.head_dim,
        conv_kernel=c.conv_size,
        kv_lora_rank=c.mla_latent,
        qk_rope_head_dim=0,
        mla_heads=c.mla_heads,
    )
