"""State transfer beyond one instance: the data the ``state_transfer`` app and the tier figure draw.

* ``anatomy(tp, tokens)``: one model-state object - its parts at Kimi K3 scale (per GPU) and on
  the tiny model (a real object: shapes, dtypes, bytes, metadata header);
* ``prefill_decode(text, n_new)``: a prefill instance publishes objects into an embedded store,
  a decode instance finds the longest jointly restorable prefix, restores and decodes; the
  transfer timeline and the distance to one instance (the two-process version is
  ``python -m kda_core.transfer selftest``);
* ``mismatches(text)``: the same objects offered to instances that differ (weights, tokenizer,
  layout) and as corrupt / truncated / foreign bytes: each refused with the field named, each
  instance still serving correct output;
* ``splice_drift(text_a, text_b, n_new)``: the teaching switch: MLA KV of one prefix with the KDA
  state of another of the same length, restored anyway; logit drift per decoded token;
* ``tier_rates(n_requests, device_ckpts, host_ratio)``: ``kda_core.sim.tiers`` on the Mooncake
  trace, device-only vs + host vs + remote.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.model import TinyHybrid, encode
from kda_core.serve.engine import Engine
from kda_core.sim.tiers import CKPT_K3_TP8, TIER_SETUPS, TierConfig, simulate_tiers
from kda_core.transfer import Identity, Layout
from kda_core.transfer.instance import Event, Instance
from kda_core.transfer.objects import (
    StateObjectError,
    decode_object,
    from_model_state,
    splice,
)
from kda_core.transfer.pd import handoff_policy
from kda_core.transfer.store import EmbeddedStore
from kda_core.workloads import bundled_trace

MAX_TEXT = 2000
MAX_NEW = 64
DEFAULT_TEXT = (
    "System: you are a terse assistant for a KDA serving lab.\n"
    "User: why can a decode instance not take the MLA KV from one prefill and the KDA state "
    "from another?\nAssistant:"
)
_PARTS = ("mla_kv", "kda_state", "conv_window")
_MISMATCH_KINDS = ("weights", "tokenizer", "layout", "corrupt", "truncated", "foreign")

__all__ = [
    "Anatomy",
    "PDRun",
    "Refusals",
    "SpliceDrift",
    "TierRates",
    "anatomy",
    "check_splice",
    "check_text",
    "mismatches",
    "prefill_decode",
    "splice_drift",
    "tier_rates",
]


def check_text(text: object, name: str = "text") -> list[int]:
    """The token ids of a prompt; ValueError naming ``name`` and the allowed length when it is
    empty, longer than ``MAX_TEXT`` characters or shorter than 4 bytes."""
    rule = f"{name} must be 1 to {MAX_TEXT:,} characters (at least 4 UTF-8 bytes)"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{rule}, got an empty text")
    if len(text) > MAX_TEXT:
        raise ValueError(f"{rule}, got {len(text):,} characters")
    ids = encode(text)
    if len(ids) < 4:
        raise ValueError(f"{rule}, got {len(ids)} bytes")
    return ids


_text = check_text


def check_splice(
    text_a: object, text_b: object, names: tuple[str, str] = ("text_a", "text_b")
) -> tuple[list[int], list[int], int]:
    """(ids of A, ids of B, splice boundary); B empty means A reversed. ValueError when B does
    not differ from A within their common length (a splice of equal prefixes is no splice);
    ``names``: how the messages call the two texts."""
    a = check_text(text_a, names[0])
    b = check_text(text_b or str(text_a)[::-1], names[1])
    n = min(len(a), len(b)) - 1  # leave one token of A to compute
    if a[:n] == b[:n]:
        raise ValueError(f"{names[1]} must differ from {names[0]} within their common length")
    return a, b, n


@functools.lru_cache(maxsize=2)
def _model(seed: int = 0) -> TinyHybrid:
    """Seed 0: the shipped trained weights; another seed: random weights from that seed (an
    instance with other weights). Shared: a forward pass never changes the weights."""
    return TinyHybrid() if seed == 0 else TinyHybrid(weights="random", seed=seed)


def _engine(seed: int = 0, **kw: object) -> Engine:
    return Engine(model=_model(seed), **kw)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Anatomy:
    parts: tuple[str, ...]
    k3_bytes: np.ndarray  # per GPU at ``tp``, bf16, boundary ``tokens``
    tiny_bytes: np.ndarray  # the real tiny-model object's parts
    tiny_shapes: tuple[tuple[int, ...], ...]
    tiny_dtypes: tuple[str, ...]
    tp: int
    tokens: int
    tiny_tokens: int
    metadata: tuple[tuple[str, str], ...]  # the safetensors header of the tiny object
    file_bytes: int


def anatomy(tp: int = 8, tokens: int = 8192, text: str = DEFAULT_TEXT) -> Anatomy:
    """Parts of one object at K3 scale (per GPU) and a real tiny-model object of ``text``."""
    tp = check_int("tp", tp, 1, 96)
    if 96 % tp:
        raise ValueError(f"tp must divide K3's 96 KDA heads, got {tp}")
    tokens = check_int("tokens", tokens, 1, 1 << 20)
    ids = _text(text)
    spec = sizing.preset("kimi-k3")
    k3 = np.array(
        [
            sizing.mla_kv_bytes_per_token(spec, "bfloat16") * tokens,
            sizing.kda_state_bytes(spec, tp, "bfloat16"),
            sizing.conv_state_bytes(spec, tp, "bfloat16"),
        ],
        dtype=np.int64,
    )
    model = _model()
    st = model.new_state()
    model.prefill(ids, st)
    obj = from_model_state(st, Identity.of(model), "prefill")
    arrays = obj.part_arrays()
    meta = obj.metadata()
    return Anatomy(
        _PARTS,
        k3,
        np.array([arrays[p].nbytes for p in _PARTS], dtype=np.int64),
        tuple(arrays[p].shape for p in _PARTS),
        tuple(str(arrays[p].dtype) for p in _PARTS),
        tp,
        tokens,
        len(ids),
        tuple(sorted(meta.items())),
        len(obj.to_bytes()),
    )


@dataclass(frozen=True, slots=True)
class PDRun:
    events: tuple[Event, ...]  # prefill and decode timelines merged, by time
    tokens: list[int]
    reference_tokens: list[int]
    max_dlogit: float
    restore_at: int
    prompt_len: int
    published: tuple[int, ...]
    source: str
    bytes_moved: int


def prefill_decode(text: str = DEFAULT_TEXT, n_new: int = 16) -> PDRun:
    """Prefill publishes at its boundaries; decode restores the longest jointly restorable
    prefix from the store and decodes ``n_new`` tokens (one process, one embedded store)."""
    ids = _text(text)
    n_new = check_int("n_new", n_new, 1, MAX_NEW)
    store = EmbeddedStore()
    pre = Instance("prefill", engine=_engine(policy=handoff_policy()), store=store)
    dec = Instance("decode", engine=_engine(), store=store)
    dec._t0 = pre._t0  # one clock for both timelines
    r = pre.engine.generate(ids, 1)
    published = pre.publish(r)
    rep, lk = dec.serve(ids, n_new)
    ref_tokens, ref_logits = _model().generate(ids, n_new)
    events = tuple(sorted(pre.events + dec.events, key=lambda e: e.t))
    return PDRun(
        events,
        rep.tokens,
        ref_tokens,
        float(np.max(np.abs(rep.logits - ref_logits))),
        rep.restore_at,
        len(ids),
        tuple(published),
        lk.source,
        sum(e.nbytes for e in dec.events if e.kind == "fetch"),
    )


@dataclass(frozen=True, slots=True)
class Refusals:
    kinds: tuple[str, ...]
    fields: tuple[str, ...]  # the field each refusal named
    messages: tuple[str, ...]
    served_ok: tuple[bool, ...]  # the instance still produced its own correct output


def mismatches(text: str = DEFAULT_TEXT, n_new: int = 4) -> Refusals:
    """Offer prefill's objects to instances / as bytes that must be refused."""
    ids = _text(text)
    n_new = check_int("n_new", n_new, 1, MAX_NEW)
    store = EmbeddedStore()
    pre = Instance("prefill", engine=_engine(policy=handoff_policy()), store=store)
    pre.publish(pre.engine.generate(ids, 1))
    good = store.get(store.keys()[-1])
    assert good is not None
    refs = {seed: _model(seed).generate(ids, n_new) for seed in (0, 1)}
    rows = []
    for kind in _MISMATCH_KINDS:
        if kind in ("weights", "tokenizer", "layout"):
            kw: dict = {
                "weights": {"engine": _engine(1)},
                "tokenizer": {"engine": _engine(), "tokenizer_fingerprint": "utf8-bytes-v2"},
                "layout": {"engine": _engine(), "layout": Layout(2, 0)},
            }[kind]
            inst = Instance(f"decode-{kind}", store=store, **kw)
        else:
            bad = {
                "corrupt": good[:-9] + bytes([good[-9] ^ 0x55]) + good[-8:],
                "truncated": good[: len(good) // 2],
                "foreign": b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"x": "y"}      ',
            }[kind]
            one = EmbeddedStore()
            keys = store.keys()
            for key in keys:
                one.put(key, bad)
            inst = Instance(f"decode-{kind}", engine=_engine(), store=one)
        rep, lk = inst.serve(ids, n_new)
        ref_tokens, ref_logits = refs[1 if kind == "weights" else 0]
        ok = rep.tokens == ref_tokens and float(np.max(np.abs(rep.logits - ref_logits))) <= 1e-9
        first = lk.refusals[0] if lk.refusals else None
        rows.append((kind, first.field if first else "", first.message if first else "", ok))
    return Refusals(*(tuple(c) for c in zip(*rows)))


