"""Compressed recurrent-state checkpoints: INT8 (SGLang's layout), scaled fp8-e4m3, bf16.

A KDA state is ``[..., K, V]``. SGLang's INT8 checkpoint store
(``python/sglang/srt/mem_cache/mamba_checkpoint_pool.py``, ``Int8CheckpointStore.quantize``)
keeps one scale per (head, key channel), because the decay Diag(alpha) acts per key channel:

    amax  = max(max_V |x|, 1e-8)          per [..., K]        (granularity "channel")
    scale = amax / 127                    cast to the state dtype *before* dividing
    q     = clamp(round(x / scale), -127, 127)   int8, round half to even
    x'    = q * scale                     |x - x'| <= scale / 2 per element

Coarser scales per head or per tensor; fp8-e4m3 (E4M3FN, saturating at ±448, scale amax / 448)
and bf16 are emulated exactly for comparison. One class, ``QuantizedState``, holds every format
(the entry ``kda_core.quant`` names it ``Int8State``). Formats, bounds and what is left out:
docs/pools.md ("Compressed checkpoints").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_FORMATS: tuple[str, ...] = ("int8", "fp8_e4m3", "bf16")
_GRANULARITIES: tuple[str, ...] = ("channel", "head", "tensor")
_AMAX_FLOOR = 1e-8
_INT8_MAX = 127
_FP8_E4M3_MAX = 448.0
_BF16_MAX = (2.0 - 2.0**-7) * 2.0**127
_MAX_ELEMENTS = 1 << 28  # ~2 GiB of float64: cap so no input can exhaust memory


# ---------------------------------------------------------------------------------------------
# validation


def _check_state(state: object, name: str = "state") -> np.ndarray:
    arr = np.asarray(state)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array [..., K, V], got dtype {arr.dtype}")
    if arr.ndim < 2:
        raise ValueError(f"{name} must have shape [..., K, V] (rank >= 2), got shape {arr.shape}")
    if arr.size == 0 or arr.size > _MAX_ELEMENTS:
        raise ValueError(f"{name} must have 1..{_MAX_ELEMENTS} elements, got {arr.size}")
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return arr


def _check_values(x: object, name: str = "x") -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.size > _MAX_ELEMENTS:
        raise ValueError(f"{name} must have at most {_MAX_ELEMENTS} elements, got {arr.size}")
    arr = arr.astype(np.float64)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    return arr


def check_format(fmt: str, granularity: str | None) -> tuple[str, str]:
    """Validate a (fmt, granularity) pair; None means the default ("channel"; bf16: "none")."""
    if fmt not in _FORMATS:
        raise ValueError(f"fmt must be one of {_FORMATS}, got {fmt!r}")
    if fmt == "bf16":
        if granularity not in (None, "none"):
            raise ValueError(
                f"granularity must be 'none' (or None) for fmt 'bf16', got {granularity!r}"
            )
        return fmt, "none"
    if granularity is None:
        granularity = "channel"
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, got {granularity!r}")
    return fmt, granularity


def _amax(x: np.ndarray, granularity: str) -> np.ndarray:
    """max |x| over the axes a scale is shared by, keepdims, floored at AMAX_FLOOR (float64)."""
    axes = {"channel": (-1,), "head": (-2, -1), "tensor": tuple(range(x.ndim))}[granularity]
    return np.maximum(np.max(np.abs(x), axis=axes, keepdims=True).astype(np.float64), _AMAX_FLOOR)


# ---------------------------------------------------------------------------------------------
# float grids


def _binade(a: np.ndarray) -> np.ndarray:
    """floor(log2(a)) for a > 0, exactly (frexp: a = m 2^E with m in [0.5, 1)); 0 -> -1075."""
    _, E = np.frexp(a)
    return np.where(a > 0, E - 1, -1075)


def _round_fp8_e4m3(x: object) -> np.ndarray:
    """x rounded to the nearest fp8-e4m3 value (ties to even), saturating at ±448. float64 out.

    Grid: quantum 2^(e-3) in binade [2^e, 2^(e+1)) for e >= -6, and 2^-9 below 2^-6
    (subnormals). Infinities saturate to ±448 too; NaN is rejected.
    """
    x = _check_values(x)
    a = np.abs(x)
    e = np.maximum(_binade(np.minimum(a, 2.0 * _FP8_E4M3_MAX)), -6)
    quantum = np.ldexp(1.0, e - 3)
    r = np.minimum(np.round(np.minimum(a, 2.0 * _FP8_E4M3_MAX) / quantum) * quantum, _FP8_E4M3_MAX)
    return np.copysign(r, x)


def round_bf16(x: object) -> np.ndarray:
    """x rounded to the nearest bf16 value (ties to even), overflow to ±inf. float64 out.

    Grid: quantum 2^(e-7) in binade [2^e, 2^(e+1)) for e >= -126, and 2^-133 below 2^-126
    (subnormals). Exactly representable in float32.
    """
    x = _check_values(x)
    a = np.abs(x)
    finite = np.isfinite(a)
    af = np.where(finite, a, 0.0)
    e = np.maximum(_binade(af), -126)
    quantum = np.ldexp(1.0, e - 7)
    r = np.round(af / quantum) * quantum
    r = np.where(finite & (r <= _BF16_MAX), r, np.inf)
    return np.copysign(r, x)


def _fp8_table() -> np.ndarray:
    """Value of every fp8-e4m3 bit pattern 0..255 (0x7F and 0xFF are NaN)."""
    b = np.arange(256)
    s = np.where(b >> 7, -1.0, 1.0)
    e = (b >> 3) & 15
    m = b & 7
    mag = np.where(e == 0, m * 2.0**-9, (1.0 + m / 8.0) * np.ldexp(1.0, e - 7))
    mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return s * mag


_FP8_E4M3_VALUES = _fp8_table()
_FP8_POSITIVE = _FP8_E4M3_VALUES[:127]  # 0x00..0x7E, strictly increasing, 0 .. 448


def _fp8_e4m3_encode(x: object) -> np.ndarray:
    """Round x to fp8-e4m3 (see `_round_fp8_e4m3`) and return the uint8 bit patterns."""
    r = _round_fp8_e4m3(x)
    idx = np.searchsorted(_FP8_POSITIVE, np.abs(r))
    return (idx | (np.signbit(r).astype(np.int64) << 7)).astype(np.uint8)


def _fp8_e4m3_decode(bits: object) -> np.ndarray:
    """uint8 bit patterns -> float64 values (0x7F / 0xFF decode to NaN)."""
    return _FP8_E4M3_VALUES[np.asarray(bits)]


def _bf16_encode(x: object) -> np.ndarray:
    """Round x to bf16 (see `round_bf16`) and return the uint16 bit patterns."""
    r = round_bf16(x).astype(np.float32)  # exact: the bf16 grid is a subset of float32's
    return (r.view(np.uint32) >> 16).astype(np.uint16)


def _bf16_decode(bits: object) -> np.ndarray:
    """uint16 bit patterns -> float64 values."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# ---------------------------------------------------------------------------------------------
