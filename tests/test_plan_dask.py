"""kda_core.plan.sweep on Dask: a LocalCluster on 127.0.0.1 (worker processes, and threads),
started and stopped here; the rows equal the serial run's exactly, the prepared trace goes to
the workers once, and a point that fails on a worker is reported, not lost."""

from __future__ import annotations

import pytest

from kda_core import plan
from kda_core.plan import _parallel
from kda_core.workloads import bundled_trace

distributed = pytest.importorskip("distributed")

K3 = "kimi-k3"
REST = 29_497 << 20  # 28.8 GiB per GPU, the K3 write-up's profiled rest
GRID = {
    "mamba_full_memory_ratio": [0.1, 0.4],
    "chunked_prefill_size": [4096, 8192],
    "mamba_track_interval": [256, 100],  # 100 with page 64 is refused: a failed point
    "page_size": [64],
}


@pytest.fixture(scope="module")
def head():
    return bundled_trace("conversation").head(1500)


@pytest.fixture(scope="module")
def serial(head):
    return plan.sweep(K3, head, rest_bytes=REST, grid=GRID, min_running=4)


def _same(a, b) -> None:
    assert len(a.points) == len(b.points) == 8
    for p, q in zip(a.points, b.points):
        assert p == q  # every field, floats bit for bit
    assert (a.pareto, a.failed, a.best, a.launch_command) == (
        b.pareto,
        b.failed,
        b.best,
        b.launch_command,
    )


def test_local_cluster_of_processes_equals_serial(serial, head):
    got = plan.sweep(K3, head, rest_bytes=REST, grid=GRID, min_running=4, workers=2)
    assert got.runner == "dask LocalCluster (2 workers)"
    _same(serial, got)
    assert len(serial.failed) == 4  # the refused points are rows too
    assert all(
        "not a multiple of page_size 64" in serial.points[i]["reason"] for i in serial.failed
    )


def test_a_callers_client_scatters_the_trace_once(serial, head):
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = distributed.Client(cluster)
    scattered = []
    real = client.scatter

    def spy(data, **kw):
        scattered.append(type(data).__name__)
        return real(data, **kw)

    client.scatter = spy
    try:
        got = plan.sweep(K3, head, rest_bytes=REST, grid=GRID, min_running=4, client=client)
        assert got.runner == "dask (the caller's client)"
        _same(serial, got)
        assert scattered == ["PreparedTrace"]  # once, not once per point
    finally:
        client.close()
        cluster.close()


def test_a_point_failing_on_a_worker_is_reported(head, monkeypatch):
    real = _parallel.evaluate

    def flaky(prep, job):
        if job.index == 1:
            raise RuntimeError("worker lost its state")
        return real(prep, job)

    monkeypatch.setattr(_parallel, "evaluate", flaky)
    cluster = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = distributed.Client(cluster)
    try:
        grid = {"mamba_full_memory_ratio": [0.1, 0.2, 0.3]}
        got = plan.sweep(K3, head.head(300), rest_bytes=REST, grid=grid, client=client)
    finally:
        client.close()
        cluster.close()
    assert [p["status"] for p in got.points] == ["ok", "failed", "ok"]
    assert got.points[1]["reason"] == "worker: RuntimeError: worker lost its state"
    assert got.points[1]["mamba_full_memory_ratio"] == 0.2 and got.failed == (1,)
