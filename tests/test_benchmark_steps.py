"""The GPU benchmarks name code in ``runner`` by string (benchmarks/trial_steps.py patches each
step of ``run_trial`` to time it): a rename there breaks them only on the GPU machine, after
its time is paid. These tests catch it on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _trial_steps():  # noqa: ANN202 (a module loaded from benchmarks/)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import trial_steps
    finally:
        sys.path.remove(str(BENCHMARKS))
    return trial_steps


def test_every_step_the_harness_benchmark_times_names_code_that_exists() -> None:
    assert _trial_steps().missing_steps() == []


def test_a_renamed_step_is_caught() -> None:
    steps = _trial_steps()
    assert steps.missing_steps(("spec_columns", "no_such_step"), ()) == ["no_such_step"]
    assert steps.missing_steps((), (("runner.execution.timed", "gone"),)) == [
        "runner.execution.timed.gone"]
