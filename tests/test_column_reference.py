"""What a user can read about the results without the source: each column's description and
unit in every result file's Parquet schema, ``opsweep --columns``, ``opsweep --docs``, and the
name and ``--version`` of every command."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.storage.column_reference import (
    DESCRIPTION_KEY,
    NO_UNIT,
    UNIT_KEY,
    describe,
    text_reference,
    unit_of,
)
from runner.storage.column_types import column_type
from runner.storage.columns import COLUMNS
from runner.storage.files import rows_to_table, write_new
from runner.storage.journal import merge_sweep
from runner.storage.layout import JOB_FILE, SWEEP_FILE

#: Every companion command's code (pyproject's [project.scripts] names each after its module).
COMPANIONS = ("runner.analysis.compare", "runner.analysis.history", "runner.analysis.report",
              "runner.execution.collect", "runner.execution.resume", "runner.claims.check",
              "runner.claims.report")


def _write_sweep(sweep: Path) -> Path:
    rows = [{"status": "ok", "op": "matmul", "dtype": "fp32", "shape": [8, 8, 8],
             "time_median_us": 2.5, "gpu_time_median_us": None, "power_w_start": 80.0,
             "param_impl": "bmm", "extra_workspace_bytes": 4096, "param_block": 64}]
    for job in (0, 1):
        write_new(rows_to_table(rows, {"format_version": 1, "job_num": job}),
                  sweep / "jobs" / str(job) / JOB_FILE)
    merge_sweep(sweep)
    return sweep / SWEEP_FILE


def test_read_schema_of_a_results_file_shows_each_columns_description_and_unit(
        tmp_path: Path) -> None:
    """The job files and the merged sweep file: every field says what it is and its unit,
    read with pyarrow alone (no opsweep needed to read them)."""
    merged = _write_sweep(tmp_path / "s")
    for path in (merged, tmp_path / "s" / "jobs" / "0" / JOB_FILE):
        schema = pq.read_schema(path)
        assert len(schema) >= 9
        for field in schema:
            meta = field.metadata or {}
            assert meta.get(DESCRIPTION_KEY), f"{path.name}: {field.name} has no description"
            assert meta.get(UNIT_KEY), f"{path.name}: {field.name} has no unit"
        median = schema.field("time_median_us").metadata
        assert median[DESCRIPTION_KEY].decode() == COLUMNS["time_median_us"][1]
        assert median[UNIT_KEY].decode() == "µs"
        assert schema.field("power_w_start").metadata[UNIT_KEY] == b"W"
        assert b"op parameter impl" in schema.field("param_impl").metadata[DESCRIPTION_KEY]
        assert schema.field("extra_workspace_bytes").metadata[UNIT_KEY] == b"bytes"
        assert schema.field("param_block").metadata[UNIT_KEY] == NO_UNIT.encode()
        assert b"opsweep" in schema.metadata  # the file's own metadata is kept beside them
    assert "description: 'median µs per call of the loop time'" in str(pq.read_schema(merged))


def test_every_declared_column_has_a_meaning_and_every_number_a_unit() -> None:
    """A new numeric column needs a unit word in its name (``_us``, ``_bytes``, ...) or an
    entry in ``NAMED_UNITS``: this names the one that has neither."""
    for name, (_, text) in COLUMNS.items():
        assert text.strip(), name
        dtype = column_type(name)
        numeric = pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or (
            pa.types.is_list(dtype) and not pa.types.is_string(dtype.value_type))
        if numeric:
            assert unit_of(name) != NO_UNIT or name in ("job_pid", "seed"), (
                f"{name}: a number with no unit; put the unit in its name or in NAMED_UNITS")
    assert [unit_of(n) for n in ("gpu_time_median_us", "sm_clock_mhz_samples_median",
                                 "energy_per_call_mJ", "temperature_c_end", "tflops",
                                 "kernel_count", "status")] == [
        "µs", "MHz", "mJ", "°C", "TFLOP/s", "count", NO_UNIT]
    assert describe("not_a_column")[1] == NO_UNIT


def test_the_column_reference_lists_every_column_and_finds_a_word() -> None:
    full = text_reference()
    assert all(f"\n{name}  [" in full for name in COLUMNS)
    one = text_reference("energy_per_call")
    assert "energy_per_call_mJ  [double, mJ]" in one and "\nsweep_id  [" not in one
    with pytest.raises(ValueError, match="no column name holds 'nothing_like_it'"):
        text_reference("nothing_like_it")


def _main(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.__main__ import main

    monkeypatch.setattr(sys, "argv", ["opsweep", *args])
    main()


def test_opsweep_columns_and_docs_answer_without_running(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _main(["--columns", "gpu_time_median"], monkeypatch)
    out = capsys.readouterr().out
    assert "gpu_time_median_us  [double, µs]" in out and "\nsweep_id  [" not in out
    with pytest.raises(SystemExit) as exit_:
        _main(["--columns", "nothing_like_it"], monkeypatch)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("opsweep: error: no column name holds")
    _main(["--docs"], monkeypatch)
    out = capsys.readouterr().out
    assert "timing.md" in out and "Two times: loop time and device time" in out


@pytest.mark.parametrize("module", COMPANIONS)
def test_every_companion_answers_version(module: str, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["pytest"])
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(["--version"])
    assert exit_.value.code in (0, None)
    assert capsys.readouterr().out.startswith("opsweep ")


@pytest.mark.parametrize(("module", "script"), [
    ("runner.compare", "opsweep-compare"), ("runner.claims.report", "opsweep-claims-report"),
    ("runner.resume", "opsweep-resume")])
def test_a_command_names_itself_as_it_was_called(
        module: str, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.cli import program

    monkeypatch.setattr(sys, "argv", [f"/venv/bin/{script}", "x"])
    assert program(module) == script
    monkeypatch.setattr(sys, "argv", ["/repo/runner/compare.py", "x"])
    assert program(module) == f"python -m {module}"


def test_the_installed_compare_names_itself_in_its_errors(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from runner.analysis.compare import main

    monkeypatch.setattr(sys, "argv", ["/venv/bin/opsweep-compare"])
    with pytest.raises(SystemExit):
        main(["only-one"])
    assert capsys.readouterr().err.startswith("opsweep-compare: error: ")
