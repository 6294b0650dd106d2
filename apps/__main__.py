"""The hub: ``python -m apps [--host H] [--port P]`` serves every app of one process.

URL layout (default http://127.0.0.1:7860):

    /                 landing page: one card per app (title, one line, thumbnail)
    /<name>/          the app, e.g. /memory_planner/ (a Gradio app mounted with
                      ``gr.mount_gradio_app``: its own queue and API, so
                      ``gradio_client.Client("http://127.0.0.1:7860/memory_planner/")`` works)
    /thumbnails/<name>.png   the card image (assets/screenshots/<name>.png, or an SVG placeholder)
    /healthz          "ok" plus the mounted apps, as JSON
    /favicon.ico      a small SVG icon

``python -m apps <name> [--host H] [--port P]`` serves one app alone (at ``/``).

Apps come from ``apps.ui.registry.APPS``; one whose module does not exist yet (or fails to import
or build) is skipped with a log line, the others still serve. Offline settings come from
``apps/__init__.py`` (no analytics, HF hub offline, no telemetry).
"""

from __future__ import annotations

import argparse
import html
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import gradio as gr
import uvicorn
from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from apps import ui
from apps.ui import registry
from words.hub import MSG as HUB

log = logging.getLogger("apps.hub")


@dataclass(frozen=True, slots=True)
class Hub:
    app: FastAPI
    mounted: tuple[str, ...]
    skipped: tuple[str, ...]


def _placeholder_svg(info: ui.AppInfo, i: int) -> str:
    c = ui.SERIES[i % len(ui.SERIES)]
    t = html.escape(info.title)
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="480" height="270" viewBox="0 0 480 270">'
        f'<rect width="480" height="270" fill="{c}" opacity="0.15"/>'
        f'<rect x="0" y="250" width="480" height="20" fill="{c}"/>'
        f'<text x="240" y="145" font-family="sans-serif" font-size="30" fill="{c}" '
        f'text-anchor="middle">{t}</text></svg>'
    )


CARD_CSS = """
body { font-family: 'Source Sans Pro', 'Liberation Sans', sans-serif; margin: 0;
       background: #f7f7fb; color: #1f2937; }
header { padding: 28px 40px 8px; }
header h1 { margin: 0 0 4px; font-size: 28px; }
header p { margin: 2px 0; color: #4b5563; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
        gap: 20px; padding: 20px 40px 40px; }
.card { background: white; border: 1px solid #e5e7eb; border-radius: 10px; overflow: hidden;
        text-decoration: none; color: inherit; display: flex; flex-direction: column;
        box-shadow: 0 1px 2px rgba(0,0,0,.05); }
.card:hover { border-color: #6366f1; box-shadow: 0 4px 12px rgba(99,102,241,.2); }
.card img { width: 100%; aspect-ratio: 16 / 9; object-fit: contain; object-position: center;
            border-bottom: 1px solid #e5e7eb; background: #fafafa; }
.card h2 { font-size: 18px; margin: 12px 14px 2px; }
.card h2 span { color: #6b7280; font-weight: normal; font-size: 15px; margin-left: 6px; }
.card p { margin: 4px 14px; font-size: 14px; color: #374151; }
.card p.zh { color: #6b7280; margin-bottom: 14px; }
.card.missing { opacity: .55; pointer-events: none; }
"""


def landing_html(mounted: Sequence[str]) -> str:
    """The landing page: one card per registered app (cards of skipped apps are greyed)."""
    cards = []
    for info in registry.APPS:
        ok = info.name in mounted
        cls = "card" if ok else "card missing"
        href = f"./{info.name}/" if ok else "#"
        cards.append(
            f'<a class="{cls}" href="{href}" id="card-{info.name}">'
            f'<img src="./thumbnails/{info.name}.png" alt="{html.escape(info.title)}">'
            f"<h2>{html.escape(info.title)}<span>{html.escape(info.title_zh)}</span></h2>"
            f"<p>{html.escape(info.blurb)}</p><p class='zh'>{html.escape(info.blurb_zh)}"
            f"{'' if ok else ' (not available yet)'}</p></a>"
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>KDA State Lab</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CARD_CSS}</style></head><body><header><h1>KDA State Lab</h1>"
        f"{''.join(f'<p>{html.escape(text)}</p>' for text in HUB.pair('intro'))}</header>"
        f'<main class="grid">{"".join(cards)}</main></body></html>'
    )


