"""``python -m apps.int8_checkpoint [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.int8_checkpoint import build

ui.main(build)
