"""Stores: the embedded store (in-process and a shared directory) and Mooncake Store over TCP on
127.0.0.1 (a master and a standalone storage node started by the fixture, stopped by it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kda_core.transfer._identity import prefix_hash
from kda_core.transfer.mooncake import MooncakeServices, _LoopbackNetns, mooncake_available
from kda_core.transfer.store import EmbeddedStore

ROOT = Path(__file__).resolve().parents[1]
MOONCAKE_OK, MOONCAKE_WHY = mooncake_available()


def mooncake_or_skip() -> None:
    """CI installs Mooncake (.ci/run): there a missing library is a failure, never a skip."""
    if not MOONCAKE_OK:
        if os.environ.get("CI"):
            pytest.fail(f"Mooncake must run in CI: {MOONCAKE_WHY}")
        pytest.skip(MOONCAKE_WHY)


@pytest.fixture(scope="module")
def mooncake():
    mooncake_or_skip()
    svc = MooncakeServices(segment_bytes=128 << 20).start()
    try:
        yield svc
    finally:
        svc.stop()
    assert svc.master is None and svc.node is None and svc.netns is None


def run_client(svc: MooncakeServices, code: str) -> dict:
    """Run a client snippet where the services are reachable; it prints one JSON line."""
    argv = svc.client_argv([sys.executable, "-c", code])
    r = subprocess.run(argv, cwd=ROOT, env=svc.client_env(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("on_disk", [False, True])
def test_embedded_store_put_get(tmp_path, on_disk):
    s = EmbeddedStore(tmp_path / "objs" if on_disk else None)
    k1, k2 = prefix_hash([1, 2, 3]), prefix_hash([1, 2])
    assert s.get(k1) is None and s.contains_many([k1, k2]) == [False, False]
    s.put(k1, b"abc")
    s.put(k1, b"abcd")  # a later put replaces
    assert s.get(k1) == b"abcd" and s.contains_many([k1, k2]) == [True, False]
    assert s.keys() == [k1]
    assert (s.stats.puts, s.stats.gets, s.stats.misses, s.stats.bytes_put) == (2, 1, 1, 7)
    if on_disk:  # no temporary file is left behind; another store object sees the data
        assert sorted(p.name for p in (tmp_path / "objs").iterdir()) == [f"{k1}.safetensors"]
        assert EmbeddedStore(tmp_path / "objs").get(k1) == b"abcd"
    for bad in ("../etc/passwd", "ABC", "", 12):
        with pytest.raises(ValueError, match="key"):
            s.put(bad, b"x")
    with pytest.raises(ValueError, match="data"):
        s.put(k2, b"")


PUT_GET = """
import json
from kda_core.transfer._identity import prefix_hash
from kda_core.transfer.mooncake import MooncakeStore
st = MooncakeStore(ADDR)
keys = [prefix_hash(range(n)) for n in (10, 11, 12)]
blobs = [bytes([n]) * (100_000 + n) for n in range(3)]
for k, b in zip(keys, blobs):
    st.put(k, b)
out = {
    "exists": st.contains_many(keys + [prefix_hash([7])]),
    "same": [st.get(k) == b for k, b in zip(keys, blobs)],
    "missing": st.get(prefix_hash([7])) is None,
    "bytes_got": st.stats.bytes_got,
}
st.close()
print(json.dumps(out))
"""


def test_mooncake_put_get_by_prefix_hash(mooncake):
    out = run_client(mooncake, PUT_GET.replace("ADDR", repr(mooncake.master_address)))
    assert out["exists"] == [True, True, True, False]
    assert out["same"] == [True, True, True] and out["missing"]
    assert out["bytes_got"] == 3 * 100_000 + 0 + 1 + 2


def test_mooncake_object_outlives_the_process_that_put_it(mooncake):
    """The storage node holds the pool: one client process puts and exits; another gets."""
    key = prefix_hash([42] * 5)
    head = "import json; from kda_core.transfer.mooncake import MooncakeStore as M\n"
    head += f"s = M({mooncake.master_address!r})\n"
    put = run_client(mooncake, head + f"s.put({key!r}, b'x' * 4096); s.close(); print('{{}}')")
    assert put == {}
    got = run_client(
        mooncake, head + f"d = s.get({key!r}); s.close(); print(json.dumps(d == b'x' * 4096))"
    )
    assert got is True


def test_mooncake_services_are_isolated_on_loopback(mooncake):
    """This build binds its handshake / TCP listeners to all interfaces, so the services run
    in a network namespace that holds nothing but loopback."""
    if not mooncake.isolated:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root: the Mooncake services must be isolated")
        pytest.skip(f"no network namespace here: {_LoopbackNetns.available()[1]}")
    ours = os.readlink("/proc/self/ns/net")
    for p in (mooncake.master, mooncake.node):
        assert os.readlink(f"/proc/{p.pid}/ns/net") != ours
        lines = Path(f"/proc/{p.pid}/net/dev").read_text().splitlines()[2:]
        assert sorted(ln.split(":")[0].strip() for ln in lines) == ["lo"]


def test_mooncake_services_refuse_bad_sizes():
    with pytest.raises(ValueError, match="segment_bytes"):
        MooncakeServices(segment_bytes=1)
    with pytest.raises(ValueError, match="isolate"):
        MooncakeServices(isolate="yes")
