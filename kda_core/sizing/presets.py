"""The shape facts that size a hybrid model's caches: ModelSpec, the real presets, dtypes.

``preset("kimi-k3")`` (69 KDA + 24 MLA layers, 96 heads) and ``preset("kimi-linear-48b")``
(20 + 7, 32 heads); `tiny_spec` is TinyHybrid as a spec; ``sizing.from_hf_config`` builds a spec
from any hybrid ``config.json`` SGLang 0.5.23 or vLLM 0.33 serves. A spec names its linear layers'
kind (one entry of ``sizing.LINEAR_KINDS``: KDA, Gated DeltaNet, Mamba2, ...) and its
attention (MLA or GQA); each kind's entry says how its fields make a state. Left out: MoE and
attention shapes that do not size a cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kda_core._checks import check_int as _check_int

if TYPE_CHECKING:  # imported when called: kda_core.model reads configs with sizing.hfconfig
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
MAX_DIM: int = 1 << 16  # cap on layers, heads, head dims, latent ranks
MAX_COUNT: int = 1 << 40  # cap on slots, tokens, byte budgets given as counts
_LINEAR_KIND_NAMES: tuple[str, ...] = (
    "kda",
    "gdn",
    "mamba2",
    "mamba1",
    "short_conv",
    "lightning",
    "jet",
    "cca",
)
# the linear (recurrent) layer kinds: sizing.LINEAR_KINDS has one entry per kind
_ATTN_KINDS: tuple[str, ...] = ("mla", "gqa")
_STATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


def dtype_bytes(dtype: str, name: str = "dtype") -> int:
    """Bytes per element of ``dtype`` (one of ``DTYPE_BYTES``); ValueError otherwise."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"{name} must be one of {sorted(DTYPE_BYTES)}, got {dtype!r}")
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shape facts that size a hybrid model's caches.

    Linear (recurrent) layers: ``n_linear_layers`` of ``linear_kind`` (``_LINEAR_KIND_NAMES``).
    Each has ``linear_heads`` heads (H, the count TP splits) with values of ``linear_v_dim`` (V)
    and keys / SSM states of ``linear_k_dim`` (K; 0 when the kind keeps no recurrent state),
    ``linear_k_heads`` key heads or groups (0 = H), and a short conv of ``conv_kernel`` taps
    (window W-1; 1 = no window) over the channels its kind's entry names, plus
    ``conv_unsplit`` channels every GPU keeps whole (ZAYA's previous hidden state).
    ``mamba_chunk_size`` is the config's (0 when it names none). Attention layers:
    ``n_attn_layers`` of ``attn_kind`` ``"mla"`` (``kv_lora_rank + qk_rope_head_dim`` latent
    values per token) or ``"gqa"`` (K and V of ``attn_head_dim`` for each of ``attn_kv_heads``
    KV heads); ``attn_heads`` (query heads) is informational. Default state dtypes, resolved
    from the config once (``sizing.from_hf_config``): ``sglang_ssm_dtype`` what SGLang uses
    without ``--mamba-ssm-dtype``; ``vllm_ssm_dtype`` what vLLM's ``auto`` gives ("" = the
    model dtype). ``family`` is the config's ``model_type`` ("" for a preset or typed spec);
    ``context_len`` its maximum context (0 when not given). ``nextn_predict_layers`` and
    ``mtp_hidden_layers`` are the config's ``num_nextn_predict_layers`` and
    ``mtp_num_hidden_layers`` (0 when absent): the MTP modules each engine reads (``_drafts``).
    The layer counts are SGLang's; ``vllm_tail_attn_layers`` of the linear layers are attention
    layers in vLLM (Ling 3.0's trailing partial layer group; ``size_vllm`` moves them).
    """

    name: str
    n_linear_layers: int
    n_attn_layers: int
    linear_heads: int
    linear_k_dim: int = 128
    linear_v_dim: int = 128
    conv_kernel: int = 4
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    attn_heads: int = 0
    linear_kind: str = "kda"
    linear_k_heads: int = 0
    attn_kind: str = "mla"
    attn_kv_heads: int = 0
    attn_head_dim: int = 0
    conv_unsplit: int = 0
    mamba_chunk_size: int = 0
    sglang_ssm_dtype: str = "float32"
    vllm_ssm_dtype: str = ""
    family: str = ""
    context_len: int = 0
    nextn_predict_layers: int = 0
    mtp_hidden_layers: int = 0
    vllm_tail_attn_layers: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string, got {self.name!r}")
        for f, lo in (("n_linear_layers", 0), ("n_attn_layers", 0), ("linear_heads", 1)):
            _check_int(f, getattr(self, f), lo, MAX_DIM)
        for f in ("linear_k_dim", "kv_lora_rank", "qk_rope_head_dim", "attn_heads"):
            _check_int(f, getattr(self, f), 0, MAX_DIM)
        for f in ("linear_k_heads", "attn_kv_heads", "attn_head_dim", "conv_unsplit"):
            _check_int(f, getattr(self, f), 0, MAX_DIM)
        _check_int("linear_v_dim", self.linear_v_dim, 1, MAX_DIM)
        _check_int("conv_kernel", self.conv_kernel, 1, 64)
        _check_int("mamba_chunk_size", self.mamba_chunk_size, 0, MAX_DIM)
        _check_int("context_len", self.context_len, 0, MAX_COUNT)
        _check_int("nextn_predict_layers", self.nextn_predict_layers, 0, 64)
        _check_int("mtp_hidden_layers", self.mtp_hidden_layers, 0, 64)
        if self.n_linear_layers + self.n_attn_layers == 0:
            raise ValueError("n_linear_layers + n_attn_layers must be >= 1")
        _check_int("vllm_tail_attn_layers", self.vllm_tail_attn_layers, 0, self.n_linear_layers)
        if self.linear_kind not in _LINEAR_KIND_NAMES:
            raise ValueError(
                f"linear_kind must be one of {_LINEAR_KIND_NAMES}, got {self.linear_kind!r}"
            )
        if self.attn_kind not in _ATTN_KINDS:
            raise ValueError(f"attn_kind must be one of {_ATTN_KINDS}, got {self.attn_kind!r}")
        if self.linear_kind == "kda" and self.linear_k_dim != self.linear_v_dim:
            # Kimi configs give one head_dim; both engines' KDA state is (H, D, D)
            raise ValueError("linear_k_dim must equal linear_v_dim for KDA layers")
        gqa = self.attn_kind == "gqa" and self.n_attn_layers
        if gqa and not (self.attn_kv_heads and self.attn_head_dim):
            raise ValueError("attn_kv_heads and attn_head_dim must be >= 1 for GQA attention")
        if self.sglang_ssm_dtype not in _STATE_DTYPES:
            raise ValueError(f"sglang_ssm_dtype must be one of {_STATE_DTYPES}")
        if self.vllm_ssm_dtype not in ("", *_STATE_DTYPES):
            raise ValueError(f"vllm_ssm_dtype must be '' or one of {_STATE_DTYPES}")
        if not isinstance(self.family, str):
            raise ValueError(f"family must be a string, got {self.family!r}")

    @property
    def n_layers(self) -> int:
        return self.n_linear_layers + self.n_attn_layers

    @property
    def k_heads(self) -> int:
        """Key heads (groups) of a linear layer: ``linear_k_heads``, else ``linear_heads``."""
        return self.linear_k_heads or self.linear_heads

    @property
    def mla_latent_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    # The KDA-era names the other studies read (int8, swa_vs_kda, context_parallel).
    @property
    def n_kda_layers(self) -> int:
        return self.n_linear_layers

    @property
    def n_mla_layers(self) -> int:
        return self.n_attn_layers

    @property
    def kda_heads(self) -> int:
        return self.linear_heads

    @property
    def head_k_dim(self) -> int:
        return self.linear_k_dim

    @property
    def head_v_dim(self) -> int:
        return self.linear_v_dim


PRESETS: dict[str, ModelSpec] = {
    # 93 layers = 23 x (3 KDA + 1 MLA) + a final MLA: 69 KDA + 24 MLA.
    "kimi-k3": ModelSpec("kimi-k3", 69, 24, 96, attn_heads=96, family="kimi_k3"),
    # 27 layers: 20 KDA + 7 MLA (docs/sizing.md, "Model configs").
    "kimi-linear-48b": ModelSpec("kimi-linear-48b", 20, 7, 32, attn_heads=32, family="kimi_linear"),
}


def check_knobs(
    model: object = "kimi-k3", overlap: bool = True, skip_decode_lock: bool = False, **dtypes: str
) -> None:
    """ValueError naming the argument unless ``model`` is a preset name or a ModelSpec, the
    flags are bools and each ``dtypes`` value (keyword = argument name) a known dtype: the
    checks a study entry point runs once before it calls the sizing functions."""
    as_spec(model, "model")
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


def as_spec(spec: object, name: str = "spec") -> ModelSpec:
    """``spec`` itself, or the preset it names; ValueError naming ``name`` otherwise. Every
    API that takes a model takes either (the one resolver)."""
    if isinstance(spec, ModelSpec):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    if isinstance(spec, str):
        raise ValueError(f"{name} must be one of {sorted(PRESETS)} or a ModelSpec, got {spec!r}")
    raise ValueError(f"{name} must be a ModelSpec or a preset name, got {type(spec).__name__}")


def preset_name(model: object, name: str = "model") -> str:
    """The preset a model names or is: a preset name as is, a ModelSpec (e.g. a Kimi K3
    ``config.json`` read by ``from_hf_config``) whose cache shape is a preset's; ValueError
    naming ``name`` otherwise (for the studies that run the simulator, which models the
    presets only)."""
    spec = as_spec(model, name)
    for key, p in PRESETS.items():
        if _shape(spec) == _shape(p):
            return key
    raise ValueError(
        f"{name} must be one of {sorted(PRESETS)} or a ModelSpec of their shape (the simulator "
        f"models those), got {spec.name!r}"
    )


def _shape(s: ModelSpec) -> tuple:
    return (s.linear_kind, s.n_linear_layers, s.n_attn_layers, s.linear_heads, s.k_heads)


def local_heads(spec: ModelSpec | str, tp: int = 1) -> int:
    """Linear-layer heads per GPU at tensor-parallel size ``tp`` (which must divide them)."""
    spec = as_spec(spec)
    tp = _check_int("tp", tp, 1, MAX_DIM)
    if spec.linear_heads % tp:
        raise ValueError(
            f"tp must divide the {spec.linear_heads} linear-layer heads of {spec.name}, got tp={tp}"
        )
    return spec.linear_heads // tp


def tiny_spec(config: ModelConfig | None = None) -> ModelSpec:
    """TinyHybrid's config (default ``ModelConfig()``) as a ModelSpec, so its serving bytes use
    the same formulas as the real models. The one place the tiny model's shape becomes a spec."""
    from kda_core.model.params import ModelConfig

    c = ModelConfig() if config is None else config
    kinds = c.layer_kinds
    return ModelSpec(
        name="k3-mini",
        n_linear_layers=kinds.count("kda"),
        n_attn_layers=kinds.count("mla"),
        linear_heads=c.n_heads,
        linear_k_dim=c.head_dim,
        linear_v_dim=c.head_dim,
        conv_kernel=c.conv_size,
        kv_lora_rank=c.mla_latent,
        qk_rope_head_dim=0,
        attn_heads=c.mla_heads,
    )
