"""What a trial costs besides its samples. One call, on a CUDA machine or on the CPU:

    python benchmarks/harness_cost.py --out DIR --trials 200 --device cuda

In one process, interleaved so the host's speed (which moves between processes by tens of
percent) cancels: ``run_trial`` of a 1-element in-place add with the device time off, a bare
loop of the same timed calls (the warm-up calls and samples × K the trial's own row reports,
each sample between two clock reads, as the timer takes them), and ``run_trial`` with the
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
import functools
import gc
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

#: The steps of ``run_trial`` (names in runner.execution.trial) timed one by one.
TRIAL_STEPS = (
    "spec_columns", "environment", "git_provenance", "user_code_provenance", "gpu_state",
    "_build_workloads", "_count_flops", "_accuracy", "sm_clock_reader", "clock_for",
    "burst_time", "measure", "clock_columns", "_memory", "device_time_of", "timing_columns",
    "device_time_columns", "settle_columns", "samples_clock_columns", "burst_columns",
    "throughput_columns", "consistency_flag", "_release",
)
#: Steps outside runner.execution.trial's namespace: (module, attribute path). The clock
#: probe's are taken during the loop time's warm-up, on CUDA (its read-back, ``tolist``, stays
#: in ``measure``).
OTHER_STEPS = (("runner.execution.modes", "prepare"), ("runner.execution.modes",
                                                        "check_supported"),
               ("torch.cuda", "synchronize"), ("torch.cuda", "empty_cache"),
               ("torch.cuda", "reset_peak_memory_stats"),
               ("runner.timing.clock_probe", "ClockProbe.stamps"),
               ("runner.timing.clock_probe", "ClockProbe.record"),
               ("runner.timing.clock_probe", "effective_mhz"))


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


def bare_loop(device: str) -> Callable[[int, int, int], float]:
    """The trial's timed calls with nothing around them: ``warmup`` calls, one per clock pair,
    then ``samples`` samples of ``k`` calls each; CUDA events and a wait on the end event on
    CUDA (the timer's event clock), ``perf_counter_ns`` on the CPU (its host clock). The call
    is a lambda, as the op's is (ops.elementwise)."""
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

    def run(warmup: int, samples: int, k: int) -> float:
        """The calls; returns the seconds the warm-up calls took."""
        start = time.perf_counter()
        for _ in range(warmup):
            timed(1)
        warmup_s = time.perf_counter() - start
        for _ in range(samples):
            timed(k)
        return warmup_s
    return run


@contextlib.contextmanager
def timed_steps(totals: dict[str, float]) -> Iterator[None]:
    """Time each step of ``run_trial`` (:data:`TRIAL_STEPS`, :data:`OTHER_STEPS`) into
    ``totals`` (seconds, summed over calls), each step less the timed steps it calls, so the
    parts add up to ``run_trial``'s wall time; the SM clock reader's readings are a step too.
    About a microsecond per wrapped call; the garbage collector's own time is added under
    ``gc.collect gen N`` (it overlaps the steps)."""
    import importlib

    import runner.execution.trial as trial

    children: list[float] = []
    collecting: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        # the collector's own time, wherever it struck (inside the steps or not)
        if phase == "start":
            collecting.append(time.perf_counter())
        elif collecting:
            name = f"gc.collect gen {info['generation']}"
            totals[name] = totals.get(name, 0.0) + time.perf_counter() - collecting.pop()

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            children.append(0.0)
            start = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
                if name == "sm_clock_reader" and result is not None:
                    # its readings are taken inside the timer's warm-ups: a step of their own
                    result = wrap("sm_clock_reader() readings (NVML, inside measure)", result)
                return result
            finally:
                spent = time.perf_counter() - start
                totals[name] = totals.get(name, 0.0) + spent - children.pop()
                if children:
                    children[-1] += spent
        return inner

    patched: list[tuple[Any, str, Any, str]] = [
        (trial, name, getattr(trial, name), name) for name in (*TRIAL_STEPS, "run_trial")]
    for module, path in OTHER_STEPS:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        patched.append((owner, name, owner.__dict__[name], f"{module}.{path}"))
    for owner, name, fn, label in patched:
        setattr(owner, name, wrap(label, fn))
    gc.callbacks.append(on_gc)
    try:
        yield
    finally:
        gc.callbacks.remove(on_gc)
        for owner, name, fn, _label in patched:
            setattr(owner, name, fn)


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
    timer_off = cfg.timer.copy()
    timer_off.device_time = False
    cuda = device.startswith("cuda")
    bare = bare_loop(device)
    # As a worker does once its imports are done (runner.execution.worker_loop): what lives
    # for the process leaves the collector's generations, so a full collection that strikes
    # during a trial scans only what the trials allocated.
    gc.collect()
    gc.freeze()
    walls = {"bare": 0.0, "off": 0.0, "on": 0.0 if cuda else float("nan"),
             "warmup_calls": 0.0, "warmup_s": 0.0, "bare_warmup_s": 0.0}
    steps: dict[str, float] = {}
    rows = {}
    for index in range(-2, trials):
        timed = index >= 0
        with timed_steps(steps if timed else {}):  # device time off: where its time goes
            start = time.perf_counter()
            row = trial.run_trial(planned.spec, planned.op, timer_off)
            walls["off"] += (time.perf_counter() - start) * timed
        if row["status"] != "ok":
            sys.exit(f"the trial failed: {row['reason']}\n{row.get('error_traceback') or ''}")
        start = time.perf_counter()
        warmup_s = bare(int(row["warmup_calls"]), int(row["n_samples"]),
                        int(row["calls_per_sample"]))
        walls["bare"] += (time.perf_counter() - start) * timed
        # the loop time's warm-up: how many calls, and how long, in the trial and bare
        walls["warmup_calls"] += row["warmup_calls"] * timed
        walls["warmup_s"] += row["warmup_time_s"] * timed
        walls["bare_warmup_s"] += warmup_s * timed
        rows["off"] = row
        if cuda:
            start = time.perf_counter()
            rows["on"] = trial.run_trial(planned.spec, planned.op, cfg.timer)
            walls["on"] += (time.perf_counter() - start) * timed
    walls.update({f"step_{name}": s for name, s in steps.items()})
    (out / "harness_rows.json").write_text(json.dumps(rows, indent=1, default=str))
    return walls


#: Builtins that are the timed calls themselves (the op, the clock), left out of the profile's
#: listing of the harness's own cost, with the op's lambda and this file's bare loop.
TIMED_CALLS = ("add_", "record", "synchronize", "elapsed_time", "perf_counter_ns")


def _timed_call(path: str, name: str) -> bool:
    if path.endswith(("elementwise.py", Path(__file__).name, f"cuda{os.sep}streams.py")):
        return True  # the op's lambda, the bare loop, torch.cuda.Event's methods
    return path == "~" and any(f"'{call}'" in name or f".{call}" in name for call in TIMED_CALLS)


def profile(out: Path, trials: int, device: str = "cuda", top: int = 25) -> str:
    """cProfile of ``trials`` interleaved device-time-off trials and bare loops; writes
    ``harness_profile.prof`` and returns (and writes to ``harness_profile.txt``) the top
    entries by cumulative and by own time, without the timed calls. cProfile slows the
    Python-heavy parts more than the rest: read it for where, not for how much."""
    import runner.execution.trial as trial

    planned, cfg = plan_trial(device)
    timer_off = cfg.timer.copy()
    timer_off.device_time = False
    bare = bare_loop(device)
    profiler = cProfile.Profile()
    for _ in range(trials):
        profiler.enable()
        row = trial.run_trial(planned.spec, planned.op, timer_off)
        profiler.disable()
        bare(int(row["warmup_calls"]), int(row["n_samples"]), int(row["calls_per_sample"]))
    profiler.dump_stats(str(out / "harness_profile.prof"))
    stats = pstats.Stats(str(out / "harness_profile.prof"))
    text = io.StringIO()
    for sort in ("cumulative", "tottime"):
        entries = [(func, stat) for func, stat in stats.stats.items()
                   if not _timed_call(func[0], func[2])]
        index = 3 if sort == "cumulative" else 2
        entries.sort(key=lambda item: item[1][index], reverse=True)
        text.write(f"\n### top {top} by {sort} time, ms per trial ({trials} trials under "
                   "cProfile; the timed calls left out)\n\n")
        text.write(f"{'ncalls/trial':>13} {'own ms':>9} {'cum ms':>9}  function\n")
        for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in entries[:top]:
            where = f"{Path(path).name}:{line}" if path != "~" else "builtin"
            text.write(f"{ncalls / trials:13.1f} {tottime / trials * 1e3:9.3f} "
                       f"{cumtime / trials * 1e3:9.3f}  {name} ({where})\n")
    (out / "harness_profile.txt").write_text(text.getvalue())
    return text.getvalue()


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
    row = run_trial(planned.spec, planned.op, cfg.timer)
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
             f"| loop time's warm-up: ms per trial, in run_trial / bare | "
             f"{walls['warmup_s'] / trials * 1e3:.3f} / "
             f"{walls['bare_warmup_s'] / trials * 1e3:.3f} |",
             f"| µs per warm-up call, in run_trial / bare | "
             f"{walls['warmup_s'] / walls['warmup_calls'] * 1e6:.3f} / "
             f"{walls['bare_warmup_s'] / walls['warmup_calls'] * 1e6:.3f} |"]
    steps = {k[len("step_"):]: v for k, v in walls.items() if k.startswith("step_")}
    # measure holds the timed calls: its excess over the bare loop is the timer's bookkeeping
    if "measure" in steps:
        steps["measure − bare loop (timer bookkeeping)"] = steps.pop("measure") - bare
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
