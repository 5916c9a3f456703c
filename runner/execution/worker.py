"""Trials run in a supervised worker process, so that no trial can take the sweep down.

Why: a device-side assert or an illegal address poisons the CUDA context for the life of the
process, a segfault in an extension or an ``os._exit`` ends it, and a hung kernel never
returns. Hydra's basic launcher runs every job of a multirun in one process, so before this one
bad trial lost the job and every job after it.

Design (standard library only: ``multiprocessing`` with the ``spawn`` start method and a
``Pipe``; messages are Python objects):

* :class:`Worker` is ONE process that imports torch, initialises CUDA lazily, and runs the
  trials sent to it, one at a time: each a :class:`~runner.execution.task.TrialTask`, pickled
  as the job built it (the op's builder is imported in the worker, from its target). It
  times the trial with the same shared timer as the in-process path: the timed region never
  crosses the process boundary.
* :class:`Supervisor` owns the worker: it waits for each trial's row at most
  ``trial_timeout_s``; a worker that died (signal, exit status) gives a ``crashed`` row, one
  that did not answer in time is killed and gives a ``timeout`` row, one whose CUDA context is
  poisoned retires itself after sending its row (``crashed``). The next trial gets a fresh
  worker. ``workers=N`` is N supervisors fed from one queue (``runner.execution.pool``); each
  starts its worker with its own environment (``CUDA_VISIBLE_DEVICES``) and thread count.
* One supervisor lives for the driver process (:func:`supervisor`), reused by every trial and
  every Hydra job: a 200-job multirun pays one worker start, not 200.
* The driver (the process Hydra runs) never initialises CUDA: heating the GPU and running
  trials both happen in the worker.
* The worker ignores SIGINT: Ctrl-C reaches the whole process group, and the driver decides
  (``runner.execution.interrupt``) whether the trial in flight finishes.
* This module is the driver's side; the worker process's loop is ``runner.execution.worker_loop``.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # noqa: F401  (registers its exit handler before ours, see below)
import signal
import sys
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from runner.core.status import Status
from runner.execution import timeline
from runner.execution.warmup import cuda_ordinals
from runner.execution.worker_loop import (  # noqa: F401  (is_poisoned: for callers)
    is_poisoned,
    run_trial_safely,
    serve,
)

if TYPE_CHECKING:
    from runner.execution.task import TrialTask

#: Seconds a fresh worker may take to import torch and report ready.
START_TIMEOUT_S = 300.0
_POLL_S = 0.25
_CTX = multiprocessing.get_context("spawn")


class InProcess:
    """``isolation=none``: trials run in the driver process (for debuggers, pdb, profilers).
    A crash or hang here ends the sweep."""

    def __init__(self) -> None:
        self.state: Any = None  # the driver's WorkerTiming, made with the first trial

    def run(self, task: TrialTask) -> dict[str, Any]:
        start = time.perf_counter()
        if self.state is None:
            from runner.execution.timed import WorkerTiming

            self.state = WorkerTiming()
        row = run_trial_safely(task, self.state)
        row["worker_trial_wall_s"] = time.perf_counter() - start
        timeline.trial_started(row.get("timestamp"))
        return row

    def heat(self, device: str, seconds: float) -> None:
        from runner.timing.heat import heat_device

        heat_device(device, seconds)


class WorkerLost(Exception):
    """The worker died or stopped answering; ``status`` says which."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Worker:
    """One worker process and the pipe to it."""

    def __init__(self, env: dict[str, str] | None = None, threads: int | None = None,
                 name: str = "opsweep-worker", cuda_ordinals: tuple[int, ...] = ()) -> None:
        """``cuda_ordinals``: the GPUs it will warm, whose context and cuBLAS handles it
        starts as soon as torch is imported (``runner.execution.warmup.start_cuda``)."""
        self.name = name
        self.info: dict[str, Any] = {"spawned_at": time.time()}
        self.conn, child = _CTX.Pipe()
        self.process = _CTX.Process(target=serve, args=(child, env, threads, cuda_ordinals),
                                    name=name)
        self.process.start()
        child.close()
        self.ready = False
        self.pending = 0  # answers to posted requests (warm-up) not read yet
        self.warmed: tuple[str, ...] = ()

    def post(self, message: tuple) -> None:
        """Send a request without waiting: the worker answers it when it gets to it (after
        its imports), and :meth:`wait_ready` reads the answer."""
        try:
            self.conn.send(message)
            self.pending += 1
        except (BrokenPipeError, OSError):
            pass  # the next request reports the dead worker

    def wait_ready(self) -> None:
        """Wait until the worker has imported torch and answered what was posted; raise
        :class:`WorkerLost`."""
        if not self.ready:
            _, info, _ = self._wait(START_TIMEOUT_S, "starting (importing torch)")
            self.info.update(info)
            self.ready = True
            timeline.worker_report(self.name, self.info)
        while self.pending:
            _, info, _ = self._wait(START_TIMEOUT_S, "warming up (CUDA context)")
            self.pending -= 1
            self.info.update(info)
            timeline.worker_report(self.name, self.info)

    def request(self, message: tuple, timeout_s: float | None) -> Any:
        """Send one request and wait for its answer; raise :class:`WorkerLost`."""
        self.wait_ready()
        try:
            self.conn.send(message)
        except (BrokenPipeError, OSError):
            raise WorkerLost(Status.crashed, self._death()) from None
        kind, value, retire = self._wait(timeout_s, "running the trial")
        if retire:
            self.stop()
        return value

    def _wait(self, timeout_s: float | None, doing: str) -> Any:
        deadline = None if not timeout_s else time.monotonic() + timeout_s
        while True:
            # short polls: a Ctrl-C handler gets to run, and a dead worker is seen at once
            if self.conn.poll(_POLL_S):
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    raise WorkerLost(Status.crashed, self._death()) from None
            if not self.process.is_alive():
                raise WorkerLost(Status.crashed, self._death())
            if deadline is not None and time.monotonic() > deadline:
                self.stop()
                raise WorkerLost(Status.timeout, f"no result after {timeout_s:g} s "
                                 f"(trial_timeout_s) while {doing}; worker killed")

    def _death(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        self.stop()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"worker process killed by {name}"
        return (f"worker process exited with status {code} (os._exit, a fatal error in "
                "native code, or the OOM killer)")

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, wait: bool = True) -> None:
        """End the worker now (it may be hung in a kernel: no polite request). ``wait=False``
        (the driver's exit): the process is killed but not waited for, see :func:`_forget`."""
        try:
            self.conn.close()
        except OSError:
            pass
        if self.process.is_alive():
            self.process.kill()
        if wait:
            self.process.join(10)
        else:
            _forget(self.process)


