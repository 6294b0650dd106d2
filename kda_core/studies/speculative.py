"""Data for the speculative_replay app and the "ReplaySSM memory vs per-draft states" figure.

* ``verify_step``: one speculative step on TinyHybrid (prefill, noisy-target drafts, verify
  with ReplaySSM, accept the natural or a chosen count, commit by exact replay): the rings per
  draft step for one layer, their slots, the per-step conv windows and the one the commit
  keeps, and the exactness figures (verify vs forward, outputs rebuilt from S0 and the ring,
  the commit vs a sequential run per acceptance count, the drift of an open-loop bf16 fold).
* ``memory_over_d``: rings vs D per-draft states (and conv windows) over D, tiny and Kimi K3.
* ``generation`` / ``acceptance_vs_noise``: the engine decoding speculatively
  (``Engine(speculative=...)``): acceptance, and exactly the greedy tokens.

Computed by ``kda_core.serve`` and ``kda_core.sizing``; this module only packages it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int, check_seed
from kda_core.model import TinyHybrid, check_tokens, decode, encode
from kda_core.serve import spec
from kda_core.serve.engine import Engine
from kda_core.studies._parking import kda_shape  # noqa: F401 (the app reads it here)
from kda_core.studies._spec_memory import spec_memory
from kda_core.studies._speculative import commit_errors, fold_errors, reconstruct_error
from kda_core.studies.prefix_replay import readable

DEFAULT_PROMPT = "Speculative decoding 推测解码: verify, accept, replay."
MAX_PROMPT_TOKENS = 512
FIELDS: tuple[str, ...] = spec.RING_FIELDS
# what a ring slot holds, by the codes of ``slot_kinds`` (the app's legend and CSV names)
SLOT_KINDS: dict[int, str] = {
    -1: "empty",
    0: "older history",
    1: "accepted step",
    2: "rejected step",
}

_MODEL: TinyHybrid | None = None


def _model() -> TinyHybrid:
    global _MODEL
    if _MODEL is None:
        _MODEL = TinyHybrid()
    return _MODEL


def _check_prompt_ids(prompt: str | Sequence[int]) -> list[int]:
    ids = check_tokens(encode(prompt) if isinstance(prompt, str) else prompt, name="prompt")
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ValueError(f"prompt: at most {MAX_PROMPT_TOKENS} tokens, got {len(ids)}")
    return ids


def _slot_kinds(ring_slot: np.ndarray, n_accept: int, pos: np.ndarray) -> np.ndarray:
    """Code per ring slot (``SLOT_KINDS``): -1 empty (``pos < 0``), 0 a position written
    before this verify, 1 a draft step inside the accepted prefix (``j < n_accept``), 2 a
    rejected draft step still held (after the commit the rejected slots are empty).

    ``ring_slot [n]`` is the slot of draft step j, ``pos [L]`` the position each slot holds.
    """
    kind = np.where(pos >= 0, 0, -1)
    for j, slot in enumerate(np.asarray(ring_slot)):
        if pos[slot] >= 0:
            kind[slot] = 1 if j < n_accept else 2
    return kind


# one verify / commit step


@dataclass(frozen=True, slots=True)
class VerifyStudy:
    """One speculative step (D = draft_tokens, L = ring_len, n = tokens verified = D).

    Tokens: ``inputs [n]`` (pending + drafts), ``targets [n]`` (the target's greedy token after
    each input), ``natural_accept`` (1 + drafts matching the targets), ``n_accept`` (used).
    Ring of KDA layer ``layer`` (index into the KDA layers), head ``head``, per draft step:
    ``ring[name]`` with d, rawv ``[n, V]``, k, g, rawk ``[n, K]``, beta ``[n]``;
    ``ring_norms [6, n]`` the L2 norm of each field over all heads; ``ring_slot [n]`` the slot
    ``position & (L-1)``; ``pos_after_verify [L]`` / ``pos_after_commit [L]`` the position each
    slot holds (-1 empty); ``kind_after_verify [L]`` / ``kind_after_commit [L]`` what it holds
    (codes of ``SLOT_KINDS``, see ``slot_kinds``); ``committed [n]`` step j < n_accept.
    Conv: ``conv_windows [n, W-1, 3*H*K]`` (window after each step),
    ``committed_window`` (index kept; -1 = the old window). Exactness: ``logits_error`` (verify vs
    plain forward), ``reconstruct_error`` (outputs from S0 + ring vs the verify's, all layers),
    ``commit_error [D+1]`` (committed S and conv window vs a sequential run, per acceptance
    count), ``fold_error [D+1]`` / ``fold_bf16_error [D+1]`` (open-loop fold of float64 / bf16
    d and k vs the exact commit, max over layers). Memory (float64 arrays of this run):
    ``ring_bytes``, ``per_draft_state_bytes``, ``conv_window_bytes``.
    """

    prompt_tokens: int
    draft_tokens: int
    ring_len: int
    layer: int
    head: int
    inputs: np.ndarray
    targets: np.ndarray
    natural_accept: int
    n_accept: int
    ring: dict[str, np.ndarray]
    ring_norms: np.ndarray
    ring_slot: np.ndarray
    pos_after_verify: np.ndarray
    pos_after_commit: np.ndarray
    conv_windows: np.ndarray
    committed_window: int
    logits_error: float
    reconstruct_error: float
    commit_error: np.ndarray
    fold_error: np.ndarray
    fold_bf16_error: np.ndarray
    ring_bytes: int
    per_draft_state_bytes: int
    conv_window_bytes: int
    kind_after_verify: np.ndarray
    kind_after_commit: np.ndarray
    committed: np.ndarray

    @property
    def memory_ratio(self) -> float:
        """Per-draft full states / rings (bytes of this run)."""
        return self.per_draft_state_bytes / self.ring_bytes


def verify_step(
    prompt: str | Sequence[int] = DEFAULT_PROMPT,
    draft_tokens: int = 8,
    n_accept: int | None = None,
    *,
    ring_len: int | None = None,
    noise: float = 0.3,
    seed: int = 2,
    layer: int = 0,
    head: int = 0,
) -> VerifyStudy:
    """Verify D tokens after ``prompt``, accept ``n_accept`` (None: the greedy acceptance).

    The defaults (noise 0.3, seed 2) give a partial acceptance (trained weights: 4 of 8).
    """
    model = _model()
    ids = _check_prompt_ids(prompt)
    D = spec.check_draft_tokens(draft_tokens)
    rs = spec.ReplaySSM(model, D, ring_len)
    n_kda = len(model.kda_layers)
    layer = check_int("layer", layer, 0, n_kda - 1)
    head = check_int("head", head, 0, model.config.n_heads - 1)
    if n_accept is not None:
        n_accept = check_int("n_accept", n_accept, 0, D)
    draft = spec.make_noisy_draft(model, noise, check_seed("seed", seed))

    state = model.new_state()
    pending = int(np.argmax(model.prefill(ids, state)[-1]))
    inputs = [pending] + draft(ids + [pending], state, D - 1)
    res = rs.verify(state, inputs)
    targets = np.argmax(res.logits, axis=1)
    natural = spec.accept_length(inputs, res.logits)
    a = natural if n_accept is None else n_accept

    ring = rs.rings[layer]
    ring_vals = {f: ring.read(f, res.start, D) for f in FIELDS}
    per_head = {f: (v[:, head] if v.ndim > 1 else v) for f, v in ring_vals.items()}
    norms = np.array([np.sqrt(np.sum(ring_vals[f].reshape(D, -1) ** 2, axis=1)) for f in FIELDS])
    pos_verify = ring.pos.copy()
    slot = ring.slots(res.start, D)
    windows = rs.conv_windows[layer].copy()
    logits_ref, _ = model.forward(inputs, state)
    recon = reconstruct_error(rs, state, res)

    fold_err, fold16_err = fold_errors(rs, state, res, D)
    committed = rs.commit(state, res, a)
    pos_commit = ring.pos.copy()
    commit_err = commit_errors(model, rs, state, inputs, committed, a)

    return VerifyStudy(
        prompt_tokens=len(ids),
        draft_tokens=D,
        ring_len=rs.ring_len,
        layer=layer,
        head=head,
        inputs=np.array(inputs),
        targets=targets,
        natural_accept=natural,
        n_accept=a,
        ring=per_head,
        ring_norms=norms,
        ring_slot=slot,
        pos_after_verify=pos_verify,
        pos_after_commit=pos_commit,
        conv_windows=windows,
        committed_window=a - 1,
        logits_error=float(np.max(np.abs(res.logits - logits_ref))),
        reconstruct_error=recon,
        commit_error=commit_err,
        fold_error=fold_err,
        fold_bf16_error=fold16_err,
        ring_bytes=rs.ring_nbytes,
        per_draft_state_bytes=rs.per_draft_state_nbytes,
        conv_window_bytes=rs.conv_window_nbytes,
        kind_after_verify=_slot_kinds(slot, a, pos_verify),
        kind_after_commit=_slot_kinds(slot, a, pos_commit),
        committed=np.arange(D) < a,
    )


# memory over D


@dataclass(frozen=True, slots=True)
class MemoryOverD:
    """Per-request bytes on one GPU over D (arrays [n_d], row 0 tiny at TP1, row 1 K3 at ``tp``).

    ``ring_len [n_d]``; ``ring_bytes``, ``per_draft_state_bytes``, ``conv_window_bytes``,
    ``ratio`` (per-draft / rings) are ``[2, n_d]`` with ``models = ("k3-mini", "kimi-k3")``.
    Deployment example (K3, ``slots`` physical slots as in the K3 write-up's log, extra_buffer
    + overlap): rings for every slot, per-draft states only for ``max_running + 1`` requests,
    so the saving there is ``deploy_per_draft_bytes / deploy_ring_bytes``.
    """

    d_values: np.ndarray
    models: tuple[str, str]
    tp: int
    dtype: str
    ring_len: np.ndarray
    ring_bytes: np.ndarray
    per_draft_state_bytes: np.ndarray
    conv_window_bytes: np.ndarray
    ratio: np.ndarray
    deploy_draft_tokens: int
    deploy_slots: int
    deploy_max_running: int
    deploy_ring_bytes: int
    deploy_per_draft_bytes: int
    deploy_conv_window_bytes: int


def memory_over_d(
    d_values: Sequence[int] = tuple(range(1, 17)),
    *,
    tp: int = 8,
    dtype: str = "bfloat16",
    deploy_slots: int = 120,
    deploy_draft_tokens: int = 8,
) -> MemoryOverD:
    """Rings vs per-draft states over D (default L = next_pow2(2D)) for tiny and Kimi K3.

    ``deploy_slots`` = 120 is the K3 write-up's ``max_mamba_cache_size: 119`` (+1 physical slot).
    """
    ds = [spec.check_draft_tokens(d) for d in d_values]
    if not 1 <= len(ds) <= 64:
        raise ValueError(f"d_values must hold 1..64 values, got {len(ds)}")
    deploy_slots = check_int("deploy_slots", deploy_slots, 1, 1 << 20)
    dd = check_int("deploy_draft_tokens", deploy_draft_tokens, 1, spec.MAX_DRAFT_TOKENS)
    specs = (sizing.tiny_spec(), sizing.preset("kimi-k3"))
    tps = (1, tp)
    rows = [[spec_memory(s, d, None, t, dtype) for d in ds] for s, t in zip(specs, tps)]

    def grid(attr: str) -> np.ndarray:
        return np.array([[getattr(m, attr) for m in row] for row in rows])

    k3 = specs[1]
    run = sizing.max_running_requests(deploy_slots - 1, "extra_buffer", overlap=True)
    L = sizing.default_ring_len(dd)
    return MemoryOverD(
        d_values=np.array(ds),
        models=(specs[0].name, specs[1].name),
        tp=tp,
        dtype=dtype,
        ring_len=np.array([m.ring_len for m in rows[0]]),
        ring_bytes=grid("ring_total"),
        per_draft_state_bytes=grid("per_draft_state_bytes"),
        conv_window_bytes=grid("conv_window_bytes"),
        ratio=grid("ratio"),
        deploy_draft_tokens=dd,
        deploy_slots=deploy_slots,
        deploy_max_running=run,
        deploy_ring_bytes=sum(sizing.replayssm_ring_bytes(k3, deploy_slots, tp, L, dtype).values()),
        deploy_per_draft_bytes=sizing.intermediate_ssm_bytes(k3, run, dd, tp, dtype, False),
        deploy_conv_window_bytes=sizing.intermediate_conv_window_bytes(k3, run, dd, tp, dtype),
    )


# the generation loop


@dataclass(frozen=True, slots=True)
class GenerationStudy:
    """A speculative generation vs plain greedy. Per verify step (arrays [S]): ``start``
    (position), ``drafted``, ``accepted`` (drafts accepted), ``committed`` (= accepted + 1).
    ``equals_greedy`` / ``logits_error`` compare with ``TinyHybrid.generate``;
    ``verify_passes`` = S vs ``greedy_passes`` = max_new_tokens - 1 decode forwards."""

    tokens: np.ndarray
    text: str
    start: np.ndarray
    drafted: np.ndarray
    accepted: np.ndarray
    committed: np.ndarray
    acceptance_rate: float
    tokens_per_step: float
    verify_passes: int
    greedy_passes: int
    equals_greedy: bool
    logits_error: float
    readable: str = ""  # ``tokens`` as readable text (``prefix_replay.readable``: escapes)


def generation(
    prompt: str | Sequence[int] = DEFAULT_PROMPT,
    max_new_tokens: int = 32,
    *,
    draft_tokens: int = 8,
    draft: str = "noisy",
    noise: float = 0.2,
    seed: int = 0,
) -> GenerationStudy:
    """Run the engine's speculative decoding and plain greedy on the same prompt; package both."""
    ids = _check_prompt_ids(prompt)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1, 256)
    if draft not in ("noisy", "ngram"):
        raise ValueError(f"draft must be 'noisy' or 'ngram', got {draft!r}")
    return _generation(ids, max_new_tokens, draft, draft_tokens, noise, check_seed("seed", seed))


