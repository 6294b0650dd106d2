"""Shared UI helpers, now in ``apps.ui``.

temporary: re-exports apps.ui for modules not yet moved
"""

from __future__ import annotations

from apps.ui import *  # noqa: F403
from apps.ui import __all__  # noqa: F401