@dataclass(frozen=True, slots=True)
class SpliceDrift:
    boundary: int
    refused_field: str
    steps: np.ndarray  # decoded token index
    drift_clean: np.ndarray  # max |dlogit| per step vs one instance, clean restore
    drift_splice: np.ndarray  # same, spliced restore (MLA of A + KDA of B)
    tokens_clean: list[int]
    tokens_splice: list[int]


def splice_drift(text_a: str = DEFAULT_TEXT, text_b: str = "", n_new: int = 16) -> SpliceDrift:
    """MLA KV from prefix A, KDA state and conv window from prefix B (same length), forced."""
    a, b, n = check_splice(text_a, text_b)
    n_new = check_int("n_new", n_new, 1, MAX_NEW)
    model = _model()
    ident = Identity.of(model)
    objs = []
    for name, ids in (("A", a[:n]), ("B", b[:n])):
        st = model.new_state()
        model.prefill(ids, st)
        objs.append(from_model_state(st, ident, f"instance-{name}"))
    spliced = splice(objs[0], objs[1])
    try:
        decode_object(spliced.to_bytes(), ident)
        refused = ""
    except StateObjectError as e:
        refused = e.field
    forced = decode_object(spliced.to_bytes(), ident, allow_splice=True)
    prompt = a[: n + 1]
    _, ref = model.generate(prompt, n_new)
    out = {}
    for label, o in (("clean", objs[0]), ("splice", forced)):
        eng = _engine()
        eng.adopt_checkpoint(list(o.tokens), o.mla_kv, o.kda_state, o.conv_window)
        rep = eng.generate(prompt, n_new)
        out[label] = (rep.tokens, np.max(np.abs(rep.logits - ref), axis=1))
    return SpliceDrift(
        n,
        refused,
        np.arange(n_new),
        out["clean"][1],
        out["splice"][1],
        out["clean"][0],
        out["splice"][0],
    )


