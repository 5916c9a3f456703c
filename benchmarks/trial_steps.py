"""Where ``run_trial``'s time goes: each of its steps timed on its own, and a cProfile listing
without the timed calls. Used by benchmarks/harness_cost.py."""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
import pstats
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The steps of ``run_trial`` (names in runner.execution.trial) timed one by one.
TRIAL_STEPS = (
    "spec_columns", "environment", "git_provenance", "user_code_provenance", "gpu_state",
    "build_checked", "count_flops", "accuracy", "sm_clock_reader", "clock_for",
    "burst_time", "clock_columns", "timing_columns", "device_time_columns", "settle_columns",
    "samples_clock_columns", "burst_columns", "throughput_columns", "allocation_columns",
    "consistency_flag", "_release",
)
#: Steps outside runner.execution.trial's namespace: (module, attribute path). The clock
#: probe's are taken during the loop time's warm-up, on CUDA (its read-back, ``tolist``, stays
#: in ``measure``).
OTHER_STEPS = (("runner.execution.modes", "prepare"), ("runner.execution.modes",
                                                        "check_supported"),
               ("runner.execution.timed", "measure"), ("runner.execution.timed", "_memory"),
               ("runner.execution.timed", "device_time_of"),
               ("torch.cuda", "synchronize"), ("torch.cuda", "empty_cache"),
               ("torch.cuda", "reset_peak_memory_stats"),
               ("runner.timing.clock_probe", "ClockProbe.stamps"),
               ("runner.timing.clock_probe", "ClockProbe.record"),
               ("runner.timing.clock_probe", "effective_mhz"))


def missing_steps(trial_steps: tuple[str, ...] = TRIAL_STEPS,
                  other_steps: tuple[tuple[str, str], ...] = OTHER_STEPS) -> list[str]:
    """The steps that no longer name code (a rename in ``runner``): each one would stop the
    benchmark with an AttributeError on the GPU machine, after its device time is paid."""
    import importlib

    import runner.execution.trial as trial

    missing = [name for name in trial_steps if not hasattr(trial, name)]
    for module, path in other_steps:
        owner: Any = importlib.import_module(module)
        for part in path.split("."):
            owner = getattr(owner, part, None)
        if owner is None:
            missing.append(f"{module}.{path}")
    return missing


@contextlib.contextmanager
def timed_steps(totals: dict[str, float],
                extra: tuple[tuple[str, str], ...] = ()) -> Iterator[None]:
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
    for module, path in (*OTHER_STEPS, *extra):
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


#: Builtins that are the timed calls themselves (the op, the clock), left out of the profile's
#: listing of the harness's own cost, with the op's lambda and the bare loop's file.
TIMED_CALLS = ("add_", "record", "synchronize", "elapsed_time", "perf_counter_ns")


def timed_call(path: str, name: str, bare_file: str) -> bool:
    if path.endswith(("elementwise.py", Path(bare_file).name, f"cuda{os.sep}streams.py")):
        return True  # the op's lambda, the bare loop, torch.cuda.Event's methods
    return path == "~" and any(f"'{call}'" in name or f".{call}" in name for call in TIMED_CALLS)


def listing(prof: Path, trials: int, top: int, bare_file: str) -> str:
    """The top ``top`` entries of a cProfile dump by cumulative and by own time, in ms per
    trial, without the timed calls (:func:`timed_call`; ``bare_file`` holds the bare loop)."""
    stats = pstats.Stats(str(prof))
    text = io.StringIO()
    for sort in ("cumulative", "tottime"):
        entries = [(func, stat) for func, stat in stats.stats.items()
                   if not timed_call(func[0], func[2], bare_file)]
        index = 3 if sort == "cumulative" else 2
        entries.sort(key=lambda item: item[1][index], reverse=True)
        text.write(f"\n### top {top} by {sort} time, ms per trial ({trials} trials under "
                   "cProfile; the timed calls left out)\n\n")
        text.write(f"{'ncalls/trial':>13} {'own ms':>9} {'cum ms':>9}  function\n")
        for (path, line, name), (_cc, ncalls, tottime, cumtime, _callers) in entries[:top]:
            where = f"{Path(path).name}:{line}" if path != "~" else "builtin"
            text.write(f"{ncalls / trials:13.1f} {tottime / trials * 1e3:9.3f} "
                       f"{cumtime / trials * 1e3:9.3f}  {name} ({where})\n")
    return text.getvalue()
