"""``python -m apps.chunk_scan [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.chunk_scan import build

ui.main(build)
