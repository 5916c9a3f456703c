"""Result files: row tables, atomic never-overwriting writes, merging a sweep, and
``python -m runner.collect`` for sweeps that ended before their merge."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.execution.collect import main as collect_main
from runner.storage.column_types import column_type
from runner.storage.columns import COLUMNS
from runner.storage.files import (
    LEADING_COLUMNS,
    METADATA_KEY,
    job_files,
    merge_tables,
    read_metadata,
    rows_to_table,
    write_new,
)
from runner.storage.journal import merge_sweep
from runner.storage.layout import JOB_FILE, SWEEP_FILE


def row(**values: Any) -> dict[str, Any]:
    """A minimal trial row with everything the summary table reads."""
    base = {"status": "ok", "reason": None, "op": "matmul", "dtype": "fp32",
            "shape_str": "8x8x8", "shape": [8, 8, 8], "graph": "none", "compile": "none",
            "streams": 1, "backward": False, "time_median_us": 1.0, "n_samples": 3}
    base.update(values)
    return base


def write_job(sweep: Path, job: int | str, rows: list[dict[str, Any]],
              **metadata: Any) -> Path:
    meta = {"format_version": 1, "job_num": job, "config": f"job: {job}\n", **metadata}
    return write_new(rows_to_table(rows, meta), sweep / "jobs" / str(job) / JOB_FILE)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


# ---------------------------------------------------------------------------------------
# rows_to_table
# ---------------------------------------------------------------------------------------

def test_columns_missing_from_the_first_row_are_kept() -> None:
    rows = [{"status": "error", "reason": "boom", "op": "matmul"},
            {"status": "ok", "op": "matmul", "time_median_us": 2.5, "param_impl": "bmm",
             "extra_bytes": 7}]
    table = rows_to_table(rows, {})
    assert table.num_rows == 2
    assert table["time_median_us"].to_pylist() == [None, 2.5]
    assert table["param_impl"].to_pylist() == [None, "bmm"]
    assert table["extra_bytes"].to_pylist() == [None, 7]
    assert table["reason"].to_pylist() == ["boom", None]


def test_leading_columns_come_first_in_order_then_first_seen() -> None:
    rows = [{"zeta": 1, "status": "ok", "alpha": 2, "op": "x", "sweep_id": "s"},
            {"beta": 3, "time_median_us": 1.0}]
    names = rows_to_table(rows, {}).column_names
    leading = [c for c in LEADING_COLUMNS if c in names]
    assert names[:len(leading)] == leading == ["sweep_id", "status", "op", "time_median_us"]
    assert names[len(leading):] == ["zeta", "alpha", "beta"]


def test_known_columns_keep_their_types_when_all_null() -> None:
    names = ["time_median_us", "samples_us", "shape", "timestamp", "noisy", "n_samples",
             "reason", "tflops", "graph_count", "accuracy_ok", "compile_dynamic"]
    table = rows_to_table([dict.fromkeys(names), dict.fromkeys(names)], {})
    for name in names:
        assert table.schema.field(name).type == column_type(name), name
        assert str(column_type(name)) == COLUMNS[name][0], name
    assert table.schema.field("samples_us").type == pa.list_(pa.float64())
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")


def test_unknown_all_null_column_is_null_typed() -> None:
    table = rows_to_table([{"extra_nothing": None}], {})
    assert pa.types.is_null(table.schema.field("extra_nothing").type)


def test_column_of_mixed_types_falls_back_to_strings() -> None:
    table = rows_to_table([{"param_n": 3}, {"param_n": "three"}, {"param_n": None}], {})
    assert table.schema.field("param_n").type == pa.string()
    assert table["param_n"].to_pylist() == ["3", "three", None]


def test_metadata_is_stored_as_json() -> None:
    table = rows_to_table([row()], {"config": "op: matmul\n", "job_num": 3})
    assert json.loads(table.schema.metadata[METADATA_KEY]) == {
        "config": "op: matmul\n", "job_num": 3}


def test_no_rows_gives_an_empty_table() -> None:
    assert rows_to_table([], {}).num_columns == 0


# ---------------------------------------------------------------------------------------
# write_new
# ---------------------------------------------------------------------------------------

def test_write_new_writes_atomically_and_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "t.parquet"
    first = rows_to_table([row(time_median_us=1.0)], {"n": 1})
    assert write_new(first, path) == path
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        write_new(rows_to_table([row(time_median_us=2.0)], {"n": 2}), path)
    assert path.read_bytes() == before
    assert pq.read_table(path)["time_median_us"].to_pylist() == [1.0]
    assert read_metadata(path) == {"n": 1}
    assert leftovers(tmp_path) == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.parquet"]


def test_write_new_never_replaces_a_file_that_appears_during_the_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another process creates the file between the exists() check and the link: the hard
    # link must fail rather than replace it, and the temporary file must go.
    path = tmp_path / "t.parquet"
    original_write = pq.write_table

    def write_then_race(table: pa.Table, where: Any, *args: Any, **kwargs: Any) -> None:
        original_write(table, where, *args, **kwargs)
        path.write_bytes(b"the other writer's result")

    monkeypatch.setattr(pq, "write_table", write_then_race)
    with pytest.raises(FileExistsError):
        write_new(rows_to_table([row()], {}), path)
    assert path.read_bytes() == b"the other writer's result"
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------
# merge_sweep
# ---------------------------------------------------------------------------------------

@pytest.fixture()
def sweep(tmp_path: Path) -> Path:
    """Three jobs with different op parameters, job 10 after job 2 (numeric order)."""
    sweep = tmp_path / "2026-01-01_00-00-00.000000"
    write_job(sweep, 0, [row(op="batched_dot", param_impl="bmm", trial_index=0),
                         row(op="batched_dot", param_impl="mul_sum", trial_index=1)],
              overrides=["op=batched_dot"])
    write_job(sweep, 10, [row(op="sum", param_layout="transposed", trial_index=0)],
              overrides=["op=sum"])
    write_job(sweep, 2, [row(status="error", reason="boom", time_median_us=None,
                             n_samples=None, trial_index=0)],
              overrides=["op=matmul"])
    return sweep


def test_job_files_are_in_numeric_job_order(sweep: Path) -> None:
    assert [p.parent.name for p in job_files(sweep)] == ["0", "2", "10"]


def test_merge_concatenates_jobs_with_different_columns(sweep: Path) -> None:
    merged = merge_sweep(sweep)
    assert merged == sweep / SWEEP_FILE
    table = pq.read_table(merged)
    assert table.num_rows == 4
    assert table["op"].to_pylist() == ["batched_dot", "batched_dot", "matmul", "sum"]
    assert table["param_impl"].to_pylist() == ["bmm", "mul_sum", None, None]
    assert table["param_layout"].to_pylist() == [None, None, None, "transposed"]
    assert table["status"].to_pylist() == ["ok", "ok", "error", "ok"]
    assert table.schema.field("time_median_us").type == pa.float64()


def test_merge_records_every_jobs_metadata(sweep: Path) -> None:
    meta = read_metadata(merge_sweep(sweep))
    assert meta["sweep_id"] == sweep.name
    assert meta["format_version"] == 1 and "merged_utc" in meta
    assert [job["job_num"] for job in meta["jobs"]] == [0, 2, 10]
    assert [job["config"] for job in meta["jobs"]] == ["job: 0\n", "job: 2\n", "job: 10\n"]
    assert meta["jobs"][0]["overrides"] == ["op=batched_dot"]


def test_merge_is_idempotent_and_only_grows(sweep: Path) -> None:
    merged = merge_sweep(sweep)
    data, stat = merged.read_bytes(), merged.stat()
    os.utime(merged, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10**9))  # tell writes apart
    mtime = merged.stat().st_mtime_ns
    assert merge_sweep(sweep) == merged  # nothing new: the file is not rewritten
    assert merged.read_bytes() == data
    assert merged.stat().st_mtime_ns == mtime
    # a job that finished after a merge (a collect of a running sweep): the merged file is
    # replaced by a superset, atomically
    write_job(sweep, 3, [row(op="late", job_num=3, trial_index=0)])
    assert merge_sweep(sweep) == merged
    assert "late" in pq.read_table(merged)["op"].to_pylist()
    assert pq.read_table(merged).num_rows == 5
    assert leftovers(sweep) == []


def test_merge_of_a_sweep_without_jobs_is_none(tmp_path: Path) -> None:
    assert merge_sweep(tmp_path) is None
    assert not (tmp_path / SWEEP_FILE).exists()


def test_merge_promotes_a_column_that_is_null_in_one_job(tmp_path: Path) -> None:
    write_job(tmp_path, 0, [row(extra_bytes=None)])
    write_job(tmp_path, 1, [row(extra_bytes=42)])
    table = pq.read_table(merge_sweep(tmp_path))
    assert table["extra_bytes"].to_pylist() == [None, 42]
    assert pa.types.is_integer(table.schema.field("extra_bytes").type)


def test_merge_stringifies_a_column_whose_type_differs_between_jobs(tmp_path: Path) -> None:
    write_job(tmp_path, 0, [row(param_size=3)])
    write_job(tmp_path, 1, [row(param_size="large")])
    table = pq.read_table(merge_sweep(tmp_path))
    assert table["param_size"].to_pylist() == ["3", "large"]


def test_merge_tables_of_nothing() -> None:
    assert merge_tables([]).num_rows == 0


# ---------------------------------------------------------------------------------------
# python -m runner.collect
# ---------------------------------------------------------------------------------------

def test_collect_merges_an_unfinished_sweep(sweep: Path, capsys: pytest.CaptureFixture) -> None:
    assert not (sweep / SWEEP_FILE).exists()
    assert collect_main([str(sweep)]) == 0
    table = pq.read_table(sweep / SWEEP_FILE)
    assert table.num_rows == 4
    assert "4 trials" in capsys.readouterr().err


def test_collect_leaves_a_merged_sweep_untouched(sweep: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    merged = merge_sweep(sweep)
    data, mtime = merged.read_bytes(), merged.stat().st_mtime_ns
    assert collect_main([str(sweep)]) == 0
    assert merged.read_bytes() == data and merged.stat().st_mtime_ns == mtime


def test_collect_status_for_bad_folders(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert collect_main([str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert collect_main([str(empty)]) == 1
    assert not (empty / SWEEP_FILE).exists()


def test_collect_command_line(tmp_path: Path, start_cli: Any) -> None:
    """The real ``python -m runner.collect`` on two sweeps: one unmerged, one merged."""
    unmerged, merged = tmp_path / "a", tmp_path / "b"
    write_job(unmerged, 0, [row(op="one")])
    write_job(unmerged, 1, [row(op="two", status="skipped", reason="needs CUDA")])
    write_job(merged, 0, [row(op="three")])
    done = merge_sweep(merged)
    data = done.read_bytes()
    run = start_cli([str(unmerged), str(merged)], tmp_path, module="runner.collect").wait()
    assert run.returncode == 0, run.explain()
    assert pq.read_table(unmerged / SWEEP_FILE)["op"].to_pylist() == ["one", "two"]
    assert str(merged / SWEEP_FILE) in run.output
    assert done.read_bytes() == data


def test_results_readme_column_table_is_generated_from_the_schema() -> None:
    """``results/README.md``'s column table is ``python -m runner.storage.column_reference``'s
    output: a column declared in runner/storage/columns.py and not regenerated into the docs
    fails."""
    from pathlib import Path

    from runner.storage.column_reference import markdown_table

    readme = (Path(__file__).resolve().parent.parent / "results" / "README.md").read_text()
    assert markdown_table() in readme, ("results/README.md is stale: regenerate its column "
                                        "table with python -m runner.storage.column_reference")


def test_every_row_names_the_experiment_its_job_was_composed_from(tmp_path: Path,
                                                                   start_cli: Any) -> None:
    run = start_cli(["experiment=quickstart", "smoke=true", "device=cpu",
                     f"results_dir={tmp_path / 'r'}"], tmp_path).wait()
    assert run.returncode == 0, run.explain()
    (merged,) = (tmp_path / "r").glob("*/results.parquet")
    column = pq.read_table(merged).column("experiment").to_pylist()
    assert column and set(column) == {"quickstart"}
    plain = start_cli(["op=add", "shape=[8]", "timer=smoke", "device=cpu",
                       f"results_dir={tmp_path / 'p'}"], tmp_path).wait()
    assert plain.returncode == 0, plain.explain()
    (merged,) = (tmp_path / "p").glob("*/results.parquet")
    assert pq.read_table(merged).column("experiment").to_pylist() == [None]


def test_every_declared_column_type_has_its_arrow_type() -> None:
    """Columns are declared by Arrow type name; each name maps to the Arrow type that prints
    as it, and a name outside the map fails with the fix."""
    from runner.storage.column_types import arrow_type

    for name, (kind, _) in COLUMNS.items():
        assert str(arrow_type(kind)) == kind, name
    with pytest.raises(ValueError, match="add it to ARROW_TYPES"):
        arrow_type("float16")


def test_a_worker_imports_neither_pyarrow_nor_pandas() -> None:
    """A worker needs the columns' names, not their Arrow types: pyarrow's import was most of
    a worker's imports after torch (0.2-1 s, paid before its first trial, more with several
    workers starting at once). The driver writes the results."""
    import subprocess
    import sys

    code = ("import sys, torch, runner.__main__, runner.execution.trial, "
            "runner.execution.worker_loop; "
            "print(sorted(m for m in ('pyarrow', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
