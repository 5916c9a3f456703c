"""Search instead of a grid: ``hydra/sweeper=optuna`` minimises the column named by
``objective``, each job returning its value; every value of the space is checked first."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from runner.config.commandline import parse_command_line
from runner.config.hydra_errors import explain
from runner.config.preflight import preflight
from runner.config.schema import RunConfig
from runner.config.search import value_jobs
from runner.config.settings import rules
from runner.core.errors import ConfigError
from runner.execution.objective import job_objective

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = REPO_ROOT / "conf" / "experiment" / "search_batched_dot.yaml"


@pytest.mark.slow
def test_the_search_finds_batched_dots_fastest_impl_in_fewer_trials_than_the_grid(
        start_cli, tmp_path: Path) -> None:
    run = start_cli(["experiment=search_batched_dot", "-m"], tmp_path).wait()
    assert run.returncode == 0, run.explain()
    sweep = next((tmp_path / "results").iterdir())
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    rows = pq.read_table(sweep / "results.parquet").to_pandas().sort_values("job_num")
    sweeper = yaml.safe_load(EXAMPLE.read_text())["hydra"]["sweeper"]
    grid = math.prod(len(text.split(",")) for text in sweeper["params"].values())
    assert len(rows) == sweeper["n_trials"] < grid
    # the first point the seeded sampler tries is not the answer: a job that returned
    # anything but its time (a constant, another column) would leave a wrong best point
    assert rows["param_impl"].iloc[0] != "mul_sum"
    # the best point is the fastest row the search ran, by the values its jobs returned (on an
    # idle CPU at this size mul_sum; which one wins on a loaded machine is not this test's)
    fastest = rows.loc[rows["time_median_us"].idxmin()]
    assert best["best_value"] == pytest.approx(fastest["time_median_us"])
    assert best["best_params"]["op.impl"] == fastest["param_impl"], rows[[
        "param_impl", "num_threads", "time_median_us"]]
    assert best["best_params"]["num_threads"] == fastest["num_threads"]


def _experiment(tmp_path: Path, params: str, objective: str = "time_median_us") -> list[str]:
    """A command line running a search experiment written under ``tmp_path``."""
    folder = tmp_path / "conf" / "experiment"
    folder.mkdir(parents=True)
    (folder / "search_typo.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /op: batched_dot\n"
        "  - override /hydra/sweeper: optuna\n"
        f"shape: [8, 8]\ndevice: cpu\nobjective: {objective}\n"
        f"hydra:\n  sweeper:\n    params:\n      {params}\n")
    return ["-m", "--config-dir", str(tmp_path / "conf"), "experiment=search_typo",
            f"results_dir={tmp_path / 'results'}"]


@pytest.mark.parametrize(("params", "named"), [
    ("op.impl: choice(mul_sum, bmmm)", ["'op.impl'", "'bmmm'", "Did you mean 'bmm'"]),
    ("num_threads: int(interval(0, 4))", ["'num_threads'", ": 0."]),
    ("num_threads: interval(1, 4)", ["'num_threads'", "1.0"]),  # a float interval: int(...)
])
def test_every_value_of_a_search_space_is_checked_before_any_trial(tmp_path: Path, params: str,
                                                                   named: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        preflight(parse_command_line(_experiment(tmp_path, params)))
    message = str(exc.value)
    assert "experiment/search_typo.yaml (hydra.sweeper.params)" in message
    assert all(text in message for text in named), message
    assert not (tmp_path / "results").exists()


def test_a_search_without_an_objective_is_refused_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'objective' is not set.*objective=time_median_us"):
        preflight(parse_command_line(_experiment(tmp_path, "op.impl: choice(mul_sum, bmm)",
                                                 objective="null")))


def test_a_search_space_is_checked_value_by_value_not_as_its_grid() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(
        ["op.impl=choice(mul_sum,bmm,einsum)", "seed=range(0,1000)",
         "num_threads=int(interval(1,8))", "dtype=fp32"])
    jobs = value_jobs(parsed)
    assert len(jobs) == 3 + 2 + 2 + 1  # the grid would be 3 x 1000 x (every thread count)
    assert ["op.impl=bmm"] in jobs and ["num_threads=1"] in jobs and ["num_threads=8"] in jobs
    assert ["seed=0"] in jobs and ["seed=1000"] in jobs  # Optuna's range includes its stop


def test_a_search_on_the_command_line_is_checked_value_by_value(tmp_path: Path,
                                                                capsys) -> None:
    base = ["-m", "op=batched_dot", "shape=[8,8]", "device=cpu", "hydra/sweeper=optuna",
            "objective=time_median_us", f"results_dir={tmp_path / 'results'}"]
    # a space of 24 million points: refused as a grid (max_trials), checked here in 7 values
    preflight(parse_command_line([*base, "op.impl=choice(mul_sum,bmm,einsum)",
                                  "seed=range(0,1000000)", "num_threads=range(1,8)"]))
    assert "search: 7 value(s) of the space checked" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="in the search space .*'num_threads': 0"):
        preflight(parse_command_line([*base, "num_threads=int(interval(0,4))"]))
    assert not (tmp_path / "results").exists()


def test_a_misspelt_objective_names_the_column_it_resembles() -> None:
    rule = rules(RunConfig)["objective"]
    rule.enforce("objective", "gpu_time_median_us")
    rule.enforce("objective", None)
    with pytest.raises(ConfigError, match="'time_mediam_us'.*Did you mean 'time_median_us'"):
        rule.enforce("objective", "time_mediam_us")


def _job_file(tmp_path: Path, values: list[float | None]) -> Path:
    path = tmp_path / "trials.parquet"
    pq.write_table(pa.table({"time_median_us": pa.array(values, pa.float64())}), path)
    return path


def test_a_job_returns_its_trials_value_or_their_geometric_mean(tmp_path: Path,
                                                                capsys) -> None:
    assert job_objective(_job_file(tmp_path, [42.5]), "time_median_us") == 42.5
    assert job_objective(_job_file(tmp_path, [10.0, 1000.0]), "time_median_us") == \
        pytest.approx(100.0)
    assert "objective time_median_us = 100" in capsys.readouterr().err


def test_a_job_without_a_value_is_a_failed_point_never_the_best(tmp_path: Path,
                                                                capsys) -> None:
    assert math.isnan(job_objective(_job_file(tmp_path, [1.0, None]), "time_median_us"))
    assert "1 trial(s) without a value" in capsys.readouterr().err
    assert math.isnan(job_objective(_job_file(tmp_path, [1.0]), "gpu_time_median_us"))
    assert "a CPU trial has no device time" in capsys.readouterr().err
    assert math.isnan(job_objective(None, "time_median_us"))


def test_a_missing_sweeper_plugin_names_the_extra_that_installs_it() -> None:
    from hydra.errors import MissingConfigException

    error = MissingConfigException("Could not find 'hydra/sweeper/optuna'",
                                   missing_cfg_file="hydra/sweeper/optuna", options=["basic"])
    assert "pip install 'opsweep[search]'" in explain(error)
