"""runner.analysis.report and .plots: the report builds, its PNGs are real, missing data is a
note."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.image import imread

try:
    from synthetic import make_trials, tiny_cpu_sweep, write_sweep
except ImportError:  # tests/ imported as a package
    from tests.synthetic import make_trials, tiny_cpu_sweep, write_sweep

from runner.analysis.plots import all_plots, plot_modes, plot_scaling
from runner.analysis.report import build_report, main
from runner.analysis.roofline import annotate, ceilings_for
from runner.storage.load import load


def gpu_sweep() -> list[dict]:
    """Matmuls that approach the H100 fallback ceilings, adds in three modes, one copy,
    one failed and one skipped trial."""
    specs = []
    for n in (256, 1024, 4096, 8192):
        for dtype, efficiency in (("bf16", 0.7), ("fp32", 0.8)):
            peak = 780e12 if dtype == "bf16" else 50e12
            specs.append({"op": "matmul", "dtype": dtype, "shape": (n, n, n),
                          "median_us": max(2 * n**3 / (peak * efficiency) * 1e6, 8.0)})
    for n in (1, 1024, 1 << 20, 1 << 26):
        t = max(6.0, 12 * n / 2400e9 * 1e6)
        specs.append({"op": "add", "dtype": "fp32", "shape": (n,), "median_us": t, "noise": 0.05})
        specs.append({"op": "add", "dtype": "fp32", "shape": (n,), "graph": "cuda_graph",
                      "median_us": t * (0.3 if n < 1e5 else 1.0)})
        specs.append({"op": "add", "dtype": "fp32", "shape": (n,), "compile": "default",
                      "median_us": t * 0.9})
    specs.append({"op": "copy", "dtype": "fp32", "shape": (1 << 28,), "median_us": 740.0,
                  "params": {"direction": "d2d"}})
    specs.append({"op": "matmul", "dtype": "fp64", "shape": (64, 64, 64), "status": "error"})
    specs.append({"op": "matmul", "dtype": "fp16", "shape": (64, 64, 64), "status": "skipped"})
    return specs


def assert_real_png(path, min_bytes=8_000):
    assert path.is_file(), f"{path} missing"
    assert path.stat().st_size > min_bytes, f"{path} is suspiciously small"
    pixels = imread(path)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 500
    assert pixels[..., :3].std() > 0.05, f"{path} is blank"


def overlapping_labels(figure) -> list[tuple[str, str]]:
    """Pairs of tick or axis labels of one axes whose drawn boxes intersect."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    clashes = []
    for ax in figure.axes:
        for ticks in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ticks
                     if t.get_visible() and t.get_text()]
            for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
                if box_a.overlaps(box_b):
                    clashes.append((a, b))
    return clashes


@pytest.mark.slow
def test_report_from_synthetic_gpu_sweep(tmp_path):
    sweep = write_sweep(tmp_path, make_trials(gpu_sweep(), sweep_id="gpu"))
    index = build_report(sweep, results_root=tmp_path)
    out = sweep / "report"
    assert index == out / "index.html"
    for name in ("scaling_matmul", "scaling_add", "roofline", "modes", "samples"):
        assert_real_png(out / f"{name}.png")
    page = index.read_text()
    assert page.count("data:image/png;base64,") == 5  # self-contained
    assert "left out: copy: one size only" in page  # a plot without data is a note
    assert "fallback:H100 SXM" in page
    rows = re.findall(r"<tr class=\"(\w+)\">", page)
    assert len(rows) == 23 and rows.count("error") == 1 and rows.count("skipped") == 1
    assert (out / "trials.csv").read_text().count("\n") == 24


