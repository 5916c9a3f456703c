"""How the workers of ``workers=N`` take their trials at run time, from the lists the
placement made (``runner.execution.schedule.assign``): the plan is a guess, and this is where
the job adapts to what each GPU really does (docs/scale-out.md#scheduling)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from runner.execution.costs import TrialCost
from runner.execution.order import cost as order_cost
from runner.execution.order import most_work_first
from runner.execution.schedule import Assignment


class WorkerQueues:
    """The job's trials as each worker takes them: its own capped trials and those pinned to
    it, in the order of its list (``runner.execution.schedule.assign``); then those that may
    be capped, one shared list, the most work first; then the light trials, one shared list,
    longest first, whoever is free; then, where taking one over finishes sooner than leaving
    it, the last trial of the worker with the most estimated seconds left.

    Why the light trials are shared: the estimate is a guess, and a GPU can be slower than
    it says. On a 4×H100 host one GPU sustained 1398 MHz on capped work where the others
    held 1618-1661 and its first trial warmed up 5 s instead of 2.5; the lists were even
    by estimate, and that GPU ran 2-3 s longer than the others. Light trials settle in
    milliseconds wherever they run, so the faster GPUs take more of them; the capped ones
    keep their place, after their own group, hot.

    Why those that may be capped are shared too: each settles in 0.1 s or in 1-2 s,
    depending on the GPU and on what ran before, so no estimate places them well. Kept on
    their worker's list, on a 4×H200 host the last of them ended one GPU's sweep 2.2 s
    after the others. Shared, the first worker done with its capped trials takes the next
    one, hot. A worker whose last trial was light, or that has taken none in a job with
    capped trials, takes the light ones first, and those that may be capped only when no
    light one is left: from cold, one held at the power limit warms up longest, and a
    worker done with its capped trials will take it hot. In a job with no capped trial they
    go first, as in one worker's order (``runner.execution.order.capped_first``)."""

    def __init__(self, assignment: Assignment, costs: Mapping[int, TrialCost],
                 pinned: Mapping[int, int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.assignment = assignment
        self.costs = costs
        self.pinned = pinned
        self.clock = clock
        self.lock = threading.Lock()

        def own(trial: Any) -> bool:
            return trial.index in pinned or costs[trial.index].capped

        self.lists = [[t for t in mine if own(t)] for mine in assignment.lists]
        #: per worker: whether the last trial it took holds the device hot (capped, or may
        #: be); a worker that has taken none counts as hot only in a job with no capped
        #: trial, where nobody will be hotter (one worker's order: ``capped_first``)
        self.hot: dict[int, bool] = {}
        self.any_capped = any(costs[t.index].capped for mine in self.lists for t in mine)
        self.maybe_capped = most_work_first(
            t for mine in assignment.lists for t in mine
            if not own(t) and costs[t.index].maybe_capped)
        # longest first; among equal estimates the heavier shape first, as one worker's heat
        # order has it (``runner.execution.order.longest_first``)
        self.shared = sorted((t for mine in assignment.lists for t in mine
                              if not own(t) and not costs[t.index].maybe_capped),
                             key=lambda t: (-costs[t.index].seconds, -order_cost(t.spec)))
        #: per worker: when its trial in hand started and its estimated seconds
        self.running: dict[int, tuple[float, float]] = {}

    def take(self, worker: int) -> Any:
        """The next trial for ``worker``: its own next one, else the next shared one (those
        that may be capped and the light ones, in the order above), else one taken over;
        None when nothing is left that it may run, or worth taking."""
        with self.lock:
            trial, seconds = self._next(worker)
            if trial is None:
                self.running.pop(worker, None)
            else:
                self.running[worker] = (self.clock(), seconds)
            return trial

    def _next(self, worker: int) -> tuple[Any, float]:
        """The next trial for ``worker`` and the seconds it is expected to take there."""
        trial, seconds = self._pick(worker)
        if trial is not None:
            self.hot[worker] = self._heavy(trial)
        return trial, seconds

    def _heavy(self, trial: Any) -> bool:
        """Whether ``trial`` holds the device hot: capped, or it may be."""
        cost = self.costs[trial.index]
        return cost.capped or cost.maybe_capped

    def _pick(self, worker: int) -> tuple[Any, float]:
        mine = self.lists[worker]
        hot = self.hot.get(worker, not self.any_capped)
        # its own capped trials first (and its pinned ones that may be capped); then, hot,
        # the next shared one that may be capped, before its pinned light trials let the
        # clock come back up
        if mine and (self._heavy(mine[0]) or not (hot and self.maybe_capped)):
            trial = mine.pop(0)
            return trial, self.costs[trial.index].seconds
        for shared in ((self.maybe_capped, self.shared) if hot
                       else (self.shared, self.maybe_capped)):
            if shared:
                trial = shared.pop(0)
                cost = self.costs[trial.index]
                return trial, cost.seconds + (0.0 if hot else cost.cold_s)
        left = {i: self._seconds_left(i) for i in range(len(self.lists)) if i != worker}
        for other in sorted(left, key=lambda i: -left[i]):
            for position in range(len(self.lists[other]) - 1, -1, -1):
                trial = self.lists[other][position]
                if trial.index in self.pinned:
                    continue
                # Taken over, it starts cold here (a capped trial's warm-up from cold); left,
                # it runs after what its worker has in hand and queued before it. Only the
                # last is a candidate: the others would leave their worker's heat order.
                cost = self.costs[trial.index]
                if cost.seconds + cost.cold_s < left[other]:
                    return self.lists[other].pop(position), cost.seconds + cost.cold_s
                break
        return None, 0.0

    def _seconds_left(self, worker: int) -> float:
        """Estimated seconds before ``worker`` is done: its queued trials, and what is left
        of the one in hand. A trial past its estimate counts as done: how much longer it
        runs is not known, and a guess too high would move capped trials to start cold."""
        queued = sum(self.costs[t.index].seconds for t in self.lists[worker])
        if worker not in self.running:
            return queued
        started, seconds = self.running[worker]
        return queued + max(seconds - (self.clock() - started), 0.0)

    @property
    def items(self) -> list[Any]:
        """The trials not handed out yet."""
        with self.lock:
            return ([t for mine in self.lists for t in mine] + list(self.maybe_capped)
                    + list(self.shared))
