"""runner.compare on synthetic result sets whose answers are known."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

try:
    from synthetic import grid, make_trials, scaled, write_sweep
except ImportError:  # tests/ imported as a package
    from tests.synthetic import grid, make_trials, scaled, write_sweep

from runner.analysis.compare import CompareOptions, compare, main, render
from runner.analysis.significance import verdict

REPO = Path(__file__).resolve().parent.parent
SPECS = grid(op="matmul", dtype=["fp32", "bf16"], shape=[(64, 64, 64), (256, 256, 256)])


def _base(**kw) -> pd.DataFrame:
    return make_trials(SPECS, sweep_id="base", seed=0, **kw)


def test_identical_runs_are_same():
    # Two runs of the same sweep: same medians, independent noise.
    result = compare(_base(), make_trials(SPECS, sweep_id="again", seed=1))
    assert list(result.pairs["verdict"]) == ["same"] * 4
    assert result.geomean == pytest.approx(1.0, abs=0.01)
    assert result.geomean_low <= 1.0 <= result.geomean_high
    assert result.counts()["only_base"] == result.counts()["only_new"] == 0
    assert result.regressions(1.0) == []


def test_repeated_runs_with_drift_within_the_noise_are_same():
    # 4% noise per sample and a 2% drift between runs: significant by U test, still "same".
    base = make_trials(SPECS, sweep_id="a", noise=0.04, n_samples=400, seed=3)
    new = scaled(base, 1.02, sweep_id="b")
    result = compare(base, new)
    assert (result.pairs["p_value"] < 0.05).any()
    assert set(result.pairs["verdict"]) == {"same"}


def test_twice_as_fast_is_faster_with_the_right_speedup():
    base = _base()
    result = compare(base, scaled(base, 0.5, sweep_id="new"))
    pairs = result.pairs
    assert list(pairs["verdict"]) == ["faster"] * 4
    assert np.allclose(pairs["speedup"], 2.0, rtol=0.01)
    assert (pairs["ci_low"] > 1.9).all() and (pairs["ci_high"] < 2.1).all()
    assert (pairs["ci_low"] <= pairs["speedup"]).all()
    assert (pairs["speedup"] <= pairs["ci_high"]).all()
    assert (pairs["p_value"] < 1e-6).all()
    assert np.allclose(pairs["change_pct"], -50.0, atol=1.0)
    assert result.geomean == pytest.approx(2.0, rel=0.01)


def test_slower_fails_the_gate(tmp_path, capsys):
    base = _base()
    b = write_sweep(tmp_path, base)
    n = write_sweep(tmp_path, scaled(base, 1.25, sweep_id="slow"))
    assert main([str(b), str(n), "--fail-on-regression", "10"]) == 1
    captured = capsys.readouterr()
    assert "4 slower" in captured.out
    assert "regression: 4 trial(s)" in captured.err and "+25.0%" in captured.err
    # A 25% regression does not trip a 30% gate.
    assert main([str(b), str(n), "--fail-on-regression", "30", "--format", "csv"]) == 0


def test_tiny_but_significant_shift_is_same():
    base = make_trials(SPECS, sweep_id="a", noise=0.001, n_samples=200)
    new = scaled(base, 1.01, sweep_id="b", noise=0.001)
    result = compare(base, new)
    assert (result.pairs["p_value"] < 1e-6).all()  # clearly significant ...
    assert set(result.pairs["verdict"]) == {"same"}  # ... but below the 3% minimum effect
    assert set(compare(base, new, CompareOptions(threshold=0.005)).pairs["verdict"]) == {"slower"}


def test_options_can_be_named_in_the_call_over_an_options_object():
    base = make_trials(SPECS, sweep_id="a", noise=0.001, n_samples=200)
    new = scaled(base, 1.01, sweep_id="b", noise=0.001)
    assert set(compare(base, new, threshold=0.005).pairs["verdict"]) == {"slower"}
    # a named field wins over the same field of the object; the object's others stay
    named = compare(base, new, CompareOptions(threshold=0.005, filters=["dtype=bf16"]),
                    threshold=0.03)
    assert set(named.pairs["verdict"]) == {"same"} and set(named.pairs["dtype"]) == {"bf16"}
    with pytest.raises(TypeError, match="colour='red': not an option; options are filters, "
                                        "ignore, alpha, threshold, time, n_boot, metric"):
        compare(base, new, colour="red")
    with pytest.raises(ValueError, match="time='fastest' is not one of auto, gpu, loop"):
        compare(base, new, time="fastest")


def test_mismatched_axes_are_reported_not_dropped():
    base = make_trials(grid(op="matmul", dtype=["fp32", "bf16"], shape=[(64, 64, 64)]))
    new = make_trials(grid(op="matmul", dtype=["fp32", "fp16"], shape=[(64, 64, 64)]))
    result = compare(base, new)
    assert list(result.pairs["trial"]) == ["matmul fp32"]
    assert list(result.only_base["dtype"]) == ["bf16"]
    assert list(result.only_new["dtype"]) == ["fp16"]
    assert any("dtype" in n and "only BASE has bf16" in n and "only NEW has fp16" in n
               for n in result.axis_notes)
    csv = pd.read_csv(io.StringIO(render(result, "csv")))
    assert sorted(csv["result"]) == ["geomean", "only_base", "only_new", "same"]


def test_param_only_on_one_side_is_explained_and_can_be_ignored():
    base = make_trials(SPECS)
    new = make_trials([{**s, "params": {"impl": "v2"}} for s in SPECS], seed=4)
    result = compare(base, new)
    assert len(result.pairs) == 0 and len(result.only_base) == len(result.only_new) == 4
    assert any("param_impl only in NEW" in n and "--ignore-axis param_impl" in n
               for n in result.axis_notes)
    assert len(compare(base, new, CompareOptions(ignore=["impl"])).pairs) == 4


def test_non_ok_rows_are_reported_not_compared_and_gate_on_new_failures():
    base = make_trials(SPECS)
    new_specs = [dict(s) for s in SPECS]
    new_specs[0]["status"] = "oom"
    new_specs[1]["status"] = "skipped"
    result = compare(base, make_trials(new_specs, seed=2))
    assert len(result.pairs) == 2
    assert sorted(result.not_compared["new_status"]) == ["oom", "skipped"]
    gate = result.regressions(50.0)
    assert len(gate) == 1 and "ok in BASE, oom in NEW" in gate[0]


def test_filters_select_trials():
    base = _base()
    result = compare(base, scaled(base, 0.5, sweep_id="n"),
                     CompareOptions(filters=["dtype=bf16", "shape_str=64x64x64,256x256x256"]))
    assert set(result.pairs["dtype"]) == {"bf16"} and len(result.pairs) == 2
    with pytest.raises(ValueError, match="no column 'colour'.*filter on one of"):
        compare(base, base, CompareOptions(filters=["colour=red"]))


def test_without_raw_samples_uses_the_runs_median_cis():
    base = _base()
    new = scaled(base, 0.5, sweep_id="n")
    for frame in (base, new):
        frame["samples_us"] = [[] for _ in range(len(frame))]
    result = compare(base, new)
    assert result.pairs["p_value"].isna().all()
    assert list(result.pairs["verdict"]) == ["faster"] * 4
    assert np.allclose(result.pairs["speedup"], 2.0)


def test_verdict_rule():
    assert verdict(1.5, 1.4, 1.6, 0.001, 0.01, alpha=0.05, threshold=0.03) == "faster"
    assert verdict(1.5, 1.4, 1.6, 0.2, 0.01, alpha=0.05, threshold=0.03) == "same"  # p
    assert verdict(1.5, 0.9, 2.0, 0.001, 0.01, alpha=0.05, threshold=0.03) == "same"  # CI
    assert verdict(1.02, 1.01, 1.03, 1e-9, 0.0, alpha=0.05, threshold=0.03) == "same"  # effect
    assert verdict(1.10, 1.05, 1.15, 1e-9, 0.2, alpha=0.05, threshold=0.03) == "same"  # noise
    assert verdict(0.5, 0.45, 0.55, 1e-9, 0.0, alpha=0.05, threshold=0.03) == "slower"


def test_cli_formats(tmp_path, capsys):
    base = _base()
    b = write_sweep(tmp_path, base)
    n = write_sweep(tmp_path, scaled(base, 0.5, sweep_id="new"))
    assert main([str(b), str(n), "--format", "markdown", "--filter", "op=matmul"]) == 0
    md = capsys.readouterr().out
    assert ("| trial | time | base | new | speedup | 95% CI | p | noise | verdict | other time |"
            in md)
    assert "time: gpu (device time) where both rows have it, else loop time (--time auto)" in md
    assert "| matmul bf16 64x64x64 | loop |" in md  # synthetic rows have no device time
    assert "4 compared: 4 faster" in md and "geomean speedup 2x" in md
    out_file = tmp_path / "cmp.csv"
    assert main([str(b), str(n), "--format", "csv", "-o", str(out_file)]) == 0
    frame = pd.read_csv(out_file)
    assert frame.iloc[-1]["trial"] == "GEOMEAN"
    assert frame.iloc[-1]["speedup"] == pytest.approx(2, rel=0.01)
    assert main([str(b), str(n)]) == 0
    table = capsys.readouterr().out
    assert "faster" in table and "matmul bf16 64x64x64" in table


@pytest.mark.parametrize("args, message", [
    (["nowhere", "nowhere"], "no results at 'nowhere'"),
    (["{b}", "{b}", "--filter", "colour=red"], "no column 'colour'"),
    (["{b}", "{b}", "--format", "html"], "invalid choice"),
    (["{b}"], "required: NEW"),
    (["{b}", "{b}", "--n-boot", "5"], "too few"),
])
def test_cli_bad_arguments_exit_2_with_one_line(tmp_path, capsys, args, message):
    b = write_sweep(tmp_path, _base())
    with pytest.raises(SystemExit) as exc:
        main([a.format(b=b) for a in args])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.slow
def test_cli_process_prints_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "runner.compare", "nowhere", "nowhere"],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("python -m runner.compare: error: no results at 'nowhere'")
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------
# Which time decides (loop vs device time)
# ---------------------------------------------------------------------------------------

#: A launch-bound add: the loop time is the host's (5 µs), the device's is 0.94 µs.
ADD = {"op": "add", "dtype": "fp32", "shape": (1,)}


def _run(loop_us: float, gpu_us: float | None, sweep: str, seed: int) -> pd.DataFrame:
    spec = {**ADD, "median_us": loop_us}
    if gpu_us is not None:
        spec["gpu_median_us"] = gpu_us
    return make_trials([spec], sweep_id=sweep, seed=seed, noise=0.005, n_samples=100)


def test_device_time_decides_where_both_rows_have_it():
    # Two processes: the host's loop moved 30%, the GPU's time did not. Same, on gpu.
    result = compare(_run(5.0, 0.94, "a", 0), _run(6.5, 0.94, "b", 1))
    pair = result.pairs.iloc[0]
    assert pair["time"] == "gpu" and pair["verdict"] == "same"
    assert pair["base_us"] == pytest.approx(0.94) and pair["new_us"] == pytest.approx(0.94)
    assert pair["base_other_us"] == pytest.approx(5.0)
    assert pair["new_other_us"] == pytest.approx(6.5)


def test_a_real_30pct_regression_of_a_launch_bound_op_is_detected():
    # No fixed overhead threshold hides it any more: the device time moved 30%.
    result = compare(_run(5.0, 0.94, "a", 0), _run(5.0, 0.94 * 1.3, "b", 1))
    pair = result.pairs.iloc[0]
    assert pair["time"] == "gpu" and pair["verdict"] == "slower"
    assert pair["change_pct"] == pytest.approx(30.0, abs=0.5)
    assert result.regressions(20.0)


def test_loop_time_decides_when_a_side_has_no_device_time():
    result = compare(_run(5.0, None, "a", 0), _run(6.5, 0.94, "b", 1))
    pair = result.pairs.iloc[0]
    assert pair["time"] == "loop" and pair["verdict"] == "slower"
    assert pair["base_us"] == pytest.approx(5.0)
    assert np.isnan(pair["base_other_us"]) and pair["new_other_us"] == pytest.approx(0.94)


def test_time_loop_gates_host_cost_on_purpose():
    result = compare(_run(5.0, 0.94, "a", 0), _run(6.5, 0.94, "b", 1), CompareOptions(time="loop"))
    pair = result.pairs.iloc[0]
    assert pair["time"] == "loop" and pair["verdict"] == "slower"
    assert pair["base_other_us"] == pytest.approx(0.94)
    assert "--time loop" in render(result, "markdown")


def test_time_gpu_does_not_compare_pairs_without_device_time():
    result = compare(_run(5.0, None, "a", 0), _run(5.0, 0.94, "b", 1), CompareOptions(time="gpu"))
    assert result.pairs.empty
    row = result.not_compared.iloc[0]
    assert row["base_reason"].startswith("--time gpu: no gpu_time (unavailable: synthetic)")
    assert row["new_reason"] is None
    with pytest.raises(ValueError, match="time='wall' is not one of auto, gpu, loop"):
        compare(_run(5.0, None, "a", 0), _run(5.0, None, "b", 1), CompareOptions(time="wall"))


def test_a_gate_that_matched_nothing_fails_with_its_own_status(tmp_path, capsys):
    from runner.analysis.compare import EXIT_NOTHING_COMPARED

    b = write_sweep(tmp_path, make_trials(grid(op="matmul", dtype=["fp32"], shape=[(64, 64, 64)]),
                                          sweep_id="base"))
    n = write_sweep(tmp_path, make_trials(grid(op="matmul", dtype=["bf16"], shape=[(64, 64, 64)]),
                                          sweep_id="new"))
    assert main([str(b), str(n), "--fail-on-regression", "5"]) == EXIT_NOTHING_COMPARED == 3
    err = capsys.readouterr().err
    assert "nothing compared" in err and "1 only in BASE, 1 only in NEW" in err
    assert main([str(b), str(n)]) == 0  # without a gate, an empty comparison is only a report
    # joined across the axis the user names, the pair is judged and its label keeps both dtypes
    assert main([str(b), str(n), "--fail-on-regression", "5", "--ignore-axis", "dtype"]) == 0


def test_ignore_axis_shape_joins_across_shapes_and_labels_both():
    base = make_trials(grid(op="matmul", dtype=["fp32"], shape=[(64, 64, 64)]))
    new = make_trials(grid(op="matmul", dtype=["fp32"], shape=[(128, 128, 128)]), seed=2)
    assert len(compare(base, new).pairs) == 0
    for name in ("shape", "shape_str"):
        pairs = compare(base, new, CompareOptions(ignore=[name])).pairs
        assert list(pairs["trial"]) == ["matmul shape 64x64x64 → 128x128x128"], name
    with pytest.raises(ValueError, match=r"--ignore-axis 'shpae'.*axes are: .*shape"):
        compare(base, new, CompareOptions(ignore=["shpae"]))


def test_the_table_is_plain_text_inside_a_notebook(monkeypatch) -> None:
    """In Jupyter, rich sends a table to the cell's display by itself (raw ANSI codes in
    its plain text, nothing for `jupyter execute` to print) unless told not to: the rendered
    text must come back, plain, for the caller to print."""
    import rich.console

    from runner.analysis.history import history
    from runner.analysis.history_table import render as render_history

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    base = _base()
    text = render(compare(base, scaled(base, 1.25, sweep_id="slow")), "table")
    assert "verdict" in text and "slower" in text and "\x1b[" not in text
    both = pd.concat([base.assign(timestamp=pd.Timestamp("2026-01-01", tz="UTC")),
                      scaled(base, 1.25, sweep_id="slow").assign(
                          timestamp=pd.Timestamp("2026-01-02", tz="UTC"))], ignore_index=True)
    table = render_history(history(both), "table")
    assert "first" in table and "\x1b[" not in table


def _on_gpu(frame: pd.DataFrame, uuid: str, index: int, mhz: float, celsius: int,
            host: str = "node1") -> pd.DataFrame:
    return frame.assign(hostname=host, gpu_uuid=uuid, gpu_index=index,
                        sm_clock_mhz_samples_median=mhz, temperature_c_timed=celsius)


def test_a_trial_that_ran_on_another_gpu_of_the_host_says_so_with_clock_and_heat():
    """A one-GPU run against a run with a worker per GPU: a trial 6% slower on GPU 1 at the
    same clock is a GPU difference, and the note says which GPUs, their clocks and heat."""
    base = _on_gpu(_base(), "GPU-aaaa", 0, 1821.0, 49)
    new = _on_gpu(scaled(base, 1.06, sweep_id="per_gpu"), "GPU-bbbb", 1, 1838.0, 54)
    notes = compare(base, new).pairs["note"]
    assert all("GPU 0 (1821 MHz, 49 °C) → GPU 1 (1838 MHz, 54 °C)" in n for n in notes)
    same_gpu = _on_gpu(scaled(base, 1.06, sweep_id="again"), "GPU-aaaa", 0, 1838.0, 54)
    other_host = _on_gpu(scaled(base, 1.06, sweep_id="elsewhere"), "GPU-bbbb", 1, 1838.0,
                         54, host="node2")
    for new in (same_gpu, other_host):  # the same GPU; another host: not this note
        assert not any("GPU 0" in n for n in compare(base, new).pairs["note"])
