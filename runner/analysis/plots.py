"""The report's plots, in report order, every one safe on a sweep that lacks its data.

Why this shape: a sweep may hold one op or twenty, one dtype or five, no mode variation, no
FLOP counts, or only failed trials. Each plot function takes the loaded DataFrame and
returns a :class:`Plot` whose ``figure`` is ``None`` with a ``note`` saying why when there
is nothing to draw, so the report can say so instead of crashing. Figures are built with
``matplotlib.figure.Figure`` (no pyplot state, no backend switch), so the same functions work
in scripts, tests and notebooks. Axes carry units, sizes spanning a decade or more go on log
scales, legends sit outside the data, and figure heights grow with the number of labels so
that labels never overlap.

The functions live by kind: ``throughput_plots`` (time and throughput against size, the
roofline), ``trial_plots`` (execution modes, sample noise), ``axis_plots`` (time against a
numeric axis) and ``insight`` (energy). This module orders them for the report and is the
one import for them (``from runner.analysis.plots import plot_roofline``).
"""

from __future__ import annotations

import pandas as pd

from runner.analysis import insight
from runner.analysis.axis_plots import plot_against_axes
from runner.analysis.figure import Plot, short_sweeps
from runner.analysis.throughput_plots import plot_roofline, plot_scaling
from runner.analysis.trial_plots import plot_modes, plot_samples

__all__ = ["all_plots", "plot_modes", "plot_roofline", "plot_samples", "plot_scaling"]


def all_plots(df: pd.DataFrame, ceilings: list) -> list[Plot]:
    """Every plot of the report, in report order.

    A plot that fails on unexpected data becomes a note naming the error, so one bad
    column never costs the whole report. Sweeps are named briefly in every label
    (:func:`runner.analysis.figure.short_sweeps`).
    """
    df = short_sweeps(df)
    makers = [("scaling", "Time and throughput against size", lambda: plot_scaling(df)),
              ("roofline", "Roofline", lambda: [plot_roofline(df, ceilings)]),
              ("against", "Time against a numeric axis", lambda: plot_against_axes(df)),
              ("modes", "Execution modes compared", lambda: [plot_modes(df)]),
              ("samples", "Sample distributions (noise)", lambda: [plot_samples(df)])]
    if insight.has(df, "energy_per_call_mJ"):
        makers.append(("energy", "Energy per call against time per call",
                       lambda: [insight.plot_energy(df)]))
    out: list[Plot] = []
    for name, title, make in makers:
        try:
            out.extend(make())
        except Exception as exc:  # noqa: BLE001 - reported in the page instead
            out.append(Plot(name, title, None, f"could not be drawn: {type(exc).__name__}: "
                                               f"{exc}"))
    return out
