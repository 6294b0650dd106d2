"""Running a sweep's points: serially, or on Dask (``dask.distributed``).

On Dask the prepared trace is scattered to every worker once (``Client.scatter(...,
broadcast=True)``) and each point is one task taking that future, so a task ships only its
small ``Job``; results come back in grid order, equal to the serial run's (the same function
on the same inputs; tests/test_plan_dask.py checks them equal on a LocalCluster). A task that
fails on the worker (an exception ``evaluate`` did not catch, a worker lost) is a failed row
with the reason: a point is reported, never lost. ``dask`` is imported here only, lazily.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kda_core.plan._evaluate import Job, evaluate
from kda_core.sim.fast import PreparedTrace

Progress = Callable[[int, int], Any] | None


def run_serial(prep: PreparedTrace, jobs: list[Job], progress: Progress) -> list[dict]:
    out = []
    for i, job in enumerate(jobs):
        out.append(evaluate(prep, job))
        if progress is not None:
            progress(i + 1, len(jobs))
    return out


def _failed(job: Job, err: BaseException) -> dict:
    reason = f"worker: {type(err).__name__}: {err}"
    return {"point": job.index, **job.flags, "status": "failed", "reason": reason}


def run_dask(client: Any, prep: PreparedTrace, jobs: list[Job], progress: Progress) -> list[dict]:
    """The points on ``client``'s cluster; rows in grid order."""
    from distributed import as_completed

    token = uuid.uuid4().hex[:8]
    shared = client.scatter(prep, broadcast=True, hash=False)
    futures = {
        client.submit(evaluate, shared, job, key=f"plan-{token}-{job.index}", pure=False): job
        for job in jobs
    }
    rows: dict[int, dict] = {}
    for done, fut in enumerate(as_completed(list(futures)), start=1):
        job = futures[fut]
        try:
            rows[job.index] = fut.result()
        except Exception as e:  # a worker-side failure: the point is reported
            rows[job.index] = _failed(job, e)
        if progress is not None:
            progress(done, len(jobs))
    client.cancel([shared])
    return [rows[job.index] for job in jobs]


def local_cluster(workers: int) -> tuple[Any, Any]:
    """A ``LocalCluster`` of ``workers`` single-thread worker processes on 127.0.0.1 (no
    dashboard) and its client; the caller closes both."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    return cluster, Client(cluster)


def connect(address: str, timeout_s: float) -> Any:
    """A client of the scheduler at ``address`` (``OSError`` / ``TimeoutError`` if it cannot
    be reached within ``timeout_s``)."""
    from distributed import Client

    return Client(address, timeout=timeout_s)
