"""The app registry: every hub card (``AppInfo``), in hub order, and ``load_app``.

``APPS`` lists every app; ``load_app(name)`` imports ``apps.<name>`` or returns None (with a
log line) when the module is missing, fails to import or has no ``build()``, so the hub survives
one broken app. A card's words are its page's, in the one catalog (``words.<name>``: ``title``,
``blurb``). ``AppInfo.thumbnail`` is the card image written by ``python -m apps.screenshots``.
Nothing here builds UI.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

log = logging.getLogger("apps")

ROOT = Path(__file__).resolve().parent.parent.parent
ASSETS = ROOT / "assets"
SCREENSHOTS = ASSETS / "screenshots"


@dataclass(frozen=True, slots=True)
class AppInfo:
    """One hub card: ``name`` is the app (``apps/<name>/``) and the URL path (``/<name>/``); the
    title and blurb in English and 中文 come from the app's catalog (``_card``)."""

    name: str
    title: str
    title_zh: str
    blurb: str
    blurb_zh: str

    @property
    def thumbnail(self) -> Path | None:
        """The card image: the first figure (``thumbs/<name>.png``), else the whole page."""
        for p in (SCREENSHOTS / "thumbs" / f"{self.name}.png", SCREENSHOTS / f"{self.name}.png"):
            if p.is_file():
                return p
        return None


ORDER: tuple[str, ...] = (  # the hub's cards, in this order
    "prefix_replay",
    "int8_checkpoint",
    "checkpoint_density",
    "unified_memory",
    "chunk_scan",
    "speculative_replay",
    "memory_planner",
    "state_transfer",
    "context_parallel",
    "fleet_routing",
)


def _card(name: str) -> AppInfo:
    """A card says what its page says: the title and a one-line blurb of the app's catalog
    (messages ``title`` and ``blurb`` of ``words.<name>``)."""
    msg = importlib.import_module(f"words.{name}").MSG
    return AppInfo(name, *msg.pair("title"), *msg.pair("blurb"))


APPS: tuple[AppInfo, ...] = tuple(_card(n) for n in ORDER)


def app_info(name: str) -> AppInfo:
    for a in APPS:
        if a.name == name:
            return a
    raise KeyError(f"unknown app {name!r}; known: {[a.name for a in APPS]}")


def load_app(name: str) -> ModuleType | None:
    """Import ``apps.<name>``; None (and a log line) when it does not exist or fails to import."""
    mod = f"apps.{name}"
    if importlib.util.find_spec(mod) is None:
        log.warning("app %s skipped: %s does not exist yet", name, mod.replace(".", "/"))
        return None
    try:
        m = importlib.import_module(mod)
    except Exception:  # the hub must survive one broken app
        log.exception("app %s skipped: import failed", name)
        return None
    if not callable(getattr(m, "build", None)):
        log.warning("app %s skipped: no build()", name)
        return None
    return m
