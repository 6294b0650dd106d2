"""Browser-test fixtures (playwright + Debian chromium) for every app and the hub.

A test module sets ``APP = "<name>"`` (a name from ``apps.ui.APPS``) and uses:

    app_url   (module scope) the app served in-process (``build().launch(prevent_thread_lock=True)``
              on 127.0.0.1), e.g. "http://127.0.0.1:7861/"; closed after the module
    hub_url   (module scope) the whole hub (``apps.__main__.build_hub``) on a free port
    browser   (module scope) one headless Debian chromium per module
    ui        (function scope) a ``Ui`` on a fresh page: console errors, page errors and
              HTTP responses >= 400 are collected (``ui.errors``); the test fails at teardown
              if any were logged (set ``ui.allowed_errors`` to substrings to tolerate)

``Ui`` helpers (all wait with timeouts, never on "networkidle", which never settles in Gradio):
    ui.goto(url)                       load and wait for the Gradio app to mount
    ui.wait_plot(elem_id)              wait until the plotly figure in ``#elem_id`` is drawn
    ui.figure(elem_id) -> str          the figure's data+layout as JSON (compare before/after)
    ui.wait_new_figure(elem_id, old)   wait until the figure differs from ``old``
    ui.click(name)                     click the button with that accessible name
    ui.fill(elem_id, value)            type into the input of a Number/Textbox by elem_id
    ui.expect_error(text)              wait for a Gradio error toast containing ``text``
    ui.close_toasts()                  dismiss toasts
    ui.screenshot(path)                full-page PNG

Chromium: ``$CHROMIUM`` or ``/usr/bin/chromium`` / ``chromium`` / ``chromium-browser`` on PATH.
When none is found the e2e tests are skipped with the reason, except when ``$CI`` is set: then
they fail. ``playwright install`` is never needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.figure_js import LABELS_JS, LAYOUT_JS, OVERLAP_JS

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 30_000

# Gradio answers a validator rejection with HTTP 422 on queue/join (the browser logs it): the
# expected response to a bad input, tolerated by tests that send one.
VALIDATION_ERRORS = ("HTTP 422", "status of 422 (Unprocessable Entity)")


def find_chromium() -> str | None:
    env = os.environ.get("CHROMIUM")
    if env and Path(env).is_file():
        return env
    for cand in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        p = cand if Path(cand).is_file() else shutil.which(cand)
        if p:
            return p
    try:  # the browser `python -m playwright install chromium` downloaded (make test's fallback)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            exe = pw.chromium.executable_path
        return exe if exe and Path(exe).is_file() else None
    except Exception:
        return None


def _require_chromium() -> str:
    path = find_chromium()
    if path is None:
        msg = "no chromium found (set $CHROMIUM or apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"e2e: {msg}; CI is set, so this is a failure")
        pytest.skip(f"e2e: {msg}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("e2e: playwright is not installed; CI is set, so this is a failure")
        pytest.skip("e2e: playwright (python) is not installed")
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


def minimal_fonts(folder: Path) -> dict[str, str]:
    """The environment of a browser that sees only the fonts of the barest machine the lab
    supports: DejaVu Sans (matplotlib's own copy, present wherever the lab is installed) and
    one CJK font (the ``fonts-wqy-zenhei`` package ``make test`` installs). Whatever else this
    machine holds (Liberation Sans, Noto) is hidden, so a layout test passing here passes on a
    fresh machine."""
    import matplotlib

    dejavu = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    cjk = [d for d in ("/usr/share/fonts/truetype/wqy",) if Path(d).is_dir()]
    dirs = "".join(f"<dir>{d}</dir>" for d in (dejavu, *cjk))
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">'
        f"<fontconfig>{dirs}<cachedir>{folder / 'cache'}</cachedir>"
        '<include ignore_missing="yes">/etc/fonts/conf.d</include></fontconfig>'
    )
    return {**os.environ, "FONTCONFIG_FILE": str(conf)}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    path = _require_chromium()
    from playwright.sync_api import sync_playwright

    env = minimal_fonts(tmp_path_factory.mktemp("fonts"))
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, env=env)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def app_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    _require_chromium()
    name = getattr(request.module, "APP", None)
    if not name:
        raise RuntimeError("set APP = '<app name>' in the e2e test module")
    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    from apps import ui as common

    mod = common.load_app(name)
    if mod is None:
        pytest.fail(f"app {name} could not be loaded")
    demo = mod.build()
    url = common.launch_on_free_port(demo)
    try:
        yield url
    finally:
        demo.close()


@pytest.fixture(scope="module")
def hub_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_chromium()
    os.environ.setdefault("GRADIO_TEMP_DIR", str(tmp_path_factory.mktemp("gradio")))
    from apps.__main__ import Server, build_hub

    hub = build_hub()
    with Server(hub.app) as s:
        yield s.url + "/"


class Ui:
    def __init__(self, page: object) -> None:
        self.page = page
        self.errors: list[str] = []
        self.allowed_errors: list[str] = []
        page.on("console", self._on_console)  # type: ignore[attr-defined]
        page.on("response", self._on_response)  # type: ignore[attr-defined]
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))  # type: ignore[attr-defined]
        page.set_default_timeout(TIMEOUT_MS)  # type: ignore[attr-defined]

    def _on_console(self, msg: object) -> None:
        if msg.type == "error":  # type: ignore[attr-defined]
            self.errors.append(msg.text)  # type: ignore[attr-defined]

    def _on_response(self, resp: object) -> None:
        if resp.status >= 400:  # type: ignore[attr-defined]
            self.errors.append(f"HTTP {resp.status} {resp.url}")  # type: ignore[attr-defined]

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(a in e for a in self.allowed_errors)]

    def goto(self, url: str) -> None:
        self.page.goto(url, wait_until="domcontentloaded")  # type: ignore[attr-defined]
        self.page.wait_for_selector(".gradio-container", state="attached")  # type: ignore[attr-defined]

    def wait_plot(self, elem_id: str) -> None:
        self.page.wait_for_selector(f"#{elem_id} .js-plotly-plot .main-svg")  # type: ignore[attr-defined]

    def figure(self, elem_id: str) -> str:
        return self.page.evaluate(  # type: ignore[attr-defined]
            """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
                 if (!g || !g.data) return '';
                 return JSON.stringify({d: g.data, t: g.layout && g.layout.title}); }""",
            elem_id,
        )

    def wait_new_figure(self, elem_id: str, old: str, timeout: float = TIMEOUT_MS / 1000) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            cur = self.figure(elem_id)
            if cur and cur != old:
                return cur
            self.page.wait_for_timeout(100)  # type: ignore[attr-defined]
        raise AssertionError(f"figure #{elem_id} did not change within {timeout:.0f} s")

    def click(self, name: str) -> None:
        self.page.get_by_role("button", name=name, exact=True).first.click()  # type: ignore[attr-defined]

    def fill(self, elem_id: str, value: object) -> None:
        box = self.page.locator(f"#{elem_id} input, #{elem_id} textarea").first  # type: ignore[attr-defined]
        box.fill(str(value))
        box.press("Tab")

    def expect_error(self, text: str) -> None:
        self.page.locator(".toast-body", has_text=text).first.wait_for(state="visible")  # type: ignore[attr-defined]

    def allow_validation_errors(self) -> None:
        """This test sends bad input on purpose: tolerate the validator's HTTP 422."""
        self.allowed_errors += list(VALIDATION_ERRORS)

    def expect_invalid(self, elem_id: str, text: str) -> None:
        """A rejected input: Gradio's validator draws the message on that input."""
        self.page.locator(f"#{elem_id} .validation-error", has_text=text).first.wait_for(  # type: ignore[attr-defined]
            state="visible"
        )

    def rejects(self, elem_id: str, value: object, button: str, message: str,
                figs: tuple[str, ...]) -> None:  # fmt: skip
        """A bad ``value`` in ``#elem_id`` then ``button``: the message shows once, on that
        input; the figures ``figs`` and every other output keep their previous values and
        no "Error" badge appears (Gradio's validator: the callback never ran)."""
        self.allow_validation_errors()
        before = self.settled(*figs)  # a loaded machine may still be drawing a language switch
        assert all(before.values()), "figures must be drawn before the bad input"
        self.fill(elem_id, value)
        self.click(button)
        self.expect_invalid(elem_id, message)
        self.page.wait_for_timeout(400)  # type: ignore[attr-defined]
        assert self.error_badges() == 0
        assert self.figures(*figs) == before

    def error_badges(self) -> int:
        """How many red "Error" status badges / toasts are on the page (0 after a validated
        rejection: the outputs keep their values)."""
        return self.page.get_by_text("Error", exact=True).count()  # type: ignore[attr-defined]

    def figures(self, *elem_ids: str) -> dict[str, str]:
        return {e: self.figure(e) for e in elem_ids}

    def settled(self, *elem_ids: str, quiet_ms: int = 1500) -> dict[str, str]:
        """The figures once none has changed for ``quiet_ms`` (the page's later load events and
        a language switch's redraws are done), within the test timeout."""
        t0, last, since = time.monotonic(), self.figures(*elem_ids), time.monotonic()
        while time.monotonic() - t0 < TIMEOUT_MS / 1000:
            self.page.wait_for_timeout(250)  # type: ignore[attr-defined]
            cur = self.figures(*elem_ids)
            if cur != last:
                last, since = cur, time.monotonic()
            elif (time.monotonic() - since) * 1000 >= quiet_ms:
                return cur
        raise AssertionError(f"figures {elem_ids} kept changing for {TIMEOUT_MS / 1000:.0f} s")

    def title(self, elem_id: str) -> str:
        """The drawn figure's title text (from the page's plotly layout)."""
        return self.page.evaluate(  # type: ignore[attr-defined]
            """id => { const g = document.querySelector('#' + id + ' .js-plotly-plot');
                 const t = g && g.layout && g.layout.title;
                 return t ? (typeof t === 'string' ? t : t.text || '') : ''; }""",
            elem_id,
        )

    def wait_title(self, elem_id: str, text: str, timeout: float = TIMEOUT_MS / 1000) -> str:
        t0 = time.monotonic()
        cur = ""
        while time.monotonic() - t0 < timeout:
            cur = self.title(elem_id)
            if text in cur:
                return cur
            self.page.wait_for_timeout(100)  # type: ignore[attr-defined]
        raise AssertionError(f"#{elem_id} title {cur!r} never contained {text!r}")

    def overlaps(self, elem_id: str) -> list[str]:
        """Text boxes of the drawn figure (annotations, legend) that overlap a data trace:
        each annotation / legend box from the page is tested against every drawn point and
        line vertex of the traces (their screen positions from plotly's own axes)."""
        return self.page.evaluate(OVERLAP_JS, elem_id)  # type: ignore[attr-defined]

    def label_overlaps(self, elem_id: str) -> list[str]:
        """Text labels on the data (``mode="text"``) that cross each other or a marker
        (``LABELS_JS``)."""
        return self.page.evaluate(LABELS_JS, elem_id)  # type: ignore[attr-defined]

    def upload_label_clear(self, elem_id: str) -> None:
        """The upload ``#elem_id``'s label ends above its upload icon (it covered it)."""
        box = self.page.locator(f"#{elem_id}")  # type: ignore[attr-defined]
        label = box.locator('label[data-testid="block-label"]').bounding_box()
        icon = box.locator('[data-testid="upload-icon"]').bounding_box()
        assert label["y"] + label["height"] <= icon["y"] + 1, (elem_id, label, icon)

    def layout_problems(self, elem_id: str) -> list[str]:
        """Text of the drawn figure outside its canvas, or a colour bar / annotation / legend
        over an axis title (``LAYOUT_JS``)."""
        return self.page.evaluate(LAYOUT_JS, elem_id)  # type: ignore[attr-defined]

    def close_toasts(self) -> None:
        for btn in self.page.locator(".toast-close").all():  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):  # a toast may vanish on its own
                btn.click(timeout=1000)

    def screenshot(self, path: str | Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]


@pytest.fixture
def ui(browser: object) -> Iterator[Ui]:
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = ctx.new_page()
    u = Ui(page)
    try:
        yield u
    finally:
        ctx.close()
    bad = u.unexpected_errors()
    assert not bad, "browser console errors:\n" + json.dumps(bad, indent=1, ensure_ascii=False)
