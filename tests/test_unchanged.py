"""A restructure leaves what a sweep produces unchanged: every trial_id, every column.

``tests/data/unchanged.json`` was written by :func:`snapshot` on the code before the package
moves. Trial ids are compared exactly (they name trials across sweeps, resumes and
comparisons); columns may be added, never removed or retyped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

GOLDEN = Path(__file__).parent / "data" / "unchanged.json"
#: experiments whose planned trials are pinned (smoke size, on the CPU)
EXPERIMENTS = ("quickstart", "execution_modes", "dtype_cliff", "streams", "cpu_threads",
               "compile_fusion", "size_sweep")
SMOKE_ARGS = ["experiment=quickstart", "smoke=true", "device=cpu", "timer=smoke"]

CLI_RUNS = {"unchanged_smoke": SMOKE_ARGS}


def planned_ids(compose: Any, plan_trials: Any, experiment: str) -> list[str]:
    cfg = compose(f"experiment={experiment}", "smoke=true", "device=cpu")
    return [spec.trial_id for _, spec in plan_trials(cfg)]


def declared_columns() -> dict[str, str]:
    from runner.storage.columns import COLUMNS

    return {name: str(arrow_type) for name, (arrow_type, _) in COLUMNS.items()}


def written_columns(results_file: Path) -> dict[str, str]:
    return {f.name: str(f.type) for f in pq.read_schema(results_file)}


def snapshot(compose: Any, plan_trials: Any, results_file: Path) -> dict[str, Any]:
    """What the golden file holds (run on the old code to write it); ``results_file`` is the
    ``results.parquet`` of ``python -m runner SMOKE_ARGS``."""
    return {"trial_ids": {e: planned_ids(compose, plan_trials, e) for e in EXPERIMENTS},
            "columns": declared_columns(), "smoke_columns": written_columns(results_file)}


def test_golden_file_is_there() -> None:
    golden = json.loads(GOLDEN.read_text())
    assert set(golden["trial_ids"]) == set(EXPERIMENTS)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_planned_trial_ids_are_unchanged(compose: Any, plan_trials: Any, experiment: str) -> None:
    golden = json.loads(GOLDEN.read_text())["trial_ids"][experiment]
    assert planned_ids(compose, plan_trials, experiment) == golden


def test_no_declared_column_is_removed_or_retyped() -> None:
    golden = json.loads(GOLDEN.read_text())["columns"]
    now = declared_columns()
    assert {name: now.get(name) for name in golden} == golden


@pytest.mark.slow
def test_a_smoke_sweep_keeps_its_ids_and_columns(cli_runs: dict[str, Any]) -> None:
    run = cli_runs["unchanged_smoke"].wait()
    assert run.returncode == 0, run.explain()
    golden = json.loads(GOLDEN.read_text())
    files = sorted(Path(run.cwd).rglob("results.parquet"))
    assert files, f"no results.parquet under {run.cwd}"
    types = written_columns(files[-1])
    missing = {n: t for n, t in golden["smoke_columns"].items() if types.get(n) != t}
    assert not missing, f"columns removed or retyped: {missing}"
    ids = pq.read_table(files[-1], columns=["trial_id"]).column("trial_id").to_pylist()
    assert sorted(ids) == sorted(golden["trial_ids"]["quickstart"])
