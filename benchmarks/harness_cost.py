"""What a trial costs besides its samples. One call, on a CUDA machine or on the CPU:

    python benchmarks/harness_cost.py --out DIR --trials 200 --device cuda

In one process, interleaved so the host's speed (which moves between processes by tens of
percent) cancels: ``run_trial`` of a 1-element in-place add with the device time off, a bare
loop of the same timed calls (the warm-up calls, then every block of samples × K the trial
took, a block the noise rules set aside and re-took included, each sample between two clock
reads, as the timer takes them), and ``run_trial`` with the
device time on (CUDA only). While they run, every step of ``run_trial`` is timed on its own
(its time less the steps it calls), so the table says where the time beyond the timed calls
goes. Then a cProfile of a shorter interleaved loop (written to DIR/harness_profile.prof, its
top entries outside the timed calls to DIR/harness_profile.txt), and the costs a trial pays
outside ``run_trial``: environment probes, a journal-sized fsync, a worker round trip over a
pipe, and a cold ``import torch``. Prints its table last.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trial_steps import listing, timed_steps  # benchmarks/: this script's folder

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def plan_trial(device: str) -> tuple[Any, Any]:
    """The planned 1-element in-place add and its job config (Hydra compose, as a job does)."""
    from hydra import compose, initialize_config_dir

    from runner.config.planner import plan_job
    from runner.config.schema import register

    register()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="config", overrides=["op=add", "shape=[1]", "op.inplace=true",
                                                       f"device={device}"])
    return plan_job(cfg)[0], cfg


def trial_task(planned: Any, cfg: Any, device_time: bool = True) -> Any:
    """The frozen task a job hands its runner for ``planned`` (``runner.execution.task``),
    with the device time on or off."""
    import dataclasses

    from runner.execution.job import trial_timer
    from runner.execution.task import TrialTask

    timer = dataclasses.replace(trial_timer(cfg), device_time=device_time)
    return TrialTask(planned.index, planned.spec, timer, cfg.check_accuracy)


@contextlib.contextmanager
def loop_blocks(record: list[tuple[int, int, float]]) -> Iterator[None]:
    """Record each block of loop-time samples taken meanwhile: (samples, calls per sample,
    wall seconds).
    The noise rules may set a block aside and take a fresh one (``runner.timing.timer.measure``,
    its samples then count in the row's ``warmup_calls``); the bare loop takes the same blocks."""
    from runner.timing import timer

    original = timer._LoopSampler.block

    def block(sampler: Any) -> Any:
        start = time.perf_counter()
        taken = original(sampler)
        # the K this block ran at (a re-measure changes it after the block)
        record.append((len(taken[0]), sampler.calls, time.perf_counter() - start))
        return taken

    timer._LoopSampler.block = block  # type: ignore[method-assign]
    try:
        yield
    finally:
        timer._LoopSampler.block = original  # type: ignore[method-assign]


def warmup_calls_of(row: dict[str, Any], blocks: list[tuple[int, int, float]]) -> int:
    """The trial's warm-up calls: the row's ``warmup_calls`` less the samples of the blocks
    the noise rules set aside (every block but the last), which it counts there too."""
    return int(row["warmup_calls"]) - sum(samples for samples, _, _ in blocks[:-1])


def bare_loop(device: str) -> Callable[[int, list[tuple[int, int, float]]], float]:
    """The trial's timed calls with nothing around them: ``warmup`` calls, one per clock pair,
    then each block of ``samples`` samples of ``k`` calls each; CUDA events and a wait on the
    end event on CUDA (the timer's event clock), ``perf_counter_ns`` on the CPU (its host
    clock). The call is a lambda, as the op's is (ops.elementwise)."""
    import torch

    x, y = torch.zeros(1, device=device), torch.ones(1, device=device)
    fn = lambda: torch.Tensor.add_(x, y)  # noqa: E731  the op's own shape of call

    if device.startswith("cuda"):
        def timed(k: int) -> None:
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(k):
                fn()
            end.record()
            end.synchronize()
            begin.elapsed_time(end)
    else:
        def timed(k: int) -> None:
            start = time.perf_counter_ns()
            for _ in range(k):
                fn()
            _ = time.perf_counter_ns() - start

    def run(warmup: int, blocks: list[tuple[int, int, float]]) -> float:
        """The calls; returns the seconds the warm-up calls took."""
        start = time.perf_counter()
        for _ in range(warmup):
            timed(1)
        warmup_s = time.perf_counter() - start
        for samples, k, _ in blocks:
            for _ in range(samples):
                timed(k)
        return warmup_s
    return run


def harness_cost(out: Path, trials: int, device: str = "cuda") -> dict[str, float]:
    """In one process, interleaved: ``run_trial`` of a 1-element add with the device time off,
    a bare loop of the same timed calls, and ``run_trial`` with the device time on (CUDA).
    Sums of wall seconds: ``bare``, ``off``, ``on`` (NaN on the CPU); the loop time's warm-up
    (``warmup_calls``, ``warmup_s``, and ``bare_warmup_s`` for the same calls bare); and
    ``step_<name>`` for
    each step of the device-time-off trials (its own time, less the timed steps it calls;
    ``step_run_trial`` is what no timed step covers; ``step_gc.collect gen N`` is the garbage
    collector's time, inside the steps). Two trials of each kind run first, untimed (a
    process's first trials pay lazy imports and allocations). The last rows go to
    ``out``/harness_rows.json."""
    import runner.execution.trial as trial

    planned, cfg = plan_trial(device)
    task_off, task_on = trial_task(planned, cfg, False), trial_task(planned, cfg)
    cuda = device.startswith("cuda")
    bare = bare_loop(device)
    # As a worker does once its imports are done (runner.execution.worker_loop): what lives
    # for the process leaves the collector's generations, so a full collection that strikes
    # during a trial scans only what the trials allocated.
    gc.collect()
    gc.freeze()
    walls = {"bare": 0.0, "off": 0.0, "on": 0.0 if cuda else float("nan"),
             "warmup_calls": 0.0, "warmup_s": 0.0, "bare_warmup_s": 0.0,
             "set_aside_blocks": 0.0}
    steps: dict[str, float] = {}
    rows = {}
    from runner.execution.timed import WorkerTiming

    state = WorkerTiming()  # as a worker keeps it from one trial to the next
    for index in range(-2, trials):
        timed = index >= 0
        blocks: list[tuple[int, int, float]] = []
        with timed_steps(steps if timed else {}), loop_blocks(blocks):  # where its time goes
            start = time.perf_counter()
            row = trial.run_trial(task_off, state)
            walls["off"] += (time.perf_counter() - start) * timed
        if row["status"] != "ok":
            sys.exit(f"the trial failed: {row['reason']}\n{row.get('error_traceback') or ''}")
        warmup_calls = warmup_calls_of(row, blocks)
        start = time.perf_counter()
        warmup_s = bare(warmup_calls, blocks)
        walls["bare"] += (time.perf_counter() - start) * timed
        # the loop time's warm-up: how many calls, and how long, in the trial and bare
        walls["warmup_calls"] += warmup_calls * timed
        walls["set_aside_blocks"] += (len(blocks) - 1) * timed
        walls["warmup_s"] += (row["warmup_time_s"] - sum(b[2] for b in blocks[:-1])) * timed
        walls["bare_warmup_s"] += warmup_s * timed
        rows["off"] = row
        if cuda:
            start = time.perf_counter()
            rows["on"] = trial.run_trial(task_on, state)
            walls["on"] += (time.perf_counter() - start) * timed
    walls.update({f"step_{name}": s for name, s in steps.items()})
    (out / "harness_rows.json").write_text(json.dumps(rows, indent=1, default=str))
    return walls


def profile(out: Path, trials: int, device: str = "cuda", top: int = 25) -> str:
    """cProfile of ``trials`` interleaved device-time-off trials and bare loops; writes
    ``harness_profile.prof`` and returns (and writes to ``harness_profile.txt``) the top
    entries by cumulative and by own time, without the timed calls. cProfile slows the
    Python-heavy parts more than the rest: read it for where, not for how much."""
    import runner.execution.trial as trial

    planned, cfg = plan_trial(device)
    task_off = trial_task(planned, cfg, False)
    bare = bare_loop(device)
    profiler = cProfile.Profile()
    from runner.execution.timed import WorkerTiming

    state = WorkerTiming()  # as a worker keeps it from one trial to the next
    for _ in range(trials):
        blocks: list[tuple[int, int, float]] = []
        with loop_blocks(blocks):
            profiler.enable()
            row = trial.run_trial(task_off, state)
            profiler.disable()
        bare(warmup_calls_of(row, blocks), blocks)
    profiler.dump_stats(str(out / "harness_profile.prof"))
    text = listing(out / "harness_profile.prof", trials, top, bare_file=__file__)
    (out / "harness_profile.txt").write_text(text)
    return text


def per_trial_costs(out: Path, device: str = "cuda") -> dict[str, float]:
    """The per-trial costs outside the timer, µs each: environment probes (``gpu_state`` runs
    three times a trial), the SM clock reader's build and one reading, journaling a row (and
    the Parquet table it makes of it), a bare fsync of 2 kB, a row's round trip over a pipe
    to another process, and a cold ``import torch`` (s)."""
    import multiprocessing as mp

    from runner.execution.environment import (
        environment,
        git_provenance,
        gpu_state,
        sm_clock_reader,
    )

    device = "cuda:0" if device == "cuda" else device  # as the trials' spec names it
    reader = sm_clock_reader(device)
    costs = {}
    for name, fn in (("gpu_state", lambda: gpu_state(device)),
                     ("environment", lambda: environment(device)),
                     ("git_provenance", git_provenance),
                     ("sm_clock_reader", lambda: sm_clock_reader(device)),
                     ("sm_clock_read", reader or (lambda: None))):
        fn()
        start = time.perf_counter()
        for _ in range(50):
            fn()
        costs[f"{name}_us"] = (time.perf_counter() - start) / 50 * 1e6
    # A row as a job journals it: one-row Parquet file, fsync, link, fsync of the folder
    # (runner.storage.journal), on the driver's side of the worker round trip.
    from runner.execution.trial import run_trial
    from runner.storage import journal
    from runner.storage.files import rows_to_table

    planned, cfg = plan_trial(device)
    row = run_trial(trial_task(planned, cfg))
    row.update(sweep_id="harness", job_num=0, trial_index=0, shard=0, num_shards=1, worker=0)
    for name, fn in (("journal_rows_to_table", lambda: rows_to_table([row], {})),
                     ("journal_write_row", lambda: journal.write_row(out / "journal", row, {}))):
        fn()
        start = time.perf_counter()
        for index in range(20):
            row["trial_index"] = index + 1
            fn()
        costs[f"{name}_us"] = (time.perf_counter() - start) / 20 * 1e6
    shutil.rmtree(out / "journal")
    path = out / "fsync.bin"
    with open(path, "ab") as f:
        start = time.perf_counter()
        for _ in range(50):
            f.write(b"x" * 2000)
            f.flush()
            os.fsync(f.fileno())
        costs["fsync_us"] = (time.perf_counter() - start) / 50 * 1e6
    path.unlink()
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=_echo, args=(child,))
    proc.start()
    parent.send(0)
    parent.recv()
    start = time.perf_counter()
    for _ in range(200):
        parent.send(("row", row, False))  # a worker sends its row so; echoed back
        parent.recv()
    costs["pipe_round_trip_us"] = (time.perf_counter() - start) / 200 * 1e6
    parent.send(None)
    proc.join()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    costs["import_torch_s"] = time.perf_counter() - start
    return costs


