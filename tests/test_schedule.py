"""Placing a job's trials on ``workers=N`` by estimated cost (runner.execution.schedule,
runner.execution.costs): balanced by seconds, not by count; a heat group cut only where it is
longer than a fair share; heat order (largest first) kept on each worker. Fake trials and
fake costs: no worker process, no GPU."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fakes import ManualClock

from runner.execution import costs, schedule
from runner.execution.costs import TrialCost
from runner.execution.worker_queues import WorkerQueues
from runner.timing.measurement import TimerPlan


@dataclass(frozen=True)
class Spec:
    """What the schedule reads of a trial's spec (a dataclass, as ``TrialSpec``)."""

    op: str
    dtype: str
    shape: tuple[int, ...]
    device: str = "cuda:0"
    backward: bool = False
    streams: int = 1
    seed: int = 0

    @property
    def trial_id(self) -> str:
        return f"{self.op}-{self.dtype}-{'x'.join(map(str, self.shape))}"


def trials_of(specs: list[Spec]) -> list[Any]:
    return [SimpleNamespace(index=i, spec=spec) for i, spec in enumerate(specs)]


def group_of(trial: Any) -> tuple[str, str, int]:
    return trial.spec.op, trial.spec.dtype, trial.spec.seed


def loads(assignment: schedule.Assignment, cost: dict[int, TrialCost]) -> list[float]:
    """Each worker's seconds, counted from its list as it runs: a cold start at the first
    trial of each heat group (the trials of a group that may be capped run apart from its
    capped ones, right after capped work: hot)."""
    out = []
    for mine in assignment.lists:
        seconds, seen = 0.0, set()
        for trial in mine:
            seconds += cost[trial.index].seconds
            if group_of(trial) not in seen:
                seconds += cost[trial.index].cold_s
            seen.add(group_of(trial))
        out.append(seconds)
    return out


def test_balance_by_cost_not_by_count() -> None:
    # one capped group of four 4-second trials and 20 light trials of 0.1 s: by count, each
    # of two workers would get 12 trials; by cost the heavy group is cut in two
    specs = [Spec("matmul", "bf16", (s, s, s)) for s in (8192, 6144, 4096, 3072)]
    specs += [Spec("add", "fp32", (n,)) for n in range(1, 21)]
    trials = trials_of(specs)
    cost = {t.index: TrialCost(4.0, 1.5, True) if t.spec.op == "matmul" else TrialCost(0.1)
            for t in trials}
    placed = schedule.assign(trials, cost, 2)
    heavy = [[t.spec.shape[0] for t in mine if t.spec.op == "matmul"] for mine in placed.lists]
    assert sorted(map(len, heavy)) == [2, 2], heavy
    assert max(loads(placed, cost)) <= 1.1 * (sum(loads(placed, cost)) / 2)
    assert sorted(t.index for mine in placed.lists for t in mine) == list(range(len(trials)))


def test_a_long_group_is_cut_in_heat_order_and_each_run_is_largest_first() -> None:
    sizes = (8192, 6144, 4096, 3072, 2048, 1024)
    trials = trials_of([Spec("matmul", "bf16", (s, s, s)) for s in sizes])
    cost = {t.index: TrialCost(t.spec.shape[0] / 1024, 1.5, True) for t in trials}
    runs = schedule.split(schedule.heat_groups(trials, {})[0], cost, fair_s=13.0)
    assert [[t.spec.shape[0] for t in run] for run in runs] == [
        [8192, 6144], [4096, 3072, 2048, 1024]]
    placed = schedule.assign(trials, cost, 2)
    for mine in placed.lists:  # each GPU: heat order, largest first
        shown = [t.spec.shape[0] for t in mine]
        assert shown == sorted(shown, reverse=True) and shown


def test_each_worker_runs_the_capped_trials_of_its_groups_before_the_light_ones() -> None:
    specs = [Spec("matmul", d, (s, s, s)) for d in ("bf16", "fp16") for s in (4096, 512)]
    specs += [Spec("matmul", "fp32", (s, s, s)) for s in (256, 1024)]
    trials = trials_of(specs)
    cost = {t.index: TrialCost(2.0, 1.5, True) if t.spec.shape[0] == 4096 else TrialCost(0.1)
            for t in trials}
    placed = schedule.assign(trials, cost, 1)
    assert [(t.spec.dtype, t.spec.shape[0]) for t in placed.lists[0]] == [
        ("bf16", 4096), ("fp16", 4096), ("fp32", 1024), ("bf16", 512), ("fp16", 512),
        ("fp32", 256)]


