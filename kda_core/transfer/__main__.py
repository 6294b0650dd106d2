"""``python -m kda_core.transfer selftest --store embedded|mooncake`` (and helpers).

selftest          prefill and decode in two processes on a built-in multi-turn workload;
                  the last line is the contract line ``pd selftest: ...``
mooncake-services start a Mooncake master + storage node on 127.0.0.1 and wait (Ctrl-C)
worker            internal: one instance serving JSON lines (used by selftest)
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kda_core.transfer")
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("selftest", help="two-process prefill -> decode check")
    st.add_argument("--store", choices=("embedded", "mooncake"), default="embedded")
    sv = sub.add_parser("mooncake-services", help="run a Mooncake master + storage node")
    sv.add_argument("--segment-mb", type=int, default=512)
    sv.add_argument("--no-isolate", action="store_true", help="no private network namespace")
    pr = sub.add_parser("mooncake-probe", help=argparse.SUPPRESS)
    pr.add_argument("master")
    wk = sub.add_parser("worker", help=argparse.SUPPRESS)
    wk.add_argument("--role", required=True)
    wk.add_argument("--store", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        from kda_core.transfer.pd import worker_main

        return worker_main(a.role, a.store)
    if a.cmd == "mooncake-probe":
        from kda_core.transfer.mooncake import probe

        return probe(a.master)
    if a.cmd == "mooncake-services":
        from kda_core.transfer.mooncake import MooncakeServices

        iso = False if a.no_isolate else "auto"
        with MooncakeServices(segment_bytes=a.segment_mb << 20, isolate=iso) as svc:
            where = f"clients: {' '.join(svc.client_argv(['CMD']))}" if svc.isolated else ""
            print(f"mooncake master at {svc.master_address} (P2PHANDSHAKE metadata) {where}")
            print("Ctrl-C stops")
            sys.stdout.flush()
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
        return 0
    from kda_core.transfer.pd import run_selftest

    try:
        res = run_selftest(a.store)
    except RuntimeError as e:  # Mooncake missing / not starting: say so in one line
        print(f"pd selftest: could not run with --store {a.store}: {e}")
        return 2
    ok = res.identical == res.requests and res.refused == res.mismatches
    print(res.line())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