def _echo(conn: Any) -> None:
    while (msg := conn.recv()) is not None:
        conn.send(msg)


def table(walls: dict[str, float], costs: dict[str, float], trials: int) -> str:
    """The result as a markdown table: walls, ratios, each step's ms per trial, the costs
    outside ``run_trial``."""
    off, bare, on = walls["off"], walls["bare"], walls["on"]
    lines = ["| measure | value |", "| --- | ---: |",
             f"| trials | {trials} |",
             f"| bare loop, s | {bare:.3f} |",
             f"| run_trial, device time off, s | {off:.3f} |",
             f"| run_trial, device time on, s | {on:.3f} |",
             f"| in-job cost: off / bare (target ≤ 1.05) | {off / bare:.3f}× |",
             f"| device time on / off (target ≤ 1.25) | {on / off:.3f}× |",
             f"| overhead beyond the timed calls, ms per trial | "
             f"{(off - bare) / trials * 1e3:.3f} |",
             f"| loop time's warm-up: calls per trial | {walls['warmup_calls'] / trials:.0f} |",
             f"| blocks the noise rules set aside and re-took (the bare loop takes them too) | "
             f"{walls['set_aside_blocks']:.0f} of {trials} trials |",
             f"| loop time's warm-up: ms per trial, in run_trial / bare | "
             f"{walls['warmup_s'] / trials * 1e3:.3f} / "
             f"{walls['bare_warmup_s'] / trials * 1e3:.3f} |",
             f"| µs per warm-up call, in run_trial / bare | "
             f"{walls['warmup_s'] / walls['warmup_calls'] * 1e6:.3f} / "
             f"{walls['bare_warmup_s'] / walls['warmup_calls'] * 1e6:.3f} |"]
    steps = {k[len("step_"):]: v for k, v in walls.items() if k.startswith("step_")}
    # measure holds the timed calls: its excess over the bare loop is the timer's bookkeeping
    if "runner.execution.timed.measure" in steps:
        steps["measure − bare loop (timer bookkeeping)"] = (
            steps.pop("runner.execution.timed.measure") - bare)
    steps["run_trial (not in any step above)"] = steps.pop("run_trial", 0.0)
    collector = {k: steps.pop(k) for k in list(steps) if k.startswith("gc.")}
    for name, seconds in sorted(steps.items(), key=lambda item: -item[1]):
        lines.append(f"| step {name}, ms per trial | {seconds / trials * 1e3:.3f} |")
    for name, seconds in sorted(collector.items()):
        lines.append(f"| {name} (inside the steps above), ms per trial | "
                     f"{seconds / trials * 1e3:.3f} |")
    for name, value in costs.items():
        lines.append(f"| {name} | {value:.4g} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--profile-trials", type=int, default=20)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    walls = harness_cost(args.out, args.trials, args.device)
    print(profile(args.out, args.profile_trials, args.device))
    costs = per_trial_costs(args.out, args.device)
    (args.out / "harness_cost.json").write_text(json.dumps({**walls, **costs}, indent=1))
    print(f"\n## Harness cost ({args.trials} tiny trials on {args.device}, one process, "
          "interleaved)\n")
    print(table(walls, costs, args.trials))


if __name__ == "__main__":
    main()