def test_a_group_no_longer_than_a_fair_share_stays_on_one_worker() -> None:
    specs = [Spec("matmul", d, (s, s, s)) for d in ("bf16", "fp16") for s in (4096, 2048)]
    trials = trials_of(specs)
    cost = {t.index: TrialCost(2.0, 1.5, True) for t in trials}
    placed = schedule.assign(trials, cost, 2)
    assert sorted({t.spec.dtype for t in mine} == {d} for mine in placed.lists
                  for d in ("bf16", "fp16")).count(True) == 2
    assert all(len({group_of(t) for t in mine}) == 1 for mine in placed.lists)


def test_pinned_trials_stay_on_their_worker_and_are_never_taken_over() -> None:
    trials = trials_of([Spec("matmul", "bf16", (s, s, s)) for s in (4096, 2048, 1024, 512)])
    cost = {t.index: TrialCost(1.0) for t in trials}
    pinned = {0: 1, 1: 1}
    placed = schedule.assign(trials, cost, 2, pinned)
    assert {t.index for t in placed.lists[1]} >= {0, 1}
    queues = WorkerQueues(placed, cost, pinned)
    taken = []
    while (trial := queues.take(0)) is not None:
        taken.append(trial.index)
    assert not {0, 1} & set(taken), "worker 0 took a trial pinned to worker 1"
    assert {t.index for t in queues.items} == {0, 1}


def test_light_trials_are_shared_and_go_longest_first_to_whoever_is_free() -> None:
    # placed even by estimate; worker 0's GPU turns out slow and stays on its first trial:
    # worker 1 takes every light trial, longest first, wherever it was placed
    trials = trials_of([Spec("matmul", "bf16", (4096, 4096, 4096)),
                        Spec("add", "fp32", (3,)), Spec("add", "fp32", (1,)),
                        Spec("matmul", "bf16", (2048, 2048, 2048)),
                        Spec("add", "fp32", (2,))])
    cost = {0: TrialCost(3.0, 1.5, capped=True), 1: TrialCost(0.3), 2: TrialCost(0.1),
            3: TrialCost(2.0, 1.5, capped=True), 4: TrialCost(0.2)}
    placed = schedule.Assignment(((trials[0], trials[1], trials[2]),
                                  (trials[3], trials[4])), (3.4, 2.2))
    queues = WorkerQueues(placed, cost, {})
    assert queues.take(0) is trials[0]
    assert queues.take(1) is trials[3], "a worker's own capped trial comes first"
    assert [queues.take(1).index for _ in range(3)] == [1, 4, 2]
    assert queues.take(0) is None and not queues.items


def test_a_capped_trial_is_taken_over_only_where_that_ends_sooner() -> None:
    trials = trials_of([Spec("matmul", "bf16", (s, s, s)) for s in (8192, 4096, 2048)])
    cost = {t.index: TrialCost(2.0, 1.5, capped=True) for t in trials}
    placed = schedule.Assignment((tuple(trials), ()), (6.0, 0.0))
    clock = ManualClock()
    queues = WorkerQueues(placed, cost, {}, clock)
    assert queues.take(0) is trials[0]
    # worker 0 has 2 s in hand and 4 s queued: its last trial, from cold here (3.5 s), ends
    # sooner than after them
    assert queues.take(1) is trials[2]
    # a second later worker 0 has 1 s in hand and 2 s queued: from cold here the trial
    # would end later than there, so it stays
    clock.now = 1.0
    assert queues.take(1) is None
    assert [t.index for t in queues.items] == [1]
    clock.now = 2.0
    assert queues.take(0) is trials[1]


def queues_of(lists: list[list[Any]], cost: dict[int, TrialCost],
              clock: ManualClock | None = None) -> WorkerQueues:
    """Worker queues over these lists (the placement's loads do not matter to them)."""
    placed = schedule.Assignment(tuple(map(tuple, lists)), (0.0,) * len(lists))
    return WorkerQueues(placed, cost, {}, clock or ManualClock())


