"""``python -m runner`` end to end, in temporary working directories.

The runs are declared in ``CLI_RUNS`` and started by conftest as soon as collection ends (each
costs a few seconds, mostly importing torch, so they overlap with the in-process tests); the
tests then read what they left behind: exit status, the results tree, the merged Parquet
file and its metadata. Every experiment runs at its smoke size (``smoke=true``), as a
multirun with one job per experiment, unless ``tests/test_experiments.py`` (the experiments'
own tests) already does so in the same session.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.config.schema import RunConfig
from runner.storage.files import read_metadata
from runner.storage.layout import JOB_FILE, SWEEP_FILE

CONF = Path(__file__).resolve().parent.parent / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
SMOKE_SUPPORTED = "smoke" in {f.name for f in dataclasses.fields(RunConfig)}

REQUIRED_COLUMNS = {
    # identity and status
    "sweep_id", "job_num", "trial_index", "trial_id", "timestamp", "status", "reason",
    "error_traceback",
    # axes
    "op", "target", "dtype", "shape", "shape_str", "device", "seed", "streams", "graph",
    "compile", "backward",
    # timing and throughput
    "samples_us", "n_samples", "calls_per_sample", "stop_reason", "time_median_us",
    "time_ci_low_us", "time_ci_high_us", "noisy", "flops", "bytes_moved", "tflops", "gbps",
    # accuracy
    "rel_error", "accuracy_ok",
    # environment
    "torch_version", "python_version", "hostname", "platform", "cpu_model", "cpu_count",
    "git_commit", "timer_preset",
}
ENV_COLUMNS = ("torch_version", "python_version", "hostname", "platform", "cpu_count")

BACK_TO_BACK = ["op=vector_add", "shape=[8]", "timer=smoke"]
#: Experiments run as multiruns (one job per experiment, one torch import per multirun),
#: split in this many processes so they share the cores.
EXPERIMENT_RUNS = 2
#: tests/test_experiments.py runs every experiment at smoke size end to end with the same
#: checks (one job per experiment, found through the metadata). Running them twice would
#: double the slowest part of the suite, so this module only does it without that file.
COVERED_BY = Path(__file__).resolve().parent / "test_experiments.py"
RUN_EXPERIMENTS = SMOKE_SUPPORTED and not COVERED_BY.exists()


def experiment_groups() -> list[list[str]]:
    return [EXPERIMENTS[i::EXPERIMENT_RUNS] for i in range(EXPERIMENT_RUNS)
            if EXPERIMENTS[i::EXPERIMENT_RUNS]]


def CLI_RUNS() -> dict[str, Any]:  # noqa: N802 (the name conftest looks for)
    """Started by conftest as soon as collection ends; each in its own folder except the
    back-to-back pair, which shares one."""
    runs: dict[str, Any] = {
        "multirun": ["op=matmul", "dtype=fp16,fp32", "shape=[32,32,32]", "timer=smoke", "-m"],
        "lists": ["op=matmul", "dtype=[fp32,bf16]", "shape=[[8,8,8],[16,16,16]]",
                  "timer=smoke"],
        # a failing function, in a job and across jobs: trials after it must still run
        "failing": ["-m", "op=custom",
                    "op.target=[ops.examples:always_fails,ops.examples:gelu_mul]",
                    "dtype=fp32,fp64", "shape=[8,8]", "timer=smoke"],
        "b2b_1": (BACK_TO_BACK, "back_to_back"),
        "b2b_2": (BACK_TO_BACK, "back_to_back"),
    }
    if RUN_EXPERIMENTS:
        for index, group in enumerate(experiment_groups()):
            runs[f"experiments_{index}"] = ["-m", f"experiment={','.join(group)}",
                                            "smoke=true"]
    return runs


@pytest.fixture(scope="module")
def runs(cli_runs: dict[str, Any]) -> dict[str, Any]:
    return cli_runs


def finished(run: Any) -> Any:
    run.wait()
    assert run.returncode == 0, run.explain()
    return run


def merged_file(run: Any) -> Path:
    """The one merged results file of a run's working directory."""
    files = sorted((run.cwd / "results").glob(f"*/{SWEEP_FILE}"))
    assert len(files) == 1, (files, run.explain())
    return files[0]


# ---------------------------------------------------------------------------------------
# A multirun: two jobs, one merged file
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def multirun(runs: dict[str, Any]) -> tuple[Any, Path, pd.DataFrame]:
    run = finished(runs["multirun"])
    path = merged_file(run)
    return run, path, pd.read_parquet(path)


