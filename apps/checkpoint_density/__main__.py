"""``python -m apps.checkpoint_density [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.checkpoint_density import build

ui.main(build)
