"""Model-state objects: MLA KV + KDA recurrent state + conv window at one boundary, as safetensors.

A decode instance can only resume a request where all three parts stand at the same token
boundary, came from the same weights, tokenizer and tensor-parallel layout (seed 000 §4.4,
§9.3). The object carries that proof with it:

* tensors ``tokens`` [T] int64 (the prefix), ``mla_kv`` [T, n_mla, C] (latent KV of tokens
  [0, T)), ``kda_state`` [L, H_local, K, V], ``conv_window`` [L, W-1, 3*H_local*K];
* a metadata header (safetensors ``__metadata__``, all strings): format and version, the token
  range, the prefix hash, the model fingerprint (weights + config), the tokenizer fingerprint,
  the TP layout / head split, the cache entry's ``physical_location`` and ``parent_checkpoint``
  (seed 000 §4.1; ``transfer._entry``), and per part its kind, dtype, shape, boundary, prefix
  hash, source instance and a content digest.

``decode_object(data, identity)`` validates every field before anything is restored and raises
``StateObjectError`` naming the field (``err.field``): ``format`` (a foreign file),
``truncated``, ``corrupt`` (a digest mismatch), ``boundary`` (the parts disagree on the
boundary or prefix: a splice), ``prefix_hash``, ``model_fingerprint`` (other weights),
``tokenizer_fingerprint``, ``layout``, ``dtype``, ``shape``, ``physical_location``,
``parent_checkpoint``. ``allow_splice=True`` is the teaching switch: a spliced object
(``splice``: MLA from one source, KDA from another) is restored anyway so its drift can be shown.

Why safetensors: it is the ecosystem's tensor container (HF weights; Mooncake's
``save_tensor_to_safetensor``), a JSON header plus raw little-endian bytes with no code
execution on load. The header is parsed here first (length, JSON, offsets) so a truncated or
foreign blob fails with a clear message before the library sees it.

Mooncake / HiCache move these bytes by prefix hash without looking inside (seed 000 §5.6);
per-step scratch (``NON_TRANSFER_FIELDS``) is never put into an object (``transferable_parts``).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from kda_core.model import ModelState
from kda_core.transfer._entry import StateObjectError, check_location, check_parent
from kda_core.transfer._identity import (
    Identity,
    prefix_hash,
)

_FORMAT = "kda-state-object"
_FORMAT_VERSION = "2"  # 2: physical_location and parent_checkpoint
_MAX_HEADER_BYTES = 1 << 20
_PART_KINDS = {"mla_kv": "mla_latent_kv", "kda_state": "kda_recurrent", "conv_window": "kda_conv"}
_NON_TRANSFER_FIELDS = frozenset(
    {
        "intermediate_ssm",
        "intermediate_conv_window",
        "replayssm_d",
        "replayssm_k",
        "replayssm_g",
        "replayssm_rawv",
        "replayssm_rawk",
        "replayssm_beta",
    }
)
"""Device-only scratch that never leaves the device (L2 host / L3 store / PD transfer).

SGLang: ``MambaPool._NON_TRANSFER_STATE_FIELDS`` in ``python/sglang/srt/mem_cache/
memory_pool.py``, skipped by ``MambaPool._iter_transfer_state_entries`` (which feeds the PD
transfer's buffer lists). Read with the search tools in a public CPU port of the v0.5.20
MambaPool methods (the upstream set is ``{"intermediate_ssm", "intermediate_conv_window"}``;
the stored copy of the real file is cut before that class); the K3 branch adds the six
ReplaySSM ring fields (seed 004, "replayssm" paragraph: "当前实现将以下字段列入
_NON_TRANSFER_STATE_FIELDS")."""

__all__ = [
    "StateObject",
    "StateObjectError",
    "decode_object",
    "from_model_state",
    "splice",
    "transferable_parts",
]


def _digest(a: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8), digest_size=16).hexdigest()


@dataclass(slots=True)
class StateObject:
    """One boundary's restorable state plus its metadata (see the module docstring)."""

    tokens: tuple[int, ...]
    mla_kv: np.ndarray
    kda_state: np.ndarray
    conv_window: np.ndarray
    model_fingerprint: str
    tokenizer_fingerprint: str
    layout: dict
    source: str = "local"
    part_meta: dict = field(default_factory=dict)  # per part: boundary, prefix hash, source
    spliced: bool = False
    physical_location: str = "device"
    parent_checkpoint: tuple[int, str] | None = None  # (boundary, prefix hash)

    def __post_init__(self) -> None:
        check_location(self.physical_location)
        if self.parent_checkpoint is not None:
            self.parent_checkpoint = check_parent(self.parent_checkpoint, self.tokens)

    @property
    def boundary(self) -> int:
        return len(self.tokens)

    @property
    def key(self) -> str:
        return prefix_hash(self.tokens)

    def part_arrays(self) -> dict[str, np.ndarray]:
        return {"mla_kv": self.mla_kv, "kda_state": self.kda_state, "conv_window": self.conv_window}

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.part_arrays().values()) + 8 * len(self.tokens)

    def metadata(self) -> dict[str, str]:
        key = self.key
        parts = {}
        for name, a in self.part_arrays().items():
            pm = self.part_meta.get(name, {})
            parts[name] = {
                "kind": _PART_KINDS[name],
                "dtype": str(a.dtype),
                "shape": list(a.shape),
                "token_end": pm.get("token_end", self.boundary),
                "prefix_hash": pm.get("prefix_hash", key),
                "source": pm.get("source", self.source),
                "digest": _digest(a),
            }
        return {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "token_start": "0",
            "token_end": str(self.boundary),
            "prefix_hash": key,
            "model_fingerprint": self.model_fingerprint,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "layout": json.dumps(self.layout, sort_keys=True),
            "source": self.source,
            "writable": "false",  # a checkpoint is read-only; the receiver restores a COW copy
            "physical_location": self.physical_location,
            "parent_checkpoint": json.dumps(self.parent_checkpoint),  # null or [boundary, hash]
            "parts": json.dumps(parts, sort_keys=True),
        }

    def to_bytes(self) -> bytes:
        tensors = {"tokens": np.asarray(self.tokens, dtype="<i8"), **self.part_arrays()}
        tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
        return st_save(tensors, metadata=self.metadata())