# quantized states


@dataclass(slots=True)
class QuantizedState:
    """A compressed state: `qdata` codes plus `scale` broadcastable to the state's shape.

    fmt "int8": qdata int8 in [-127, 127], x' = qdata * scale.
    fmt "fp8_e4m3": qdata uint8 e4m3 bit patterns, x' = decode(qdata) * scale.
    fmt "bf16": qdata uint16 bf16 bit patterns, scale all ones and not stored (granularity
    "none"). `scale` keeps the reduced axes as size 1 (channel: [..., K, 1]; head:
    [..., 1, 1]; tensor: all ones) and has the state's dtype, like SGLang's store.
    """

    qdata: np.ndarray
    scale: np.ndarray
    fmt: str = "int8"
    granularity: str = "channel"
    dtype: np.dtype = np.dtype(np.float64)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.qdata.shape

    @property
    def nbytes(self) -> int:
        """Bytes a checkpoint pool would hold: codes plus scales (bf16: codes only)."""
        return int(self.qdata.nbytes + (0 if self.fmt == "bf16" else self.scale.nbytes))

    def dequantize(self) -> np.ndarray:
        """The restored state in the original dtype (computed in float64, then cast)."""
        if self.fmt == "int8":
            vals = self.qdata.astype(np.float64)
        elif self.fmt == "fp8_e4m3":
            vals = _fp8_e4m3_decode(self.qdata)
        else:
            vals = _bf16_decode(self.qdata)
        return (vals * self.scale.astype(np.float64)).astype(self.dtype)

    def bound(self, state: object | None = None) -> np.ndarray:
        """Per-element worst-case |x - x'| (state shape).

        int8: scale / 2 (needs no state). fp8 / bf16: half the grid quantum at |x| / scale,
        times the scale (needs the original state: the quantum depends on the binade).
        """
        s = self.scale.astype(np.float64)
        if self.fmt == "int8":
            return np.broadcast_to(s / 2.0, self.shape).copy()
        if state is None:
            raise ValueError(f"state is required for the error bound of fmt {self.fmt!r}")
        x = _check_state(state)
        if x.shape != self.shape:
            raise ValueError(f"state must have shape {self.shape}, got {x.shape}")
        y = np.abs(x.astype(np.float64)) / s
        if self.fmt == "fp8_e4m3":
            e = np.maximum(_binade(np.minimum(y, _FP8_E4M3_MAX)), -6)
            return np.ldexp(1.0, e - 4) * s
        e = np.maximum(_binade(y), -126)
        return np.ldexp(1.0, e - 8) * s


def quantize(state: object, fmt: str = "int8", granularity: str | None = None) -> QuantizedState:
    """Compress a state `[..., K, V]` in `fmt` ("int8", "fp8_e4m3", "bf16") at `granularity`
    ("channel" = one scale per (..., key channel), the default; "head"; "tensor"; bf16: "none").
    """
    fmt, granularity = check_format(fmt, granularity)
    x = _check_state(state)
    dtype = x.dtype
    if fmt == "bf16":
        return QuantizedState(
            _bf16_encode(x), np.ones((1,) * x.ndim, dtype), fmt, granularity, np.dtype(dtype)
        )
    qmax = _INT8_MAX if fmt == "int8" else _FP8_E4M3_MAX
    scale = (_amax(x, granularity) / qmax).astype(dtype)  # cast before dividing (SGLang)
    y = x.astype(np.float64) / scale.astype(np.float64)
    if fmt == "int8":
        codes = np.clip(np.round(y), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    else:
        codes = _fp8_e4m3_encode(y)
    return QuantizedState(codes, scale, fmt, granularity, np.dtype(dtype))


def quantize_int8(state: object, granularity: str = "channel") -> QuantizedState:
    """INT8 checkpoint of a state `[H, K, V]` (or `[..., K, V]`), SGLang's layout by default:
    one scale per (head, key channel) = max over V of |x| / 127 (amax floored at 1e-8)."""
    if granularity is None:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, got None")
    return quantize(state, "int8", granularity)


def roundtrip(state: object, fmt: str = "int8", granularity: str | None = None) -> np.ndarray:
    """quantize(...).dequantize(): what a restore from a compressed checkpoint yields."""
    return quantize(state, fmt, granularity).dequantize()


# ---------------------------------------------------------------------------------------------
# error metrics
