"""``python -m kda_core.fleet listen tcp://HOST:PORT``: subscribe to a vLLM or SGLang server's
KV event stream (``--kv-events-config`` with the ZMQ publisher) and print, live, the KV blocks
and state checkpoints it holds and the prefixes a KV-only router would over-count
(``kda_core.fleet._listen``). ``--seconds`` / ``--batches`` stop it; Ctrl-C too."""

from __future__ import annotations

import argparse
import sys


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kda_core.fleet")
    sub = ap.add_subparsers(dest="cmd", required=True)
    li = sub.add_parser("listen", help="read a server's KV event stream")
    li.add_argument("endpoint", help="the publisher's address, e.g. tcp://127.0.0.1:5557")
    li.add_argument("--topic", default="", help="ZMQ topic to subscribe to (default: all)")
    li.add_argument("--max-frame-bytes", type=int, default=64 << 20)
    li.add_argument("--max-blocks", type=int, default=1_000_000, help="index bound")
    li.add_argument("--seconds", type=float, default=None)
    li.add_argument("--batches", type=int, default=None)
    li.add_argument("--every", type=float, default=2.0, help="seconds between status lines")
    li.add_argument(
        "--bind", action="store_true", help="bind the endpoint (the server's publisher connects)"
    )
    a = ap.parse_args(argv)
    if not a.endpoint.startswith(("tcp://", "ipc://")):
        ap.error(f"endpoint must be tcp://HOST:PORT or ipc://PATH, got {a.endpoint!r}")
    for name in ("max_frame_bytes", "max_blocks"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    from kda_core.fleet._listen import listen

    try:
        listen(
            a.endpoint,
            topic=a.topic,
            max_frame_bytes=a.max_frame_bytes,
            max_blocks=a.max_blocks,
            seconds=a.seconds,
            batches=a.batches,
            every_s=a.every,
            bind=a.bind,
            out=lambda line: print(line, flush=True),
        )
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(_main())
