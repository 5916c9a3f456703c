"""Which worker of ``workers=N`` runs which trials, and in what order: balanced by estimated
cost (``runner.execution.costs``), heat order kept on each GPU (docs/scale-out.md#scheduling).

Why: one longest-first queue balanced the trials by the size of their shape, and scattered
every heat group over every GPU. A power-capped group (bf16 at 2048³ and up) then paid its
cold warm-up once per GPU it touched, and its trials followed uncapped ones of other groups
(``runner.execution.order``: each starts cold). And the size of a shape is not what a trial
costs: the timer's warm-up and budget are.

The rule:

1. The job's trials fall into heat groups (:func:`runner.execution.order.heat_order`: same
   everything but the shape), each largest first; a trial pinned to a GPU (``cuda:N``)
   groups only with trials pinned to the same GPU.
2. Each worker's load is its trials' estimated seconds plus one cold start per heat group
   it runs (``TrialCost.cold_s``: a conservative charge; with the capped trials run back
   to back (4.), only a worker's first capped group starts cold).
3. Groups are cut, in their heat order, into runs of consecutive trials: not at all, or into
   runs of a fair share (the job's seconds over the workers), half one, ... down to single
   trials. For each cut, the runs go longest first to the least loaded worker (pinned runs
   to their own), then a run moves off the busiest worker while that lowers its load. The
   cut whose busiest worker is least loaded wins (ties: the fewest runs). So a group is
   split across GPUs only where it is longer than a fair share, or where the job's
   trials are too few and too long to balance otherwise, and each split pays its cold start.
4. A worker runs its trials in heat order: its capped trials first, each group together and
   largest first, the groups longest first; then those that may be capped, then its light
   trials, each longest first across groups (``runner.execution.order.capped_first``).
5. At run time those that may be capped, then the light trials, are shared lists: a worker
   done with its capped trials takes the next one left (hot, the next that may be capped,
   before its own pinned light trials), so a GPU slower than its estimate takes fewer. A
   worker with nothing left takes the *last* trial of the worker with the most estimated
   seconds left, where running it here (from cold) ends sooner than leaving
   it: an estimate that was wrong costs one trial's time at the end, not a GPU idle for
   minutes. Pinned trials stay (``runner.execution.worker_queues``).

No scheduler of our own beyond this: the worker processes are the pool's
(``runner.execution.pool``); this module only decides the lists and hands out trials.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.execution.costs import TrialCost
from runner.execution.order import capped_first, heat_key, longest_first


@dataclass(frozen=True)
class Assignment:
    """Each worker's trials in the order it runs them, and its estimated seconds."""

    lists: tuple[tuple[Any, ...], ...]
    loads_s: tuple[float, ...]

    @property
    def balance(self) -> float:
        """The busiest worker's estimate over the mean (1.0: perfectly even)."""
        mean = sum(self.loads_s) / len(self.loads_s) if self.loads_s else 0.0
        return max(self.loads_s) / mean if mean > 0 else 1.0


def heat_groups(trials: Iterable[Any], pinned: Mapping[int, int]) -> list[list[Any]]:
    """The heat groups of ``trials`` (a pinned trial only with those pinned to its worker),
    in the order of their first trial, each largest first."""
    groups: dict[tuple[str, int | None], list[Any]] = {}
    for trial in trials:
        groups.setdefault((heat_key(trial.spec), pinned.get(trial.index)),
                          []).append(trial)
    return [longest_first(group) for group in groups.values()]


def split(group: Sequence[Any], costs: Mapping[int, TrialCost], fair_s: float) -> list[list]:
    """``group`` cut, in its order, into about ``ceil(seconds / fair_s)`` runs of equal
    estimated seconds; whole when it is no longer than ``fair_s``."""
    total = _group_seconds(group, costs)
    parts = min(len(group), math.ceil(total / fair_s)) if fair_s > 0 else 1
    if parts <= 1:
        return [list(group)]
    runs: list[list[Any]] = [[]]
    target = total / parts
    seconds = cold = 0.0  # the current run's
    for trial in group:
        cost = costs[trial.index]
        if runs[-1] and len(runs) < parts and seconds + cold + cost.seconds / 2 > target:
            runs.append([])
            seconds = cold = 0.0
        runs[-1].append(trial)
        seconds, cold = seconds + cost.seconds, max(cold, cost.cold_s)
    return runs


def assign(trials: Iterable[Any], costs: Mapping[int, TrialCost], workers: int,
           pinned: Mapping[int, int] | None = None) -> Assignment:
    """The trials of one job placed on ``workers`` workers by the rule above. ``pinned``:
    trial index -> the worker that must run it."""
    pinned = pinned or {}
    groups = heat_groups(trials, pinned)
    if workers < 1 or not groups:
        return Assignment(tuple(() for _ in range(max(workers, 0))), (0.0,) * max(workers, 0))
    fair_s = sum(_group_seconds(group, costs) for group in groups) / workers
    keys = [heat_key(group[0].spec) for group in groups]

    def placed_cut(parts: int) -> list[_Worker]:
        """Groups cut into runs of a fair share over ``parts`` (0: whole), placed."""
        runs = [_Run(run, key, pinned.get(group[0].index), costs)
                for key, group in zip(keys, groups)
                for run in ([group] if parts == 0 or group[0].index in pinned
                            else split(group, costs, fair_s / parts))]
        return _improve(_place(runs, workers))

    def score(placed: list[_Worker]) -> tuple[float, int]:
        """The busiest worker's seconds, then how many runs (fewer: fewer cold starts)."""
        return (round(max(w.load for w in placed), 6), sum(len(w.runs) for w in placed))

    # how finely long groups are cut: not at all, a fair share, half, a quarter, ... single
    # trials (doubling: a few placements, however many trials); finer only while it helps
    longest = max(map(len, groups))
    best: list[_Worker] | None = None
    for parts in [0] + [2**i for i in range(longest.bit_length() + 1)]:
        placed = placed_cut(parts)
        if best is None or score(placed) < score(best):
            best = placed
        if max(w.load for w in best) <= EVEN * sum(w.load for w in best) / workers:
            break
    lists = tuple(tuple(_heat_ordered(w.runs, costs)) for w in best or ())
    return Assignment(lists, tuple(w.load for w in best or ()))


