"""``python -m apps.screenshots``: a full-page PNG of every app (and the hub's landing page).

Serves the hub in-process on a free loopback port, opens each ``/<name>/`` in headless Debian
Chromium (playwright with ``executable_path``; never ``playwright install``), waits until the
default figures are drawn and stop changing, and writes ``assets/screenshots/<name>.png``
(1366 px wide) plus ``thumbs/<name>.png`` (the first figure, the hub's card image); then
switches the page to 中文, waits until the figures are redrawn, and writes
``<name>_zh.png``. The landing page (``hub.png``) is taken last so that it shows the fresh
thumbnails. Options: ``--out DIR``, ``--apps name ...``, ``--chromium PATH``, ``--width``.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from apps import ui
from apps.__main__ import Server, build_hub

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
log = logging.getLogger("apps.screenshots")


def find_chromium(explicit: str | None = None) -> str | None:
    for cand in (explicit, "/usr/bin/chromium", "chromium", "chromium-browser"):
        if not cand:
            continue
        p = cand if Path(cand).is_file() else shutil.which(cand)
        if p:
            return p
    return None


def _settle(page: object, timeout_s: float = 60.0, quiet_s: float = 1.5) -> int:
    """Wait for a first plotly figure, then until the figures stop changing; returns their
    count."""
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=timeout_s * 1000)  # type: ignore[attr-defined]
    js = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
              .map(g => JSON.stringify(g.layout && g.layout.title) + (g.data || []).length)
              .join('|') + document.querySelectorAll('.pending').length"""
    t0 = time.monotonic()
    last, since = None, time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        cur = page.evaluate(js)  # type: ignore[attr-defined]
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        page.wait_for_timeout(200)  # type: ignore[attr-defined]
    return int(page.evaluate("document.querySelectorAll('.js-plotly-plot').length"))  # type: ignore[attr-defined]


def _settle_zh(page: object, timeout_s: float = 30.0) -> None:
    """After the switch: wait until every figure title has Chinese in it (or the time is up:
    a title made only of numbers and names stays as it is), then until nothing changes."""
    js = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(g => {
              const t = g.layout && g.layout.title; const s = t ? (t.text || t) : '';
              return !s || /[\u4e00-\u9fff]/.test(s); })"""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s and not page.evaluate(js):  # type: ignore[attr-defined]
        page.wait_for_timeout(200)  # type: ignore[attr-defined]
    _settle(page, quiet_s=1.0)


def take(
    out_dir: Path,
    names: Sequence[str] | None = None,
    chromium: str | None = None,
    width: int = 1366,
) -> list[Path]:
    from playwright.sync_api import sync_playwright

    exe = find_chromium(chromium)
    if exe is None:
        raise SystemExit("no chromium found: apt-get install chromium (or pass --chromium PATH)")
    out_dir.mkdir(parents=True, exist_ok=True)
    hub = build_hub(names)
    written: list[Path] = []
    with Server(hub.app) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            for name in hub.mounted:
                page = browser.new_page(viewport={"width": width, "height": 900})
                t0 = time.perf_counter()
                page.goto(f"{srv.url}/{name}/", wait_until="domcontentloaded")
                n = _settle(page)
                path = out_dir / f"{name}.png"
                page.screenshot(path=str(path), full_page=True)
                thumb = out_dir / "thumbs" / f"{name}.png"
                thumb.parent.mkdir(exist_ok=True)
                page.locator(".js-plotly-plot").first.screenshot(path=str(thumb))
                zh = out_dir / f"{name}_zh.png"
                page.get_by_role("radio", name=ui.LANGS[1]).check()
                _settle_zh(page)
                page.screenshot(path=str(zh), full_page=True)
                page.close()
                written += [path, thumb, zh]
                log.info("%s: %d figures, %.1f s -> %s", name, n, time.perf_counter() - t0, path)
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(srv.url + "/", wait_until="load")
            page.wait_for_timeout(500)
            path = out_dir / "hub.png"
            page.screenshot(path=str(path), full_page=True)
            written.append(path)
            log.info("hub -> %s", path)
        finally:
            browser.close()
    for name in hub.skipped:
        log.warning("%s: skipped (not available)", name)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m apps.screenshots", description=__doc__)
    ap.add_argument("--out", type=Path, default=ui.SCREENSHOTS)
    ap.add_argument("--apps", nargs="*", default=None, help="only these apps")
    ap.add_argument("--chromium", default=None)
    ap.add_argument("--width", type=int, default=1366)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stdout)
    take(args.out, args.apps, args.chromium, args.width)


if __name__ == "__main__":
    main()
