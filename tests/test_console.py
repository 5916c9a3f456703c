"""What the terminal shows: the progress line and the summary table."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from runner import console
from runner.analysis.selection import spec_cells
from runner.summary_table import summary_table


def CLI_RUNS() -> dict[str, Any]:  # noqa: N802 (the name conftest looks for)
    return {"threads": ["experiment=cpu_threads", "smoke=true"]}


def _render(renderable: Any, width: int = 200) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None)
    out.print(renderable)
    return out.file.getvalue()


def test_cpu_threads_table_shows_the_swept_num_threads(cli_runs: dict[str, Any]) -> None:
    run = cli_runs["threads"].wait()
    assert run.returncode == 0, run.explain()
    header = next(line for line in run.stdout.splitlines() if "status" in line)
    assert "num_threads" in header and "impl" in header
    # what did not vary is said once, above the table, not as a column
    assert "dtype=fp32" in run.stdout and "dtype" not in header


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Console:
    record = console._TeeConsole(file=io.StringIO(), width=200, color_system=None,
                                 force_terminal=False)
    monkeypatch.setattr(console, "stderr", record)
    return record


def test_bracketed_op_parameter_is_visible_in_the_progress_line(recorded: Console) -> None:
    items = ["a", "b"]
    for _ in console.track(items, "job 0 (op=batched_dot op.impl=[mul_sum,bmm,einsum])",
                           label=lambda s: f"batched_dot fp32 [x{s}]"):
        pass
    with console.progress(1, "job 1 (op.impl=[bmm])") as advance:
        advance("[tag]")
    text = recorded.file.getvalue()
    assert "op.impl=[mul_sum,bmm,einsum]" in text and "op.impl=[bmm]" in text
    assert "eta" in text  # the time-remaining column


def test_trial_labels_are_shown_literally_and_cut_to_fit() -> None:
    from rich.text import Text

    label = "batched_dot fp32 [bold]x[/bold] op.impl=[mul_sum,bmm]"
    assert Text.from_markup(console.plain(label)).plain == label
    long = "x" * 200
    assert len(Text.from_markup(console.plain(long)).plain) == console.MAX_LABEL


def test_labels_keep_what_tells_items_apart() -> None:
    labels = ["matmul fp32 64x64x64 streams=2", "matmul fp32 64x64x64 streams=4"]
    assert console.distinct_parts(labels) == ["streams=2", "streams=4"]
    assert console.distinct_parts(["add fp32 8"]) == ["add fp32 8"]


def _row(**kw: Any) -> dict[str, Any]:
    row = {"op": "matmul", "dtype": "bf16", "shape_str": "64x64x64", "device": "cuda:0",
           "graph": "none", "compile": "none", "backward": False, "status": "ok",
           "time_median_us": 20.0, "ci_rel_halfwidth": 0.01, "tflops": 1.0, "gbps": 2.0,
           "n_samples": 10, "accuracy_ok": True, "param_flops": -1.0}
    row.update(kw)
    return row


def test_cuda_rows_lead_with_device_time_and_bound() -> None:
    rows = [_row(gpu_time_us=12.5, gpu_time_ci_rel_halfwidth=0.02, bound="overhead"),
            _row(dtype="fp16", gpu_time_us=11.0, gpu_time_ci_rel_halfwidth=0.02,
                 bound="compute")]
    text = _render(summary_table(rows, "sweep s", spec_cells(rows)))
    header = next(line for line in text.splitlines() if "status" in line)
    assert header.index("device µs") < header.index("loop µs") < header.index("bound")
    assert "12.5" in text and "overhead" in text and "2.0%" in text
    # the custom op's sentinel is never shown as a number
    assert "-1" not in text and "flops=auto" in text


def test_capped_rows_show_their_temperature_and_a_flag_leads_the_note() -> None:
    """A capped device time is the sustained number at the board's temperature, so the
    table shows it next to the time; a ``sustained_flag`` is in the note, not only in the
    Parquet file. Rows that are not capped show neither."""
    flag = "the GPU was lowering its clock for its temperature as its timing ended"
    rows = [_row(gpu_time_us=204.1, power_capped=True, temperature_c_timed=67.0),
            _row(dtype="fp16", gpu_time_us=178.3, power_capped=True,
                 temperature_c_timed=87.0, sustained_flag=flag),
            _row(dtype="fp32", gpu_time_us=2640.0, power_capped=False,
                 temperature_c_timed=61.0)]
    text = _render(summary_table(rows, "sweep s", spec_cells(rows)), width=250)
    header = next(line for line in text.splitlines() if "status" in line)
    assert header.index("loop µs") < header.index("capped °C") < header.index("note")
    lines = {row["dtype"]: next(line for line in text.splitlines()
                                if f"{row['gpu_time_us']:,.0f}" in line) for row in rows}
    assert "│        67 │" in lines["bf16"] and "│        87 │" in lines["fp16"]
    assert "61" not in lines["fp32"] and "may not be sustained: the GPU was lowering" in \
        " ".join(text.split())
    assert "capped °C: the power cap set the clock" in " ".join(text.split())
    plain_rows = [_row(gpu_time_us=12.5)]
    assert "capped °C" not in _render(summary_table(plain_rows, "s", spec_cells(plain_rows)))


def test_a_row_whose_time_depends_on_where_its_bytes_live_says_so_in_the_note() -> None:
    """An ``allocation_flag`` reaches the summary's note (alone it still makes the note
    column), after a ``sustained_flag`` where a row has both."""
    flag = "where its bytes live moves it: 4 allocations of its inputs read 12.69-12.89 µs"
    rows = [_row(gpu_time_us=12.9, allocation_flag=flag), _row(dtype="fp16")]
    text = " ".join(_render(summary_table(rows, "sweep s", spec_cells(rows)),
                            width=400).split())
    assert "note" in text and "where its bytes live moves it: 4 allocations" in text
    both = [_row(gpu_time_us=12.9, allocation_flag=flag, sustained_flag="held down")]
    text = " ".join(_render(summary_table(both, "sweep s", spec_cells(both)), width=400).split())
    assert text.index("may not be sustained: held down") < text.index("where its bytes live")


def test_cpu_rows_have_one_time_and_say_why_tflops_is_blank() -> None:
    rows = [_row(device="cpu", tflops=None), _row(device="cpu", dtype="fp32", tflops=None)]
    text = _render(summary_table(rows, "sweep s", spec_cells(rows)))
    assert "device µs" not in text and "median µs" in text
    assert "TFLOP/s: the op declares no FLOP count" in text
    traced = [_row(device="cpu", trace_path="jobs/0/traces/matmul.json")]
    assert "profile traces (trace_path): jobs/0/traces" in \
        _render(summary_table(traced, "sweep s", spec_cells(traced)))


def test_long_skip_reasons_wrap_at_words() -> None:
    reason = "graph=cuda_graph needs a CUDA device; run with device=cuda or drop graph"
    rows = [_row(status="skipped", reason=reason), _row(dtype="fp16")]
    text = _render(summary_table(rows, "sweep s", spec_cells(rows)), width=120)
    words = set(reason.replace(";", " ").split())
    cells = " ".join(line.split("│")[-2] for line in text.splitlines() if line.count("│") > 3)
    assert set(cells.replace(";", " ").split()) >= words  # no word cut in two


def test_without_a_terminal_progress_is_lines_and_the_sweep_folder_has_the_log(
        cli_runs: dict[str, Any]) -> None:
    run = cli_runs["threads"].wait()
    assert run.returncode == 0, run.explain()
    lines = [line for line in run.stderr.splitlines() if " trials" in line and "job 0" in line]
    total = int(lines[0].rsplit(": ", 1)[1].split()[0])  # "job 0 (...): 6 trials"
    assert lines[-1].split(": ")[-2].startswith(f"{total}/{total} trials"), lines
    assert "━" not in run.stderr  # no bar drawn into a file
    (log,) = (run.cwd / "results").glob(f"*/{console.LOG_NAME}")
    text = log.read_text(encoding="utf-8")
    assert lines[-1] in text and "status" in text and f"{total} trials (" in text


@pytest.fixture
def log_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console's log, restored after the test (it is process-wide)."""
    for name in ("path", "console", "verbose"):
        monkeypatch.setattr(console._Log, name, getattr(console._Log, name))


