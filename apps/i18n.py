"""The 中文 phrase-table machinery, now in ``apps.ui.i18n``.

temporary: re-exports apps.ui for modules not yet moved
"""

from __future__ import annotations

from apps.ui.i18n import *  # noqa: F403
from apps.ui.i18n import __all__  # noqa: F401
