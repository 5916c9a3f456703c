"""Ctrl-C in a sweep that hydra-ray-launcher runs (``hydra/launcher=ray``, a local ``ray.init``
or a cluster's address): exit 130 with the resume command, as a basic sweep ends.

Why: the terminal's Ctrl-C never reaches a Ray job. Ray starts its workers in process groups of
their own with SIGINT blocked, so only the driver gets it; the plugin's driver then sits in
``ray.get`` until every job has run all its trials. Ray's own way to interrupt a task is
``ray.cancel``: not forced, Ray raises the interrupt in the task's main thread, exactly where
a job's Ctrl-C handler (``runner.execution.interrupt.GracefulStop``) receives it, and a task
not started yet never starts; forced, Ray ends the task's process.

So, in the driver, around the plugin's launch (the one place where it submits and waits):

* the first Ctrl-C raises ``KeyboardInterrupt`` out of ``ray.get`` (a Ctrl-C that came while
  Ray was starting: at the first submission, which is then not made);
* every job submitted is cancelled, not forced: a running job stops after its trial in flight,
  writes its job file and returns; a queued job never starts;
* the driver waits for the running jobs and hands Hydra the returns of those that ended; the
  end-of-sweep callback (``runner.execution.callbacks``) then merges what finished, prints the
  resume command and exits 130;
* a second Ctrl-C forces the cancel: each job's process ends at once, and every trial it
  journaled stays (``runner.storage.journal``), as in a basic sweep.

The plugin gives no handle on its tasks, so :func:`install` wraps its module's ``launch`` and
its task submission (``launch_job_on_ray``); everything else is the plugin's own code.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from runner.execution import interrupt

#: ``runner.execution.launched.launcher_name`` of the launcher this module stops.
RAY = "ray"
#: seconds between looks at the Ctrl-C count while the cancelled jobs end
POLL_S = 0.25
FIRST = ("\nopsweep: Ctrl-C: each Ray job stops after its trial in flight (Ctrl-C again to "
         "stop them now; finished trials are kept)")
AGAIN = "\nopsweep: Ctrl-C: ending the Ray jobs now (finished trials are kept)"


@dataclass
class _Launch:
    """One call of the plugin's launch: the jobs submitted, and whether Ctrl-C raises."""

    submitted: list[Any] = field(default_factory=list)
    #: a Ctrl-C raises KeyboardInterrupt (in ``ray.get``): from the first job submitted on
    armed: bool = False


_PLUGIN: dict[str, Any] = {}  # the plugin's own functions, once wrapped


def install() -> None:
    """Wrap hydra-ray-launcher's launch in this process (the sweep's driver); idempotent."""
    try:
        from hydra_plugins.hydra_ray_launcher import _core
    except ImportError:  # Hydra names the missing plugin (pip install -e .[ray]) itself
        return
    if _PLUGIN:
        return
    _PLUGIN.update(launch=_core.launch, submit=_core.launch_job_on_ray)
    _core.launch = _launch
    _core.launch_job_on_ray = _submit


_CURRENT: list[_Launch] = []


def _launch(launcher: Any, job_overrides: Any, initial_job_idx: int) -> Any:
    """The plugin's launch, which stops its jobs on Ctrl-C and returns those that ended."""
    if interrupt.requested():  # Ctrl-C before this batch of jobs: start none of it
        return []
    state = _Launch()
    _CURRENT.append(state)
    try:
        with _ctrl_c_raises(state):
            try:
                results = _PLUGIN["launch"](launcher, job_overrides, initial_job_idx)
                state.armed = False
                return results
            except KeyboardInterrupt:  # a Ctrl-C just after the jobs ended: the same below
                state.armed = False
            return _stop_jobs(state.submitted)
    finally:
        _CURRENT.remove(state)


def _submit(*args: Any, **kwargs: Any) -> Any:
    """The plugin's submission of one job, recorded; none after a Ctrl-C."""
    state = _CURRENT[-1]
    # Disarmed while Ray queues the job: a Ctrl-C raised between the queueing and the record
    # would leave a job running that nobody cancels or waits for. Counted, then raised here.
    state.armed = False
    if interrupt.requested():  # Ctrl-C while Ray was starting, or while this one was queued
        raise KeyboardInterrupt
    ref = _PLUGIN["submit"](*args, **kwargs)
    state.submitted.append(ref)
    if interrupt.requested():
        raise KeyboardInterrupt
    state.armed = True
    return ref


@contextmanager
def _ctrl_c_raises(state: _Launch) -> Iterator[None]:
    """While the plugin submits and waits, and while its jobs stop: Ctrl-C is counted, and
    raised once armed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: Any) -> None:
        interrupt.press()
        print(FIRST if interrupt.presses() == 1 else AGAIN, file=sys.stderr, flush=True)
        if state.armed:
            state.armed = False  # once: the stop below must not be interrupted
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _stop_jobs(submitted: list[Any]) -> list[Any]:
    """Cancel the jobs (a second Ctrl-C: forced), wait for them, return those that ended."""
    import ray
    from ray.exceptions import TaskCancelledError, WorkerCrashedError

    pending, forced, cancelled = list(submitted), False, False
    while pending:
        if not cancelled or (not forced and interrupt.presses() >= 2):
            forced = cancelled and interrupt.presses() >= 2
            # Hazard: Ray's driver can abort ("Tried to complete task that was not pending")
            # when a cancel meets the reply of a task that is just ending; a job whose result
            # is in is never cancelled, which leaves only that instant.
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            for ref in pending:
                try:
                    ray.cancel(ref, force=forced)
                except Exception:  # noqa: BLE001  one job Ray cannot cancel: wait for it
                    continue
            cancelled = True
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
    returns = []
    for ref in submitted:
        try:
            returns.append(ray.get(ref))
        except (TaskCancelledError, WorkerCrashedError):
            continue  # never started, or ended by force: its journal holds what finished
    return returns
