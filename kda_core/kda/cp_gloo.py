"""Real ranks for `kda_core.kda.cp`: P worker processes in one torch.distributed gloo group on CPU.

    with GlooGroup(2) as group:
        o, S = cp.context_parallel(q, k, v, g, beta, ranks=2, scan="logdepth", group=group)

The group is started once (spawning and initialising 2-4 processes takes 7-20 s on a 2-core
machine) and then runs any number of tasks. Workers are ``python -m kda_core.kda.cp_gloo``
subprocesses (cwd and PYTHONPATH = the project root) on 127.0.0.1 only: GLOO_SOCKET_IFNAME=lo,
MASTER_ADDR=127.0.0.1, and a TCPStore that this process opens on a free port the OS picks at run
time (no fixed ports). Tasks and results travel as pickles over each worker's stdin / stdout
pipes (the worker's own prints go to a per-rank log file); between the workers, only gloo.

Inside a task every rank runs `_cp_rank.local_pass`, the scan with real collectives
(``all_gather`` then a local fold, or the log-depth schedule with ``isend`` / ``recv``), and
`_cp_rank.finish`, timing each phase and counting the bytes it hands to gloo. Each rank runs
`kda.chunked` on one thread (KDA_THREADS=1, OPENBLAS_NUM_THREADS=1): one rank stands for one
device.

Needs torch (imported lazily: ``kda_core.cp`` works without it).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from kda_core._checks import check_int
from kda_core.kda._cp_conv import conv_pieces
from kda_core.kda._cp_plan import MAX_RANKS, Plan
from kda_core.kda._cp_rank import LocalPass, finish, local_pass
from kda_core.kda._cp_scan import Element, combine, logdepth_schedule, sequential_states

_ROOT = Path(__file__).resolve().parents[2]  # the project root (kda_core/kda/cp_gloo.py)
_START_TIMEOUT = 180.0  # seconds for all workers to join the group (a loaded 2-core machine)
_TASK_TIMEOUT = 600.0
_COLLECTIVE_TIMEOUT = 300.0


class GlooGroup:
    """P worker processes in one gloo process group; this process is not a member."""

    def __init__(self, ranks: int, *, timeout: float = _START_TIMEOUT) -> None:
        import torch.distributed as dist  # ImportError: the caller skips real ranks

        self.ranks = check_int("ranks", ranks, 1, MAX_RANKS)
        self._store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
        self._logs = Path(tempfile.mkdtemp(prefix="kda-cp-"))
        self._procs: list[subprocess.Popen] = []
        self._send: list[Connection] = []
        self._recv: list[Connection] = []
        path = os.pathsep.join([str(_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        try:
            for r in range(self.ranks):
                env = dict(
                    os.environ,
                    PYTHONPATH=path,
                    GLOO_SOCKET_IFNAME="lo",
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(self._store.port),
                    KDA_CP_RANK=str(r),
                    KDA_CP_WORLD=str(self.ranks),
                    KDA_THREADS="1",
                    OPENBLAS_NUM_THREADS="1",
                )
                log = open(self._logs / f"rank{r}.log", "wb")  # noqa: SIM115 - closed in close()
                p = subprocess.Popen(
                    [sys.executable, "-m", "kda_core.kda.cp_gloo"],
                    cwd=_ROOT,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                )
                log.close()
                self._procs.append(p)
                # the Connections own duplicates of the pipe ends; Popen's copies close now
                self._send.append(Connection(os.dup(p.stdin.fileno()), readable=False))
                self._recv.append(Connection(os.dup(p.stdout.fileno()), writable=False))
                p.stdin.close()
                p.stdout.close()
            self._gather(timeout, "start")
        except BaseException:
            self.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------

    def _gather(self, timeout: float, what: str) -> list:
        """One reply per rank, read in rank order (the order replies arrive in does not matter).
        A rank's error is raised after every reply is read (the pipes stay in step); a rank that
        is silent or gone breaks the group, which is closed."""
        out = []
        deadline = time.monotonic() + timeout
        for r, conn in enumerate(self._recv):
            lost = None
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                lost = f"gloo rank {r}: no reply to {what} in {timeout:.0f} s"
            else:
                try:
                    out.append(conn.recv())
                except EOFError:
                    lost = f"gloo rank {r} exited during {what}: {self._tail(r)}"
            if lost:
                self.close()
                raise RuntimeError(lost)
        for r, reply in enumerate(out):
            if isinstance(reply, dict) and "error" in reply:
                raise RuntimeError(f"gloo rank {r} failed in {what}: {reply['error']}")
        return out

    def _tail(self, r: int) -> str:
        try:
            return (self._logs / f"rank{r}.log").read_text(errors="replace")[-800:]
        except OSError:
            return "(no log)"

    def _run(self, tasks: list[dict], what: str) -> list[dict]:
        if not self._procs:
            raise RuntimeError("the gloo group is closed")
        for conn, task in zip(self._send, tasks):
            conn.send(task)
        return self._gather(_TASK_TIMEOUT, what)

    # -- tasks ---------------------------------------------------------------------------------

    def run_plan(
        self, plan: Plan, inputs, S0: np.ndarray, scan: str, scale: float, chunk_size: int
    ) -> list[dict]:
        """Every rank's share of ``plan`` -> per rank {o, finals, seconds, bytes_sent}."""
        tasks = []
        for r in range(plan.ranks):
            t = slice(plan.bounds[r], plan.bounds[r + 1])
            docs = {p.doc: S0[p.doc] for p in plan.pieces[r] if p.starts_doc}
            tasks.append(
                {
                    "kind": "plan",
                    "rows": [np.ascontiguousarray(x[t]) for x in inputs],
                    "pieces": plan.pieces[r],
                    "initial_states": docs,
                    "constant": plan.constant,
                    "scan": scan,
                    "scale": scale,
                    "chunk_size": chunk_size,
                }
            )
        return self._run(tasks, "context_parallel")

    def run_conv(
        self, x: np.ndarray, w: np.ndarray, window: np.ndarray, activation: str, plan: Plan
    ) -> list[dict]:
        """The conv halo exchange over ``plan``'s segments: a rank whose segment starts inside
        a document receives its predecessor's outgoing window (W-1 rows, all of that document);
        -> per rank {y, window, finals, bytes_sent}."""
        opens = [not pieces[0].starts_doc for pieces in plan.pieces] + [False]
        tasks = [
            {
                "kind": "conv",
                "x": np.ascontiguousarray(x[plan.bounds[r] : plan.bounds[r + 1]]),
                "w": w,
                "window": window,
                "pieces": plan.pieces[r],
                "recv_halo": opens[r],
                "send_halo": opens[r + 1],
                "activation": activation,
            }
            for r in range(self.ranks)
        ]
        return self._run(tasks, "short_conv_cp")

    def pingpong(self, nbytes: int, repeat: int) -> float:
        """Median seconds of one round trip of ``nbytes`` between ranks 0 and 1 (bench only)."""
        if self.ranks < 2:
            raise ValueError("pingpong needs a group of at least 2 ranks")
        tasks = [{"kind": "pingpong", "nbytes": nbytes, "repeat": repeat}] * self.ranks
        return self._run(tasks, "pingpong")[0]["seconds"]

    def close(self) -> None:
        """Stop the workers (a goodbye, then terminate / kill stragglers) and free the store."""
        for conn in self._send:
            with contextlib.suppress(OSError):
                conn.send(None)
        for p in self._procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=20)
        for conn in self._send + self._recv:
            conn.close()
        self._procs, self._send, self._recv = [], [], []
        self._store = None

    def __enter__(self) -> GlooGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# the worker side


