"""Mooncake Store over TCP on 127.0.0.1: services (master + standalone storage node) and a client.

Measured on this machine kind (PyPI ``mooncake-transfer-engine-non-cuda`` 0.3.13.post1):

* the wheel's ``engine.so`` links Debian's ``libibverbs1`` even for TCP (``apt-get install
  libibverbs1``; ``.ci/run`` and the Makefile's ``test`` target install it);
* ``MC_TCP_BIND_ADDRESS=127.0.0.1`` is set for every process, but it is not enough: ``ss -ltnp``
  shows the P2P-handshake listener on 0.0.0.0 and the TCP transport on ``*`` in the storage
  node and in every client (its log still says "listening on 127.0.0.1"). So the services and
  their clients run in a private network namespace that holds only loopback
  (``_LoopbackNetns``: ``unshare -n`` + ``nsenter``, root only; CI is root). Without root they
  run unisolated and ``MooncakeServices.isolated`` is False (the tests then fail in CI and skip
  the isolation check elsewhere);
* the master gets ``--rpc_address=127.0.0.1`` and ``--metrics_host=127.0.0.1`` (both default
  to 0.0.0.0) and ``--enable_http_metadata_server=false``: clients use ``P2PHANDSHAKE``
  metadata, so no HTTP metadata server (which would listen on all interfaces) is needed;
* an object lives in the memory segment of the process that put it - it disappears when that
  process exits - unless a storage node holds the pool: ``MooncakeServices`` starts the
  wheel's standalone ``mooncake_client`` with a global segment, and every client here mounts
  none (``global_segment_size=0``), so objects outlive the prefill process.

``MooncakeServices`` picks free loopback ports, starts both processes (in the namespace when
it can), waits until a client can put, and stops them (terminate, then kill) on ``stop`` /
context exit. Clients run as subprocesses started through ``client_argv``.
``MooncakeStore`` has the methods of ``store.EmbeddedStore`` (put, get, contains_many).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kda_core.transfer._store_rules import MAX_OBJECT_BYTES, StoreStats, check_key

__all__ = [
    "MooncakeServices",
    "MooncakeStore",
    "mooncake_available",
]

_HOST = "127.0.0.1"


def _mooncake_bin() -> Path | None:
    """The wheel's directory holding ``mooncake_master`` / ``mooncake_client`` (None: absent)."""
    try:
        import mooncake
    except ImportError:
        return None
    d = Path(mooncake.__file__).parent
    return d if (d / "mooncake_master").exists() and (d / "mooncake_client").exists() else None


def mooncake_available() -> tuple[bool, str]:
    """(True, "") when the client library loads; otherwise (False, the reason)."""
    os.environ.setdefault("MC_TCP_BIND_ADDRESS", _HOST)
    if _mooncake_bin() is None:
        return False, "mooncake-transfer-engine-non-cuda is not installed"
    try:
        from mooncake.store import MooncakeDistributedStore  # noqa: F401
    except (ImportError, OSError) as e:  # libibverbs1 missing shows up here
        return False, f"mooncake.store does not load ({e}); apt-get install libibverbs1"
    return True, ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((_HOST, 0))
        return s.getsockname()[1]


_HOLDER = (
    "import fcntl, socket, struct, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "f = struct.unpack('16sH', fcntl.ioctl(s, 0x8913, struct.pack('16sH', b'lo', 0))[:18])[1]\n"
    "fcntl.ioctl(s, 0x8914, struct.pack('16sH', b'lo', f | 1))\n"  # SIOCSIFFLAGS |= IFF_UP
    "print('up', flush=True)\n"
    "sys.stdin.read()\n"
)


