"""The GPU benchmarks name code in ``runner`` by string (benchmarks/trial_steps.py patches each
step of ``run_trial`` to time it): a rename there breaks them only on the GPU machine, after
its time is paid. These tests catch it on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

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


def test_the_order_gate_fails_on_an_unflagged_miss_and_counts_false_alarms(capsys) -> None:  # noqa: ANN001
    import pandas as pd

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import order_gates
    finally:
        sys.path.remove(str(BENCHMARKS))
    refs = {(4096, "bf16"): {"ref_us": 200.0}, (2048, "bf16"): {"ref_us": 25.0}}

    def runs(flag_fast: str | None, flag_right: str | None) -> dict[str, list]:
        frame = pd.DataFrame([
            {"dtype": "bf16", "shape_str": "4096x4096x4096", "gpu_time_us": 180.0,
             "sustained_flag": flag_fast},
            {"dtype": "bf16", "shape_str": "2048x2048x2048", "gpu_time_us": 25.2,
             "sustained_flag": flag_right}])
        return {"heat": [(frame, 30.0, 4.0)]}

    name, ok, text = order_gates.print_misses(runs(None, None), refs)
    assert not ok and "heat/1 bf16 4096³ -10.0%" in text
    assert "bf16 4096³ | -10.00%" in capsys.readouterr().out
    _, ok, text = order_gates.print_misses(runs("drew 84% of the limit", "drew 90%"), refs)
    assert ok and "1 of 1 right rows flagged" in text


def test_the_regime_check_imports_and_splits_a_trial_into_thirds() -> None:
    """benchmarks/regime_check.py runs only on a GPU: a broken import or split shows here."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import regime_check
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert regime_check.thirds([1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 9.0, 9.0, 9.0]) == (1.0, 9.0)
    assert regime_check.thirds([2.0]) == (2.0, 2.0)


def test_the_workers_gate_fails_on_an_unflagged_gap_and_passes_a_flagged_one() -> None:
    """workers_check.py: a device time more than 3% off the one-GPU run fails its gate unless
    one of the two rows carries a ``sustained_flag`` or an ``allocation_flag``; the 46-trial
    mix has wall targets of its own (1.8× on 2 GPUs, 3.0× on 4)."""
    import pandas as pd

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import workers_check
    finally:
        sys.path.remove(str(BENCHMARKS))

    def rows(times: list[float], flags: list[str | None],
             flag: str = "sustained_flag") -> pd.DataFrame:
        return pd.DataFrame({"trial_id": ["a", "b"], "op": "matmul", "dtype": "bf16",
                             "shape_str": "8", "gpu_index": [0, 1], "status": "ok",
                             "gpu_time_us": times, flag: flags})

    def run(df: pd.DataFrame) -> dict:
        return {"rows": df, "span_s": 10.0, "wall_s": 12.0, "first_by_worker": {0: 4.0},
                "busy": {0: {"fraction": 1.0}}}

    base = run(rows([100.0, 100.0], [None, None]))
    gate = "N=2: device time within 3% of workers=1, or flagged"

    def verdict(times: list[float], flags: list[str | None], flag: str = "sustained_flag",
                one: dict | None = None) -> str:
        checks = workers_check.checks_for({"1": one or base, "2": run(rows(times, flags, flag))},
                                          False)
        return next(status for name, status, _ in checks if name == gate)

    assert verdict([100.0, 105.0], [None, None]) == "FAIL"
    assert verdict([100.0, 105.0], [None, "held down"]) == "PASS"
    # a row whose time depends on where its process put the op's bytes, in either run
    assert verdict([100.0, 105.0], [None, "where its bytes live"], "allocation_flag") == "PASS"
    flagged_base = run(rows([100.0, 100.0], [None, "where its bytes live"], "allocation_flag"))
    assert verdict([100.0, 105.0], [None, None], one=flagged_base) == "PASS"
    assert verdict([105.0, 100.0], [None, None], one=flagged_base) == "FAIL"
    assert verdict([100.0, 102.0], [None, None]) == "PASS"
    assert workers_check.wall_target(4, seeds=1) == 3.0
    assert workers_check.wall_target(4, seeds=3) == 0.85 * 4


def test_the_workers_check_names_the_trial_that_ended_the_sweep_last() -> None:
    """A pool's tail is one trial's doing more often than not: the summary names it."""
    import pandas as pd

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import workers_check
    finally:
        sys.path.remove(str(BENCHMARKS))

    df = pd.DataFrame({"worker": [0, 0, 1, 1], "end_s": [5.0, 9.0, 6.0, 11.6],
                       "op": "matmul", "dtype": ["bf16", "fp32", "bf16", "tf32"],
                       "shape_str": ["8192", "256", "4096", "1024x1024x1024"],
                       "worker_trial_wall_s": [3.0, 0.1, 2.0, 3.16],
                       "power_capped": [True, False, True, True],
                       "heat_before": ["cold", "cold", "hot", "cold"],
                       "gpu_time_settle_s": [2.7, 0.02, 1.1, 2.7]})
    line = workers_check.tail_line(df)
    assert "worker 1 ended 2.60 s after the others" in line
    assert "tf32 1024x1024x1024 (3.16 s, capped, heat before cold, warm-up 2.70 s)" in line
    assert workers_check.tail_line(df[df["worker"] == 0]) is None


def test_the_benchmarks_count_rows_timed_on_several_allocations_and_their_flags() -> None:
    """workers_check names the rows timed on several allocations and how many are flagged;
    process_spread adds the median over them and counts the flagged rows of each trial."""
    import pandas as pd

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import process_spread
        import workers_check
    finally:
        sys.path.remove(str(BENCHMARKS))

    rows = pd.DataFrame({"op": ["layer_norm", "layer_norm", "matmul"], "dtype": "fp32",
                         "shape_str": ["1024x4096", "2048x4096", "8"],
                         "allocations": [4, 1, None], "allocation_spread": [0.021, None, None],
                         "allocation_flag": ["where its bytes live", None, None]})
    line = workers_check.allocations_line(rows)
    assert "1 rows, 1 flagged" in line and "layer_norm fp32 1024x4096 2.1%" in line
    assert "0 flagged" in workers_check.allocations_line(rows.drop(columns="allocation_flag"))
    assert workers_check.allocations_line(rows.iloc[1:]) is None  # none timed on several

    def process(own_us: float, over_us: float, flag: str | None) -> pd.DataFrame:
        return pd.DataFrame({"op": ["layer_norm"], "dtype": ["fp32"], "shape_str": ["1024x4096"],
                             "l2_flush": [False], "gpu_time_us": [own_us],
                             "gpu_time_ci_rel_halfwidth": [0.002],
                             "gpu_time_allocations_median_us": [over_us],
                             "allocation_flag": [flag]})

    own, over = process_spread.spread_rows(
        [process(13.0, 12.9, "where its bytes live"), process(13.26, 12.95, None)], 0)
    assert own["time"] == "device" and own["spread"] == pytest.approx(0.02)
    assert over["time"] == "over allocations" and over["runs_us"] == [12.9, 12.95]
    assert own["flagged"] == over["flagged"] == 1
