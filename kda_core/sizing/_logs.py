"""The lines SGLang prints about its pools, rebuilt from the arithmetic (to compare with logs).

``mamba_allocation_log`` / ``kv_allocation_log`` (allocation), ``capping_message`` (the state
cache caps concurrency, SGLang's words); ``sglang.sglang_log_lines`` puts them together for a
deployment. "GB" in SGLang's lines is GiB; sizes count ``max_mamba_cache_size + 1`` slots
(slot 0 is a dummy sink). The ring line keeps the K3 write-up's ``(L=16)`` header (SGLang
0.5.23 prints ``(record_len=16, fold=...)``).
Left out: every other log line (the ``max_total_num_tokens=`` line needs the free GPU memory).
"""

from __future__ import annotations

from kda_core._checks import check_int as _check_int
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.presets import (
    GIB,
    MAX_COUNT,
    ModelSpec,
    as_spec,
    dtype_bytes,
)
from kda_core.sizing.sizes import (
    conv_state_bytes,
    intermediate_conv_window_bytes,
    intermediate_ssm_bytes,
    kda_state_bytes,
    kv_bytes_per_token,
    replayssm_ring_bytes,
)
from kda_core.sizing.slots import max_running_requests, slots_per_request

_TORCH_DTYPE_NAME: dict[str, str] = {
    "float32": "torch.float32",
    "bfloat16": "torch.bfloat16",
    "float16": "torch.float16",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "int8": "torch.int8",
}


def capping_message(
    state_slots: int,
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    ssm_dtype: str | None = None,
    requested: int | None = None,
) -> str | None:
    """SGLang 0.5.23's warning when the state cache caps concurrency
    (``KVCacheConfigurator.resolve_max_num_reqs``), word for word, else None.

    None when ``requested`` (the wanted ``--max-running-requests``) fits under the cap. SGLang
    prints the same hint whatever the state dtype: ``ssm_dtype`` is accepted for the callers
    that pass it and changes nothing (the lab's own advice is ``sizing.fixes``).
    """
    cap = max_running_requests(state_slots, strategy, overlap, skip_decode_lock)
    spr = slots_per_request(strategy, overlap, skip_decode_lock)
    if ssm_dtype is not None:
        dtype_bytes(ssm_dtype, "ssm_dtype")
    if requested is not None and _check_int("requested", requested, 0, MAX_COUNT) <= cap:
        return None
    return (
        f"max_running_requests is capped to {cap} by the mamba state cache "
        f"(max_mamba_cache_size={state_slots}, {spr} state slots per request). To raise it: "
        "increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state "
        "size with --mamba-ssm-dtype bfloat16."
    )


def _gb(n: int, digits: int) -> str:
    return f"{n / GIB:.{digits}f}GB"


