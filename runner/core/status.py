"""The outcome of one trial (the ``status`` column), apart from the result schema
(``runner.storage.columns``) so that the processes that run trials name it without importing
pyarrow: the driver starts its workers before anything heavy is imported."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Outcome of one trial. Every trial ends as a row with one of these (the ``status``
    column)."""

    ok = "ok"
    error = "error"
    skipped = "skipped"
    oom = "oom"
    #: the worker process died (signal, exit) or its CUDA context was poisoned
    crashed = "crashed"
    #: no result within trial_timeout_s; the worker was killed
    timeout = "timeout"
