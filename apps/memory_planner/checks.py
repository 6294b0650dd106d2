"""memory_planner's inputs and their checks: each input's one range (``NUMBERS``, ``CUSTOM``) or
choice list (``CHOICES``), the model (a shipped config, a pasted ``config.json`` or the custom
numbers) and TP against its heads, and the Plan button's Gradio ``validator``: the same tables
as the callback, so a rejected input leaves the page as it was."""

from __future__ import annotations

from collections.abc import Sequence

from apps import ui
from apps.ui import guard
from apps.ui.catalog import UserError
from apps.ui.checks import fail
from kda_core import sizing
from kda_core.sizing.hf import shipped_configs
from kda_core.sizing.presets import DTYPE_BYTES
from kda_core.studies import planner_engines as pe
from words.catalog import Msg
from words.common import COMMON
from words.memory_planner import MSG

CONFIG, CUSTOM_MODEL = "config.json", "custom"  # a pasted config, the typed numbers
BUNDLED_DRAFT = "qwen3-next-80b-a3b-eagle3"  # the shipped EAGLE3 draft config the page offers
PRESETS = (*shipped_configs(), CONFIG, CUSTOM_MODEL)
DTYPES = tuple(DTYPE_BYTES)
SSM_DTYPES = ("auto", "float32", "bfloat16", "float16")  # auto: each engine's own default
STRATEGIES = ("extra_buffer", "extra_buffer_lazy", "no_buffer", "radix_off")
NUMBERS = {  # a number input: (message key, low, high, integer?); the labels quote the ranges
    "tp": ("v_tp", 1, 64, True),
    "budget_gib": ("v_budget", 0.5, 1024, False),
    "ratio": ("v_ratio", 0.01, 10, False),
    "max_slots": ("v_max_slots", 0, 1_000_000, True),
    "draft": ("v_draft", 0, 64, True),
    "input_len": ("v_input", 1, 10_000_000, True),
    "output_len": ("v_output", 0, 10_000_000, True),
    "page_size": ("v_page", 1, 4096, True),
    "requested": ("v_requested", 0, 1_000_000, True),
    "max_num_seqs": ("v_max_num_seqs", 1, 1_000_000, True),
}
CUSTOM = {  # the custom model's numbers (key, low, high, default); lora / rope: GQA's KV heads
    "n_kda": ("v_n_kda", 1, 512, 69),  # linear layers (of the kind chosen)
    "n_mla": ("v_n_mla", 1, 512, 24),  # attention layers
    "heads": ("v_heads", 1, 65_536, 96),
    "head_dim": ("v_head_dim", 1, 1024, 128),
    "conv_k": ("v_conv_k", 1, 16, 4),
    "lora": ("v_lora", 0, 8192, 512),
    "rope": ("v_rope", 0, 1024, 64),
    "value_dim": ("v_value_dim", 0, 1024, 0),
}
CHOICES = {  # a choice input: (message key, allowed)
    "ssm_dtype": ("v_ssm_dtype", SSM_DTYPES),
    "conv_dtype": ("v_conv_dtype", DTYPES),
    "kv_dtype": ("v_kv_dtype", DTYPES),
    "strategy": ("v_strategy", STRATEGIES),
    "linear_kind": ("v_linear_kind", ("kda", "gdn", "mamba2", "mamba1", "short_conv")),
    "attn_kind": ("v_attn_kind", ("mla", "gqa")),
}
KNOWN = (*NUMBERS, *CUSTOM, *CHOICES)


def check(name: str, value: object) -> object:
    """One input checked against its one range (``NUMBERS``, ``CUSTOM``) or choice list."""
    if name in CHOICES:
        key, allowed = CHOICES[name]
        return ui.check_choice(MSG(key), value, allowed)
    key, lo, hi, integer = NUMBERS[name] if name in NUMBERS else (*CUSTOM[name][:3], True)
    return (ui.check_int if integer else ui.check_float)(MSG(key), value, lo, hi)


def model_spec(model: str, config_json: str, a: dict, mtp: bool = False) -> sizing.ModelSpec:
    """The ModelSpec: a shipped config, the pasted config.json, or the custom numbers ``a``;
    with ``mtp``, a model whose MTP drafter the engines cannot size is refused by the field."""
    mtp = _check_flag(mtp)
    if ui.check_choice(MSG("v_model"), model, PRESETS) != CUSTOM_MODEL:
        return pe.model_spec(model, config_json or "", mtp=mtp, draft=a["draft"])
    attn = {"kv_lora_rank": a["lora"], "qk_rope_head_dim": a["rope"]}
    if a["attn_kind"] == "gqa":
        attn = {"attn_kind": "gqa", "attn_kv_heads": a["lora"], "attn_head_dim": a["rope"]}
    nums = [a[k] for k in ("n_kda", "n_mla", "heads", "head_dim", "conv_k")]
    kw = {"linear_kind": a["linear_kind"], "value_dim": a["value_dim"], **attn}
    return pe.custom_spec(CUSTOM_MODEL, *nums, **kw)