def _generation(
    ids: list[int], max_new_tokens: int, draft: str, draft_tokens: int, noise: float, seed: int
) -> GenerationStudy:
    """`generation` on checked arguments (the engine checks D and noise). The engine runs
    without its cache: one request, nothing to hit."""
    model = _model()
    sp = dict(draft=draft, draft_tokens=draft_tokens, noise=noise, seed=seed)
    out = Engine(model=model, cache=False, speculative=sp).generate(ids, max_new_tokens)
    steps = out.verify_steps
    ref, ref_logits = model.generate(ids, max_new_tokens)
    drafted = np.array([len(s.inputs) - 1 for s in steps], dtype=np.int64)
    accepted = np.array([s.accepted for s in steps], dtype=np.int64)
    return GenerationStudy(
        tokens=np.array(out.tokens),
        text=decode(out.tokens),
        start=np.array([s.start for s in steps], dtype=np.int64),
        drafted=drafted,
        accepted=accepted,
        committed=accepted + 1,
        acceptance_rate=float(accepted.sum() / drafted.sum()) if drafted.sum() else 0.0,
        tokens_per_step=(len(out.tokens) - 1) / len(steps) if steps else 0.0,
        verify_passes=len(steps),
        greedy_passes=max_new_tokens - 1,
        equals_greedy=out.tokens == ref,
        logits_error=float(np.max(np.abs(out.logits - ref_logits))),
        readable=readable(out.tokens),
    )