def transferable_parts(device_fields: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The device state fields an object may carry: the three parts; ``NON_TRANSFER_FIELDS``
    (ReplaySSM rings, intermediate conv windows) are dropped; anything else is refused."""
    out = {}
    for name, arr in device_fields.items():
        if name in _NON_TRANSFER_FIELDS:
            continue
        if name not in _PART_KINDS:
            raise ValueError(f"device_fields: unknown state field {name!r}")
        out[name] = arr
    missing = set(_PART_KINDS) - set(out)
    if missing:
        raise ValueError(f"device_fields: missing {sorted(missing)}")
    return out


def _header(data: bytes) -> tuple[dict, int]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise StateObjectError("format", f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 8:
        raise StateObjectError("truncated", f"{len(data)} bytes, not even a header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER_BYTES:
        raise StateObjectError("format", f"header length {n} is not a safetensors header")
    if 8 + n > len(data):
        raise StateObjectError("truncated", f"header needs {8 + n} bytes, file has {len(data)}")
    try:
        header = json.loads(data[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StateObjectError("format", f"header is not JSON ({e.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise StateObjectError("format", "header is not a JSON object")
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise StateObjectError("format", f"not a {_FORMAT} (a foreign safetensors file?)")
    if meta.get("format_version") != _FORMAT_VERSION:
        raise StateObjectError(
            "format", f"format_version {meta.get('format_version')!r}, this reads {_FORMAT_VERSION}"
        )
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(info["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise StateObjectError("format", f"tensor {name!r} has no data offsets") from None
    if 8 + n + end != len(data):
        raise StateObjectError(
            "truncated", f"tensor data needs {8 + n + end} bytes, file has {len(data)}"
        )
    return meta, n


def _json_field(meta: dict, name: str) -> object:
    try:
        return json.loads(meta[name])
    except (KeyError, TypeError, json.JSONDecodeError):
        raise StateObjectError("format", f"metadata field {name!r} missing or not JSON") from None


def _check_parts_agree(meta: dict, parts: dict, T: int, key: str) -> None:
    for name in _PART_KINDS:
        pm = parts[name]
        if int(pm["token_end"]) != T or pm["prefix_hash"] != key:
            raise StateObjectError(
                "boundary",
                f"parts disagree: {name} stands at token {pm['token_end']} (prefix "
                f"{pm['prefix_hash'][:12]}, from {pm['source']!r}), the object at {T} (prefix "
                f"{key[:12]}); a splice of two sources is never restored",
            )
    sources = {parts[n]["source"] for n in _PART_KINDS}
    if len(sources) > 1:
        raise StateObjectError("boundary", f"parts come from different sources {sorted(sources)}")


def _check_identity(meta: dict, layout: dict, identity: Identity) -> None:
    if meta.get("model_fingerprint") != identity.model_fingerprint:
        raise StateObjectError(
            "model_fingerprint",
            f"made by other weights/config ({str(meta.get('model_fingerprint'))[:12]}), this "
            f"instance serves {identity.model_fingerprint[:12]}",
        )
    if meta.get("tokenizer_fingerprint") != identity.tokenizer_fingerprint:
        raise StateObjectError(
            "tokenizer_fingerprint",
            f"made with tokenizer {meta.get('tokenizer_fingerprint')!r}, this instance uses "
            f"{identity.tokenizer_fingerprint!r}",
        )
    want = identity.layout.describe(identity.kda_heads)
    if layout != want:
        raise StateObjectError(
            "layout",
            f"object layout tp_size={layout.get('tp_size')} rank={layout.get('tp_rank')} "
            f"heads {layout.get('kda_heads')}, this instance expects tp_size={want['tp_size']} "
            f"rank={want['tp_rank']} heads {want['kda_heads']}",
        )


def decode_object(data: bytes, identity: Identity, *, allow_splice: bool = False) -> StateObject:
    """Parse and validate a serialised object against ``identity``; nothing partial escapes.

    Raises ``StateObjectError`` (a ValueError) naming the first field that does not match.
    ``allow_splice`` (teaching switch) lets parts from different sources through."""
    if not isinstance(identity, Identity):
        raise ValueError(f"identity must be an Identity, got {type(identity).__name__}")
    meta, _ = _header(data)
    parts = _json_field(meta, "parts")
    layout = _json_field(meta, "layout")
    if (
        not isinstance(parts, dict)
        or set(parts) != set(_PART_KINDS)
        or not isinstance(layout, dict)
    ):
        raise StateObjectError("format", f"parts must be exactly {sorted(_PART_KINDS)}")
    try:
        T = int(meta["token_end"])
        tensors = st_load(bytes(data))
    except (KeyError, ValueError) as e:
        raise StateObjectError("format", f"unreadable: {e}") from None
    except Exception as e:  # safetensors raises its own error type on malformed files
        raise StateObjectError("format", f"safetensors refused it: {e}") from None
    if set(tensors) != {"tokens", *_PART_KINDS}:
        raise StateObjectError("format", f"tensors {sorted(tensors)} are not an object's parts")
    for name in _PART_KINDS:
        if _digest(tensors[name]) != parts[name].get("digest"):
            raise StateObjectError("corrupt", f"part {name} does not match its digest")
    tokens = tuple(int(t) for t in tensors["tokens"])
    key = prefix_hash(tokens)
    if len(tokens) != T or meta.get("prefix_hash") != key:
        raise StateObjectError(
            "prefix_hash", f"tokens hash to {key[:12]}, header says {meta.get('prefix_hash')!r}"
        )
    if not allow_splice:
        _check_parts_agree(meta, parts, T, key)
    _check_identity(meta, layout, identity)
    shapes = identity.shapes(T)
    for name in _PART_KINDS:
        a = tensors[name]
        if str(a.dtype) != identity.dtype or parts[name]["dtype"] != identity.dtype:
            raise StateObjectError(
                "dtype", f"part {name} is {a.dtype}, this instance restores {identity.dtype}"
            )
        if a.shape != shapes[name]:
            raise StateObjectError("shape", f"part {name} is {a.shape}, expected {shapes[name]}")
    spliced = len({(parts[n]["prefix_hash"], parts[n]["source"]) for n in _PART_KINDS}) > 1
    parent = _json_field(meta, "parent_checkpoint")
    return StateObject(
        tokens,
        tensors["mla_kv"],
        tensors["kda_state"],
        tensors["conv_window"],
        meta["model_fingerprint"],
        meta["tokenizer_fingerprint"],
        layout,
        meta.get("source", "?"),
        {n: {k: parts[n][k] for k in ("token_end", "prefix_hash", "source")} for n in _PART_KINDS},
        spliced,
        check_location(meta.get("physical_location")),
        None if parent is None else check_parent(parent, tokens),
    )


def splice(mla_from: StateObject, kda_from: StateObject) -> StateObject:
    """Teaching: MLA KV (and the token prefix) from one object, KDA state and conv window from
    another of the same length. The parts keep their own provenance, so a normal load refuses."""
    if mla_from.boundary != kda_from.boundary:
        raise ValueError(
            f"splice: boundaries differ ({mla_from.boundary} vs {kda_from.boundary}); a splice "
            "pairs two objects of the same length"
        )
    own = {"token_end": kda_from.boundary, "prefix_hash": kda_from.key, "source": kda_from.source}
    mla = {"token_end": mla_from.boundary, "prefix_hash": mla_from.key, "source": mla_from.source}
    return StateObject(
        mla_from.tokens,
        mla_from.mla_kv,
        kda_from.kda_state,
        kda_from.conv_window,
        kda_from.model_fingerprint,
        kda_from.tokenizer_fingerprint,
        dict(kda_from.layout),
        kda_from.source,
        {"mla_kv": mla, "kda_state": own, "conv_window": dict(own)},
        True,
    )


def from_model_state(state: ModelState, identity: Identity, source: str = "local") -> StateObject:
    """The object of a request's full-precision ``ModelState`` (copies; tp_size=1 only)."""
    if not isinstance(state, ModelState):
        raise ValueError(f"state must be a ModelState, got {type(state).__name__}")
    if identity.layout.tp_size != 1:
        raise ValueError(
            "from_model_state builds a full (tp_size=1) object; identity has a TP layout"
        )
    return StateObject(
        tuple(state.tokens),
        np.array(state.mla_kv, dtype=np.float64),
        np.stack([s.S for s in state.kda]).astype(np.float64),
        np.stack([s.conv for s in state.kda]).astype(np.float64),
        identity.model_fingerprint,
        identity.tokenizer_fingerprint,
        identity.layout.describe(identity.kda_heads),
        source,
    )