def _forget(process: Any) -> None:
    """Leave a killed worker to the system instead of waiting for it to be gone.

    Why: a process killed with a CUDA context is gone only once the CUDA driver has torn the
    context down (up to 0.5 s on the hosts measured, docs/scale-out.md), and at the driver's
    exit nothing is left to wait for: the rows are on disk and a worker writes nothing.
    ``multiprocessing``'s exit handler joins every child it knows of, so it is told to forget
    this one (``_children``, the set ``active_children`` reads: private, so checked; without
    it we wait as before). Whoever adopts the killed process reaps it."""
    children = getattr(multiprocessing.process, "_children", None)
    if isinstance(children, set):
        children.discard(process)
    else:  # pragma: no cover - another Python's multiprocessing: wait, as before
        process.join(10)


class Supervisor:
    """Runs trials in a worker, replacing it whenever it dies, hangs or is poisoned.

    ``env`` and ``threads`` are given to every worker it starts (``runner.execution.pool``
    pins each of its supervisors to one GPU this way)."""

    def __init__(self, env: dict[str, str] | None = None, threads: int | None = None,
                 name: str = "opsweep-worker") -> None:
        self.worker: Worker | None = None
        self.starts = 0
        self.env, self.threads, self.name = env, threads, name
        self.warm_devices: tuple[str, ...] = ()

    def prestart(self, warm: tuple[str, ...] | None = None) -> None:
        """Start the worker now, so its torch import overlaps the driver's planning.
        ``warm``: devices whose one-off costs (``runner.execution.warmup``) the worker pays
        right after its imports, before any trial; a replacement worker is warmed alike."""
        if warm is not None:
            self.warm_devices = tuple(warm)
        if self.worker is None or not self.worker.alive():
            self.worker = Worker(self.env, self.threads, self.name,
                                 cuda_ordinals(self.warm_devices))
            self.starts += 1
        if self.warm_devices and self.worker.warmed != self.warm_devices:
            self.worker.post(("warm", self.warm_devices))
            self.worker.warmed = self.warm_devices

    def wait_ready(self) -> None:
        """Start the worker if needed and wait for it; a worker that fails to start is
        reported by the next :meth:`run` (as a row), not here."""
        self.prestart()
        try:
            if self.worker is not None:
                self.worker.wait_ready()
        except WorkerLost:
            pass

    def run(self, task: TrialTask) -> dict[str, Any]:
        """Run ``task`` in the worker, exactly as the job built it; wait for its row at most
        the task's ``timeout_s``. A worker that dies or hangs gives the trial a ``crashed`` or
        ``timeout`` row."""
        sent, sent_at = time.perf_counter(), datetime.now(timezone.utc)
        timeline.trial_sent()
        try:
            row = self._request(("trial", task), task.timeout_s)
        except WorkerLost as lost:  # the driver's view: sent at, waited for
            from runner.execution.trial import failed_row  # imports torch: only when needed

            row = failed_row(task, lost.status, str(lost))
            row.update(timestamp=sent_at, worker_trial_wall_s=time.perf_counter() - sent)
        timeline.trial_started(row.get("timestamp"))
        return row

    def heat(self, device: str, seconds: float) -> None:
        try:
            self._request(("heat", (device, seconds)), None)
        except WorkerLost as lost:
            print(f"opsweep: warning: heating {device} failed: {lost}", file=sys.stderr)

    def keep_warm(self, device: str, max_s: float) -> None:
        """Have the worker keep ``device`` under load until its next request (at most
        ``max_s``), without waiting (``runner.execution.warmup.heat_while_idle``)."""
        if self.worker is not None and self.worker.alive():
            self.worker.post(("keep_warm", (device, max_s)))

    def _request(self, message: tuple, timeout_s: float | None) -> Any:
        self.prestart()
        worker = self.worker
        if worker is None:  # pragma: no cover - prestart always makes one
            raise WorkerLost(Status.crashed, "no worker")
        return worker.request(message, timeout_s)

    def stop(self, wait: bool = True) -> None:
        """Kill the worker; ``wait=False``: do not wait for it to be gone (the driver's
        exit, :func:`_forget`)."""
        if self.worker is not None:
            self.worker.stop(wait)
            self.worker = None


_SUPERVISOR: Supervisor | None = None


def supervisor() -> Supervisor:
    """The driver process's one supervisor (made on first use, stopped at exit)."""
    global _SUPERVISOR
    if _SUPERVISOR is None:
        _SUPERVISOR = Supervisor()
        # atexit runs handlers last-registered first: ours (registered after
        # multiprocessing.util's, imported above) stops the worker before multiprocessing
        # joins its children, which would otherwise wait forever on an idle worker
        atexit.register(_SUPERVISOR.stop, False)  # not waited for: see _forget
    return _SUPERVISOR
