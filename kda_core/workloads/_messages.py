"""The words of the trace readers' refusals that several modules share: the chain rule of block
ids broken, and a list of line numbers (ranges folded), so a reason repeated on many lines is
said once."""

from __future__ import annotations

from collections.abc import Iterable


def chain_conflict(h: int, here: int, before: int, what: str = "'hash_ids'") -> str:
    """Id ``h`` comes after ``here`` in this row (-1: it opens the row) but came after
    ``before`` in an earlier one: equal ids name one prefix, so the id before an id never
    changes."""
    now = "opens this row" if here == -1 else f"comes after id {here} here"
    then = "opened a row earlier" if before == -1 else f"came after id {before} earlier"
    return (
        f"{what}: id {h} {now} but {then} (an id names a whole prefix: the id before it is fixed)"
    )


def lines_of(numbers: Iterable[int], most: int = 8) -> str:
    """'line 7', 'lines 1-5', 'lines 2, 4-6' (sorted, runs folded; past ``most`` runs, the
    count of the lines left: 'lines 1, 4, ..., 23 and 6 more')."""
    nums = sorted(set(numbers))
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:most])
    rest = sum(b - a + 1 for a, b in runs[most:])
    more = f" and {rest} more" if rest else ""
    return f"line {text}" if len(nums) == 1 else f"lines {text}{more}"


def grouped(reasons: Iterable[tuple[int, str]]) -> list[str]:
    """``(line, reason)`` pairs as one entry per distinct reason, in the order of its first
    line: '<lines>: <reason>'."""
    by: dict[str, list[int]] = {}
    for line, reason in sorted(reasons):
        by.setdefault(reason, []).append(line)
    return [f"{lines_of(lines)}: {reason}" for reason, lines in by.items()]


def n_rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n:,} rows"