def test_multirun_writes_one_merged_file_and_one_file_per_job(multirun: Any) -> None:
    run, path, df = multirun
    sweep = path.parent
    assert [p.name for p in (run.cwd / "results").iterdir()] == [sweep.name]
    assert (sweep / "jobs" / "0" / JOB_FILE).is_file()
    assert (sweep / "jobs" / "1" / JOB_FILE).is_file()
    assert sorted(p.name for p in (sweep / "jobs").iterdir()) == ["0", "1"]
    assert len(df) == 2
    assert sorted(df["job_num"]) == [0, 1]
    assert list(df["trial_index"]) == [0, 0]
    assert set(df["sweep_id"]) == {sweep.name}
    assert list(df["dtype"]) == ["fp16", "fp32"]
    assert not list(sweep.rglob("*.tmp"))


def test_multirun_has_every_column(multirun: Any) -> None:
    _, _, df = multirun
    missing = REQUIRED_COLUMNS - set(df.columns)
    assert not missing, f"missing columns: {sorted(missing)}"


def test_multirun_rows(multirun: Any) -> None:
    _, path, df = multirun
    fp32 = df[df["dtype"] == "fp32"].iloc[0]
    assert fp32["status"] == "ok", fp32["reason"]
    assert fp32["op"] == "matmul" and list(fp32["shape"]) == [32, 32, 32]
    assert fp32["shape_str"] == "32x32x32"
    # measured (a loaded machine may stop the smoke timer before its 3 samples: then noisy)
    assert 1 <= fp32["n_samples"] <= 3 and fp32["n_samples"] == len(fp32["samples_us"])
    assert fp32["n_samples"] == 3 or fp32["noisy"]
    assert fp32["time_median_us"] > 0
    assert fp32["flops"] == 2 * 32**3
    assert fp32["tflops"] == pytest.approx(fp32["flops"] / fp32["time_median_us"] / 1e6)
    assert fp32["gbps"] > 0
    assert fp32["accuracy_ok"]
    assert fp32["device"] in ("cpu", "cuda:0")
    assert fp32["timer_preset"] == "smoke"
    for column in ENV_COLUMNS:
        assert pd.notna(fp32[column]), column
    # fp16 may not be supported everywhere, but the row is never missing and says why
    fp16 = df[df["dtype"] == "fp16"].iloc[0]
    assert fp16["status"] in ("ok", "skipped", "error")
    if fp16["status"] != "ok":
        assert isinstance(fp16["reason"], str) and fp16["reason"]
    assert df["trial_id"].nunique() == 2
    schema = pq.read_schema(path)
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert schema.field("samples_us").type == pa.list_(pa.float64())


def test_multirun_metadata_records_each_job(multirun: Any) -> None:
    _, path, _ = multirun
    meta = read_metadata(path)
    assert meta["sweep_id"] == path.parent.name
    jobs = meta["jobs"]
    assert [job["job_num"] for job in jobs] == [0, 1]
    assert ["dtype=fp16" in job["overrides"] for job in jobs] == [True, False]
    assert ["dtype=fp32" in job["overrides"] for job in jobs] == [False, True]
    assert all("op" in job["config"] and "timer" in job["config"] for job in jobs)


def test_multirun_reads_back_with_runner_load(multirun: Any) -> None:
    run, path, df = multirun
    import runner

    load = getattr(runner, "load", None)
    if load is None:
        import importlib

        try:
            load = importlib.import_module("runner.storage.load")
        except ImportError:
            pytest.skip("runner.storage.load does not exist")
    if not callable(load):
        load = getattr(load, "load", None)
    if load is None:
        pytest.skip("runner.storage.load is not callable")
    for where in (path, path.parent, run.cwd / "results"):  # file, sweep, results root
        loaded = load(where)
        assert len(loaded) == 2, where  # the job files are never counted on top
        assert sorted(loaded["trial_id"].astype(str)) == sorted(df["trial_id"])


def test_collect_merges_a_copy_of_a_real_sweep(multirun: Any, tmp_path: Path) -> None:
    """``python -m runner.collect`` on a real sweep whose merge never happened."""
    from runner.execution.collect import main as collect_main

    _, path, df = multirun
    copy = tmp_path / path.parent.name
    shutil.copytree(path.parent / "jobs", copy / "jobs")
    assert collect_main([str(copy)]) == 0
    rebuilt = pd.read_parquet(copy / SWEEP_FILE)
    assert list(rebuilt["trial_id"]) == list(df["trial_id"])
    assert list(rebuilt["time_median_us"]) == list(df["time_median_us"])
    assert read_metadata(copy / SWEEP_FILE)["jobs"] == read_metadata(path)["jobs"]


# ---------------------------------------------------------------------------------------
# A single run with list axes: one job, the cartesian product
# ---------------------------------------------------------------------------------------

