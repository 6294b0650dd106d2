"""``python -m apps.memory_planner [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.memory_planner import build

ui.main(build)
