"""The messages every app shares (``words.common``), re-exported for
``apps.text.speculative_replay`` until that app moves to its folder (docs/apps.md)."""

from __future__ import annotations

from words.common import COMMON

__all__ = ["COMMON"]
