"""``python -m apps.state_transfer [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.state_transfer import build

ui.main(build)
