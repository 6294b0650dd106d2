"""The messages every app shares, now in the one catalog (``words.common``); re-exported here
for the apps that still keep their words in ``apps.text`` (see docs/apps.md)."""

from __future__ import annotations

from words.common import COMMON

__all__ = ["COMMON"]
