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

Every attempt stays in the journal; this only chooses the one row per trial. The same rule
says when a merged view may be replaced (:func:`superset_problem`): only by one that keeps
every trial and every finished row, or that the rule prefers (a damaged sweep is repaired).
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


def row_keys(table: pa.Table) -> list[tuple[tuple, tuple]]:
    """``((sweep_id, job_num, trial_index), (status, trial_id, timestamp))`` of each row."""
    names = ("sweep_id", "job_num", "trial_index", "status", "trial_id", "timestamp")
    n = table.num_rows
    cols = [table.column(c).to_pylist() if c in table.column_names else [None] * n
            for c in names]
    return [((s, j, i), (st, tid, ts)) for s, j, i, st, tid, ts in zip(*cols)]


def superset_problem(old: pa.Table, new: pa.Table) -> str | None:
    """Why ``new`` may not replace ``old`` (None when it may): every trial of ``old`` must be
    in ``new``, and every ``ok``/``skipped`` row of ``old`` unchanged there, or replaced by an
    attempt the one rule prefers (:mod:`runner.storage.attempts`: a sweep with two ok attempts
    of one trial is repaired to the earliest; the other attempts stay in the journal)."""
    return compare_rows(old, new)[0]


def compare_rows(old: pa.Table, new: pa.Table) -> tuple[str | None, list[tuple]]:
    """The problem (or None) and the trials whose kept row the rule changed."""
    new_rows: dict[tuple, list[tuple]] = {}
    for key, value in row_keys(new):
        new_rows.setdefault(key, []).append(value)
    old_rows = row_keys(old)
    missing = [key for key, _ in old_rows if key not in new_rows]
    if missing:
        return (f"{len(missing)} trial(s) of the existing file are missing, e.g. {missing[0]}",
                [])
    changed, repaired = [], []
    for key, value in old_rows:
        if value[0] not in DONE_STATUSES or value in new_rows[key]:
            continue
        if any(preference(v[0], v[2]) < preference(value[0], value[2]) for v in new_rows[key]):
            repaired.append(key)
        else:
            changed.append(key)
    if changed:
        return f"{len(changed)} finished trial(s) would change, e.g. {changed[0]}", repaired
    return None, repaired