def _tensor(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def _element_bytes(e: Element, kind: str) -> np.ndarray:
    return e.b if kind == "state" else np.concatenate([e.M, e.b], axis=2)


def _element_from(buf: np.ndarray, kind: str, K: int) -> Element:
    if kind == "state":
        return Element(None, buf)
    return Element(buf[:, :, :K], buf[:, :, K:])


def _scan_allgather(dist, lp: LocalPass, constant, rank: int, P: int):
    import torch

    e = lp.element
    H, K, V = e.b.shape
    M = np.zeros((H, K, K), e.b.dtype) if e.M is None else e.M
    buf = _tensor(np.concatenate([M, e.b], axis=2))
    out = [torch.empty_like(buf) for _ in range(P)]
    dist.all_gather(out, buf)
    elems = [_element_from(o.numpy(), "map", K) for o in out]
    elems = [Element(None, x.b) if c else x for x, c in zip(elems, constant)]  # zero M
    return sequential_states(elems[: rank + 1])[rank], (P - 1) * buf.numel() * buf.element_size()


def _scan_logdepth(dist, lp: LocalPass, constant, rank: int):
    import torch

    own = lp.element
    H, K, V = own.b.shape
    held = None  # the prefix of the ranks before this one, once received
    sent = 0
    for step in logdepth_schedule(constant):
        out = next((m for m in step if m.src == rank), None)
        inc = next((m for m in step if m.dst == rank), None)
        work = None
        if out is not None:
            payload = _tensor(_element_bytes(own if out.step == 0 else held, out.kind))
            sent += payload.numel() * payload.element_size()
            work = dist.isend(payload, out.dst)
        if inc is not None:
            width = V if inc.kind == "state" else K + V
            buf = torch.empty((H, K, width), dtype=_tensor(own.b).dtype)
            dist.recv(buf, inc.src)
            y = _element_from(buf.numpy(), inc.kind, K)
            held = y if inc.step == 0 else combine(y, held)
        if work is not None:
            work.wait()
    return (None if held is None else held.b), sent


def _task_plan(dist, task: dict, rank: int, P: int) -> dict:
    dist.barrier()  # every rank starts the clock together
    marks = [(time.perf_counter(), time.process_time())]
    lp = local_pass(
        *task["rows"],
        task["pieces"],
        task["initial_states"],
        scale=task["scale"],
        chunk_size=task["chunk_size"],
    )
    marks.append((time.perf_counter(), time.process_time()))
    if P == 1:
        S_in, sent = None, 0
    elif task["scan"] == "allgather":
        S_in, sent = _scan_allgather(dist, lp, task["constant"], rank, P)
    else:
        S_in, sent = _scan_logdepth(dist, lp, task["constant"], rank)
    marks.append((time.perf_counter(), time.process_time()))
    o, finals = finish(lp, S_in)
    marks.append((time.perf_counter(), time.process_time()))
    names = ("local", "scan", "finish")
    wall = {n: marks[i + 1][0] - marks[i][0] for i, n in enumerate(names)}
    cpu = {n: marks[i + 1][1] - marks[i][1] for i, n in enumerate(names)}
    wall["total"], cpu["total"] = marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]
    return {"o": o, "finals": finals, "seconds": wall, "cpu_seconds": cpu, "bytes_sent": sent}


