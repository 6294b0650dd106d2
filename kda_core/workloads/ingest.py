"""What reading a trace file refuses: :class:`RowError` (a malformed row, naming its field).
The caps on a file (``_caps``) are checked as the rows come, a ``ValueError`` naming the line;
the streaming assembly itself is ``_accumulator``.
"""

from __future__ import annotations


class RowError(ValueError):
    """A malformed row; ``field`` names what is wrong ("JSON", "timestamp", "hash_ids", ...).
    ``facts``: the values the message states, for a caller that words it its own way (a file
    whose format cannot be told: ``line``, ``fits``; a file with no readable row:
    ``skipped``, ``reasons``)."""

    def __init__(self, field: str, message: str, **facts: object) -> None:
        super().__init__(message)
        self.field = field
        self.facts = facts