def test_plain_progress_lines_are_spaced_unless_verbose(
        recorded: Console, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, log_off: None
) -> None:
    now = [0.0]
    monkeypatch.setattr(console.time, "monotonic", lambda: now[0])
    with console.progress(4, "job 0") as advance:
        for seconds in (0.5, 1.0, 3.0, 3.1):  # a line at 3.0 (2 s after the start), and the last
            now[0] = seconds
            advance(f"t{seconds}")
    shown = [line for line in recorded.file.getvalue().splitlines() if line]
    assert [line.rsplit(": ", 1)[1] for line in shown] == ["4 trials", "t3.0", "t3.1"]
    assert shown[-1].startswith("job 0: 4/4 trials, 0:00:03, eta 0:00:00")
    path = console.start_log(tmp_path, verbose=True)
    with console.progress(2, "job 1") as advance:
        advance("a")
        advance("b")
    assert [line.rsplit(": ", 1)[1] for line in path.read_text().splitlines()] == \
        ["2 trials", "a", "b"]


def test_plain_progress_names_the_overrides_once_and_paces_the_eta_after_the_first_trial(
        recorded: Console, monkeypatch: pytest.MonkeyPatch, log_off: None) -> None:
    """The first trial carries what happens once (a worker importing torch) and, largest
    first, the most work: an eta from the start read 10 s here where 4 s were left."""
    now = [0.0]
    monkeypatch.setattr(console.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(console._Log, "verbose", True)  # a line for every trial
    title = "job 0 (experiment=quickstart_cpu timer.max_time_s=0.2 seed=3)"
    labels = ["a", "b", "c", "d", "e", "f"]
    for _ in console.track(labels, title, name="job 0"):
        now[0] += 4.0 if now[0] == 0.0 else 1.0
    shown = [line for line in recorded.file.getvalue().splitlines() if line]
    assert shown[0] == f"{title}: 6 trials"
    assert all(line.startswith("job 0: ") and "experiment=" not in line for line in shown[1:])
    assert ", eta –: a" in shown[1]  # one trial tells nothing of the pace yet
    assert shown[2].startswith("job 0: 2/6 trials, 0:00:05, eta 0:00:04: b"), shown[2]
    assert shown[-1].startswith("job 0: 6/6 trials, 0:00:09, eta 0:00:00: f"), shown[-1]


def test_log_records_of_opsweep_modules_reach_the_console_and_the_log(
        recorded: Console, tmp_path: Any, log_off: None) -> None:
    import logging

    path = console.start_log(tmp_path)
    logging.getLogger("runner.analysis.roofline").warning("no ceiling for this device")
    line = "warning: runner.analysis.roofline: no ceiling for this device"
    assert line in recorded.file.getvalue()
    assert line in path.read_text()


def test_the_blank_tflops_note_names_the_ops_and_the_custom_fix_only_for_custom() -> None:
    copy = [_row(device="cpu", op="copy", tflops=None)]
    text = " ".join(_render(summary_table(copy, "s", spec_cells(copy))).split())
    assert "no FLOP count (copy)" in text and "op.flops" not in text
    custom = [_row(device="cpu", op="custom", tflops=None)]
    text = " ".join(_render(summary_table(custom, "s", spec_cells(custom))).split())
    assert "(custom; for op=custom set op.flops)" in text


def test_rows_from_a_dataframe_show_like_plain_ones() -> None:
    """Rows taken from pandas carry NumPy scalars and NaN for missing text: the table shows
    them as it shows plain rows (a NumPy True is capped, a NaN note is no note), and a noisy
    row keeps "noisy" in view beside a long flag."""
    import numpy as np

    flag = "the GPU was lowering its clock for its temperature " + "x " * 100
    rows = [_row(gpu_time_us=np.float64(204.1), power_capped=np.bool_(True),
                 temperature_c_timed=np.int64(67), sustained_flag=float("nan"),
                 reason=float("nan")),
            _row(dtype="fp16", gpu_time_us=178.3, power_capped=np.bool_(False),
                 temperature_c_timed=np.int64(61), noisy=True, noisy_reason="3 samples",
                 sustained_flag=flag)]
    text = " ".join(_render(summary_table(rows, "s", spec_cells(rows)), width=250).split())
    assert "capped °C" in text and "│ 67 │" in text and "61" not in text
    assert "nan" not in text and "noisy (3 samples); may not be sustained" in text
