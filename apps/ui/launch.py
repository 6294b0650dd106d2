"""Serving: theme / CSS / launch keywords, ports, ``main`` for ``python -m apps.<name>``.

Everything binds 127.0.0.1. ``launched(demo)`` serves in-process on a kernel-chosen free port
(tests, benchmarks); ``bind_port`` / ``next_free_port`` walk up from a busy ``--port``;
``plot_from_client`` decodes a ``gradio_client`` plot output. The offline environment is set
by importing ``apps`` (``apps/__init__.py``), before gradio is imported.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import logging
import math
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gradio as gr
import numpy as np

from apps.ui import fonts

log = logging.getLogger("apps")

HOST = "127.0.0.1"
PORT = 7860


# The page and every figure use KDA Sans, the DejaVu Sans that ships inside matplotlib, served
# from that folder by this server (apps.ui.fonts; no CDN): the same widths on every machine.
# (Gradio's default IBM Plex Sans SemiBold ships 55 glyphs, so bold "KDA" / "GiB" mixed two
# faces.) WenQuanYi Zen Hei / Noto CJK cover 中文.
gr.set_static_paths(paths=[fonts.FONT_DIR])
FONT_STACK = fonts.STACK
MONO_STACK = ("DejaVu Sans Mono", "Liberation Mono", "WenQuanYi Zen Hei Mono", "monospace")
THEME = gr.themes.Default(
    primary_hue="indigo", secondary_hue="slate", font=FONT_STACK, font_mono=MONO_STACK
)
CSS = (
    fonts.font_face_css()
    + """
.gradio-container { max-width: 1280px !important; margin: auto; }
.kda-intro { font-size: 0.97rem; }
.kda-metrics table { font-size: 0.9rem; }
.kda-metrics th { word-break: keep-all !important; overflow-wrap: normal !important;
  hyphens: none; }
/* tables: numbers never wrap mid-digit; a wide table scrolls inside its column instead of
   overflowing it; code moves whole words (a number) to the next line and breaks inside
   only a word longer than the cell (an escaped byte string, a hash); a key in the first
   column (a name) never breaks */
.prose table { display: block; max-width: 100%; overflow-x: auto; }
.prose td, .prose th { word-break: normal !important; overflow-wrap: normal !important; }
.prose th { word-break: keep-all !important; }  /* 中文 headers break between words only */
.prose td code { word-break: normal !important; overflow-wrap: anywhere !important;
  white-space: normal !important; }
.prose td:first-child code { word-break: normal !important; white-space: nowrap !important; }
.gradio-container strong, .gradio-container b, .prose strong { font-weight: 600 !important; }
/* an upload's (or a kda-flow-error box's) refusal sits below the widget, in the flow: Gradio
   draws a validation message over its input, which hid the file's name and its Clear button
   and cut a long message at the widget's edge */
:is(.kda-upload, .kda-flow-error):has(> .wrap > .validation-error) { display: flex !important;
  flex-direction: column; }
:is(.kda-upload, .kda-flow-error) > .wrap:has(> .validation-error) {
  position: static !important; padding: 0 !important; order: 9; margin-top: 6px; }
:is(.kda-upload, .kda-flow-error) > .wrap > .validation-error { position: static !important; }
/* an upload's label sits above its drop area, in the flow: Gradio floats it over the area's
   top, where a long (中文, two-line) label covered the upload icon */
.kda-upload > label[data-testid="block-label"] { position: static !important;
  border: 0 !important; }
"""
)
# Every upload (a trace, a config.json) is refused by the server above this size, before a
# callback sees it (``Blocks.launch`` / ``mount_gradio_app``'s ``max_file_size``, per file);
# the trace panel checks the same cap and names it in the page's language.
MAX_UPLOAD_MIB = 32
LAUNCH_KWARGS: dict[str, Any] = {
    "max_file_size": MAX_UPLOAD_MIB << 20,
    "theme": THEME,
    "css": CSS,
    "head": fonts.preload_head(),
    "footer_links": ["api"],
    "run_history": False,
}


# Sessions (what a closed or idle browser tab leaves on the server; measured and bounded in
# tests/e2e/test_e2e_sessions.py). Gradio keeps a closed tab's gr.State values an hour and
# the tab's copy of the page config (with every value an event returned to it) until 10,000
# sessions have come after it. Here: a closed tab's session goes when it closes (the page's
# unload event); an idle tab's gr.State values (or an API client's, which never closes) after
# SESSION_TTL_S without an update; and at most SESSION_CAPACITY sessions per app are kept
# (the least recently used goes first; its tab, if still open, starts over: its callbacks
# ask for a scenario or an upload again).
SESSION_TTL_S = 30 * 60
SESSION_CAPACITY = 64
SESSION_KWARGS: dict[str, Any] = {"state_session_capacity": SESSION_CAPACITY}


def _libc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim`` (None elsewhere): Gradio runs callbacks on a thread pool, and
    glibc gives threads their own heaps (arenas), which keep what a closed tab freed unless
    trimmed: 50 tabs of prefix_replay left +52 MB of RSS untrimmed, +19 MB trimmed (measured,
    tests/e2e/test_e2e_sessions.py)."""
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return lambda: trim(0)


_TRIM = _libc_trim()


def _trim() -> None:
    if _TRIM is not None:
        _TRIM()