class _LoopbackNetns:
    """A private network namespace holding only ``lo``: whatever listens inside is reachable
    from inside only. Needs root and util-linux ``unshare`` / ``nsenter``."""

    def __init__(self) -> None:
        self.holder: subprocess.Popen | None = None

    @staticmethod
    def available() -> tuple[bool, str]:
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return False, "a network namespace needs root"
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            return False, "util-linux unshare/nsenter not found"
        r = subprocess.run(["unshare", "-n", "true"], capture_output=True)
        return (r.returncode == 0, "" if r.returncode == 0 else r.stderr.decode().strip())

    def start(self) -> _LoopbackNetns:
        self.holder = subprocess.Popen(
            ["unshare", "-n", "--", sys.executable, "-c", _HOLDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "up":
            self.stop()
            raise RuntimeError("could not bring up loopback in a new network namespace")
        return self

    @property
    def path(self) -> str:
        assert self.holder is not None
        return f"/proc/{self.holder.pid}/ns/net"

    def wrap(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def stop(self) -> None:
        if self.holder is None:
            return
        if self.holder.stdin is not None:
            self.holder.stdin.close()
        try:
            self.holder.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait(timeout=10)
        self.holder = None


class MooncakeServices:
    """A Mooncake master and one standalone storage node (``segment_bytes``) on 127.0.0.1.

    ``isolate`` ("auto": when possible) runs them - and every client started through
    ``client_argv`` - in a private loopback-only network namespace: this build's handshake and
    TCP-transport listeners bind all interfaces whatever ``MC_TCP_BIND_ADDRESS`` says
    (measured with ``ss -ltnp``), so the namespace is what keeps them off the network.
    """

    def __init__(
        self,
        segment_bytes: int = 512 << 20,
        log_dir: str | None = None,
        isolate: bool | str = "auto",
    ) -> None:
        if not 16 << 20 <= segment_bytes <= 16 << 30:
            raise ValueError(f"segment_bytes must be in [16 MiB, 16 GiB], got {segment_bytes}")
        if isolate not in (True, False, "auto"):
            raise ValueError(f"isolate must be True, False or 'auto', got {isolate!r}")
        self.segment_bytes = segment_bytes
        self.isolate = isolate
        self._own_logs = log_dir is None
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="mooncake-logs-"))
        self.netns: _LoopbackNetns | None = None
        self.master: subprocess.Popen | None = None
        self.node: subprocess.Popen | None = None
        self.rpc_port = 0

    @property
    def master_address(self) -> str:
        return f"{_HOST}:{self.rpc_port}"

    @property
    def isolated(self) -> bool:
        return self.netns is not None

    def client_argv(self, argv: list[str]) -> list[str]:
        """A command that runs where the services are reachable (inside the namespace)."""
        return self.netns.wrap(argv) if self.netns is not None else list(argv)

    def client_env(self) -> dict[str, str]:
        root = str(Path(__file__).resolve().parents[2])
        return dict(os.environ, MC_TCP_BIND_ADDRESS=_HOST, PYTHONPATH=root)

    def _spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        with open(self.log_dir / log, "wb") as f:
            return subprocess.Popen(
                self.client_argv(argv), stdout=f, stderr=subprocess.STDOUT, env=self.client_env()
            )

    def start(self, timeout: float = 60.0) -> MooncakeServices:
        ok, why = mooncake_available()
        if not ok:
            raise RuntimeError(why)
        d = _mooncake_bin()
        assert d is not None
        can, why = _LoopbackNetns.available()
        if self.isolate is True and not can:
            raise RuntimeError(f"isolate=True: {why}")
        try:
            if self.isolate is True or (self.isolate == "auto" and can):
                self.netns = _LoopbackNetns().start()
            # ports are free in the namespace too (it holds nothing else)
            self.rpc_port, metrics, node_port = _free_port(), _free_port(), _free_port()
            self.master = self._spawn(
                [
                    str(d / "mooncake_master"),
                    f"--rpc_address={_HOST}",
                    f"--rpc_port={self.rpc_port}",
                    f"--metrics_host={_HOST}",
                    f"--metrics_port={metrics}",
                    "--enable_http_metadata_server=false",
                ],
                "master.log",
            )
            self.node = self._spawn(
                [
                    str(d / "mooncake_client"),
                    f"--host={_HOST}",
                    f"--port={node_port}",
                    f"--master_server_address={self.master_address}",
                    "--metadata_server=P2PHANDSHAKE",
                    f"--global_segment_size={self.segment_bytes}",
                    "--protocol=tcp",
                ],
                "storage_node.log",
            )
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        """Ready once a segment-less client (a subprocess, where clients run) can put."""
        argv = [sys.executable, "-m", "kda_core.transfer", "mooncake-probe", self.master_address]
        r = subprocess.run(
            self.client_argv(argv), env=self.client_env(), capture_output=True, timeout=timeout + 30
        )
        for p, what in ((self.master, "mooncake_master"), (self.node, "storage node")):
            if p is not None and p.poll() is not None:
                raise RuntimeError(f"{what} exited with code {p.returncode}")
        if r.returncode != 0:
            raise RuntimeError(f"Mooncake never became usable: {r.stderr.decode()[-500:]}")

    def stop(self) -> None:
        for p in (self.node, self.master):
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        self.node = self.master = None
        if self.netns is not None:
            self.netns.stop()
            self.netns = None
        if self._own_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> MooncakeServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def probe(master_address: str, timeout: float = 60.0) -> int:
    """Retry a put until the storage node's segment takes it (``mooncake-probe``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            st = MooncakeStore(master_address, local_buffer_bytes=16 << 20)
        except RuntimeError:
            time.sleep(0.2)
            continue
        try:
            st.put("00000000feedbeef", b"probe")
            return 0
        except RuntimeError:
            time.sleep(0.2)
        finally:
            st.close()
    return 1


class MooncakeStore:
    """Objects put/got by prefix hash through Mooncake Store (this process mounts no memory)."""

    name = "mooncake"

    def __init__(self, master_address: str, local_buffer_bytes: int = 128 << 20) -> None:
        ok, why = mooncake_available()
        if not ok:
            raise RuntimeError(why)
        from mooncake.store import MooncakeDistributedStore

        self._s = MooncakeDistributedStore()
        rc = self._s.setup(_HOST, "P2PHANDSHAKE", 0, local_buffer_bytes, "tcp", "", master_address)
        if rc != 0:
            raise RuntimeError(f"mooncake setup against {master_address} failed (code {rc})")
        self.master_address = master_address
        self.stats = StoreStats()

    def put(self, key: str, data: bytes) -> None:
        check_key(key)
        if not isinstance(data, (bytes, bytearray)) or not 0 < len(data) <= MAX_OBJECT_BYTES:
            raise ValueError(f"data must be 1..{MAX_OBJECT_BYTES} bytes")
        rc = self._s.put(key, bytes(data))
        if rc != 0:
            raise RuntimeError(f"mooncake put {key[:12]} failed (code {rc})")
        self.stats.puts += 1
        self.stats.bytes_put += len(data)

    def get(self, key: str) -> bytes | None:
        check_key(key)
        data = self._s.get(key) if self._s.is_exist(key) == 1 else b""
        if not data:
            self.stats.misses += 1
            return None
        self.stats.gets += 1
        self.stats.bytes_got += len(data)
        return bytes(data)

    def contains_many(self, keys: list[str]) -> list[bool]:
        if not keys:
            return []
        return [r == 1 for r in self._s.batch_is_exist([check_key(k) for k in keys])]

    def close(self) -> None:
        if self._s is not None:
            self._s.close()
            self._s = None
