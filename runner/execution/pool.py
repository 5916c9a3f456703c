"""``workers=N`` / ``workers=per_gpu``: the trials of one job run concurrently, one supervised
worker process per GPU, fed from one queue (docs/scale-out.md).

Why: a sweep ran its trials one after another on one GPU; a user with an 8-GPU node used one
of them. Design, on top of the crash-isolation worker (``runner.execution.worker``):

* **Placement.** Worker *i* is a :class:`~runner.execution.worker.Supervisor` whose processes
  start with ``CUDA_VISIBLE_DEVICES`` set to the *i*-th GPU visible to the driver (the
  driver's own ``CUDA_VISIBLE_DEVICES`` list is respected), so it owns exactly one device and
  two trials never share a GPU. Inside it ``cuda`` / ``cuda:0`` is its GPU.
* **Pinning.** A trial whose device was written as ``cuda:N`` runs only on the worker owning
  visible GPU N (rewritten to ``cuda:0`` inside it). Its row keeps ``device=cuda:N`` (the
  driver's numbering, what the user asked) and its ``trial_id``; ``gpu_index`` / ``gpu_uuid``
  say which physical GPU ran it. ``device=cuda`` or ``auto`` (resolved to ``cuda:0``) is not
  pinned: any worker runs it on its own GPU, and its row says ``cuda:0``.
* **Order.** One queue, longest first (:func:`cost`); each worker's thread takes the next
  trial it may run when it finishes one.
* **CPU.** Every worker runs with ``cpu_count // N`` intra-op threads (a trial's
  ``num_threads`` still wins), so N CPU workers split the cores and CI tests this path.
* **Reuse.** One pool per driver process (:func:`pool`), reused by every Hydra job of a
  multirun with the same placement: worker start (importing torch) is paid once per worker.
"""

from __future__ import annotations

import atexit
import math
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from runner.core.errors import ConfigError
from runner.execution.worker import START_TIMEOUT_S, Supervisor

PER_GPU = "per_gpu"
#: per-call cost of fwd+bwd relative to forward only (about two more passes)
BACKWARD_FACTOR = 3
_PINNED = re.compile(r"cuda:(\d+)")


@dataclass(frozen=True)
class Slot:
    """One worker: its number (the ``worker`` column), the visible GPU it owns (the driver's
    numbering; None: no GPU), its environment and its intra-op thread count."""

    index: int
    gpu: int | None
    env: tuple[tuple[str, str], ...]
    threads: int | None


@dataclass(frozen=True)
class WorkerPlan:
    """The job's workers and which trials are pinned to a visible GPU (trial index → GPU)."""

    slots: tuple[Slot, ...]
    pinned: dict[int, int]


