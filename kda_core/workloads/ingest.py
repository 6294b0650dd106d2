"""What reading a trace file refuses: :class:`RowError` (a malformed row, naming its field)
and the caps on a file (checked as the rows come, a ``ValueError`` naming the line):
``MAX_TRACE_FILE_BYTES`` a file, ``MAX_TRACE_REQUESTS`` requests, ``MAX_TRACE_BLOCKS`` block
ids (``_rows`` caps a line). The streaming assembly itself is ``_accumulator``.
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


MAX_TRACE_FILE_BYTES = 2 << 30  # 2 GiB
MAX_TRACE_REQUESTS = 2_000_000
MAX_TRACE_BLOCKS = 50_000_000  # input + output block ids (8 bytes each: 400 MB)
