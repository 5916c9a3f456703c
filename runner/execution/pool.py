"""``workers=N`` / ``workers=per_gpu``: the trials of one job run concurrently, one supervised
worker process per GPU, fed from one queue (docs/scale-out.md).

Why: a sweep ran its trials one after another on one GPU; a user with an 8-GPU node used one
of them. Design, on top of the crash-isolation worker (``runner.execution.worker``):

* **Placement** (which worker owns which GPU, ``cuda:N`` pins, the CPU split):
  ``runner.execution.placement``. Worker *i* is a :class:`~runner.execution.worker.Supervisor`
  whose processes own visible GPU *i*; inside it ``cuda`` / ``cuda:0`` is its GPU. A pinned
  trial's row keeps ``device=cuda:N`` and its ``trial_id``; ``gpu_index`` / ``gpu_uuid`` say
  which physical GPU ran it.
* **Order.** Each worker gets its own list of capped trials, balanced by estimated cost with
  heat order kept on each GPU (``runner.execution.schedule``); those that may be capped,
  then the light trials, go to whichever worker is free, and a worker with nothing left
  may take over the last trial of the busiest one (``runner.execution.worker_queues``).
* **Reuse.** One pool per driver process (:func:`pool`), reused by every Hydra job of a
  multirun with the same placement: worker start (importing torch) is paid once per worker.
* **Start.** ``python -m runner ... workers=N|per_gpu`` starts the pool before Hydra composes
  anything (:func:`prestart`: GPUs counted without torch),
  so every worker imports torch while the driver composes and plans; then each warms its own
  GPU (``runner.execution.warmup``), all at once. A job placed otherwise replaces the pool.
* **Driver round trip.** A worker's row is journaled while it already runs its next trial
  (at most one finished row per worker not yet on disk), and the workers' journal writes
  do not wait on each other (each trial has its own journal file).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from runner.execution import costs as trial_costs
from runner.execution.placement import (  # noqa: F401  (plan_workers, explicit_gpus: job.py's)
    PER_GPU,
    Slot,
    explicit_gpus,
    gpus_without_torch,
    guess_devices,
    plan_workers,
    predicted_slots,
)
from runner.execution.schedule import Assignment, assign
from runner.execution.worker import START_TIMEOUT_S, Supervisor
from runner.execution.worker_queues import WorkerQueues

if TYPE_CHECKING:
    from runner.execution.task import TrialTask


def prestart(workers: Any, device: list[Any] | None, heat_s: float = 0.0) -> None:
    """Start the workers a job will most likely get, before Hydra composes it, and have each
    warm the device it will most likely use (:func:`guess_devices`): a pool for
    ``workers=N|per_gpu``, else the one supervised worker. ``workers``: its one value (None:
    a sweep over several, unsure); ``device``: the values given for ``device`` (None: not
    given); ``heat_s``: ``gpu_warmup_s`` as given (0: not given): each GPU is then kept
    warm from its warm-up on, while the driver plans, and that heat counts towards it.
    Nothing is started when unsure (the job starts its workers after planning). A job
    placed otherwise (CPU trials on a GPU machine, an experiment's own ``workers`` or
    ``device``) replaces or re-warms them."""
    from runner.execution.worker import supervisor

    workers = None if workers is None else str(workers)
    gpus = gpus_without_torch()
    if gpus is None:
        if workers == "1":
            supervisor().prestart()
        return
    devices = guess_devices(device, gpus)
    if workers == "1" or (workers == PER_GPU and len(gpus) == 1):
        supervisor().prestart(devices)
        cuda = [d for d in devices if d.startswith("cuda")]
        if heat_s > 0 and len(cuda) == 1:
            supervisor().keep_warm(cuda[0], KEEP_WARM_MAX_S)
        return
    slots = predicted_slots(workers, gpus, os.cpu_count() or 1) if workers else None
    if slots is not None:
        pool(slots).prestart(devices, keep_warm=heat_s > 0)


def warm_devices(trials: Iterable[Any]) -> tuple[str, ...]:
    """The devices a job's trials run on, each once, in plan order."""
    return tuple(dict.fromkeys(trial.spec.device for trial in trials))


