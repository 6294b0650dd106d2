"""``python -m kda_core.fleet listen``: a ZMQ publisher on loopback (a free port, closed by the
test) sends a replica's event batches, frames that are not KV event batches and one over the
size cap, framed as vLLM's ``ZmqEventPublisher`` frames them ``(topic, seq, payload)``. The
listener counts and skips the bad frames and reports what the replica holds: for the prompt
[1, 2, 3, 4] + 100 tokens under vLLM's rules (states at 1536 and 3072, KV blocks 1-4), a
KV-only router over-counts the prefixes ending at blocks 1 and 3 by one block each."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import msgspec
import pytest
import zmq

from kda_core.fleet._listen import listen
from tests.test_fleet_records import replica_payloads

REPO_ROOT = __file__.rsplit("/tests/", 1)[0]


def publisher(frames: list[bytes], ready: threading.Event, port: list[int]) -> None:
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.XPUB)  # a PUB that sees subscriptions: send once one has arrived
    pub.setsockopt(zmq.LINGER, 0)
    port.append(pub.bind_to_random_port("tcp://127.0.0.1"))
    ready.set()
    try:
        if not pub.poll(30_000):
            return
        pub.recv()  # the subscription (a PUB drops everything sent before it)
        for seq, payload in enumerate(frames):
            pub.send_multipart((b"", seq.to_bytes(8, "big"), payload))
        time.sleep(0.5)
    finally:
        pub.close(0)


def frames() -> list[bytes]:
    payloads, _ = replica_payloads([[1, 2, 3, 4]])
    junk = [b"\xc1\xc1", msgspec.msgpack.encode({"hello": 1}), b"x" * 5000]
    return junk + payloads


def cli(args: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kda_core.fleet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)


def run_publisher(payloads):
    ready, port = threading.Event(), []
    t = threading.Thread(target=publisher, args=(payloads, ready, port), daemon=True)
    t.start()
    assert ready.wait(10)
    return t, port[0]


def test_listen_counts_and_skips_bad_frames():
    t, port = run_publisher(frames())
    lines: list[str] = []
    st = listen(
        f"tcp://127.0.0.1:{port}", max_frame_bytes=4096, seconds=15, batches=1, out=lines.append
    )
    t.join(10)
    assert st.batches == 1 and st.not_kv_events == 2 and st.oversize == 1 and st.frames == 4
    assert st.over == {"states": 2, "prefixes": 2, "blocks": 2}
    assert "over-counts 2 prefixes by 2 blocks" in lines[-1]


def test_cli_listen_end_to_end():
    t, port = run_publisher(frames())
    args = ["listen", f"tcp://127.0.0.1:{port}", "--batches", "1", "--seconds", "15"]
    p = cli([*args, "--max-frame-bytes", "4096"])
    t.join(10)
    assert p.returncode == 0, p.stderr
    assert "KV blocks 4, state checkpoints 2" in p.stdout


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:1", "127.0.0.1:5557"])
def test_cli_refuses_a_bad_endpoint(endpoint):
    p = cli(["listen", endpoint])
    assert p.returncode == 2 and "endpoint must be" in p.stderr