def _task_conv(dist, task: dict, rank: int, P: int) -> dict:
    x, w, window = task["x"], task["w"], task["window"]
    halo, sent = None, 0
    if task["recv_halo"]:  # the segment starts inside a document
        buf = _tensor(np.empty(window.shape, x.dtype))
        dist.recv(buf, rank - 1)
        halo = buf.numpy()
    y, out, finals = conv_pieces(x, w, task["pieces"], halo, window, task["activation"])
    if task["send_halo"]:
        dist.send(_tensor(out), rank + 1)
        sent = out.nbytes
    return {"y": y, "window": out, "finals": finals, "bytes_sent": sent}


def _task_pingpong(dist, task: dict, rank: int, P: int) -> dict:
    import torch

    buf = torch.zeros(max(1, task["nbytes"]), dtype=torch.uint8)
    times = []
    dist.barrier()
    for _ in range(task["repeat"] if rank < 2 else 0):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(buf, 1)
            dist.recv(buf, 1)
        else:
            dist.recv(buf, 0)
            dist.send(buf, 0)
        times.append(time.perf_counter() - t0)
    return {"seconds": float(np.median(times)) if times else 0.0}


def _worker() -> None:
    import torch.distributed as dist

    rank, P = int(os.environ["KDA_CP_RANK"]), int(os.environ["KDA_CP_WORLD"])
    recv = Connection(os.dup(0), writable=False)
    send = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # stray prints go to the log, never into the result pipe
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), None, False)
    # a failed rank must not leave the others waiting for gloo's default 30 minutes
    timeout = datetime.timedelta(seconds=_COLLECTIVE_TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=P, timeout=timeout)
    send.send({"rank": rank, "pid": os.getpid()})
    tasks = {"plan": _task_plan, "conv": _task_conv, "pingpong": _task_pingpong}
    try:
        while True:
            try:
                task = recv.recv()
            except EOFError:
                break
            if task is None:
                break
            try:
                send.send(tasks[task["kind"]](dist, task, rank, P))
            except Exception as e:  # reported to the parent, which raises
                send.send({"error": f"{type(e).__name__}: {e}"})
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    _worker()