def trial_queue(trials: list[Any], pinned: dict[int, int], slots: tuple[Slot, ...],
                costs: dict[int, trial_costs.TrialCost] | None = None) -> WorkerQueues:
    """The job's trials as one list per worker (``runner.execution.schedule``), from
    ``costs`` (by trial index; None: estimated for this machine's devices). ``pinned``:
    trial index -> the visible GPU it must run on."""
    costs = costs if costs is not None else trial_costs.for_tasks(trials)
    owner = {slot.gpu: slot.index for slot in slots if slot.gpu is not None}
    on_worker = {index: owner[gpu] for index, gpu in pinned.items() if gpu in owner}
    return WorkerQueues(assign(trials, costs, len(slots), on_worker), costs, on_worker)


class Pool:
    """N supervisors, one per :class:`Slot`."""

    def __init__(self, slots: tuple[Slot, ...]) -> None:
        self.slots = slots
        self.supervisors = [Supervisor(dict(s.env), s.threads, f"opsweep-worker-{s.index}")
                            for s in slots]
        #: the last :meth:`run`'s placement: each worker's trials and estimated seconds
        self.assignment: Assignment | None = None

    def prestart(self, warm: tuple[str, ...] | None = None, keep_warm: bool = False) -> None:
        """Start every worker (all at once: each imports torch on its own core). ``warm``:
        the job's devices; each worker warms its own GPU (``cuda:0`` inside it), and with
        ``keep_warm`` then keeps it under load until its first request."""
        for slot, supervisor in zip(self.slots, self.supervisors):
            local = None
            if warm is not None:
                cuda = any(device.startswith("cuda") for device in warm)
                local = ("cuda:0",) if cuda and slot.gpu is not None else ("cpu",)
            supervisor.prestart(local)
            if keep_warm and local == ("cuda:0",):
                supervisor.keep_warm("cuda:0", KEEP_WARM_MAX_S)

    def stop(self, wait: bool = True) -> None:
        """Kill every worker first, then wait for each: N GPU contexts are torn down at once,
        not one after another. ``wait=False`` (the driver's exit): not waited for
        (``runner.execution.worker._forget`` says why)."""
        for supervisor in self.supervisors:
            if supervisor.worker is not None and supervisor.worker.alive():
                supervisor.worker.process.kill()
        for supervisor in self.supervisors:
            supervisor.stop(wait)

    def run(self, tasks: list[TrialTask], pinned: dict[int, int], *, stop: Any,
            record: Callable[[dict[str, Any], TrialTask], None], heat_s: float = 0.0,
            costs: dict[int, trial_costs.TrialCost] | None = None) -> None:
        """Run ``tasks`` on every worker at once; ``record(row, task)`` is called as each
        finishes; ``costs``: each task's estimated cost by index (None: estimated here).

        The driver's round trip stays off the workers' time: a worker's thread hands its row
        to its own writer thread and sends the worker its next trial at once, so the row is
        journaled while that trial runs. Before handing over the next row it waits for the
        previous one to be on disk: per worker, at most one finished row is not yet journaled.
        ``record`` runs in those writer threads, one per worker, concurrently: it must be
        thread-safe (the journal is: a job's trial log appends a line under its segment's
        lock, ``runner.storage.trial_log``; the progress bar locks).

        Stops handing out trials once ``stop.requested`` (first Ctrl-C): the trials in flight
        finish and are recorded. A ``KeyboardInterrupt`` (second Ctrl-C) kills the workers;
        what they were running is not recorded. A failing ``record`` (a full disk) stops
        handing out trials; it is raised once the workers are idle."""
        heat = heat_s > 0 and any(t.spec.device.startswith("cuda") for t in tasks)
        queue = trial_queue(tasks, pinned, self.slots, costs)
        self.assignment = queue.assignment
        feed = _Feed(queue, stop, record, heat_s if heat else 0.0,
                     threading.Barrier(len(self.slots)))
        threads = [threading.Thread(target=feed.serve, args=(slot, sup), daemon=True,
                                    name=f"opsweep-worker-{slot.index}")
                   for slot, sup in zip(self.slots, self.supervisors)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # short joins: the Ctrl-C handler runs in this thread
        except KeyboardInterrupt:
            feed.abort.set()
            self.stop()
            for thread in threads:
                thread.join(15)
            raise
        if feed.errors:
            raise feed.errors[0]


@dataclass
class _Feed:
    """What the workers' threads of one :meth:`Pool.run` share: the queue, the stop and
    abort signals, the errors raised, and the barrier they start at."""

    queue: WorkerQueues
    stop: Any
    record: Callable[[dict[str, Any], TrialTask], None]
    heat_s: float
    barrier: threading.Barrier
    abort: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)

    def serve(self, slot: Slot, supervisor: Supervisor) -> None:
        """One worker's thread: its trials one after another, each row journaled by the
        worker's writer thread while the next trial runs."""
        writer = ThreadPoolExecutor(1, thread_name_prefix=f"opsweep-journal-{slot.index}")
        writing: Future | None = None
        try:
            supervisor.wait_ready()  # imports done, own GPU warmed (prestart's request)
            warm = self.heat_s > 0 and slot.gpu is not None
            if warm and not self.stop.requested:
                supervisor.heat("cuda:0", self.heat_s)
                supervisor.keep_warm("cuda:0", KEEP_WARM_MAX_S)  # through the wait below
            try:  # all start together, so the longest trials go to different workers
                self.barrier.wait(START_TIMEOUT_S)
            except threading.BrokenBarrierError:
                pass
            while not self.stop.requested and not self.abort.is_set():
                task = self.queue.take(slot.index)
                if task is None:
                    break
                row = run_on(supervisor, slot, task)
                if writing is not None:
                    writing.result()  # the previous row is on disk (or its error raised)
                if self.abort.is_set():
                    break
                writing = writer.submit(self.record, row, task)
            if writing is not None:
                writing.result()
            if warm and not self.stop.requested and not self.abort.is_set():
                supervisor.keep_warm("cuda:0", KEEP_WARM_MAX_S)  # until the next job's
        except BaseException as exc:  # noqa: BLE001 (SystemExit of a failed journal write)
            self.errors.append(exc)
            self.abort.set()
            self.barrier.abort()
        finally:
            writer.shutdown(wait=True)