def capped_trials(count: int) -> tuple[list[Any], dict[int, TrialCost]]:
    """``count`` capped trials of 2 s each, with a cold start of 1.5 s."""
    trials = trials_of([Spec("matmul", "bf16", (s, s, s))
                        for s in (8192, 6144, 4096, 3072, 2048)[:count]])
    return trials, {t.index: TrialCost(2.0, 1.5, capped=True) for t in trials}


def test_what_is_left_of_the_trial_in_hand_counts_towards_a_take_over() -> None:
    trials, cost = capped_trials(2)
    queues = queues_of([trials, []], cost)
    assert queues.take(0) is trials[0]
    # 2 s queued alone would not pay a cold start here (3.5 s); with the 2 s in hand it does
    assert queues.take(1) is trials[1]


def test_a_trial_past_its_estimate_counts_as_done() -> None:
    trials, cost = capped_trials(3)
    clock = ManualClock()
    queues = queues_of([trials, []], cost, clock)
    assert queues.take(0) is trials[0]
    clock.now = 3.0  # a second past the trial's estimate: 4 s queued are left, no less
    assert queues.take(1) is trials[2]


def test_only_the_last_trial_of_a_worker_is_taken_over() -> None:
    # the last (3 s + 2.5 s cold) is not worth moving; the one before it would be (1 s +
    # 0.5 s), but taking it would break its worker's heat order
    trials = trials_of([Spec("matmul", "bf16", (4096,) * 3), Spec("matmul", "bf16", (2048,) * 3)])
    cost = {0: TrialCost(1.0, 0.5, capped=True), 1: TrialCost(3.0, 2.5, capped=True)}
    queues = queues_of([trials, []], cost)
    assert queues.take(1) is None
    assert [t.index for t in queues.items] == [0, 1]


def test_the_worker_with_the_most_left_is_the_one_relieved() -> None:
    trials, cost = capped_trials(5)
    # both would be worth relieving (4 s and 6 s left, 3.5 s from cold here)
    queues = queues_of([trials[:2], trials[2:], []], cost)
    assert queues.take(2) is trials[4], "not taken from the worker with the most left"


def test_trials_that_may_be_capped_are_shared_and_go_first_to_a_worker_done_with_capped_work(
        ) -> None:
    # both that may be capped are on worker 1's list, after its capped trial; worker 0,
    # hot from its own, takes the first (bf16: the narrower dtype), before any light trial
    trials = trials_of([Spec("matmul", "bf16", (4096,) * 3), Spec("matmul", "tf32", (1024,) * 3),
                        Spec("matmul", "bf16", (1024,) * 3), Spec("add", "fp32", (8,)),
                        Spec("matmul", "bf16", (8192,) * 3)])
    cost = {0: TrialCost(2.0, 1.5, capped=True), 1: TrialCost(2.0, maybe_capped=True),
            2: TrialCost(2.0, maybe_capped=True), 3: TrialCost(0.2),
            4: TrialCost(3.0, 1.5, capped=True)}
    queues = queues_of([[trials[0], trials[3]], [trials[4], trials[1], trials[2]]], cost)
    assert queues.take(0) is trials[0], "a worker's own capped trial comes first"
    assert queues.take(1) is trials[4]
    assert queues.take(0) is trials[2], "left on worker 1's list, it would end its sweep late"
    assert queues.take(1) is trials[1]
    assert queues.take(0) is trials[3]
    assert queues.take(1) is None and not queues.items


def test_a_cold_worker_takes_light_trials_before_those_that_may_be_capped() -> None:
    # worker 0 runs the capped trial; worker 1, cold, leaves the one that may be capped to it
    trials = trials_of([Spec("matmul", "bf16", (4096,) * 3), Spec("matmul", "bf16", (1024,) * 3),
                        Spec("add", "fp32", (8,)), Spec("add", "fp32", (4,))])
    cost = {0: TrialCost(2.0, 1.5, capped=True), 1: TrialCost(2.0, maybe_capped=True),
            2: TrialCost(0.2), 3: TrialCost(0.1)}
    queues = queues_of([[trials[0], trials[2]], [trials[1], trials[3]]], cost)
    assert queues.take(1) is trials[2], "cold, it took the one that may be capped"
    assert queues.take(0) is trials[0]
    assert queues.take(1) is trials[3]
    assert queues.take(0) is trials[1], "hot from its capped trial, it takes it next"
    assert queues.take(1) is None and not queues.items