@pytest.mark.slow
def test_plots_are_labelled_logged_and_uncluttered(tmp_path):
    df = annotate(make_trials(gpu_sweep()), results_root=tmp_path)
    plots = {p.name: p for p in all_plots(df, ceilings_for(df, tmp_path))}
    scaling = plots["scaling_matmul"].figure
    time_ax = scaling.axes[0]
    assert time_ax.get_xscale() == "log" and time_ax.get_yscale() == "log"
    assert "µs" in time_ax.get_ylabel() and "numel" in time_ax.get_xlabel()
    assert "TFLOP/s" in scaling.axes[1].get_ylabel()
    assert "GB/s" in plots["scaling_add"].figure.axes[1].get_ylabel()
    roof = plots["roofline"].figure.axes[0]
    assert "FLOP/byte" in roof.get_xlabel() and "TFLOP/s" in roof.get_ylabel()
    assert any("ceiling bf16" in t.get_text() for t in roof.get_legend().get_texts())
    for name, plot in plots.items():
        if plot.figure is not None:
            assert overlapping_labels(plot.figure) == [], name


def test_sweep_without_data_for_any_plot_still_reports(tmp_path):
    failed = make_trials([{"op": "matmul", "status": "error"}, {"op": "add", "status": "oom"}],
                         sweep_id="broken")
    index = build_report(write_sweep(tmp_path, failed), tmp_path / "out")
    page = index.read_text()
    assert "data:image/png" not in page
    assert page.count("no timed (ok) trials in this sweep") == 4
    assert not list((tmp_path / "out").glob("*.png"))
    assert "synthetic error" in page and "oom" in page


def test_single_mode_sweep_notes_the_missing_comparison():
    df = make_trials([{"op": "add", "shape": (n,)} for n in (1, 100, 10_000)])
    plot = plot_modes(df)
    assert plot.figure is None and "every trial ran in one mode (eager)" in plot.note
    assert plot_scaling(df)[0].figure is not None


@pytest.mark.slow
def test_markdown_report_links_existing_pngs(tmp_path):
    sweep = write_sweep(tmp_path, make_trials(gpu_sweep()[:8], sweep_id="gpu"))
    report = build_report(sweep, tmp_path / "md", fmt="markdown", results_root=tmp_path)
    text = report.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 3 and all((tmp_path / "md" / link).is_file() for link in links)
    # what varies is a column; what does not is one line above
    assert "| op | dtype | shape | status | loop time median (µs) | ±CI (%) |" in text
    assert "| matmul | fp32 | 8192x8192x8192 | ok | 27,488 |" in text
    assert "- **same in every trial**: device=cuda:0  mode=eager" in text


@pytest.mark.slow
def test_cli(tmp_path, capsys):
    sweep = write_sweep(tmp_path, make_trials(gpu_sweep()[:4]))
    assert main([str(sweep), "--out", str(tmp_path / "r"), "--filter", "dtype=bf16"]) == 0
    assert "report: " in capsys.readouterr().out
    assert (tmp_path / "r" / "index.html").is_file()
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "missing")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no results at" in err


@pytest.mark.slow
def test_report_from_a_real_tiny_cpu_sweep(tmp_path_factory, tmp_path):
    sweep = tiny_cpu_sweep(tmp_path_factory)
    df = load(sweep)
    assert set(df["status"].astype(str)) == {"ok", "skipped"}
    index = build_report(sweep, tmp_path / "report")
    for name in ("scaling_matmul", "scaling_add", "roofline", "samples"):
        assert_real_png(tmp_path / "report" / f"{name}.png", min_bytes=5_000)
    page = index.read_text()
    assert "skipped" in page and "cuda_graph" in page
    assert "no CPU calibration" not in page or "roofline" in page
    assert np.isfinite(df.loc[df["status"] == "ok", "time_median_us"]).all()


def test_trials_csv_is_numbers_with_units_in_the_headers(tmp_path):
    import pandas as pd

    sweep = write_sweep(tmp_path, make_trials(gpu_sweep()[:4], sweep_id="gpu"))
    build_report(sweep, tmp_path / "r", results_root=tmp_path)
    table = pd.read_csv(tmp_path / "r" / "trials.csv")
    for column in ("loop time median (µs)", "±CI (%)", "TFLOP/s", "GB/s", "% of peak"):
        assert pd.api.types.is_float_dtype(table[column]), column
    assert table["loop time median (µs)"].gt(0).all()
    text = (tmp_path / "r" / "trials.csv").read_text()
    assert " µs" not in text.split("\n", 1)[1] and "%," not in text
