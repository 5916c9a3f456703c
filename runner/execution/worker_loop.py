"""The worker process's side of crash isolation (``runner.execution.worker``): its loop, and
one trial into one row whatever happens (also used in the driver with ``isolation=none``).

The loop answers the driver's requests one at a time: ``trial`` (a
:class:`~runner.execution.task.TrialTask`, exactly as the job built it; a row back, with the
seconds the trial took, ``worker_trial_wall_s``), ``warm`` (``runner.execution.warmup``),
``heat`` and ``keep_warm`` (heat until the next request).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from runner.core.status import Status

if TYPE_CHECKING:
    from runner.execution.task import TrialTask
    from runner.execution.timed import WorkerTiming
    from runner.execution.warmup import EarlyWarmups

#: Error text that means the CUDA context of the process is unusable from now on.
POISONED_CUDA = (
    "device-side assert", "illegal memory access", "an illegal instruction",
    "misaligned address", "unspecified launch failure", "CUDA error: an illegal",
    "CUBLAS_STATUS_EXECUTION_FAILED", "operation not permitted when stream is capturing",
)


def run_trial_safely(task: TrialTask, state: WorkerTiming | None = None) -> dict[str, Any]:
    """``run_trial``, plus the failures it cannot turn into a row itself (its clean-up raising
    after a device-side assert). A poisoned CUDA context makes the row ``crashed``.
    ``state``: what this process keeps between its trials (``run_trial``)."""
    from runner.execution.trial import failed_row, run_trial

    try:
        row = run_trial(task, state)
    except Exception as exc:  # the trial's own handler failed too: still one row
        row = failed_row(task, Status.error, f"{type(exc).__name__}: {exc}"[:500])
        row["error_traceback"] = traceback.format_exc()
    if row.get("status") == Status.error.value and is_poisoned(row):
        row["status"] = Status.crashed.value
        row["reason"] = f"CUDA context poisoned, worker replaced: {row['reason']}"
    return row


def is_poisoned(row: dict[str, Any]) -> bool:
    text = f"{row.get('reason') or ''}\n{row.get('error_traceback') or ''}"
    return any(marker in text for marker in POISONED_CUDA)


def serve(conn: Any, env: dict[str, str] | None = None, threads: int | None = None,
          cuda_ordinals: tuple[int, ...] = ()) -> None:
    """The worker's main loop: start (:func:`_start`), then answer requests one at a time
    until the driver hangs up, or until a trial's row retires the worker."""
    early = _start(conn, env, threads, cuda_ordinals)
    answer_requests(conn, early=early)


def answer_requests(conn: Any, heat_while_idle: Any = None,
                    early: EarlyWarmups | None = None) -> None:
    """Answer the driver's requests one at a time, until it hangs up or a row retires the
    worker. ``keep_warm`` (device, max seconds) is answered at once; then the device is
    kept under load (``runner.execution.warmup.heat_while_idle``) until the next request
    comes. ``early``: the CUDA warm-ups this worker started after its import, for ``warm``."""
    if heat_while_idle is None:
        from runner.execution.warmup import heat_while_idle
    heated: tuple[str, float, float] | None = None  # device, seconds, when (keep_warm's)
    from runner.execution.timed import WorkerTiming  # imported by _start already

    state = WorkerTiming()  # this worker's, handed from each trial to the next
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "keep_warm":
            conn.send(("keeping", {}, False))
            seconds = heat_while_idle(*payload, asked=conn.poll)
            heated = (payload[0], seconds, time.perf_counter())
            continue
        if kind == "heat" and heated is not None:
            payload = still_to_heat(payload, heated)
        heated = None
        answer = handle(kind, payload, state, early)
        conn.send(answer)
        if answer[2]:
            return


def still_to_heat(request: tuple[str, float], heated: tuple[str, float, float],
                  now_s: float | None = None) -> tuple[str, float]:
    """A ``heat`` request (device, seconds) less what ``keep_warm`` heated that device right
    before it (device, seconds, when it stopped): ``gpu_warmup_s`` counts the heat its worker
    gave the GPU while the driver was still planning."""
    device, seconds = request
    now_s = time.perf_counter() if now_s is None else now_s
    if heated[0] == device and now_s - heated[2] <= HEAT_GAP_S:
        seconds = max(0.0, seconds - heated[1])
    return device, seconds


#: Longest gap (s) between keeping a device warm and a heat request that counts it.
HEAT_GAP_S = 0.5


def handle(kind: str, payload: Any, state: WorkerTiming | None = None,
           early: EarlyWarmups | None = None) -> tuple[str, Any, bool]:
    """One request's answer: ``(kind, value, retire)``. A trial whose row is ``crashed`` (a
    poisoned CUDA context) retires the worker once its row is sent. ``state``: the worker's
    own, passed into every trial (``runner.execution.timed.WorkerTiming``); ``early``: its
    CUDA warm-ups started after the import, which ``warm`` waits for."""
    if kind == "trial":
        received = time.perf_counter()  # busy from here until the row is sent
        row = run_trial_safely(payload, state)
        row["worker_trial_wall_s"] = time.perf_counter() - received
        return "row", row, row["status"] == Status.crashed.value
    if kind == "warm":
        from runner.execution.warmup import warm

        return "warmed", warm(payload, early), False
    if kind == "heat":
        from runner.timing.heat import heat_device

        heat_device(*payload)
        return "done", None, False
    raise ValueError(f"unknown request {kind!r}: expected trial, warm, heat or keep_warm")


def _start(conn: Any, env: dict[str, str] | None, threads: int | None,
           cuda_ordinals: tuple[int, ...] = ()) -> EarlyWarmups:
    """Set the worker up and answer "ready" with its start-up steps
    (``runner.execution.timeline``); the CUDA warm-ups it started, for the "warm" request.

    ``env`` is applied first thing: the CUDA driver reads ``CUDA_VISIBLE_DEVICES`` when it
    initialises (the first CUDA call), so a pinned worker sees only its GPU.
    ``threads``: torch intra-op threads of this worker (a trial's ``num_threads`` still wins
    for that trial; ``context.trial_settings`` restores this value after it).
    ``cuda_ordinals``: GPUs whose context and cuBLAS handles start on a thread as soon as
    torch is imported (``runner.execution.warmup.start_cuda``)."""
    main_at = time.time()
    os.environ.update(env or {})
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    import gc

    from runner.core.bytecode import cache_bytecode
    from runner.execution.warmup import start_cuda

    bytecode_cache = cache_bytecode("torch")  # before torch: else it may compile every time
    started = time.perf_counter()
    import torch  # noqa: F401  (paid once, before "ready"; timed on its own)

    torch_import_s = time.perf_counter() - started
    early = start_cuda(cuda_ordinals)  # beside the imports below; "warm" waits for it
    import runner.execution.trial  # noqa: F401  (the trial code, ops base, pandas-free)

    imports_s = time.perf_counter() - started - torch_import_s
    if threads:
        torch.set_num_threads(threads)
    # Imports live for the process: keep per-trial gc.collect() short. No collect first: it
    # found 33 unreachable objects after these imports, and took 70-80 ms before "ready".
    gc.freeze()
    conn.send(("ready", {"pid": os.getpid(), "main_at": main_at, "torch_import_s":
                         torch_import_s, "imports_s": imports_s, "ready_at": time.time(),
                         "bytecode_cache": bytecode_cache},
               False))
    return early


def _die_with_parent() -> None:
    """Linux: the worker gets SIGKILL when the driver dies (even by SIGKILL), so no orphan
    keeps a GPU busy."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
