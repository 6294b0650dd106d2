"""What a log read back is made of: each line's verdict and the report.

``compare`` marks a rebuilt line ``reproduced``, ``different`` (with the logged and rebuilt
numbers) or ``input``; ``logread`` (vLLM) and ``logsglang`` (SGLang) build ``LineVerdict``s
with it and return a ``LogReport``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kda_core.sizing.logread._parse import LogLine
from kda_core.sizing.presets import GIB

REPRODUCED, DIFFERENT, INPUT = "reproduced", "different", "input"
NOT_UNDERSTOOD, SKIPPED = "not understood", "skipped"
_STATUSES: tuple[str, ...] = (REPRODUCED, DIFFERENT, INPUT, NOT_UNDERSTOOD, SKIPPED)
Check = tuple[str, float, float]


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
    """A log read back: per-line verdicts, the inferred flags and the concurrency verdict."""

    engine: str
    model: str
    lines: tuple[LineVerdict, ...]
    inferred: dict[str, object]
    verdict: str
    explanation: str
    remedies: tuple[tuple[str, str], ...]  # (flag change, predicted effect)

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in _STATUSES}
        for v in self.lines:
            out[v.status] += 1
        return out