def test_list_axes_expand_inside_one_job(runs: dict[str, Any]) -> None:
    run = finished(runs["lists"])
    path = merged_file(run)
    df = pd.read_parquet(path)
    assert sorted(p.name for p in (path.parent / "jobs").iterdir()) == ["0"]
    assert len(df) == 4
    assert list(df["job_num"]) == [0, 0, 0, 0]
    assert list(df["trial_index"]) == [0, 1, 2, 3]
    assert [(s, d) for s, d in zip(df["shape_str"], df["dtype"])] == [
        ("8x8x8", "fp32"), ("8x8x8", "bf16"), ("16x16x16", "fp32"), ("16x16x16", "bf16")]
    assert (df["status"] == "ok").all(), df[["status", "reason"]]
    assert df["trial_id"].nunique() == 4
    assert "4 trials" in run.output
    # stored in plan order, run in heat order (runner.execution.order): on a CPU no trial is
    # power-capped, so all run as light ones, longest first (fp32's 4 bytes before bf16's 2)
    ran = df.sort_values("timestamp")
    assert [(s, d) for s, d in zip(ran["shape_str"], ran["dtype"])] == [
        ("16x16x16", "fp32"), ("16x16x16", "bf16"), ("8x8x8", "fp32"), ("8x8x8", "bf16")]


# ---------------------------------------------------------------------------------------
# A failing op becomes an error row; the sweep goes on
# ---------------------------------------------------------------------------------------

def test_failing_op_is_an_error_row_and_the_sweep_goes_on(runs: dict[str, Any]) -> None:
    run = finished(runs["failing"])
    df = pd.read_parquet(merged_file(run))
    assert len(df) == 4
    assert list(df["job_num"]) == [0, 0, 1, 1]
    fails = df[df["param_target"] == "ops.examples:always_fails"]
    works = df[df["param_target"] == "ops.examples:gelu_mul"]
    assert len(fails) == len(works) == 2
    assert (fails["status"] == "error").all()
    for _, failed in fails.iterrows():
        assert "fails on purpose" in failed["reason"]
        assert failed["reason"].startswith("RuntimeError")
        assert "Traceback" in failed["error_traceback"]
        assert "always_fails" in failed["error_traceback"]
        assert pd.isna(failed["time_median_us"])
    assert (works["status"] == "ok").all(), works[["status", "reason"]]
    assert works["accuracy_ok"].all()
    assert works["error_traceback"].isna().all()
    assert "2 error" in run.output and "2 ok" in run.output


# ---------------------------------------------------------------------------------------
# Back-to-back runs never share a sweep folder
# ---------------------------------------------------------------------------------------

def test_back_to_back_runs_get_different_sweep_folders(runs: dict[str, Any]) -> None:
    first, second = finished(runs["b2b_1"]), finished(runs["b2b_2"])
    assert first.cwd == second.cwd
    sweeps = sorted(p for p in (first.cwd / "results").iterdir() if p.is_dir())
    assert len(sweeps) == 2, sweeps
    for sweep in sweeps:
        df = pd.read_parquet(sweep / SWEEP_FILE)
        assert len(df) == 1 and list(df["sweep_id"]) == [sweep.name]
        assert [p.name for p in (sweep / "jobs").iterdir()] == ["0"]


# ---------------------------------------------------------------------------------------
# Every experiment runs end to end at its smoke size
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def experiment_rows(runs: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Each experiment's rows, found through the job metadata of the merged files."""
    if not RUN_EXPERIMENTS:
        return {}
    found: dict[str, pd.DataFrame] = {}
    for index in range(len(experiment_groups())):
        run = runs[f"experiments_{index}"].wait()
        if run.returncode != 0:
            continue  # reported by test_experiment_runs_end_to_end
        path = merged_file(run)
        df = pd.read_parquet(path)
        for job in read_metadata(path)["jobs"]:
            names = [o.partition("=")[2] for o in job["overrides"]
                     if o.startswith("experiment=")]
            assert len(names) == 1, job["overrides"]
            found[names[0]] = df[df["job_num"] == job["job_num"]]
    return found


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_end_to_end(runs: dict[str, Any], experiment_rows: dict[str, Any],
                                    name: str) -> None:
    if not SMOKE_SUPPORTED:
        pytest.skip(f"needs a smoke size preset (smoke=true) to run at CI size: "
                    f"{', '.join(EXPERIMENTS)}")
    if not RUN_EXPERIMENTS:
        pytest.skip(f"runs end to end in {COVERED_BY.name}::test_experiment_runs_at_smoke_size")
    index = next(i for i, group in enumerate(experiment_groups()) if name in group)
    finished(runs[f"experiments_{index}"])
    df = experiment_rows[name]
    assert len(df) > 0
    assert set(df["status"]) <= {"ok", "skipped"}, df.loc[
        df["status"] != "ok", ["op", "status", "reason"]].to_string()
    assert df["reason"][df["status"] == "skipped"].notna().all()
    assert (df["timer_preset"] == "smoke").all()
    if not (df["status"] == "ok").any():  # only acceptable where the experiment needs a GPU
        import torch

        assert not torch.cuda.is_available(), df[["op", "reason"]].to_string()
        assert df["reason"].str.contains("CUDA|accelerator|cpu").all(), df["reason"].tolist()