def run_on(supervisor: Supervisor, slot: Slot, task: TrialTask) -> dict[str, Any]:
    """Run one trial on one worker: a CUDA trial of a GPU-owning worker runs on its
    ``cuda:0``; the row keeps the job's device and trial id, and says which worker ran it."""
    spec = task.spec
    local = task
    if slot.gpu is not None and spec.device.startswith("cuda"):
        local = replace(task, spec=replace(spec, device="cuda:0"))
    row = supervisor.run(local)
    row.update(device=spec.device, trial_id=spec.trial_id, worker=slot.index)
    return row


_POOL: Pool | None = None
#: With ``gpu_warmup_s``, the longest a worker keeps its GPU under load while it waits (for
#: the other workers to be ready, for the next job of a multirun; a request ends it).
KEEP_WARM_MAX_S = 30.0


def pool(slots: tuple[Slot, ...]) -> Pool:
    """The driver's pool for this placement: reused across the jobs of a multirun, replaced
    (old workers stopped) when a job asks for another one; stopped at exit."""
    global _POOL
    if _POOL is not None and _POOL.slots == slots:
        return _POOL
    if _POOL is None:
        atexit.register(_stop_at_exit)  # after multiprocessing's handler: runs before it
    else:
        _POOL.stop()
    _POOL = Pool(slots)
    return _POOL


def stop_pool() -> None:
    """Stop the pool's workers (a job of the multirun runs with one worker, or at exit); a
    later :func:`pool` call starts them again."""
    if _POOL is not None:
        _POOL.stop()


def _stop_at_exit() -> None:
    """The driver exits: kill the pool's workers without waiting for their GPU contexts to be
    torn down."""
    if _POOL is not None:
        _POOL.stop(wait=False)
