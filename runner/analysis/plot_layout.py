"""What the report's figures share: how much one figure shows, and where its legend goes.

Why a module of its own: the throughput figures (``throughput_plots``), the per-trial
figures (``trial_plots``), the axis figures (``axis_plots``) and the history figure
(``history_plot``) cap their series and rows alike and put their legends in one place; a
module below them all keeps those figure modules from importing each other.
"""

from __future__ import annotations

#: Most series / rows drawn in one figure; the rest are left out with a note.
MAX_SERIES = 12
MAX_ROWS = 40


def legend_outside(ax, n: int) -> None:
    """A legend beside the axes, never over the data; none for a single series."""
    if n > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
                  frameon=False)
