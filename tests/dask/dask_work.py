"""Functions the tests run on Dask workers (a module of their own, so worker processes import it).

Each one coordinates with its test through named ``distributed.Event`` objects (the
scheduler holds them), never through timing: a worker process shares no memory with the test.
"""

from __future__ import annotations

import time
from typing import Any

from distributed import Event, LocalCluster

from fusion_nb.dask import DaskTask


def local_cluster(**options: Any) -> LocalCluster:
    """A ``LocalCluster`` on free ports only: the tests run beside anything, and beside each other.

    ``dashboard_address=None`` is not enough: without bokeh the scheduler still serves its HTTP
    routes (health, metrics), on distributed's default port 8787 unless it is given another.
    """
    return LocalCluster(dashboard_address=":0", scheduler_kwargs={"dashboard": False}, **options)


#: how long a worker function waits for its test before giving up (a failed test must not hang the worker)
PATIENCE = 60


def rendezvous(mine: str, other: str) -> None:
    """Run as two tasks at once: each waits for the other, so both of the worker's threads run."""
    Event(mine).set()
    if not Event(other).wait(timeout=PATIENCE):
        raise TimeoutError("the other warm-up task never ran")


def report_then_wait(task: DaskTask, go: str) -> str:
    """Reports 10%, waits for the test to see it and say go, then reports 100% and returns."""
    task.report(1, 10, "started")
    if not Event(go).wait(timeout=PATIENCE):
        raise TimeoutError("the test never said go")
    task.report(10, 10, "finished")
    return "done"


def many_reports(task: DaskTask, text: str) -> int:
    """Reports ``int(text)`` times in a tight loop, going backwards every other time."""
    count = int(text)
    for i in range(count):
        task.report(i, count, f"step {i}")
        task.report(max(0, i - 5), count)  # lower: dropped on the worker
    task.report(count, count, "all done")
    return count


def cooperative(task: DaskTask, ended: str) -> str:
    """Reports, then loops until the stop (checked every 10 ms); says when it has ended."""
    try:
        task.report(5, message="waiting for the stop")
        deadline = time.monotonic() + PATIENCE
        while not task.stopped():
            if time.monotonic() > deadline:
                return "never stopped"
            time.sleep(0.01)
        task.raise_if_stopped()
        return "unreachable"
    finally:
        Event(ended).set()


def stubborn(task: DaskTask, release: str, ended: str) -> str:
    """Never checks the stop: runs until the test releases it, then says it has ended."""
    try:
        task.report(5, message="not listening")
        Event(release).wait(timeout=PATIENCE)
        return "ran to its end"
    finally:
        Event(ended).set()


def fails(task: DaskTask) -> None:
    task.report(50, message="about to fail")
    raise ValueError("cannot open /srv/acme/secrets/db.ini")


def sleeps(task: DaskTask, seconds: float) -> str:
    """Non-cooperative and long: for the cluster that is closed under it."""
    task.report(1, message="sleeping")
    time.sleep(seconds)
    return "woke up"


def entered_then_wait(task: DaskTask, marks: str, go: str) -> int:
    """Appends this process's pid to ``marks`` (one line per entry), then waits for ``go``; returns the pid."""
    import os

    with open(marks, "a") as file:
        file.write(f"{os.getpid()}\n")
    if not Event(go).wait(timeout=PATIENCE):
        raise TimeoutError("the test never said go")
    return os.getpid()