def bound_sessions(demo: gr.Blocks) -> gr.Blocks:
    """``demo`` with its sessions bounded (see ``SESSION_TTL_S``): every ``gr.State`` without
    a time-to-live gets one, the capacity is set (``launch`` takes it as
    ``SESSION_KWARGS``; a mounted app reads it from the Blocks) and a closed tab's states are
    deleted at once. Idempotent."""
    if getattr(demo, "_kda_bounded", False):
        return demo
    demo.state_session_capacity = SESSION_CAPACITY
    for block in demo.blocks.values():
        if isinstance(block, gr.State) and block.time_to_live in (None, math.inf):
            block.time_to_live = SESSION_TTL_S

    def forget(request: gr.Request) -> None:
        """A closed tab: its gr.State values (``delete_state`` runs their delete callbacks)
        and Gradio's copy of the page for it (``StateHolder.session_data``, gradio 6.31's
        ``state_holder.py``, where a closed session waits an hour and its copy until 10,000
        newer ones), now."""
        holder, h = demo.state_holder, request.session_hash
        if h is None:
            return
        holder.delete_state(h)
        with holder.lock:
            holder.session_data.pop(h, None)
            holder.time_last_used.pop(h, None)
        _trim()

    demo.unload(forget)
    demo._kda_bounded = True  # type: ignore[attr-defined]
    return demo


def free_port(host: str = HOST) -> int:
    """A port the kernel just handed out on ``host`` (bind to 0). Gradio's own search walks up
    from 7860, so two test runs on one machine would race for the same ports; ephemeral ports
    from the kernel do not collide."""
    return next_free_port(host, 0)[0]


def launch_on_free_port(demo: gr.Blocks, attempts: int = 5) -> str:
    """``demo.launch`` in-process on 127.0.0.1 at a free port (retried if another process took
    it between the probe and the bind); returns the URL."""
    for attempt in range(attempts):
        try:
            _, url, _ = bound_sessions(demo).launch(
                prevent_thread_lock=True,
                server_name=HOST,
                server_port=free_port(),
                quiet=True,
                **LAUNCH_KWARGS,
                **SESSION_KWARGS,
            )
            return url
        except OSError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def launched(demo: gr.Blocks) -> Iterator[str]:
    """Serve ``demo`` in-process on 127.0.0.1 (a free port) for tests and benchmarks; yields
    its URL and closes the server afterwards."""
    url = launch_on_free_port(demo)
    try:
        yield url
    finally:
        demo.close()


def _decode_typed(x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) >= {"dtype", "bdata"}:
            arr = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
            if "shape" in x:
                shape = [int(n) for n in str(x["shape"]).split(",")]
                arr = arr.reshape(shape)
            return arr.tolist()
        return {k: _decode_typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode_typed(v) for v in x]
    return x


def plot_from_client(value: Any) -> dict[str, Any]:
    """A ``gr.Plot`` value as ``gradio_client`` returns it -> the plotly figure dict, with
    plotly's base64 typed arrays (``{"dtype", "bdata"}``) decoded to lists."""
    import json

    if isinstance(value, dict) and "plot" in value:
        value = value["plot"]
    fig = json.loads(value) if isinstance(value, str) else value
    return _decode_typed(fig)


PORT_TRIES = 20


def bind_port(host: str, port: int, tries: int = PORT_TRIES) -> tuple[socket.socket, str]:
    """A listening socket on ``host:port``, or on the next free port above it (``tries``
    ports at most); returns it and a line for the reader (empty when ``port`` itself was
    free). Raises ``OSError`` naming the range and the ``--port`` option when none is free."""
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in [0, 65535], got {port}")
    last: OSError | None = None
    for p in range(port, min(port + tries, 65536)) if port else [0]:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            sock.bind((host, p))
            sock.listen(128)
        except OSError as e:
            sock.close()
            last = e
            continue
        got = sock.getsockname()[1]
        if p == port or not port:
            return sock, ""
        note = f"port {port} is in use; serving on {got}, the next free port "
        return sock, note + "(choose one with --port P, or make demo PORT=P)"
    raise OSError(
        f"ports {port}-{port + tries - 1} on {host} are all in use ({last}); choose another "
        "with --port P (make demo PORT=P)"
    )


def next_free_port(host: str, port: int) -> tuple[int, str]:
    """Like ``bind_port`` but returns the port number (the socket is closed again; for
    ``Blocks.launch``, which binds by itself)."""
    sock, note = bind_port(host, port)
    got = int(sock.getsockname()[1])
    sock.close()
    return got, note


def _program(build: Callable[[], gr.Blocks]) -> str:
    """``python -m apps.<name>`` for the app that defines ``build`` (argparse would name the
    file it runs, ``__main__.py``): an app folder's package, or the module run as a script."""
    name = build.__module__
    if name == "__main__":  # an app module run directly: its import name is in its spec
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        name = spec.name if spec is not None else "apps"
    return f"python -m {name.removesuffix('.__main__')}"


def main(build: Callable[[], gr.Blocks], argv: Sequence[str] | None = None) -> None:
    """``python -m apps.<name> [--host H] [--port P]``: serve one app (blocking); a port in
    use moves to the next free one, said on stderr."""
    ap = argparse.ArgumentParser(prog=_program(build), description="Serve one KDA State Lab app")
    ap.add_argument("--host", default=HOST)
    ap.add_argument("--port", type=int, default=PORT)
    args = ap.parse_args(argv)
    port, note = next_free_port(args.host, args.port)
    if note:
        log.warning(note)
    bound_sessions(build()).launch(
        server_name=args.host, server_port=port, **LAUNCH_KWARGS, **SESSION_KWARGS
    )