def test_with_no_capped_trial_those_that_may_be_capped_go_first_and_each_follows_one() -> None:
    # no worker will be hotter: as in one worker's order, they come before the light ones,
    # and a worker that just ran a light trial leaves the next to one that ran a heavy one
    trials = trials_of([Spec("matmul", "bf16", (1024,) * 3), Spec("matmul", "fp16", (1024,) * 3),
                        Spec("add", "fp32", (8,)), Spec("add", "fp32", (4,))])
    cost = {0: TrialCost(2.0, maybe_capped=True), 1: TrialCost(2.0, maybe_capped=True),
            2: TrialCost(0.2), 3: TrialCost(0.1)}
    queues = queues_of([[trials[0], trials[2]], [trials[1], trials[3]]], cost)
    assert queues.take(0) is trials[0], "a light trial went before the one that may be capped"
    assert queues.take(1) is trials[1]
    assert [queues.take(0), queues.take(1)] == [trials[2], trials[3]]


def test_a_hot_worker_takes_one_that_may_be_capped_before_its_own_pinned_light_trial() -> None:
    trials = trials_of([Spec("matmul", "bf16", (4096,) * 3), Spec("matmul", "bf16", (1024,) * 3),
                        Spec("add", "fp32", (8,))])
    cost = {0: TrialCost(2.0, 1.5, capped=True), 1: TrialCost(2.0, maybe_capped=True),
            2: TrialCost(0.2)}
    placed = schedule.Assignment(((trials[0], trials[2], trials[1]), ()), (4.2, 0.0))
    queues = WorkerQueues(placed, cost, {2: 0}, ManualClock())
    assert [queues.take(0) for _ in range(3)] == [trials[0], trials[1], trials[2]], (
        "a pinned light trial let the clock back up between the capped trial and the next")


def mixed_sweep(seeds: int = 1) -> list[Any]:
    """The 46-trial mix of a new user's first multi-GPU sweep: 24 matmuls (256³-8192³ ×
    bf16/fp16/fp32/tf32) plus sdpa, layer_norm, softmax and linear; once per seed."""
    specs = []
    for seed in range(seeds):
        specs += [Spec("matmul", d, (s, s, s), seed=seed)
                  for s in (256, 512, 1024, 2048, 4096, 8192)
                  for d in ("bf16", "fp16", "fp32", "tf32")]
        specs += [Spec("sdpa", d, (8, 16, s, 64), seed=seed) for d in ("bf16", "fp16")
                  for s in (1024, 2048, 4096)]
        specs += [Spec(op, d, (r, 4096), seed=seed) for op in ("layer_norm", "softmax")
                  for d in ("bf16", "fp32") for r in (1024, 4096, 16384)]
        specs += [Spec("linear", d, (n, 4096, 4096), seed=seed) for d in ("bf16", "fp32")
                  for n in (8192, 32768)]
    assert len(specs) == 46 * seeds
    return trials_of(specs)


def tasks_of(trials: list[Any], plan: TimerPlan = TimerPlan()) -> list[Any]:
    timer = SimpleNamespace(plan=plan, device_time=True, preset="default")
    return [SimpleNamespace(index=t.index, spec=t.spec, timer=timer, check_accuracy=True)
            for t in trials]


def lower_bound(cost: dict[int, TrialCost], workers: int) -> float:
    """No placement's busiest worker does better: the mean, and, k trials a worker being
    too few for the (k·N+1) longest, k+1 of them on one worker, after a cold start."""
    seconds = sorted((c.seconds for c in cost.values()), reverse=True)
    cold = max(c.cold_s for c in cost.values())
    mean = (sum(seconds) + cold * workers) / workers
    pigeons = [(k + 1) * seconds[k * workers] + cold
               for k in range(1, len(seconds)) if k * workers < len(seconds)]
    return max([mean, seconds[0] + cold, *pigeons])


