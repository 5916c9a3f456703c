"""Which attempt of a trial is its row: one fixed rule, used by the job view, the merge,
``collect``, ``resume`` and ``runner.load``.

A trial can have several attempts on disk: a resumed sweep runs its failed trials again, and a
sweep written by two processes at once (before sweeps were locked) ran some trials twice. The
kept row must not depend on which file happened to be written last, or the rebuilt views flip
between attempts and no merge can ever verify them again. The rule:

1. ``ok`` over ``skipped`` over every failure (``error``, ``crashed``, ``timeout``, ...);
2. among ``ok`` (or ``skipped``) attempts, the **earliest** (``timestamp``: when the trial
   started), so a later duplicate never displaces a row already kept;
3. among failures only, the **latest**: the most recent reason is the one to act on;
4. ties: the order the attempts were given in (job file first, then journal attempts).

Every attempt stays in the journal; this only chooses the one row per trial.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import pyarrow as pa

#: Statuses a resumed sweep never runs again.
DONE_STATUSES = frozenset({"ok", "skipped"})
_RANK = {"ok": 0, "skipped": 1}


def preference(status: Any, timestamp: Any) -> tuple[int, float]:
    """Sort key of one attempt: smaller is kept (see the module's rule)."""
    rank = _RANK.get(status, 2)
    seconds = _seconds(timestamp)
    if rank < 2:
        return rank, seconds if seconds is not None else math.inf
    return rank, -seconds if seconds is not None else math.inf


def _seconds(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    if hasattr(value, "timestamp"):  # pandas.Timestamp
        try:
            return float(value.timestamp())
        except (TypeError, ValueError):
            return None
    return None


def trial_keys(table: pa.Table) -> list[tuple]:
    """``(sweep_id, job_num, trial_index)`` of each row (missing parts: None / row number)."""
    n = table.num_rows

    def column(name: str, default: list[Any]) -> list[Any]:
        return table.column(name).to_pylist() if name in table.column_names else default

    return list(zip(column("sweep_id", [None] * n), column("job_num", [None] * n),
                    column("trial_index", list(range(n)))))


def keep_one(table: pa.Table) -> tuple[pa.Table, dict[tuple, int]]:
    """One row per trial by the rule, in trial order; and ``{trial: n}`` for every trial that
    had ``n >= 2`` finished (ok/skipped) attempts, so callers can say what they kept."""
    if table.num_rows == 0:
        return table, {}
    keys = trial_keys(table)
    n = table.num_rows
    statuses = (table.column("status").to_pylist() if "status" in table.column_names
                else [None] * n)
    stamps = (table.column("timestamp").to_pylist() if "timestamp" in table.column_names
              else [None] * n)
    chosen: dict[tuple, tuple] = {}
    finished: dict[tuple, int] = {}
    for i, key in enumerate(keys):
        rank = (*preference(statuses[i], stamps[i]), i)
        if statuses[i] in DONE_STATUSES:
            finished[key] = finished.get(key, 0) + 1
        if key not in chosen or rank < chosen[key]:
            chosen[key] = rank
    order = sorted((rank[-1] for rank in chosen.values()), key=lambda i: _sortable(keys[i]))
    repeated = {key: count for key, count in finished.items() if count > 1}
    return table.take(pa.array(order, pa.int64())), repeated


def _sortable(key: tuple) -> tuple:
    return tuple((value is None, value if value is not None else 0) if not isinstance(value, str)
                 else (False, value) for value in key)
