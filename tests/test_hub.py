"""The hub (python -m apps): landing page, one mounted app per registry entry, missing apps
skipped, thumbnails, suite-unique api names, and a gradio_client call through a mounted path."""

from __future__ import annotations

import dataclasses
import urllib.request

import pytest

from apps import __main__ as hub
from apps import ui as common

MINE = ("memory_planner", "chunk_scan")


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback only
        return r.status, r.headers.get("content-type", ""), r.read()


def test_landing_html_has_one_card_per_app():
    page = hub.landing_html(["memory_planner"])
    for a in common.APPS:
        assert f'id="card-{a.name}"' in page
        assert a.title in page and a.blurb in page and a.title_zh in page
        assert f'src="./thumbnails/{a.name}.png"' in page
    assert 'href="./memory_planner/"' in page
    assert page.count("(not available yet)") == len(common.APPS) - 1


def test_missing_app_is_skipped(monkeypatch, caplog):
    ghost = common.AppInfo("not_written_yet", "Ghost", "幽灵", "x", "x")
    monkeypatch.setattr("apps.ui.registry.APPS", (*common.APPS, ghost))
    with caplog.at_level("WARNING", logger="apps"):
        h = hub.build_hub(["memory_planner", "not_written_yet"])
    assert h.mounted == ("memory_planner",) and h.skipped == ("not_written_yet",)
    assert "not_written_yet skipped" in caplog.text


def test_broken_build_is_skipped(monkeypatch):
    import apps.chunk_scan as cs

    def boom():
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(cs, "build", boom)
    h = hub.build_hub(["chunk_scan", "memory_planner"])
    assert h.mounted == ("memory_planner",) and h.skipped == ("chunk_scan",)


def test_api_names_unique_across_the_hub():
    names: list[str] = []
    for a in common.APPS:
        mod = common.load_app(a.name)
        if mod is None:
            continue
        cfg = mod.build().get_config_file()
        public = [d["api_name"] for d in cfg["dependencies"] if d["api_visibility"] == "public"]
        assert public, f"{a.name} has no public api_name"
        for n in public:
            assert n.startswith(a.name + "_"), f"{a.name}: {n} is not prefixed with the app name"
            assert n == n.lower() and " " not in n
        names += public
    assert len(names) == len(set(names))


def test_served_hub_pages_and_client(tmp_path):
    from gradio_client import Client

    h = hub.build_hub(list(MINE))
    with hub.Server(h.app) as s:
        status, ctype, body = _get(s.url + "/")
        assert status == 200 and "text/html" in ctype
        assert body.decode().count('class="card"') == len(MINE)
        for name in MINE:
            status, ctype, body = _get(f"{s.url}/{name}/")
            assert status == 200 and b"gradio" in body.lower()
        status, ctype, body = _get(s.url + "/thumbnails/chunk_scan.png")
        info = common.app_info("chunk_scan")
        if info.thumbnail is not None:
            assert ctype == "image/png" and body == info.thumbnail.read_bytes()
        else:
            assert ctype.startswith("image/svg+xml") and b"Chunk scan" in body
        with pytest.raises(urllib.error.HTTPError):
            _get(s.url + "/thumbnails/etc.png")
        status, _, body = _get(s.url + "/healthz")
        assert b'"apps":["memory_planner","chunk_scan"]' in body
        c = Client(f"{s.url}/memory_planner/", verbose=False, download_files=str(tmp_path))
        out = c.predict(api_name="/memory_planner_plan")
        assert "| **max running requests** | **30** |" in out[0]


def test_cli_rejects_unknown_app():
    with pytest.raises(SystemExit):
        hub.main(["no_such_app"])


def test_registry_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        common.APPS[0].title = "x"  # type: ignore[misc]


def test_a_taken_port_moves_to_the_next_free_one_and_says_so():
    """The port is bound before it is announced; a taken one is reported
    with the way to choose another, and the next free port is used."""
    import socket

    taken = socket.socket()
    taken.bind((common.HOST, 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        sock, note = common.bind_port(common.HOST, port)
        try:
            got = sock.getsockname()[1]
            assert got != port and port < got < port + common.PORT_TRIES
            assert f"port {port} is in use; serving on {got}" in note
            assert "--port P" in note and "make demo PORT=P" in note
        finally:
            sock.close()
        free, note2 = common.bind_port(common.HOST, 0)  # 0: any free port, nothing to say
        free.close()
        assert note2 == ""
    finally:
        taken.close()


def test_no_free_port_in_range_is_an_error_naming_the_option():
    import socket

    held = []
    try:
        first = socket.socket()
        first.bind((common.HOST, 0))
        first.listen()
        held.append(first)
        base = first.getsockname()[1]
        with pytest.raises(OSError, match=r"all in use.*--port P"):
            common.bind_port(common.HOST, base, tries=1)
    finally:
        for s in held:
            s.close()


def test_validators_see_the_session_through_the_hub():
    """Mounted apps: a validator must read the caller's session (reading an empty one through
    the hub would reject every call that needs a served session), and still reject a bad
    value."""
    from gradio_client import Client

    from apps.__main__ import Server

    h = hub.build_hub(["prefix_replay"])
    with Server(h.app) as s:
        c = Client(s.url + "/prefix_replay/", verbose=False)
        c.predict(api_name="/prefix_replay_load")
        c.predict(api_name="/prefix_replay_inspect")
        c.predict(0, api_name="/prefix_replay_step")
        with pytest.raises(Exception, match="400|step"):  # outside the slider: a 400
            c.predict(999, api_name="/prefix_replay_step")
