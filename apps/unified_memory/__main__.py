"""``python -m apps.unified_memory [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.unified_memory import build

ui.main(build)
