"""``python -m apps.context_parallel [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.context_parallel import build

ui.main(build)