def _group_seconds(group: Sequence[Any], costs: Mapping[int, TrialCost]) -> float:
    """Seconds of trials of one heat group run together: theirs, plus one cold start."""
    return (sum(costs[t.index].seconds for t in group)
            + max((costs[t.index].cold_s for t in group), default=0.0))


def _heat_ordered(runs: list[_Run], costs: Mapping[int, TrialCost]) -> list[Any]:
    """One worker's trials in the order it runs them: each heat group together, largest
    first; the groups longest first; then the capped trials of all its groups before those
    that may be capped, and those before the light ones
    (:func:`runner.execution.order.capped_first`)."""
    groups: dict[str, list[Any]] = {}
    for run in runs:
        groups.setdefault(run.key, []).extend(run.trials)
    ordered = [longest_first(group) for group in groups.values()]
    grouped = [t for group in sorted(ordered, key=lambda g: -_group_seconds(g, costs))
               for t in group]
    return capped_first(grouped, lambda trial: costs[trial.index].capped,
                        lambda trial: costs[trial.index].maybe_capped)


class _Run:
    """Consecutive trials of one heat group, placed together."""

    def __init__(self, trials: list[Any], key: str, owner: int | None,
                 costs: Mapping[int, TrialCost]) -> None:
        self.trials, self.key, self.owner = trials, key, owner
        self.seconds = sum(costs[t.index].seconds for t in trials)
        self.cold_s = max(costs[t.index].cold_s for t in trials)


class _Worker:
    """One worker's runs and load: their seconds, plus one cold start per heat group (the
    longest of its runs')."""

    def __init__(self) -> None:
        self.runs: list[_Run] = []
        self.seconds = self.cold_s = 0.0
        #: per heat group: how many of its runs here have each cold start
        self.colds: dict[str, dict[float, int]] = {}

    @property
    def load(self) -> float:
        return self.seconds + self.cold_s

    def _cold(self, key: str) -> float:
        return max(self.colds.get(key) or (0.0,))

    def cold_after(self, run: _Run) -> float:
        """How much more cold start ``run`` would add here."""
        return max(run.cold_s - self._cold(run.key), 0.0)

    def add(self, run: _Run) -> None:
        self.cold_s += self.cold_after(run)
        self.runs.append(run)
        self.seconds += run.seconds
        counts = self.colds.setdefault(run.key, {})
        counts[run.cold_s] = counts.get(run.cold_s, 0) + 1

    def remove(self, run: _Run) -> None:
        self.runs.remove(run)
        self.seconds -= run.seconds
        before = self._cold(run.key)
        counts = self.colds[run.key]
        counts[run.cold_s] -= 1
        if not counts[run.cold_s]:
            del counts[run.cold_s]
        self.cold_s -= before - self._cold(run.key)

    def load_with(self, add: _Run | None = None, remove: _Run | None = None) -> float:
        """The load after adding and/or removing a run (nothing changed)."""
        if remove is not None:
            self.remove(remove)
        load = self.load + (add.seconds + self.cold_after(add) if add else 0.0)
        if remove is not None:
            self.add(remove)
        return load


def _place(runs: list[_Run], workers: int) -> list[_Worker]:
    """Runs longest first onto the least loaded worker (pinned runs first, to their own)."""
    placed = [_Worker() for _ in range(workers)]
    for run in sorted(runs, key=lambda r: (r.owner is None, -(r.seconds + r.cold_s))):
        worker = run.owner if run.owner is not None else min(
            range(workers), key=lambda i: placed[i].load_with(add=run))
        placed[worker].add(run)
    return placed


def _improve(placed: list[_Worker]) -> list[_Worker]:
    """Move a run off the busiest worker, or swap it for a shorter one, while that lowers
    the busiest worker's load."""
    for _ in range(4 * len(placed) * SEARCH):
        busiest = max(placed, key=lambda w: w.load)
        top = busiest.load - 1e-9
        step = None
        for run in sorted((r for r in busiest.runs if r.owner is None),
                          key=lambda r: -r.seconds)[:SEARCH]:
            for other in (w for w in placed if w is not busiest):
                if max(busiest.load_with(remove=run), other.load_with(add=run)) < top:
                    step = (run, other, None)
                    break
                for back in sorted((r for r in other.runs if r.owner is None
                                    and r.seconds < run.seconds),
                                   key=lambda r: -r.seconds)[:SEARCH]:
                    busiest.remove(run)
                    other.remove(back)
                    better = max(busiest.load_with(add=back), other.load_with(add=run)) < top
                    busiest.add(run)
                    other.add(back)
                    if better:
                        step = (run, other, back)
                        break
                if step:
                    break
            if step:
                break
        if step is None:
            break
        run, other, back = step
        busiest.remove(run)
        other.add(run)
        if back is not None:
            other.remove(back)
            busiest.add(back)
    return placed


#: How many of a worker's longest runs one improving step tries to move or swap.
SEARCH = 16
#: A placement whose busiest worker is within this factor of the mean is not cut finer.
EVEN = 1.02
