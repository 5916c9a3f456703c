"""``runner.export``: one record per trial as JSON, CSV or github-action-benchmark's format."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from synthetic import CPU, make_trials, scaled, write_sweep

from runner.analysis.export import BENCHMARK_ACTION_KEYS, BENCHMARK_ACTION_OPTIONAL, main
from runner.storage.load import load

SPECS = [
    {"op": "matmul", "shape": (64, 64, 64), "median_us": 123.456789012345},
    {"op": "batched_dot", "shape": (100, 32), "params": {"impl": "bmm"}, "median_us": 7.5},
    {"op": "batched_dot", "shape": (100, 32), "params": {"impl": "einsum"}, "median_us": 9.25},
    {"op": "add", "shape": (4096,), "status": "error"},
]


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return write_sweep(tmp_path / "results", make_trials(SPECS, env=CPU, sweep_id="cpu-sweep"))


@pytest.fixture
def gpu_sweep(tmp_path: Path) -> Path:
    specs = [dict(s, gpu_median_us=s["median_us"] / 2) for s in SPECS[:2]]
    return write_sweep(tmp_path / "results", make_trials(specs, sweep_id="gpu-sweep"))


def export(capsys, *args: str) -> str:
    assert main([*map(str, args)]) == 0
    return capsys.readouterr().out


def test_json_is_one_record_per_trial_with_the_stored_values(sweep, capsys) -> None:
    records = json.loads(export(capsys, sweep, "--format", "json"))
    stored = load(sweep, samples="drop")
    assert len(records) == len(stored) == len(SPECS)
    assert list(records[0]) == list(stored.columns)
    by_index = {r["trial_index"]: r for r in records}
    assert by_index[0]["time_median_us"] == stored.loc[0, "time_median_us"]  # exact
    assert by_index[0]["shape"] == [64, 64, 64]
    assert by_index[1]["param_impl"] == "bmm"
    assert by_index[3]["status"] == "error" and by_index[3]["time_median_us"] is None
    assert pd.Timestamp(by_index[0]["timestamp"]) == stored.loc[0, "timestamp"]
    assert "samples_us" not in records[0]


def test_samples_are_kept_on_request(sweep, capsys) -> None:
    records = json.loads(export(capsys, sweep, "--format", "json", "--samples"))
    stored = load(sweep)
    assert records[0]["samples_us"] == list(stored.loc[0, "samples_us"])


def test_csv_reads_back_through_csv_and_pandas(sweep, capsys) -> None:
    text = export(capsys, sweep, "--format", "csv")
    stored = load(sweep, samples="drop")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(SPECS)
    assert float(rows[0]["time_median_us"]) == stored.loc[0, "time_median_us"]  # exact
    assert json.loads(rows[0]["shape"]) == [64, 64, 64]
    assert rows[3]["time_median_us"] == "" and rows[3]["status"] == "error"
    frame = pd.read_csv(io.StringIO(text))
    assert list(frame.columns) == list(stored.columns)
    assert frame["time_median_us"].tolist()[:3] == stored["time_median_us"].tolist()[:3]
    assert frame["l2_flush"].dtype == bool


def check_benchmark_action(entries: object) -> None:
    """What github-action-benchmark's custom format requires of the file."""
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert set(BENCHMARK_ACTION_KEYS) <= set(entry), entry
        assert set(entry) <= {*BENCHMARK_ACTION_KEYS, *BENCHMARK_ACTION_OPTIONAL}, entry
        assert isinstance(entry["name"], str) and isinstance(entry["unit"], str)
        assert isinstance(entry["value"], (int, float)) and not isinstance(entry["value"], bool)
        assert math.isfinite(entry["value"])
        for key in BENCHMARK_ACTION_OPTIONAL:
            assert isinstance(entry.get(key, ""), str), (key, entry)
    names = [entry["name"] for entry in entries]
    assert len(set(names)) == len(names), names  # the action keys a series by its name


def test_benchmark_action_entries_are_the_loop_times_of_cpu_trials(sweep, capsys) -> None:
    assert main([str(sweep), "--format", "benchmark-action"]) == 0
    out = capsys.readouterr()
    entries = json.loads(out.out)
    check_benchmark_action(entries)
    assert len(entries) == 3  # the failed trial has no time
    assert "1 of 4 trials have no time" in out.err
    stored = load(sweep, samples="drop")
    assert sorted(e["value"] for e in entries) == sorted(stored["time_median_us"].dropna())
    assert all(e["name"].endswith("(loop time)") and e["unit"] == "us" for e in entries)
    impls = [e["name"] for e in entries if "batched_dot" in e["name"]]
    assert any("impl=bmm" in n for n in impls) and any("impl=einsum" in n for n in impls)
    assert all(e["range"].startswith("± ") for e in entries)
    assert all("cpu-sweep" not in e["name"] and "sweep_id: cpu-sweep" in e["extra"]
               for e in entries)


def test_benchmark_action_takes_the_device_time_and_says_so(gpu_sweep, capsys) -> None:
    entries = json.loads(export(capsys, gpu_sweep, "--format", "benchmark-action"))
    check_benchmark_action(entries)
    stored = load(gpu_sweep, samples="drop")
    assert sorted(e["value"] for e in entries) == sorted(stored["gpu_time_median_us"])
    assert all(e["name"].endswith("(device time)") for e in entries)


def test_the_same_trial_keeps_its_name_from_sweep_to_sweep(tmp_path, capsys) -> None:
    base = make_trials(SPECS, env=CPU, sweep_id="first")
    first = write_sweep(tmp_path, base)
    second = write_sweep(tmp_path, scaled(base, 1.5, sweep_id="second"))
    names = [sorted(e["name"] for e in json.loads(export(capsys, s, "--format",
                                                         "benchmark-action")))
             for s in (first, second)]
    assert names[0] == names[1]
    both = json.loads(export(capsys, tmp_path, "--format", "benchmark-action"))
    check_benchmark_action(both)  # one spec in two sweeps: still one series each
    assert len(both) == 6


def test_output_writes_the_file_and_nothing_to_stdout(sweep, tmp_path, capsys) -> None:
    target = tmp_path / "bench.json"
    assert main([str(sweep), "--format", "benchmark-action", "--output", str(target)]) == 0
    assert capsys.readouterr().out == ""
    check_benchmark_action(json.loads(target.read_text(encoding="utf-8")))


@pytest.mark.parametrize("args", [["{missing}", "--format", "json"],
                                  ["{sweep}", "--format", "xml"],
                                  ["{sweep}"]])
def test_a_missing_sweep_or_a_bad_format_is_one_line_and_exit_2(args, sweep, tmp_path,
                                                               capsys) -> None:
    argv = [a.format(missing=tmp_path / "nope", sweep=sweep) for a in args]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # named as it was run: python -m runner.export here, opsweep-export when installed
    assert err.startswith("python -m runner.export: error: ") and err.count("\n") == 1, err