def _bind_validators_to_mount(app: FastAPI, demo: gr.Blocks, path: str) -> None:
    """Gradio 6.31 runs an event's ``validator=`` against ``demo.app`` (``queueing.py``
    ``Queue.push``) but the event itself against the app ``mount_gradio_app`` created
    (``server_app``), and mounting does not set ``demo.app``: the validator then reads an empty
    session (``gr.State`` at its default) and rejects every call that needs the session. Point
    both at the mounted app."""
    mounted = next(r.app for r in reversed(app.routes) if getattr(r, "path", None) == path)
    demo.app = mounted
    demo._queue.set_server_app(mounted)


def build_hub(names: Sequence[str] | None = None) -> Hub:
    """A FastAPI app with the landing page and every available app mounted at ``/<name>``."""
    wanted = [a.name for a in registry.APPS] if names is None else list(names)
    app = FastAPI(title="KDA State Lab", docs_url=None, redoc_url=None, openapi_url=None)
    mounted: list[str] = []
    skipped: list[str] = []
    for name in wanted:
        ui.app_info(name)
        mod = ui.load_app(name)
        if mod is None:
            skipped.append(name)
            continue
        try:
            demo = mod.build()
        except Exception:
            log.exception("app %s skipped: build() failed", name)
            skipped.append(name)
            continue
        gr.mount_gradio_app(app, ui.bound_sessions(demo), path=f"/{name}", **ui.LAUNCH_KWARGS)
        _bind_validators_to_mount(app, demo, f"/{name}")
        mounted.append(name)
    page = landing_html(mounted)
    svgs = {a.name: _placeholder_svg(a, i) for i, a in enumerate(registry.APPS)}
    m = tuple(mounted)

    @app.get("/", response_class=HTMLResponse)
    def landing() -> str:
        return page

    @app.get("/thumbnails/{name}.png", response_model=None)
    def thumbnail(name: str) -> Response:
        if name not in svgs:
            return Response(status_code=404)
        p = ui.app_info(name).thumbnail
        if p is not None:
            return FileResponse(p, media_type="image/png")
        return Response(svgs[name], media_type="image/svg+xml")

    @app.get("/favicon.ico", response_model=None)
    def favicon() -> Response:
        svg = (
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
            f'<rect width="16" height="16" rx="3" fill="{ui.COLORS["state"]}"/>'
            f'<rect x="3" y="3" width="10" height="4" fill="{ui.COLORS["kv"]}"/></svg>'
        )
        return Response(svg, media_type="image/svg+xml")

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "apps": list(m)})

    return Hub(app, m, tuple(skipped))


class Server:
    """uvicorn in a background thread (tests, benchmarks): ``with Server(app) as s: s.url``."""

    def __init__(self, app: FastAPI, host: str = ui.HOST, port: int = 0) -> None:
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=1,  # clients' open event streams do not hold it up
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.host = host
        self.url = ""

    def start(self, timeout: float = 30.0) -> Server:
        self._thread.start()
        t0 = time.monotonic()
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() - t0 > timeout:
                raise RuntimeError("hub server did not start")
            time.sleep(0.02)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        return self

    def stop(self) -> None:
        for route in self._server.config.app.routes:  # end the mounted apps' event streams
            ev = getattr(getattr(route, "app", None), "stop_event", None)
            if ev is not None:
                ev.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m apps", description=__doc__.split("\n")[0])
    ap.add_argument("app", nargs="?", help="serve only this app (one of the registry names)")
    ap.add_argument("--host", default=ui.HOST)
    ap.add_argument(
        "--port",
        type=int,
        default=ui.PORT,
        help=f"port (default {ui.PORT}); when taken, the next free one is used and printed",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.app:
        names = [a.name for a in registry.APPS]
        if args.app not in names:
            ap.error(f"unknown app {args.app!r}; choose one of {names}")
        mod = ui.load_app(args.app)
        if mod is None:
            ap.error(f"app {args.app!r} is not available")
        port, note = ui.next_free_port(args.host, args.port)
        if note:
            log.warning(note)
        ui.bound_sessions(mod.build()).launch(
            server_name=args.host, server_port=port, **ui.LAUNCH_KWARGS, **ui.SESSION_KWARGS
        )
        return
    t0 = time.perf_counter()
    try:
        sock, note = ui.bind_port(args.host, args.port)  # bound before it is announced
    except (OSError, ValueError) as e:
        ap.exit(2, f"python -m apps: {e}\n")
    if note:
        log.warning(note)
    hub = build_hub()
    port = sock.getsockname()[1]
    log.info(
        "serving %d apps (%s) on http://%s:%d/ (built in %.1f s); skipped: %s",
        len(hub.mounted),
        ", ".join(hub.mounted),
        args.host,
        port,
        time.perf_counter() - t0,
        ", ".join(hub.skipped) or "none",
    )
    config = uvicorn.Config(hub.app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
