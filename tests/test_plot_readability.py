"""Plots a person reads at a glance: every axis labelled, every legend entry told apart by
its look, no tick labels drawn over each other, for the shapes of data that broke them (12
series over many sweeps, one sweep, a sweep over threads)."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from matplotlib.figure import Figure

try:
    from synthetic import make_trials
    from test_report import overlapping_labels
except ImportError:  # tests/ imported as a package
    from tests.synthetic import make_trials
    from tests.test_report import overlapping_labels

from runner.analysis.history import history, plot_history
from runner.analysis.plots import all_plots


def unreadable(figure: Figure) -> list[str]:
    """What a reader could not read: an axis without a label, two legend entries that look
    the same (colour and marker), tick labels drawn over each other."""
    found = []
    for ax in figure.axes:
        if not ax.get_xlabel() or not ax.get_ylabel():
            found.append(f"unlabelled axis in {ax.get_title() or figure.get_suptitle()!r}")
        legend = ax.get_legend()
        if legend is not None:
            looks = [(str(h.get_color()), str(h.get_marker())) for h in legend.legend_handles
                     if hasattr(h, "get_marker")]
            if len(set(looks)) < len(looks):
                found.append(f"legend entries that look alike: {looks}")
    found += [f"overlapping labels {a!r} and {b!r}" for a, b in overlapping_labels(figure)]
    found += [f"cut off at the figure's edge: {text!r}" for text in cut_off(figure)]
    return found


def cut_off(figure: Figure) -> list[str]:
    """Axis labels and titles drawn partly outside the figure (``mediar`` for ``median``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer, edge = canvas.get_renderer(), figure.bbox
    texts = [t for ax in figure.axes for t in (ax.xaxis.label, ax.yaxis.label, ax.title)]
    return [t.get_text() for t in texts if t.get_text() and t.get_visible() and not (
        edge.x0 - 1 <= t.get_window_extent(renderer).x0
        and t.get_window_extent(renderer).x1 <= edge.x1 + 1)]


def test_the_check_catches_a_planted_unreadable_plot() -> None:
    fig = Figure()
    ax = fig.subplots()
    for i in range(11):  # C0..C9 then C0 again, one marker: entries 0 and 10 look alike
        ax.plot([0, 1], [i, i], color=f"C{i % 10}", marker="o", label=str(i))
    ax.legend()
    found = unreadable(fig)
    assert any("unlabelled axis" in f for f in found)
    assert any("look alike" in f for f in found)


def _sweeps(n_sweeps: int, n_series: int) -> pd.DataFrame:
    frames = []
    for s in range(n_sweeps):
        specs = [{"op": "add", "dtype": "fp32", "shape": (1 << (k + 4),),
                  "median_us": 5.0 + k + 0.01 * s} for k in range(n_series)]
        df = make_trials(specs, sweep_id=f"2026-01-{s + 1:02d}_00-00-00.000000")
        df["timestamp"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(days=s)
        df["git_commit"] = f"{s:07x}"
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


@pytest.mark.slow
def test_history_reads_with_twelve_series_over_many_sweeps_and_with_one_sweep() -> None:
    for n_sweeps in (20, 1):
        (figure,) = plot_history(history(_sweeps(n_sweeps, 12))).values()
        assert unreadable(figure) == [], n_sweeps
        (ax,) = figure.axes
        assert len(ax.get_legend().get_texts()) == 12


def test_a_sweep_over_threads_gets_a_line_against_threads_and_every_plot_reads(
        tmp_path) -> None:
    specs = [{"op": "matmul", "dtype": "fp32", "shape": (64, 64, 64), "num_threads": n,
              "median_us": 100.0 / n} for n in (1, 2, 4, 8)]
    plots = {p.name: p for p in all_plots(make_trials(specs), [])}
    against = plots["against_num_threads"].figure
    (ax,) = against.axes
    assert ax.get_xlabel() == "num_threads" and "µs" in ax.get_ylabel()
    assert [float(v) for v in ax.lines[0].get_xdata()] == [1, 2, 4, 8]
    for name, plot in plots.items():
        if plot.figure is not None:
            assert unreadable(plot.figure) == [], name


def test_modes_across_decades_are_points_not_bars() -> None:
    """On a log axis a bar's length says nothing: 8 ms looked like 80% of 24 ms."""
    specs = [{"op": "add", "shape": (n,), "graph": graph, "median_us": us}
             for n, base in ((64, 5.0), (1 << 24, 5000.0))
             for graph, us in (("none", base), ("cuda_graph", base / 2))]
    plots = {p.name: p for p in all_plots(make_trials(specs), [])}
    (ax,) = plots["modes"].figure.axes
    assert ax.get_xscale() == "log"
    assert not ax.patches and ax.lines  # no bars; markers with whiskers
    narrow = [{"op": "add", "shape": (64,), "graph": graph, "median_us": us}
              for graph, us in (("none", 5.0), ("cuda_graph", 4.0))]
    (ax,) = {p.name: p for p in all_plots(make_trials(narrow), [])}["modes"].figure.axes
    assert ax.get_xscale() == "linear" and ax.patches  # bars where lengths compare


def test_sweeps_started_in_one_minute_get_tick_labels_that_differ() -> None:
    df = _sweeps(2, 1)
    df["timestamp"] = pd.Timestamp("2026-01-01 10:00:05", tz="UTC") + pd.to_timedelta(
        df["sweep_id"].str[9:10].astype(int) * 20, unit="s")
    df["git_commit"] = "abc1234"
    (figure,) = plot_history(history(df)).values()
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert len(labels) == 2 and len(set(labels)) == 2, labels


def test_a_slow_trials_median_is_written_in_plain_digits() -> None:
    specs = [{"op": "add", "shape": (1 << 24,), "median_us": 15_900.0},
             {"op": "add", "shape": (64,), "median_us": 2.5}]
    (ax,) = {p.name: p for p in all_plots(make_trials(specs), [])}["samples"].figure.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert any("(15,900 µs)" in label for label in labels), labels
    assert not any("e+" in label for label in labels)


def _many_sweeps(n_sweeps: int = 6) -> pd.DataFrame:
    """A quickstart-like sweep run again and again: matmuls at two sizes (8x apart) under
    two implementations, with the long labels a custom op's parameters make."""
    frames = []
    for s in range(n_sweeps):
        specs = [{"op": "matmul", "dtype": dtype, "shape": (n, n, n),
                  "params": {"impl": impl, "block_size_m": 128},
                  "median_us": 2 * n**3 / (peak * 0.7) * 1e6 * (1 + 0.01 * s)}
                 for n in (512, 1024) for dtype, peak in (("fp32", 50e12), ("bf16", 780e12))
                 for impl in ("cublas_reference", "triton_persistent_tma")]
        df = make_trials(specs, sweep_id=f"2026-11-2{s}_09-1{s}-0{s}.12345{s}", seed=s)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def test_two_sizes_scale_on_a_log_axis_with_a_tick_at_each_size() -> None:
    specs = [{"op": "matmul", "dtype": "fp32", "shape": (n, n, n), "median_us": n**3 / 1e6}
             for n in (512, 1024)]
    plots = {p.name: p for p in all_plots(make_trials(specs), [])}
    for ax in plots["scaling_matmul"].figure.axes:
        assert ax.get_xscale() == "log"
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert ticks == ["134M", "1.07G"], ticks
        for axis in (ax.xaxis, ax.yaxis):  # no "1e8" that a reader must multiply in
            assert axis.get_offset_text().get_text() == ""
            assert not any("e+" in t.get_text() or "e-" in t.get_text()
                           for t in axis.get_ticklabels())
    assert unreadable(plots["scaling_matmul"].figure) == []


def test_labels_name_a_sweep_briefly_and_every_plot_of_many_sweeps_reads() -> None:
    plots = {p.name: p for p in all_plots(_many_sweeps(), [])}
    assert {"scaling_matmul", "roofline", "samples"} <= {n for n, p in plots.items() if p.figure}
    for name, plot in plots.items():
        if plot.figure is not None:
            assert unreadable(plot.figure) == [], name
    samples = [t.get_text() for t in plots["samples"].figure.axes[0].get_yticklabels()]
    assert samples[0].startswith("11-20 09:10 "), samples[0]
    assert not any("2026-11-2" in label or ".12345" in label for label in samples)


def test_roofline_numbers_a_trial_once_and_never_draws_numbers_over_each_other() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from runner.analysis.ceilings import ceilings_for

    df = _many_sweeps().assign(device="cuda:0", device_name="NVIDIA H100 80GB HBM3")
    figure = next(p for p in all_plots(df, ceilings_for(df)) if p.name == "roofline").figure
    (ax,) = figure.axes
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    numbers = [a for a in ax.texts if a.get_text()[:1].isdigit() and ":" not in a.get_text()]
    boxes = [a.get_window_extent(canvas.get_renderer()) for a in numbers]
    assert not [(a.get_text(), b.get_text()) for (a, p), (b, q)
                in itertools.combinations(zip(numbers, boxes, strict=True), 2) if p.overlaps(q)]
    keyed = {n for a in numbers for n in a.get_text().split(",")}
    assert keyed == {str(k) for k in range(1, 9)}  # 8 trials, each in 6 sweeps
    key = next(a.get_text() for a in ax.texts if a.get_text().startswith("1: "))
    assert "2026-" not in key and "11-20" not in key  # a trial, not a trial per sweep


def test_sweeps_are_named_as_briefly_as_tells_them_apart() -> None:
    from runner.analysis.figure import short_sweeps

    def names(*ids: str) -> list[str]:
        return list(short_sweeps(pd.DataFrame({"sweep_id": list(ids)}))["sweep_id"])

    assert names("2026-11-27_08-19-57.016342", "2026-11-28_09-00-01.5") == [
        "11-27 08:19", "11-28 09:00"]
    assert names("2026-11-27_08-19-57.016342", "2026-11-27_08-19-59.1") == [
        "11-27 08:19:57", "11-27 08:19:59"]  # one minute: the seconds tell them apart
    assert names("2025-12-31_23-00-00.0", "2026-01-01_01-00-00.0") == [
        "2025-12-31 23:00", "2026-01-01 01:00"]  # across a year: the year
    assert names("nightly", "2026-11-27_08-19-57.016342") == [
        "nightly", "2026-11-27_08-19-57.016342"]  # a name the user chose stays