@dataclass(frozen=True, slots=True)
class AcceptanceCurve:
    """Acceptance rate and emitted tokens per verify vs draft noise (arrays [n_noise])."""

    noise: np.ndarray
    acceptance_rate: np.ndarray
    tokens_per_step: np.ndarray
    all_equal_greedy: bool


def acceptance_vs_noise(
    noises: Sequence[float] = (0.0, 0.1, 0.2, 0.4),
    prompt: str | Sequence[int] = DEFAULT_PROMPT,
    max_new_tokens: int = 24,
    *,
    draft_tokens: int = 8,
    seed: int = 0,
) -> AcceptanceCurve:
    """The noisy-target draft at several noise levels (0 = a perfect draft)."""
    ns = [float(x) for x in noises]
    if not 1 <= len(ns) <= 16:
        raise ValueError(f"noises must hold 1..16 values, got {len(ns)}")
    ids, seed = _check_prompt_ids(prompt), check_seed("seed", seed)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, 1, 256)
    runs = [_generation(ids, max_new_tokens, "noisy", draft_tokens, x, seed) for x in ns]
    return AcceptanceCurve(
        noise=np.array(ns),
        acceptance_rate=np.array([r.acceptance_rate for r in runs]),
        tokens_per_step=np.array([r.tokens_per_step for r in runs]),
        all_equal_greedy=all(r.equals_greedy for r in runs),
    )
