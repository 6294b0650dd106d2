"""What a log read back is made of: each line's verdict, the reasons, the fixes and the report.

``compare`` marks a rebuilt line ``reproduced``, ``different`` (with the logged and rebuilt
numbers) or ``input``. The reader's sentences are ``Reason``s: a key of ``REASONS`` (the English
templates; the memory planner app has them in Chinese too) and its numbers, so a page can say
them in its own language; ``Reason.text()`` is the English one the command line prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.presets import GIB

REPRODUCED, DIFFERENT, INPUT = "reproduced", "different", "input"
NOT_UNDERSTOOD, SKIPPED = "not understood", "skipped"
_STATUSES: tuple[str, ...] = (REPRODUCED, DIFFERENT, INPUT, NOT_UNDERSTOOD, SKIPPED)
Check = tuple[str, float, float]

REASONS: dict[str, str] = {
    # verdicts
    "state_slots": "{slots} state slots / {spr} reserved per request = {cap} running requests "
    "at most: concurrency is bound by the state slots",
    "state_slots_range": "{cap} running requests = slots // {spr} with {lo} to {hi} slots: "
    "concurrency is bound by the state slots",
    "kv_tokens": "the KV pool is full while state slots are free: concurrency is bound by the KV "
    "tokens",
    "kv_reduced": "{tokens} KV tokens // 2 = {cap}: concurrency is bound by the KV tokens",
    "request_pool": "the request cap ({bound}) binds before the state slots ({cap})",
    "other_model": "the log's numbers do not fit {model}: is it this model?",
    "names_other": "the log names the model {name}, not {model}: is it this model?",
    "nothing_known": "no line of the paste is one the reader knows ({skipped} skipped)",
    "unknown": "the paste does not say what bounds concurrency",
    "vllm_max_num_seqs": "max_num_seqs ({seqs}) is reached while the KV blocks are not full",
    "vllm_prefix_inert": "the attention block was raised to {block} tokens, so a prompt needs at "
    "least {hit} tokens to hit the prefix cache; {conc} requests of {length} tokens fit",
    "vllm_kv_tokens": "{blocks} blocks hold {conc} requests of {length} tokens",
    # what the server did (per-batch lines, /metrics)
    "seen": "seen: {running} running",
    "seen_waiting": "{waiting} waiting",
    "seen_kv": "KV pool {kv} used",
    "seen_at_cap": "(at the cap)",
    "seen_hits": "prefix cache hits {hits} of queried tokens",
    # what a fragment cannot pin
    "needs_slots": "the slot count needs the 'Mamba Cache is allocated' or the capping line, or "
    "per-batch 'mamba num' and 'mamba usage'",
    "needs_tp": "the TP needs the 'Mamba Cache is allocated' line or the server_args echo (TP {tp} "
    "assumed)",
    "needs_spr": "the slots per request need the capping line or the strategy arguments "
    "(SGLang's default {spr} assumed)",
    "needs_budget": "the budget needs the 'Mamba Cache is allocated' and 'KV Cache is allocated' "
    "lines",
    "needs_dtype": "the state dtype needs the 'Mamba Cache is allocated' line (SGLang's default "
    "{dtype} assumed)",
    "needs_blocks": "the block count needs the 'GPU KV cache size' or the 'Available KV cache "
    "memory' line",
    "needs_requested": "the requested --max-running-requests is not in the paste",
    "needs_running": "the effective max_running_requests needs the capping or the "
    "'max_total_num_tokens=' line",
    "cut": "the line is cut before its numbers (a {what} line)",
    # requested vs effective
    "running": "requested {requested}, effective {effective}",
    "running_effective": "effective {effective} (the request is not in the paste)",
    "bound_state": "the state cache: {slots} slots // {spr} per request = {cap}",
    "bound_state_range": "the state cache: {cap} = slots // {spr} with {lo} to {hi} slots",
    "bound_kv": "the KV pool: {tokens} tokens // 2 = {cap}",
    "bound_cli": "--max-running-requests {cap}",
    "bound_pool": "the request pool: {tokens} tokens / context {context} x 512 = {cap}",
    "won_state": "the state cache won",
    "won_kv": "the KV pool won",
    "won_cli": "the --max-running-requests cap won",
    "won_pool": "the request pool won",
    "bound_graph": "not the CUDA graphs: SGLang captures them up to max_running_requests, not "
    "the other way",
    # toward a target
    "target": "target {target} running requests",
    "target_default": "no target given: sized for {target} (twice the cap)",
    "target_requested": "no target given: sized for the requested {target}",
    "sized_for": "{slots} slots = {target} x {k}: sized for {k} slots per request ({which}), "
    "while the server reserves {spr} ({reserving}): {slots} // {spr} = {cap}",
    "fix_split": "{slots} slots -> cap {cap}, {tokens} KV tokens",
    "fix_cap": "cap {cap}",
    "fix_none": "no value reaches it: the whole budget holds {slots} slots",
    "cost_kv": "KV tokens {before} -> {after}",
    "cost_kv_none": "nothing is left for the KV pool: SGLang refuses to start",
    "cost_kv_unknown": "KV tokens: the paste does not pin the budget",
    "cost_bf16": "the recurrent state in bfloat16 (SGLang's default is float32)",
    "cost_lazy": "the second track slot is taken at a track boundary, not up front (requires the "
    "overlap scheduler)",
    "cost_skip": "experimental: an SGLANG_OPT_ environment flag",
    "cost_radix_off": "no prefix cache at all",
    "cost_rest": "the fixes are sized on the budget {slots} slots imply at ratio {ratio}",
    "cost_drafts": "the fixes leave the speculative buffers out (not rebuilt)",
    # held vs reserved
    "held": "each running request holds {held} slots ('mamba num' / '#running-req' over "
    "{samples} batches); the scheduler reserves {spr}: at the cap of {cap}, {free} of {slots} "
    "slots ({share}) stay free",
    "held_pattern": "{spr} reserved: {reserving}; a reservation of {held}: {matching}",
    # vLLM levers
    "vllm_bf16": "block {block}, {conc}x",
    "vllm_seqs_start": "starts (one mamba block per sequence)",
    "vllm_more_seqs": "up to {conc} at full length",
    "vllm_mamba_block": "no effect in align mode: vLLM 0.33 sets it to the block size",
}
"""The reader's sentences (English); a key's ``{names}`` are the numbers a ``Reason`` carries."""


@dataclass(frozen=True, slots=True)
class Reason:
    """A sentence of the reader: ``key`` of ``REASONS`` and the numbers it names."""

    key: str
    params: dict[str, object] = field(default_factory=dict)

    def text(self) -> str:
        """The English sentence."""
        return REASONS[self.key].format(**self.params)


@dataclass(frozen=True, slots=True)
class LineVerdict:
    """One log line read back: ``status``; where rebuilt, the lab's line and every number
    compared as ``(field, logged, rebuilt)`` (``checks``; those that differ at the printed
    precision in ``diffs``); ``inputs`` names the numbers taken as given."""

    line_no: int
    text: str
    kind: str
    status: str
    rebuilt: str = ""
    diffs: tuple[Check, ...] = ()
    note: str = ""
    checks: tuple[Check, ...] = ()
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Fix:
    """One lever: the flag change, its ``effect`` (the cap it gives), whether it ``reaches``
    the target (None without one), what it ``costs`` and the startup ``lines`` it will print
    (empty when the paste does not pin the budget)."""

    flag: str
    effect: Reason
    reaches: bool | None = None
    cap: int | None = None
    costs: tuple[Reason, ...] = ()
    lines: tuple[str, ...] = ()


def join_reasons(reasons: tuple[Reason, ...], say: object) -> str:
    """The reasons said by ``say`` (a Reason -> str), "; " between them; the parts of what
    was seen (``seen_*``) after the first with ", " ("(at the cap)" with a space)."""
    out = ""
    for r in reasons:
        text = say(r)  # type: ignore[operator]
        if not out:
            out = text
        elif r.key == "seen_at_cap":
            out += f" {text}"
        elif r.key.startswith("seen_"):
            out += f", {text}"
        else:
            out += f"; {text}"
    return out


def compare(
    line: LogLine,
    rebuilt: str,
    pairs: list[tuple[str, float, float, int]],
    inputs: tuple[str, ...] = (),
    note: str = "",
) -> LineVerdict:
    """``pairs`` of (field, logged, rebuilt, decimals): reproduced when every one is equal at
    the printed precision, different otherwise, input when there is nothing to compare."""
    checks = tuple((f, float(a), float(b)) for f, a, b, _ in pairs)
    diffs = tuple((f, float(a), float(b)) for f, a, b, nd in pairs if round(a, nd) != round(b, nd))
    status = DIFFERENT if diffs else REPRODUCED if checks else INPUT
    return LineVerdict(
        line.line_no, line.text, line.kind, status, rebuilt, diffs, note, checks, inputs
    )


def gib(n: int) -> float:
    """Bytes as the "GB" SGLang prints (GiB)."""
    return n / GIB


@dataclass(frozen=True, slots=True)
class LogReport:
    """A log (or a fragment of one) read back: the known lines' verdicts (``skipped`` counts
    the lines the reader does not know: they are not listed), the inferred flags, the verdict
    and its ``reasons``, what the paste cannot pin (``missing``), the requested and effective
    ``max_running_requests`` (``running``: requested, effective, target, the bounds and the
    one that won, said in ``bounds``), held vs reserved slots (``held``) and the ``fixes``,
    each lever toward ``running["target"]``."""

    engine: str
    model: str
    lines: tuple[LineVerdict, ...]
    inferred: dict[str, object]
    verdict: str
    reasons: tuple[Reason, ...]
    fixes: tuple[Fix, ...] = ()
    skipped: int = 0
    missing: tuple[Reason, ...] = ()
    running: dict[str, object] = field(default_factory=dict)
    bounds: tuple[Reason, ...] = ()
    held: tuple[Reason, ...] = ()

    @property
    def explanation(self) -> str:
        """The verdict's reasons in English, one sentence (what was seen as one clause)."""
        return join_reasons(self.reasons, Reason.text)

    def counts(self) -> dict[str, int]:
        """Lines per status (the skipped ones included)."""
        out = {s: 0 for s in _STATUSES}
        for v in self.lines:
            out[v.status] += 1
        out[SKIPPED] += self.skipped
        return out