@pytest.mark.parametrize("workers", [2, 4, 8])
def test_dry_run_of_the_mixed_sweep_is_balanced(workers: int) -> None:
    """Planned for 2, 4 and 8 GPUs from the estimates of an H100: the busiest worker's
    estimate within 10% of the mean on 2 and 4; on 8, nineteen trials that are capped or may
    be, of about the same length, make three on one worker unavoidable: within 10% of that
    bound."""
    tasks = tasks_of(mixed_sweep())
    cost = costs.costs(tasks, costs.rates_for("cuda:0", "NVIDIA H100 80GB HBM3"))
    placed = schedule.assign(tasks, cost, workers)
    counted = loads(placed, cost)
    mean = sum(counted) / workers
    bound = mean if workers < 8 else lower_bound(cost, workers)
    assert max(counted) <= 1.1 * bound, (counted, mean, bound)
    assert max(counted) == pytest.approx(max(placed.loads_s))
    assert sorted(t.index for mine in placed.lists for t in mine) == list(range(46))


def test_dry_run_for_eight_workers_of_a_sweep_long_enough_to_balance() -> None:
    """Eight workers, the mix with five seeds (230 trials, over four minutes on one GPU):
    the busiest worker within 10% of the mean; every trial placed once."""
    tasks = tasks_of(mixed_sweep(seeds=5))
    cost = costs.costs(tasks, costs.rates_for("cuda:0", "NVIDIA H100 80GB HBM3"))
    placed = schedule.assign(tasks, cost, 8)
    counted = loads(placed, cost)
    assert sum(cost[t.index].seconds for t in tasks) > 240
    assert max(counted) <= 1.1 * sum(counted) / 8, counted
    assert sorted(t.index for mine in placed.lists for t in mine) == list(range(230))


def test_dry_run_for_eight_workers_with_fake_costs() -> None:
    """Eight workers, the mixed sweep with fake costs shaped like a one-GPU run's (53 s of
    trials: capped matmuls 2-4 s, the rest 0.2-0.6 s)."""
    trials = mixed_sweep()

    def fake(spec: Spec) -> TrialCost:
        if spec.op == "matmul" and spec.dtype != "fp32" and spec.shape[0] >= 2048:
            return TrialCost({2048: 2.0, 4096: 3.0, 8192: 4.0}[spec.shape[0]], 1.5, True)
        return TrialCost(0.2 + 0.4 * (spec.shape[0] >= 4096 or spec.op == "linear"))

    cost = {t.index: fake(t.spec) for t in trials}
    placed = schedule.assign(trials, cost, 8)
    counted = loads(placed, cost)
    assert max(counted) <= 1.1 * lower_bound(cost, 8), counted
    assert placed.balance <= 1.2


def test_capped_ops_cost_their_settling_and_the_rest_little() -> None:
    rates = costs.rates_for("cuda:0", "NVIDIA H100 80GB HBM3")
    assert rates.name == "H100 SXM"
    task = tasks_of(trials_of([Spec("matmul", "bf16", (8192, 8192, 8192)),
                               Spec("matmul", "fp32", (8192, 8192, 8192)),
                               Spec("matmul", "bf16", (256, 256, 256)),
                               Spec("matmul", "bf16", (8192, 8192, 8192), "cpu")]))
    capped, fp32, small, cpu = (costs.estimate(t, rates) for t in task)
    assert capped.capped and capped.cold_s > 0
    assert not fp32.capped and not small.capped and not cpu.capped
    assert capped.seconds > 5 * small.seconds
    assert costs.rates_for("cuda:0", "a GPU no table knows").name == costs.DEFAULT_GPU
    assert costs.rates_for("cpu").name == "cpu"