def visible_gpus() -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` entry of each GPU the driver sees, in CUDA's order.

    Counted by ``torch.cuda.device_count()`` (NVML / cudaGetDeviceCount): no CUDA context is
    made in the driver."""
    from runner.core.axes import cuda_device_count

    count = cuda_device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def explicit_gpus(values: dict[str, Any]) -> set[str]:
    """Devices written as ``cuda:N`` in the job's config (its ``device`` and its cases'): the
    only ones that pin. ``cuda`` and ``auto`` resolve to ``cuda:0`` too but do not pin."""
    from runner.config.trials import as_choices

    raws = list(as_choices(values.get("device")))
    for case in values.get("cases") or []:
        if isinstance(case, dict) and "device" in case:
            raws += list(as_choices(case["device"]))
    return {str(raw) for raw in raws if _PINNED.fullmatch(str(raw))}


def plan_workers(workers: Any, isolation: str, planned: list, explicit: set[str],
                 gpus: list[str] | None = None, cpu_count: int | None = None) -> WorkerPlan:
    """The workers of one job; :class:`ConfigError` (exit 2) for a placement that cannot
    work. ``gpus``/``cpu_count`` default to this machine's (tests inject them)."""
    gpus = visible_gpus() if gpus is None else gpus
    cpu_count = cpu_count or os.cpu_count() or 1
    if workers == PER_GPU:
        if not gpus:
            raise ConfigError("invalid value for 'workers': 'per_gpu' makes one worker per GPU, "
                              "but no CUDA device is visible on this machine. Use workers=N to "
                              "split the CPU's cores over N workers, or workers=1.")
        n = len(gpus)
    else:
        n = int(workers)
    if n > 1 and isolation != "process":
        raise ConfigError(f"invalid value for 'workers': {workers!r} with isolation="
                          f"{isolation}: trials in the driver process cannot run in parallel. "
                          "Use isolation=process, or workers=1.")
    uses_cuda = any(t.spec.device.startswith("cuda") for t in planned)
    if uses_cuda and n > len(gpus):
        raise ConfigError(f"invalid value for 'workers': {workers!r}. This machine has "
                          f"{len(gpus)} visible CUDA device(s) and each worker owns one; use "
                          f"workers={max(len(gpus), 1)} or workers=per_gpu.")
    pin = uses_cuda or n <= len(gpus)
    threads = max(1, cpu_count // n) if n > 1 else None
    slots = tuple(Slot(i, i if pin else None,
                       (("CUDA_VISIBLE_DEVICES", gpus[i]),) if pin else (), threads)
                  for i in range(n))
    pinned = {}
    for trial in planned:
        if n > 1 and trial.spec.device in explicit:
            gpu = int(trial.spec.device.partition(":")[2])
            if gpu >= n:
                raise ConfigError(f"invalid value for 'device': {trial.spec.device!r} pins "
                                  f"trials to visible GPU {gpu}, but workers={workers} runs on "
                                  f"visible GPUs 0..{n - 1}. Use workers=per_gpu, or "
                                  "device=cuda (any worker's GPU).")
            pinned[trial.index] = gpu
    return WorkerPlan(slots, pinned)


def cost(spec: Any) -> float:
    """Estimated cost of a trial, for ordering only: the product of its shape's sizes times
    the bytes per element of its dtype, times 3 for fwd+bwd. Crude (it ignores the op), but
    within one op the big shapes are the slow trials, and those must not start last."""
    from runner.execution.context import TORCH_DTYPES

    factor = BACKWARD_FACTOR if getattr(spec, "backward", False) else 1
    return math.prod(spec.shape) * TORCH_DTYPES[spec.dtype].itemsize * factor


def longest_first(trials: Iterable[Any]) -> list[Any]:
    """Trials by :func:`cost`, descending; equal costs keep the plan's order."""
    return sorted(trials, key=lambda trial: -cost(trial.spec))


class TrialQueue:
    """The job's one queue: a worker takes the first trial it may run (unpinned, or pinned to
    its GPU)."""

    def __init__(self, trials: Iterable[Any], pinned: dict[int, int]) -> None:
        self.items = longest_first(trials)
        self.pinned = pinned
        self.lock = threading.Lock()

    def take(self, slot: Slot) -> Any:
        with self.lock:
            for position, trial in enumerate(self.items):
                gpu = self.pinned.get(trial.index)
                if gpu is None or gpu == slot.gpu:
                    return self.items.pop(position)
        return None


class Pool:
    """N supervisors, one per :class:`Slot`."""

    def __init__(self, slots: tuple[Slot, ...]) -> None:
        self.slots = slots
        self.supervisors = [Supervisor(dict(s.env), s.threads, f"opsweep-worker-{s.index}")
                            for s in slots]

    def prestart(self) -> None:
        for supervisor in self.supervisors:
            supervisor.prestart()

    def stop(self) -> None:
        for supervisor in self.supervisors:
            supervisor.stop()

    def run(self, trials: list, pinned: dict[int, int], args: tuple, *, stop: Any,
            record: Callable[[dict[str, Any], Any], None], heat_s: float = 0.0) -> None:
        """Run ``trials`` on every worker at once; ``record(row, trial)`` is called under one
        lock as each finishes. ``args``: (timer, check_accuracy, timeout_s, insight).

        Stops handing out trials once ``stop.requested`` (first Ctrl-C): the trials in flight
        finish and are recorded. A ``KeyboardInterrupt`` (second Ctrl-C) kills the workers;
        what they were running is not recorded."""
        queue = TrialQueue(trials, pinned)
        lock, abort, errors = threading.Lock(), threading.Event(), []
        barrier = threading.Barrier(len(self.slots))
        heat = heat_s > 0 and any(t.spec.device.startswith("cuda") for t in trials)

        def serve(slot: Slot, supervisor: Supervisor) -> None:
            try:
                supervisor.wait_ready()
                if heat and slot.gpu is not None:
                    supervisor.heat("cuda:0", heat_s)
                try:  # all start together, so the longest trials go to different workers
                    barrier.wait(START_TIMEOUT_S)
                except threading.BrokenBarrierError:
                    pass
                while not stop.requested and not abort.is_set():
                    trial = queue.take(slot)
                    if trial is None:
                        return
                    row = run_on(supervisor, slot, trial, args)
                    with lock:
                        if not abort.is_set():
                            record(row, trial)
            except BaseException as exc:  # noqa: BLE001 (SystemExit of a failed journal write)
                errors.append(exc)
                abort.set()
                barrier.abort()

        threads = [threading.Thread(target=serve, args=(slot, sup), daemon=True,
                                    name=f"opsweep-worker-{slot.index}")
                   for slot, sup in zip(self.slots, self.supervisors)]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # short joins: the Ctrl-C handler runs in this thread
        except KeyboardInterrupt:
            abort.set()
            self.stop()
            for thread in threads:
                thread.join(15)
            raise
        if errors:
            raise errors[0]


def run_on(supervisor: Supervisor, slot: Slot, trial: Any, args: tuple) -> dict[str, Any]:
    """Run one trial on one worker: a CUDA trial of a GPU-owning worker runs on its
    ``cuda:0``; the row keeps the job's device and trial id, and says which worker ran it."""
    spec = trial.spec
    local = trial
    if slot.gpu is not None and spec.device.startswith("cuda"):
        local = replace(trial, spec=replace(spec, device="cuda:0"))
    row = supervisor.run(local, *args)
    row.update(device=spec.device, trial_id=spec.trial_id, worker=slot.index)
    return row


_POOL: Pool | None = None


def pool(slots: tuple[Slot, ...]) -> Pool:
    """The driver's pool for this placement: reused across the jobs of a multirun, replaced
    (old workers stopped) when a job asks for another one; stopped at exit."""
    global _POOL
    if _POOL is not None and _POOL.slots == slots:
        return _POOL
    if _POOL is None:
        atexit.register(stop_pool)  # after multiprocessing's handler: runs before it
    else:
        _POOL.stop()
    _POOL = Pool(slots)
    return _POOL


def stop_pool() -> None:
    """Stop the pool's workers (a job of the multirun runs with one worker, or at exit); a
    later :func:`pool` call starts them again."""
    if _POOL is not None:
        _POOL.stop()