@dataclass(frozen=True, slots=True)
class TierRates:
    setups: tuple[str, ...]
    state_hit_rate: np.ndarray
    ttft_mean_s: np.ndarray
    ttft_p95_s: np.ndarray
    hits: np.ndarray  # [setup, tier] restores from device / host / remote
    bytes_loaded: np.ndarray  # [setup, tier] host / remote -> device
    bytes_written: np.ndarray  # [setup, tier] write-through to host / remote
    n_requests: int
    device_ckpts: int
    host_ckpts: int
    checkpoint_bytes: int


@functools.lru_cache(maxsize=8)
def tier_rates(
    n_requests: int = 1000, device_ckpts: int = 16, host_ratio: float = 2.0
) -> TierRates:
    """Mooncake conversation trace (first ``n_requests``), K3 at TP8, sglang placement."""
    n_requests = check_int("n_requests", n_requests, 100, 12031)
    device_ckpts = check_int("device_ckpts", device_ckpts, 1, 4096)
    if not isinstance(host_ratio, (int, float)) or not 0.0 < host_ratio <= 64:
        raise ValueError(f"host_ratio must be in (0, 64], got {host_ratio!r}")
    host_ckpts = max(1, int(round(device_ckpts * host_ratio)))
    cfg = TierConfig(device_bytes=device_ckpts * CKPT_K3_TP8, host_bytes=host_ckpts * CKPT_K3_TP8)
    trace = bundled_trace("conversation").head(n_requests)
    res = [simulate_tiers(trace, setup, cfg) for setup in TIER_SETUPS]
    tiers = ("device", "host", "remote")
    return TierRates(
        TIER_SETUPS,
        np.array([r.state_hit_rate for r in res]),
        np.array([r.ttft_mean_s for r in res]),
        np.array([r.ttft_p95_s for r in res]),
        np.array([[r.hits[t] for t in tiers] for r in res], dtype=np.int64),
        np.array([[r.bytes_loaded[t] for t in tiers[1:]] for r in res], dtype=np.int64),
        np.array([[r.bytes_written[t] for t in tiers[1:]] for r in res], dtype=np.int64),
        n_requests,
        device_ckpts,
        host_ckpts,
        CKPT_K3_TP8,
    )