def mamba_allocation_log(
    spec: ModelSpec | str,
    max_mamba_cache_size: int,
    tp: int = 1,
    ssm_dtype: str = "bfloat16",
    conv_dtype: str = "bfloat16",
    draft_tokens: int = 0,
    max_running: int | None = None,
    replayssm: bool = True,
    ring_len: int | None = 16,
    ring_dtype: str = "bfloat16",
    ring_requests: int | None = None,
) -> list[str]:
    """The lines SGLang logs when it allocates the state cache (sizes count size + 1 slots).

    With ``draft_tokens > 0`` the intermediate (per-draft) buffers are printed too, for
    ``max_running`` requests (default ``size // 5``, extra_buffer + overlap). With
    ``replayssm`` (``--enable-linear-replayssm-spec``) and ``ring_len`` set, the ReplaySSM ring
    line follows; its d/k/rawv/rawk tensors are in ``ring_dtype`` (bf16 in all of the K3 write-up's
    logs, even with an fp32 SSM state).

    The rings follow the flag, not ``draft_tokens``: the K3 write-up's two "no spark spec" logs
    (51 and 80 slots, no intermediate buffers, i.e. D = 0) both print the ring line, so a
    D = 0 configuration with the flag on allocates them. ``replayssm=False`` prints no ring
    line (and, with D > 0, a full per-draft SSM buffer instead).

    A kind without a ring (Mamba2, short conv, ...) prints none. A GDN model's spec-verify
    ring is request-lifetime scratch: it covers
    ``ring_requests + 1`` requests (SGLang's ``max_running_requests``; required for such a
    model) and prints in SGLang 0.5.23's form, ``(record_len=L, fold=False): d, k, g`` and the
    low parts of d and k as ``rawv`` / ``rawk`` (``MambaPool.__init__``).
    """
    size = _check_int("max_mamba_cache_size", max_mamba_cache_size, 0, MAX_COUNT)
    phys = size + 1
    line = (
        f"Mamba Cache is allocated. max_mamba_cache_size: {size}, "
        f"conv_state size: {_gb(phys * conv_state_bytes(spec, tp, conv_dtype), 2)}, "
        f"ssm_state size: {_gb(phys * kda_state_bytes(spec, tp, ssm_dtype), 2)}"
    )
    d = _check_int("draft_tokens", draft_tokens, 0, 1 << 16)
    if d:
        run = size // 5 if max_running is None else max_running
        ssm_i = intermediate_ssm_bytes(spec, run, d, tp, ssm_dtype, replayssm)
        conv_i = intermediate_conv_window_bytes(spec, run, d, tp, conv_dtype)
        line += (
            f" intermediate_ssm_state_cache size: {_gb(ssm_i, 2)} "
            f"intermediate_conv_window_cache size: {_gb(conv_i, 2)}"
        )
    lines = [line]
    ring = LINEAR_KINDS[as_spec(spec).linear_kind].ring if replayssm and ring_len else ""
    if ring == "gdn":
        if ring_requests is None:
            raise ValueError("ring_requests is required for a GDN model's ReplaySSM ring")
        requests = _check_int("ring_requests", ring_requests, 0, MAX_COUNT)
        lines.append(_gdn_ring_line(spec, tp, ring_len, ring_dtype, requests))
    elif ring == "kda":
        r = replayssm_ring_bytes(spec, phys, tp, ring_len, ring_dtype)
        lines.append(
            f"GDN ReplaySSM ring buffers allocated (L={ring_len}): "
            f"d={_gb(r['d'], 3)}, k={_gb(r['k'], 3)}, g={_gb(r['g'], 3)} "
            f"rawv={_gb(r['rawv'], 3)}, rawk={_gb(r['rawk'], 3)}, beta={_gb(r['beta'], 3)}"
        )
    return lines


def _gdn_ring_line(spec: ModelSpec | str, tp: int, ring_len: int, dtype: str, requests: int) -> str:
    r = replayssm_ring_bytes(spec, requests + 1, tp, ring_len, dtype)
    line = (
        f"GDN ReplaySSM ring buffers allocated (record_len={ring_len}, fold=False): "
        f"d={_gb(r['d'], 3)}, k={_gb(r['k'], 3)}, g={_gb(r['g'], 3)} "
    )
    if "d_low" in r:
        line += f"rawv={_gb(r['d_low'], 3)}, rawk={_gb(r['k_low'], 3)}, "
    return line


def kv_allocation_log(
    spec: ModelSpec | str,
    num_tokens: int,
    kv_dtype: str = "bfloat16",
    *,
    tp: int = 1,
    page_size: int = 1,
) -> str:
    """SGLang's KV pool line: ``KV Cache is allocated. dtype: ..., #tokens: N, KV size: X GB``.

    The pool holds ``N + page_size`` rows (a padding page); an MLA pool prints one size, a GQA
    pool its K and V halves (``K size: a GB, V size: b GB``).
    """
    n = _check_int("num_tokens", num_tokens, 0, MAX_COUNT)
    page = _check_int("page_size", page_size, 1, 1 << 20)
    size = (n + page) * kv_bytes_per_token(spec, tp, kv_dtype)
    head = f"KV Cache is allocated. dtype: {_TORCH_DTYPE_NAME[kv_dtype]}, #tokens: {n}, "
    if as_spec(spec).attn_kind == "mla":
        return head + f"KV size: {size / GIB:.2f} GB"
    return head + f"K size: {size / 2 / GIB:.2f} GB, V size: {size / 2 / GIB:.2f} GB"