def check_tp(spec: sizing.ModelSpec, tp: int) -> int:
    """``tp`` (in range already) when it divides the model's linear-layer heads and groups."""
    if spec.linear_heads % tp or (spec.linear_k_heads and spec.linear_k_heads % tp):
        raise fail("e_heads", MSG, heads=spec.linear_heads, tp=tp)
    return tp


def check_model(model: str = "kimi-k3", config_json: str = "") -> Exception | None:
    """Before a plan: a pasted config's refusal (None when it reads), said by ``draw_check``."""
    if model != CONFIG:
        return None
    try:
        pe.model_spec(model, config_json or "")
    except ValueError as e:
        return e
    return None


def plan_validator(names: Sequence[str]):  # noqa: ANN201 - Gradio's validator callable
    """The per-input checks of the plan (``names``: its parameters, in order), TP vs heads, and
    a config that does not read (``check_model`` has said it by the Plan button already)."""

    def cross(model: str, config_json: str, *v: object) -> tuple[int, object] | None:
        err = check_model(model, config_json)  # refused: the plan is not run
        if err is not None or model == CUSTOM_MODEL:
            return None if err is None else (1, COMMON("core_refused", message=str(err)))
        try:
            check_tp(pe.model_spec(model, config_json or ""), check("tp", v[7]))
        except UserError as e:
            return 9, e.msg  # rendered in the page's language
        why = _mtp_refusal(model, config_json, v[mtp - 2], v[draft - 2])
        if why is not None:
            return mtp, why
        try:
            spec = pe.model_spec(model, config_json or "")
            check_eagle(spec, v[eagle - 2], v[mtp - 2], check("draft", v[draft - 2]))
        except UserError as e:
            return eagle, e.msg
        return None

    draft, mtp, eagle = names.index("draft"), names.index("mtp"), names.index("eagle")
    checks = [(lambda v, n=n: check(n, v)) if n in KNOWN else None for n in names]
    checks[mtp] = _check_flag
    checks[eagle] = lambda v: _check_flag(v, "v_eagle")
    checks[0] = lambda v: ui.check_choice(MSG("v_model"), v, PRESETS)
    return guard.validator(*checks, cross=cross)


def _check_flag(value: object, key: str = "v_mtp") -> bool:
    """A drafter checkbox: a bool (an API caller may send anything)."""
    if not isinstance(value, bool):
        raise fail("must_choice", name=MSG(key), choices="[True, False]", got=repr(value)[:40])
    return value


def check_eagle(spec: sizing.ModelSpec, eagle: object, mtp: object, draft: int) -> None:
    """With the bundled EAGLE3 draft chosen: one drafter (not MTP too), draft tokens >= 1
    (vLLM's ``num_speculative_tokens``), and a target both engines size it beside (the
    engines' refusal, as ``python -m kda_core.sizing`` says it); UserError otherwise."""
    if not _check_flag(eagle, "v_eagle"):
        return
    if _check_flag(mtp):
        raise UserError(MSG("e_two_drafters"))
    if draft < 1:
        raise UserError(MSG("e_eagle_draft"))
    d = sizing.Deployment(sizing.GIB, eagle=BUNDLED_DRAFT, num_speculative_tokens=draft)
    try:
        sizing.size_sglang(spec, d)
        sizing.size_vllm(spec, d.replace(max_model_len=1))
    except ValueError as e:
        raise UserError(COMMON("core_refused", message=str(e))) from None


def _mtp_refusal(model: str, config: str, mtp: object, draft: object) -> Msg | None:
    """With the MTP drafter chosen: the engines' refusal (``mtp: ...``, naming the config's field
    as ``python -m kda_core.sizing`` does), said on the MTP checkbox."""
    if not _check_flag(mtp):
        return None
    try:
        pe.model_spec(model, config or "", mtp=True, draft=check("draft", draft))
    except ValueError as e:
        return COMMON("core_refused", message=str(e))
    return None


def check_upload(path: object) -> None:
    """An uploaded config.json: readable and at most 1 MiB (``planner_engines``' own check)."""
    try:
        pe.read_config_file(path)
    except ValueError as e:  # the study's sentence, inside one in the page's language
        raise UserError(COMMON("core_refused", message=str(e))) from None


__all__ = [
    "BUNDLED_DRAFT",
    "CHOICES",
    "CONFIG",
    "CUSTOM",
    "CUSTOM_MODEL",
    "NUMBERS",
    "PRESETS",
    "check",
    "check_eagle",
    "check_model",
    "check_tp",
    "check_upload",
    "model_spec",
    "plan_validator",
]
