"""Validators that leave the page alone on bad input, now in ``apps.ui.guard``.

temporary: re-exports apps.ui for modules not yet moved
"""

from __future__ import annotations

from apps.ui.guard import *  # noqa: F403
from apps.ui.guard import __all__  # noqa: F401