def test_tensor_core_1024_cubes_may_be_capped_and_are_costed_so() -> None:
    # on an H100 the power cap held bf16 and fp16 1024³ down, so each warmed up for seconds;
    # an estimate that called them light placed them last on one GPU, and the others idled.
    # H200 hosts called tf32 1024³ capped now and then: run last and cold, it kept one GPU
    # busy after the others
    rates = costs.rates_for("cuda:0", "NVIDIA H100 80GB HBM3")
    task = tasks_of(trials_of([Spec("matmul", dtype, shape, device)
                               for dtype, shape, device in (
                                   ("bf16", (1024, 1024, 1024), "cuda:0"),
                                   ("tf32", (1024, 1024, 1024), "cuda:0"),
                                   ("fp32", (1024, 1024, 1024), "cuda:0"),
                                   ("bf16", (512, 512, 512), "cuda:0"),
                                   ("bf16", (2048, 2048, 2048), "cuda:0"),
                                   ("bf16", (1024, 1024, 1024), "cpu"))]))
    bf16, tf32, fp32, small, capped, cpu = (costs.estimate(t, rates) for t in task)
    assert bf16.maybe_capped and not bf16.capped
    assert tf32.maybe_capped and not tf32.capped and tf32.seconds == bf16.seconds
    # the CUDA cores' fp32, a smaller cube, a capped one and the CPU may not be
    assert not any(c.maybe_capped for c in (fp32, small, capped, cpu))
    assert capped.capped
    # costed as a capped trial, hot; held only lightly, it pays no longer cold start
    assert bf16.seconds >= costs.HOT_CAPPED_MIN_S + costs.CAPPED_SAMPLE_S
    assert bf16.seconds > 5 * small.seconds
    assert bf16.cold_s == max(costs.BAND_CAPPED_MIN_S - costs.HOT_CAPPED_MIN_S, 0.0)
    assert capped.cold_s == costs.CAPPED_MIN_S - costs.HOT_CAPPED_MIN_S > bf16.cold_s
    # the pool's estimate carries it, and a measured wall keeps it
    found = costs.costs(task[:1], rates, {(task[0].spec.trial_id, "default"): 0.4})
    assert found[0].seconds == 0.4 and found[0].maybe_capped


def test_a_worker_runs_what_may_be_capped_between_its_capped_and_light_trials() -> None:
    trials = trials_of([Spec("matmul", "fp32", (4096, 4096, 4096)),
                        Spec("matmul", "bf16", (1024, 1024, 1024)),
                        Spec("matmul", "bf16", (4096, 4096, 4096)),
                        Spec("matmul", "bf16", (256, 256, 256))])
    cost = {0: TrialCost(1.0), 1: TrialCost(2.0, 1.5, maybe_capped=True),
            2: TrialCost(3.0, 1.5, capped=True), 3: TrialCost(0.1)}
    (ran,) = schedule.assign(trials, cost, 1).lists
    assert [t.index for t in ran] == [2, 1, 0, 3]


def test_what_an_earlier_sweep_measured_replaces_the_estimate(tmp_path: Any) -> None:
    tasks = tasks_of(trials_of([Spec("matmul", "bf16", (256, 256, 256)),
                                Spec("add", "fp32", (8,))]))
    sweep = tmp_path / "2026-01-01_00-00-00"
    sweep.mkdir()
    pq.write_table(pa.table({"trial_id": [tasks[0].spec.trial_id, tasks[1].spec.trial_id],
                             "timer_preset": ["default", "quick"], "status": ["ok", "ok"],
                             "worker_trial_wall_s": [7.5, 9.0]}),
                   sweep / "results.parquet")
    walls = costs.earlier_walls(tmp_path)
    found = costs.costs(tasks, costs.rates_for("cuda:0"), walls)
    assert found[0].seconds == 7.5
    assert found[1].seconds != 9.0, "a figure of another timer preset was used"
    assert costs.earlier_walls(tmp_path / "missing") == {}


def test_the_gpu_model_is_read_from_the_driver(tmp_path: Any) -> None:
    gpu = tmp_path / "0000:18:00.0"
    gpu.mkdir()
    (gpu / "information").write_text("Model: \t\t NVIDIA H200\nIRQ: 42\n")
    assert costs.gpu_model(tmp_path) == "NVIDIA H200"
    assert costs.gpu_model(tmp_path / "missing") is None


def test_the_capped_estimate_judges_each_trial_on_its_own_device() -> None:
    # a thin bf16 matmul is memory-bound on a GPU (not capped) but would read compute-bound
    # against a CPU's ceilings: a job whose first trial runs on the CPU must not lend its
    # ceilings to the GPU's trials
    thin, cube = (16384, 16384, 64), (8192, 8192, 8192)
    trials = trials_of([Spec("matmul", "bf16", cube, device="cpu"),
                        Spec("matmul", "bf16", thin, device="cuda:0"),
                        Spec("matmul", "bf16", cube, device="cuda:0")])
    capped, _ = costs.power_estimates()
    assert [capped(t) for t in trials] == [False, False, True]
    # the pool's estimate alike
    assert [costs.for_tasks(trials)[t.index].capped for t in trials] == [False, False, True]
