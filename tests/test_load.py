"""runner.storage.load: every layout read once, schemas unioned, proper dtypes, long samples,
speed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

try:
    from synthetic import SLOW_GUARD_S, grid, make_trials, to_table, write_sweep
except ImportError:  # tests/ imported as a package
    from tests.synthetic import SLOW_GUARD_S, grid, make_trials, to_table, write_sweep

from runner.storage.load import ResultsNotFoundError, find_result_files, load, read_metadata

REPO = Path(__file__).resolve().parent.parent


def _matmuls(sweep_id: str, **params) -> pd.DataFrame:
    specs = grid(op="matmul", dtype=["fp32", "bf16"], shape=[(64, 64, 64), (128, 128, 128)])
    for spec in specs:
        spec["params"] = dict(params)
    return make_trials(specs, sweep_id=sweep_id, n_samples=10)


def test_sweep_dir_reads_merged_file_only_once(tmp_path):
    sweep = write_sweep(tmp_path, _matmuls("s1"))  # merged file + 2 job files
    df = load(sweep)
    assert len(df) == 4
    assert [p.name for p in find_result_files(sweep)] == ["results.parquet"]
    # and pandas reads the merged file directly as well
    assert len(pd.read_parquet(sweep / "results.parquet")) == 4


def test_crashed_sweep_reads_job_files_and_unions_their_columns(tmp_path):
    a = _matmuls("crashed")
    a["job_num"] = 0
    b = make_trials(grid(op="copy", dtype="fp32", shape=[(1024,)],
                         params=[{"direction": "d2d"}]), sweep_id="crashed")
    b["job_num"] = 1
    sweep = write_sweep(tmp_path, pd.concat([a, b], ignore_index=True), merged=False)
    df = load(sweep)
    assert len(df) == 5
    assert df["param_direction"].isna().sum() == 4  # matmul rows lack the copy's param
    assert set(df["op"]) == {"matmul", "copy"}


def test_results_root_reads_every_sweep_once_and_skips_calibration(tmp_path):
    write_sweep(tmp_path, _matmuls("merged"))
    write_sweep(tmp_path, _matmuls("crashed", impl="x"), merged=False)
    (tmp_path / "calibration").mkdir()
    (tmp_path / "calibration" / "cuda-x.json").write_text("{}")
    df = load(tmp_path)
    assert df.groupby("sweep_id", observed=True).size().to_dict() == {"crashed": 4, "merged": 4}
    assert df.loc[df["sweep_id"] == "crashed", "param_impl"].eq("x").all()
    assert df.loc[df["sweep_id"] == "merged", "param_impl"].isna().all()


def test_file_glob_and_list_forms(tmp_path):
    s1 = write_sweep(tmp_path, _matmuls("2026-a"))
    s2 = write_sweep(tmp_path, _matmuls("2026-b"))
    assert len(load(s1 / "results.parquet")) == 4
    assert len(load(str(tmp_path / "2026-*"))) == 8
    assert len(load([s1, s2, s1])) == 8  # the same file listed twice is read once


def test_dtypes_are_proper(tmp_path):
    df = load(write_sweep(tmp_path, _matmuls("s1")))
    for column in ("op", "dtype", "shape_str", "graph", "compile", "status", "device"):
        assert isinstance(df[column].dtype, pd.CategoricalDtype), column
    assert list(df["dtype"].cat.categories[:5]) == ["fp64", "fp32", "tf32", "fp16", "bf16"]
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert df["time_median_us"].dtype == np.float64
    assert isinstance(df["samples_us"].iloc[0], np.ndarray)


def test_conflicting_param_types_become_strings(tmp_path):
    write_sweep(tmp_path, _matmuls("ints", block=64))
    write_sweep(tmp_path, _matmuls("strs", block="auto"))
    df = load(tmp_path)
    assert sorted(df["param_block"].astype(str).unique()) == ["64", "auto"]


def test_samples_long_form(tmp_path):
    trials = make_trials(grid(op="add", dtype="fp32", shape=[(1,), (4096,)]),
                         sweep_id="s", n_samples=7)
    trials.loc[1, "samples_us"] = [1.0, 2.0, 3.0]
    long = load(write_sweep(tmp_path, trials), samples="long")
    assert len(long) == 7 + 3
    assert list(long["sample_index"]) == [*range(7), 0, 1, 2]
    assert list(long["sample_us"].iloc[-3:]) == [1.0, 2.0, 3.0]
    assert "samples_us" not in long.columns
    assert (long["shape_str"].iloc[-3:] == "4096").all()
    narrow = load(tmp_path / "s", samples="long", columns=["trial_id", "dtype"])
    assert list(narrow.columns) == ["trial_id", "dtype", "sample_index", "sample_us"]


def test_samples_drop_and_columns(tmp_path):
    sweep = write_sweep(tmp_path, _matmuls("s1"))
    assert "samples_us" not in load(sweep, samples="drop").columns
    few = load(sweep, columns=["op", "time_median_us", "not_a_column"], samples="drop")
    assert list(few.columns) == ["op", "time_median_us", "not_a_column"]
    assert few["not_a_column"].isna().all()


def test_missing_path_is_a_clear_value_error(tmp_path):
    with pytest.raises(ValueError, match="no results at .*nowhere.*sweep directory"):
        load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsNotFoundError, match="no result files under"):
        load(tmp_path / "empty")
    with pytest.raises(ValueError, match="samples="):
        load(tmp_path, samples="wide")  # type: ignore[arg-type]


def test_metadata_is_readable(tmp_path):
    sweep = write_sweep(tmp_path, _matmuls("s1"))
    meta = read_metadata(sweep)
    assert list(meta.values())[0]["sweep_id"] == "s1"


@pytest.mark.slow
def test_fast_on_100k_rows(tmp_path):
    base = make_trials(grid(op="matmul", dtype=["fp32", "bf16", "fp16", "tf32"],
                            shape=[(n, n, n) for n in (64, 128, 256, 512, 1024)]),
                       n_samples=20)
    big = pa.concat_tables([to_table(base)] * 5000)  # 100k rows, 2M samples
    (tmp_path / "big").mkdir()
    pq.write_table(big, tmp_path / "big" / "results.parquet")
    start = time.perf_counter()
    df = load(tmp_path / "big")
    elapsed = time.perf_counter() - start
    assert len(df) == 100_000
    assert elapsed < SLOW_GUARD_S, f"load took {elapsed:.2f}s for 100k rows"
    start = time.perf_counter()
    long = load(tmp_path / "big", samples="long", columns=["dtype", "shape_str"])
    assert len(long) == 2_000_000
    assert time.perf_counter() - start < SLOW_GUARD_S


@pytest.mark.slow
def test_import_is_torch_free():
    code = "import sys, runner.storage.load; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False", "import runner.storage.load must not import torch"


@pytest.mark.slow
def test_runner_load_is_callable_however_it_is_reached(tmp_path):
    sweep = write_sweep(tmp_path, _matmuls("s1"))
    code = ("import runner, runner.storage.load, sys; "
            f"print(len(runner.load({str(sweep)!r}))); "
            "from runner import load; "
            f"print(len(load({str(sweep)!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split() == ["4", "4"]


@pytest.mark.slow
def test_import_runner_exports_load(tmp_path):
    sweep = write_sweep(tmp_path, _matmuls("s1"))
    code = f"import runner; print(len(runner.load({str(sweep)!r})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    if "has no attribute 'load'" in out.stderr:
        pytest.fail("runner/__init__.py must export load ("
                    "`from runner.storage.load import load`)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "4"
