"""Hydra callback: when a run or multirun ends, merge its job files and print the summary;
with ``check=true``, judge the experiment's claims and exit 1 when one failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runner import console
from runner.analysis.selection import spec_cells
from runner.execution import timeline
from runner.storage.journal import merge_sweep

#: Set when the end-of-sweep merge failed: ``python -m runner`` then exits 1 (Hydra turns a
#: callback's exception into a warning, which would have been exit 0 with no merged file).
MERGE_FAILED: list[str] = []


class MergeResults(Callback):
    """Merges ``jobs/*/trials.parquet`` into ``results.parquet`` at the end of a sweep.

    A sweep that crashed before this ran is merged later by ``python -m runner.collect DIR``.
    """

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        job_dir = Path(config.hydra.runtime.output_dir)
        self._finish(config, job_dir.parent.parent)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish(config, Path(config.hydra.sweep.dir))

    @staticmethod
    def _finish(config: DictConfig, sweep_dir: Path) -> None:
        try:
            merged = finish_sweep(sweep_dir)
        except (OSError, ValueError) as exc:  # a full disk, a newer format: never exit 0
            console.stderr.print(f"opsweep: error: merging {sweep_dir} failed: {exc}. Every "
                                 "finished trial is in jobs/*/journal; retry with: python -m "
                                 f"runner.collect {sweep_dir}", highlight=False)
            MERGE_FAILED.append(str(sweep_dir))
            return
        if merged is not None and config.get("store_calibration") and config.get("smoke"):
            console.stderr.print("calibration not stored: smoke=true sizes and timer give "
                                 "meaningless ceilings")
        elif merged is not None and config.get("store_calibration"):
            import pandas as pd

            from runner.analysis.roofline import store_calibration

            path = store_calibration(pd.read_parquet(merged), config.results_dir)
            if path is None:
                console.stderr.print("calibration: nothing stored (no usable rows)")
            else:
                console.stderr.print(f"calibration stored → {path}", highlight=False)
        if merged is not None and config.get("check"):
            from runner.claims.check import check_sweep

            status = check_sweep(merged)  # after the merge: -m sweeps are judged as one
            if status:
                raise SystemExit(status)


def finish_sweep(sweep_dir: Path) -> Path | None:
    """Merge a sweep, print its summary table and where the data is."""
    merged = merge_sweep(sweep_dir)
    if merged is None:
        console.stderr.print(f"no trial results under {sweep_dir}")
        return None
    rows = pq.read_table(merged).to_pylist()
    spec = spec_cells(rows[:console.MAX_SUMMARY_ROWS])
    console.stdout.print(console.summary_table(rows, f"sweep {sweep_dir.name}", spec))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    console.stderr.print(f"{len(rows)} trials ({tally}) → {merged}", highlight=False)
    for line in (timeline.busy_line(rows), timeline.startup_line(timeline.reported_startup())):
        if line:
            console.stderr.print(line, highlight=False)
    return merged
