"""``python -m apps.fleet_routing [--host H] [--port P]``: this app alone."""

from apps import ui
from apps.fleet_routing import build

ui.main(build)
