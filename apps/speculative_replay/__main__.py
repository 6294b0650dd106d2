"""``python -m apps.speculative_replay [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.speculative_replay import build

ui.main(build)
