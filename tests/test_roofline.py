"""runner.analysis.roofline: calibration storage, the three regimes, fallbacks, never raising."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

try:
    from synthetic import CPU, H100, SLOW_GUARD_S, make_trials
except ImportError:  # tests/ imported as a package
    from tests.synthetic import CPU, H100, SLOW_GUARD_S, make_trials

from runner.analysis import roofline
from runner.analysis.roofline import annotate, calibration_slug, store_calibration

GPU = {**H100, "device_name": "NVIDIA Test GPU", "driver_version": "1.0"}
TRIAL_COLUMNS = ["op", "dtype", "shape_str", "status", "pct_of_peak", "bound",
                 "roofline_source", "roofline_reason"]


def calibrate_rows(env=GPU) -> pd.DataFrame:
    """A calibrate sweep with known maxima: bf16 800 TFLOP/s, fp32 50, d2d 3000 GB/s,
    h2d 50, d2h 45, launch floor 6 µs (median of 5, 6, 7; the graphed 1 µs is ignored)."""
    specs = [
        {"op": "matmul", "dtype": "bf16", "shape": (4096,) * 3, "tflops": 600.0},
        {"op": "matmul", "dtype": "bf16", "shape": (8192,) * 3, "tflops": 800.0},
        {"op": "matmul", "dtype": "bf16", "shape": (8192,) * 3, "tflops": 9999.0,
         "status": "error"},
        {"op": "matmul", "dtype": "fp32", "shape": (4096,) * 3, "tflops": 40.0},
        {"op": "matmul", "dtype": "fp32", "shape": (8192,) * 3, "tflops": 50.0},
        {"op": "copy", "params": {"direction": "d2d"}, "shape": (1 << 26,), "gbps": 2000.0},
        {"op": "copy", "params": {"direction": "d2d"}, "shape": (1 << 28,), "gbps": 3000.0},
        {"op": "copy", "params": {"direction": "h2d"}, "shape": (1 << 28,), "gbps": 25.0},
        {"op": "copy", "params": {"direction": "h2d"}, "shape": (1 << 28,), "gbps": 50.0},
        {"op": "copy", "params": {"direction": "d2h"}, "shape": (1 << 28,), "gbps": 45.0},
        {"op": "add", "shape": (1,), "median_us": 5.0},
        {"op": "add", "shape": (1,), "median_us": 6.0, "params": {"inplace": True}},
        {"op": "add", "shape": (1,), "median_us": 7.0, "seed": 1},
        {"op": "add", "shape": (1,), "median_us": 1.0, "graph": "cuda_graph"},
        {"op": "add", "shape": (4096,), "median_us": 9.0},
    ]
    overrides = [{k: s.pop(k) for k in ("tflops", "gbps") if k in s} for s in specs]
    df = make_trials(specs, sweep_id="calib", env=env)
    for i, values in enumerate(overrides):
        for key, value in values.items():
            df.loc[i, key] = value
    return df


def trials(env=GPU) -> pd.DataFrame:
    """One trial per regime plus the awkward cases, on a device with calibrate_rows()."""
    return make_trials([
        # 2 * 8192^3 FLOP in 2000 µs = 549.8 TFLOP/s: compute-bound at 68.7% of 800
        {"op": "matmul", "dtype": "bf16", "shape": (8192,) * 3, "median_us": 2000.0},
        # 3 * 4 * 2^26 bytes in 400 µs = 2013 GB/s: memory-bound at 67.1% of 3000
        {"op": "add", "dtype": "fp32", "shape": (1 << 26,), "median_us": 400.0},
        # one element in 6.5 µs: overhead-bound, at 6 / 6.5 = 92.3% of the floor
        {"op": "add", "dtype": "fp32", "shape": (1,), "median_us": 6.5},
        # 2 * 4 * 2^20 bytes over the link in 200 µs = 41.9 GB/s: 83.9% of the h2d 50
        {"op": "copy", "dtype": "fp32", "shape": (1 << 20,), "median_us": 200.0,
         "params": {"direction": "h2d"}},
        {"op": "matmul", "dtype": "fp64", "shape": (512,) * 3, "median_us": 100.0},
        {"op": "matmul", "dtype": "bf16", "shape": (64,) * 3, "status": "error"},
    ], env=env)


@pytest.fixture
def calibrated(tmp_path):
    path = store_calibration(calibrate_rows(), tmp_path)
    assert path is not None
    return tmp_path, path


def test_store_calibration_takes_the_documented_rows(calibrated):
    root, path = calibrated
    slug = calibration_slug("cuda", "NVIDIA Test GPU", "1.0")
    assert path == root / "calibration" / f"{slug}.json"
    assert path.name == "cuda-nvidia-test-gpu-driver-1-0.json"
    data = json.loads(path.read_text())
    assert data["matmul_tflops"] == {"bf16": 800.0, "fp32": 50.0}  # max, error row ignored
    assert data["copy_gbps"] == 3000.0 and data["h2d_gbps"] == 50.0 and data["d2h_gbps"] == 45.0
    assert data["launch_us"] == 6.0  # median of the eager one-element adds
    assert data["graph_launch_us"] == 1.0  # the graphed one-element add
    assert data["missing"] == [] and data["driver_version"] == "1.0"


def test_each_regime_is_classified(calibrated):
    root, _ = calibrated
    out = annotate(trials(), results_root=root).set_index(["op", "dtype", "shape_str"])
    source = "calibration:cuda-nvidia-test-gpu-driver-1-0"
    compute = out.loc[("matmul", "bf16", "8192x8192x8192")]
    assert compute["bound"] == "compute" and compute["roofline_source"] == source
    assert compute["pct_of_peak"] == pytest.approx(100 * 2 * 8192**3 / 2000e-6 / 1e12 / 800)
    memory = out.loc[("add", "fp32", "67108864")]
    assert memory["bound"] == "memory"
    assert memory["pct_of_peak"] == pytest.approx(100 * 12 * 2**26 / 400e-6 / 1e9 / 3000)
    overhead = out.loc[("add", "fp32", "1")]
    assert overhead["bound"] == "overhead"
    assert overhead["pct_of_peak"] == pytest.approx(100 * 6.0 / 6.5)
    link = out.loc[("copy", "fp32", "1048576")]
    assert link["bound"] == "memory"
    assert link["pct_of_peak"] == pytest.approx(100 * 8 * 2**20 / 200e-6 / 1e9 / 50)
    for row in (compute, memory, overhead, link):
        assert row["roofline_reason"]  # the numbers that decided it


def test_graph_replays_are_held_to_the_graph_launch_floor(calibrated, tmp_path):
    graphed = make_trials([{"op": "add", "shape": (1,), "graph": "cuda_graph",
                            "median_us": 1.25}], env=GPU)
    root, _ = calibrated
    out = annotate(graphed, results_root=root)
    assert out["bound"].iloc[0] == "overhead"
    assert out["pct_of_peak"].iloc[0] == pytest.approx(100 * 1.0 / 1.25)
    # Without a graphed calibration row the eager floor is used, and the reason says so.
    eager_only = calibrate_rows()
    eager_only = eager_only[eager_only["graph"] == "none"]
    store_calibration(eager_only, tmp_path)
    out = annotate(graphed, results_root=tmp_path)
    assert out["pct_of_peak"].iloc[0] == pytest.approx(100 * 6.0 / 1.25)
    assert "eager floor used" in out["roofline_reason"].iloc[0]


def test_missing_inputs_are_null_with_a_reason(calibrated):
    root, _ = calibrated
    out = annotate(trials(), results_root=root).set_index(["op", "dtype", "shape_str"])
    fp64 = out.loc[("matmul", "fp64", "512x512x512")]
    assert pd.isna(fp64["bound"]) and np.isnan(fp64["pct_of_peak"])
    assert "no matmul peak for dtype fp64" in fp64["roofline_reason"]
    failed = out.loc[("matmul", "bf16", "64x64x64")]
    assert pd.isna(failed["bound"]) and failed["roofline_reason"] == "status=error: not timed"


def test_other_driver_uses_the_same_device_calibration_and_says_so(calibrated):
    root, _ = calibrated
    out = annotate(trials(env={**GPU, "driver_version": "2.0"}), results_root=root)
    assert out["bound"].iloc[0] == "compute"
    assert "calibrated with driver 1.0, this trial ran driver 2.0" in out["roofline_reason"].iloc[0]


def test_fallback_table_for_uncalibrated_known_gpus(tmp_path):
    out = annotate(trials(env=H100), results_root=tmp_path)
    assert out["roofline_source"].iloc[0] == "fallback:H100 SXM"
    assert out["bound"].iloc[0] == "compute"
    assert out["pct_of_peak"].iloc[0] == pytest.approx(100 * 2 * 8192**3 / 2000e-6 / 1e12 / 781)
    assert "fallback ceilings" in out["roofline_reason"].iloc[0]
    h200 = annotate(trials(env={**H100, "device_name": "NVIDIA H200"}), results_root=tmp_path)
    assert h200["roofline_source"].iloc[0] == "fallback:H200"
    l4 = annotate(trials(env={**H100, "device_name": "NVIDIA L4"}), results_root=tmp_path)
    assert l4["roofline_source"].iloc[0] == "fallback:L4"
    assert "launch floor 10 us assumed" in l4["roofline_reason"].iloc[2]


def test_unknown_gpu_and_uncalibrated_cpu_are_null_with_reasons(tmp_path):
    odd = annotate(trials(env={**H100, "device_name": "NVIDIA Mystery 9000"}), tmp_path)
    assert odd["bound"].isna().all() and odd["roofline_source"].isna().all()
    assert "no calibration and no fallback entry for 'NVIDIA Mystery 9000'" \
        in odd["roofline_reason"].iloc[0]
    cpu = annotate(trials(env=CPU), results_root=tmp_path)
    assert cpu["bound"].isna().all()
    assert "no CPU calibration for 'Synthetic CPU'" in cpu["roofline_reason"].iloc[0]


def test_cpu_calibration_is_used_for_cpu_rows(tmp_path):
    cpu_cal = calibrate_rows(env=CPU)
    cpu_cal = cpu_cal[~cpu_cal["params_json"].str.contains("h2d|d2h")]
    path = store_calibration(cpu_cal, tmp_path)
    assert path.name == "cpu-synthetic-cpu.json"
    assert json.loads(path.read_text())["missing"] == []  # no link bandwidth on a CPU
    out = annotate(trials(env=CPU), results_root=tmp_path)
    assert out["roofline_source"].iloc[0] == "calibration:cpu-synthetic-cpu"
    assert list(out["bound"].iloc[:3]) == ["compute", "memory", "overhead"]


def test_annotate_never_raises(tmp_path, monkeypatch):
    weird = pd.DataFrame({"status": ["ok", None], "tflops": ["fast", None],
                          "device": [["cuda", 0], None], "time_per_op_us": [1.0, -1.0]})
    out = annotate(weird, results_root=tmp_path)
    assert out["roofline_reason"].notna().all()
    assert annotate(pd.DataFrame(), results_root=tmp_path).empty

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(roofline, "resolve_ceilings", boom)
    out = annotate(trials(), results_root=tmp_path)
    assert len(out) == 6 and out["bound"].isna().all()
    assert (out["roofline_reason"] == "roofline failed: RuntimeError: boom").all()


def test_store_calibration_never_raises(tmp_path):
    assert store_calibration(pd.DataFrame(), tmp_path) is None
    failed = calibrate_rows().assign(status="error")
    assert store_calibration(failed, tmp_path) is None
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert store_calibration(calibrate_rows(), blocker) is None
    partial = store_calibration(calibrate_rows().query("op == 'matmul'"), tmp_path)
    missing = json.loads(partial.read_text())["missing"]
    assert any(m.startswith("copy_gbps") for m in missing)
    assert any(m.startswith("launch_us") for m in missing)


@pytest.mark.slow
def test_annotate_is_fast_on_100k_rows(calibrated):
    root, _ = calibrated
    few = trials()
    big = few.iloc[np.tile(np.arange(len(few)), 17_000)].reset_index(drop=True)
    start = time.perf_counter()
    out = annotate(big, results_root=root)
    assert time.perf_counter() - start < SLOW_GUARD_S
    assert out["bound"].notna().sum() == 4 * 17_000


def test_docs_list_every_fallback_device():
    from pathlib import Path

    from runner.analysis.devices import FALLBACK_DEVICES

    docs = (Path(__file__).resolve().parent.parent / "docs" / "analysis.md").read_text()
    for spec in FALLBACK_DEVICES:
        assert f"| {spec.name} |" in docs, f"docs/analysis.md lacks the {spec.name} row"


def test_measured_host_overhead_decides_the_overhead_regime(calibrated):
    """The device time settles it both ways, whatever the launch floor says."""
    root, _ = calibrated
    df = make_trials([
        # loop 5 µs, GPU 0.94 µs: host-paced (ratio 5.3), overhead at 6 / 5 of the floor
        {"op": "add", "dtype": "fp32", "shape": (1,), "median_us": 5.0, "gpu_median_us": 0.94,
         "noise": 0.0},
        # a chain on 1M elements: loop 1450 µs, GPU 902: host-paced although far above the
        # 6 µs launch floor
        {"op": "add", "dtype": "fp32", "shape": (1 << 20,), "median_us": 1450.0,
         "gpu_median_us": 902.0, "noise": 0.0},
        # GPU-paced (ratio 1.01) although the roofline time is below the launch floor:
        # memory-bound at the device time's rate
        {"op": "add", "dtype": "fp32", "shape": (1024,), "median_us": 5.05,
         "gpu_median_us": 5.0, "noise": 0.0},
        # the 8192^3 matmul: ratio 1.0, compute-bound at the device time
        {"op": "matmul", "dtype": "bf16", "shape": (8192,) * 3, "median_us": 2000.0,
         "gpu_median_us": 2000.0, "noise": 0.0},
    ], env=GPU)
    out = annotate(df, results_root=root)
    assert list(out["bound"]) == ["overhead", "overhead", "memory", "compute"]
    assert out["pct_of_peak"].iloc[0] == pytest.approx(100 * 6.0 / 5.0)
    assert out["roofline_reason"].iloc[1].startswith(
        "host-paced: loop time 1.61x the device time (>= 1.2)")
    assert out["pct_of_peak"].iloc[2] == pytest.approx(100 * 12 * 1024 / 5.0e-6 / 1e9 / 3000)
    assert "GPU-paced: loop time 1.01x" in out["roofline_reason"].iloc[2]
    assert out["bound"].iloc[3] == "compute"


def test_just_below_the_ratio_threshold_is_not_overhead(calibrated):
    root, _ = calibrated
    below = roofline.OVERHEAD_RATIO * 0.99
    df = make_trials([{"op": "add", "dtype": "fp32", "shape": (1 << 20,),
                       "median_us": 100.0 * below, "gpu_median_us": 100.0, "noise": 0.0}],
                     env=GPU)
    assert annotate(df, results_root=root)["bound"].iloc[0] == "memory"
