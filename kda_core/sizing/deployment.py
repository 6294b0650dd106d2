"""One deployment of a hybrid model: every knob SGLang 0.5.23 and vLLM 0.33 size it with.

``Deployment`` is frozen and checked once, each knob against its one range in ``KNOBS`` (the
command line and the memory planner app check theirs against the same table). Knob names are
the engines' flags with underscores (``--mamba-full-memory-ratio`` is ``ratio``; SGLang's
``--speculative-num-draft-tokens`` is ``draft_tokens``, vLLM's ``num_speculative_tokens``).
Dtypes left ``None`` are each engine's own default for the model (``state_dtype``): SGLang's
SSM state is float32 unless the config declares one it reads; vLLM's ``auto`` is float32 for
KDA and Nemotron-H, the declared one for Qwen3.5, else the model dtype (``conv_dtype``). The
sizing functions take a ``Deployment``: ``sglang.size_sglang``, ``vllm.size_vllm``;
``split_memory`` and ``vllm_plan`` are their flat spellings (DESIGN.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.sizing._eagle import EagleDraft, read_eagle_draft
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.families import FAMILIES
from kda_core.sizing.presets import DTYPE_BYTES, GIB, MAX_COUNT, ModelSpec
from kda_core.sizing.slots import STRATEGIES

KNOBS: dict[str, tuple[int, int]] = {
    "rest_bytes": (0, MAX_COUNT),
    "tp": (1, 1024),
    "max_mamba_cache_size": (0, MAX_COUNT),
    "max_running_requests": (1, MAX_COUNT),
    "page_size": (1, 1 << 20),
    "draft_tokens": (0, 1 << 10),
    "ring_len": (1, 1 << 16),
    "chunked_prefill_size": (1, MAX_COUNT),
    "block_size": (1, 1 << 20),
    "kernel_block_size": (1, 1 << 16),
    "max_model_len": (1, 1 << 32),
    "max_num_seqs": (1, MAX_COUNT),
    "num_speculative_tokens": (0, 1 << 10),
    "checkpoint_alignment": (1, 1 << 16),
    "prefill_checkpoint_blocks": (0, 1),
}
"""The one range of every integer knob (inclusive)."""
_RATIO_RANGE: tuple[float, float] = (0.0, 1e6)  # --mamba-full-memory-ratio
_MAMBA_CACHE_MODES: tuple[str, ...] = ("align", "none")
_OPTIONAL = {"max_mamba_cache_size", "max_running_requests", "max_model_len"}
_OPTIONAL |= {"checkpoint_alignment", "prefill_checkpoint_blocks"}
_STATE_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True, slots=True)
class Deployment:
    """A deployment on one GPU (bytes per GPU). ``rest_bytes``: SGLang's profiled rest of the
    GPU, vLLM's "Available KV cache memory". SGLang: ``ratio``, ``max_mamba_cache_size`` (None:
    from the ratio), ``max_running_requests``, ``page_size``, ``strategy``
    (``--mamba-radix-cache-strategy``, or "radix_off"), ``overlap`` (not
    ``--disable-overlap-schedule``), ``skip_decode_lock`` (``SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK``),
    ``draft_tokens``, ``replayssm`` (``--enable-linear-replayssm-spec``, ring ``ring_len``),
    ``chunked_prefill_size``. vLLM: ``block_size`` (before alignment), ``kernel_block_size`` (the
    attention backend's), ``mamba_cache_mode``, ``max_model_len`` (None: the config's),
    ``max_num_seqs``, ``num_speculative_tokens``, ``use_replayssm`` (``--use-replayssm``: on a
    KDA model with speculative tokens, RecoverSSM), and what the linear layers' prefill backend
    declares (``checkpoint_alignment``; ``prefill_checkpoint_blocks``, None: the kind's).
    Both: ``mtp`` (the model's own MTP modules draft: vLLM ``speculative_config={"method":
    "mtp"}``, SGLang ``--speculative-algorithm NEXTN`` with no draft path): their attention
    KV joins the pool as each engine prices it (``_drafts``). ``eagle``: an EAGLE / EAGLE3
    drafter with its own config (SGLang ``--speculative-draft-model-path``, vLLM
    ``speculative_config={"method": "eagle3", "model": ...}``), sized by ``_eagle``: given as
    the draft's ``config.json`` (a dict, a path, or a shipped draft's name)."""

    rest_bytes: int
    tp: int = 1
    ssm_dtype: str | None = None
    conv_dtype: str = "bfloat16"
    kv_dtype: str = "bfloat16"
    ratio: float = 0.9
    max_mamba_cache_size: int | None = None
    max_running_requests: int | None = None
    page_size: int = 1
    strategy: str = "extra_buffer"
    overlap: bool = True
    skip_decode_lock: bool = False
    draft_tokens: int = 0
    replayssm: bool = False
    ring_len: int = 16
    chunked_prefill_size: int = 8192
    block_size: int = 16
    kernel_block_size: int = 16
    mamba_cache_mode: str = "align"
    max_model_len: int | None = None
    max_num_seqs: int = 256
    num_speculative_tokens: int = 0
    mtp: bool = False
    eagle: EagleDraft | str | dict | None = None
    use_replayssm: bool = False
    checkpoint_alignment: int | None = None
    prefill_checkpoint_blocks: int | None = None

    def __post_init__(self) -> None:
        for name, (lo, hi) in KNOBS.items():
            v = getattr(self, name)
            if not (v is None and name in _OPTIONAL):
                object.__setattr__(self, name, check_int(name, v, lo, hi))
        object.__setattr__(self, "ratio", _check_ratio(self.ratio))
        if self.ring_len & (self.ring_len - 1):
            raise ValueError(f"ring_len must be a power of two, got {self.ring_len}")
        for name in ("overlap", "skip_decode_lock", "replayssm", "mtp", "use_replayssm"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if isinstance(self.eagle, (str, dict)):  # a shipped draft's name, a path, a config
            try:
                object.__setattr__(self, "eagle", read_eagle_draft(self.eagle))
            except (ValueError, OSError) as e:
                raise ValueError(f"eagle: {e}") from None
        if self.eagle is not None and not isinstance(self.eagle, EagleDraft):
            raise ValueError(
                f"eagle must be a draft config.json (a dict, a path or a shipped draft's name), "
                f"got {self.eagle!r}"
            )
        if self.eagle is not None and self.mtp:
            raise ValueError("mtp and eagle are two drafters: give one")
        _check_choice("strategy", self.strategy, STRATEGIES)
        _check_choice("mamba_cache_mode", self.mamba_cache_mode, _MAMBA_CACHE_MODES)
        _check_choice("conv_dtype", self.conv_dtype, tuple(DTYPE_BYTES))
        _check_choice("kv_dtype", self.kv_dtype, tuple(DTYPE_BYTES))
        if self.ssm_dtype is not None:
            _check_choice("ssm_dtype", self.ssm_dtype, tuple(DTYPE_BYTES))
        if self.strategy == "extra_buffer_lazy" and not self.overlap:
            raise ValueError("strategy 'extra_buffer_lazy' requires overlap=True")

    @classmethod
    def build(cls, **knobs: object) -> Deployment:
        """A deployment from keyword knobs, ``gpu_gib`` (GiB) standing in for ``rest_bytes``;
        ValueError naming an unknown knob (the constructor would raise a TypeError)."""
        if "gpu_gib" in knobs:
            knobs["rest_bytes"] = gib_bytes("gpu_gib", knobs.pop("gpu_gib"))
        unknown = sorted(set(knobs) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"{unknown[0]} is not a deployment knob (one of {sorted(KNOBS)} ...)")
        return cls(**knobs)

    def replace(self, **knobs: object) -> Deployment:
        """This deployment with ``knobs`` changed (checked again)."""
        return dataclasses.replace(self, **knobs)

    def state_dtype(self, spec: ModelSpec, engine: str) -> str:
        """The recurrent-state dtype ``engine`` allocates for ``spec``: ``ssm_dtype`` when given,
        else the engine's default (module doc). vLLM sizes a lightning state in the cache
        (conv) dtype whatever the SSM flag (``linear_attention_state_dtype``), and ignores the
        flag for a family whose classes never read it (``FAMILIES``' ``vllm_ssm_flag``)."""
        kind = LINEAR_KINDS[spec.linear_kind]
        if engine == "vllm":
            if kind.vllm_state_dtype == "conv":
                return self.conv_dtype
            fam = FAMILIES.get(spec.family)
            if self.ssm_dtype is not None and (fam is None or fam.vllm_ssm_flag):
                return self.ssm_dtype
            if kind.vllm_state_dtype == "float32":
                return "float32"
            return spec.vllm_ssm_dtype or self.conv_dtype
        return spec.sglang_ssm_dtype if self.ssm_dtype is None else self.ssm_dtype


def _check_ratio(ratio: object) -> float:
    lo, hi = _RATIO_RANGE
    if (
        isinstance(ratio, (bool, np.bool_))
        or not isinstance(ratio, (int, float, np.integer, np.floating))
        or not lo < float(ratio) <= hi
    ):
        raise ValueError(
            f"ratio (--mamba-full-memory-ratio) must be a number in (0, 1e6], got {ratio!r}"
        )
    return float(ratio)


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def gib_bytes(name: str, gib: object) -> int:
    """A budget given in GiB as bytes, checked against ``rest_bytes``' range (ValueError
    naming ``name``)."""
    hi = KNOBS["rest_bytes"][1] / GIB
    ok = isinstance(gib, (int, float, np.integer, np.floating)) and not isinstance(gib, bool)
    if not ok or not 0 < float(gib) <= hi:
        raise ValueError(f"{name} must be a number of GiB in (0, {hi:g}], got {gib!r}")
    return int(float(gib) * GIB)
