"""``python -m apps.prefix_replay [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.prefix_replay import build

ui.main(build)
