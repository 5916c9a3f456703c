"""Hydra callback: before a run or multirun plans anything, take the sweep's lock (one writer
per sweep, ``runner.storage.lock``); when it ends, merge its job files and print the summary;
with ``check=true``, judge the experiment's claims and exit 1 when one failed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runner import console, summary_table
from runner.cli import fail
from runner.execution import gpu_compare, interrupt, launched, ray_stop, timeline
from runner.storage import lock
from runner.storage.backfill import backfill
from runner.storage.files import FormatError
from runner.storage.journal import check_formats, merge_sweep
from runner.storage.layout import RESUME_ENV, has_results

#: Set when the end-of-sweep merge failed: ``python -m runner`` then exits 1 (Hydra turns a
#: callback's exception into a warning, which would have been exit 0 with no merged file).
MERGE_FAILED: list[str] = []


class MergeResults(Callback):
    """Merges ``jobs/*/trials.parquet`` into ``results.parquet`` at the end of a sweep.

    A sweep that crashed before this ran is merged later by ``python -m runner.collect DIR``.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        interrupt.install()
        take_lock(config, Path(config.hydra.run.dir).parent.parent)
        console.start_log(Path(config.hydra.run.dir).parent.parent, config.hydra.verbose)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # a Ray request the local cluster could never meet was refused by the pre-flight
        # (runner.config.launchers.check_ray_request), before anything was written
        if launched.starts_child_jobs(config.hydra.launcher.get("_target_")):
            interrupt.shield_launched_jobs()
        else:
            interrupt.install()
        if _runs_on_ray(config):
            ray_stop.install()  # Ctrl-C reaches Ray's jobs only through ray.cancel
        take_lock(config, Path(config.hydra.sweep.dir))
        console.start_log(Path(config.hydra.sweep.dir), config.hydra.verbose)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if launched.starts_child_jobs(config.hydra.launcher.get("_target_")) \
                or _runs_on_ray(config):
            interrupt.unshield_job()  # a process of its own: Ctrl-C stops it, as in a basic job
        # a job a launcher runs in another process logs into the same file
        console.start_log(Path(config.hydra.runtime.output_dir).parent.parent,
                          config.hydra.verbose)
        if interrupt.requested():  # Ctrl-C between two jobs of a multirun: start no other
            job_dir = Path(config.hydra.runtime.output_dir)
            stopped(job_dir.parent.parent, job_dir)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """A job that could not write its file (a full disk, a file-size limit, a folder in
        the file's place) ends the sweep with exit status 1 and one line, not a traceback."""
        error = getattr(job_return, "_return_value", None)
        if isinstance(error, OSError):
            sweep_dir = Path(config.hydra.runtime.output_dir).parent.parent
            write_failed(error, sweep_dir)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        job_dir = Path(config.hydra.runtime.output_dir)
        self._finish(config, job_dir.parent.parent)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._finish(config, Path(config.hydra.sweep.dir))

    @staticmethod
    def _finish(config: DictConfig, sweep_dir: Path) -> None:
        interrupt.end_shield()  # every job has ended (a no-op where none was shielded)
        try:
            lock.hold(sweep_dir, float(config.get("lock_wait_s") or 0.0))  # held: a no-op
            merged = finish_sweep(sweep_dir)
        except lock.SweepBusy as exc:
            fail(exc)
        except (OSError, ValueError) as exc:  # a full disk, a newer format: never exit 0
            console.stderr.print(f"opsweep: error: merging {sweep_dir} failed: {exc}. Every "
                                 "finished trial is in jobs/*/journal; retry with: python -m "
                                 f"runner.collect {sweep_dir}", highlight=False)
            MERGE_FAILED.append(str(sweep_dir))
            return
        finally:
            lock.release(sweep_dir)  # the sweep is written: nothing below writes into it
        if interrupt.requested():  # Ctrl-C while merging: the merge completed; say so, 130
            stopped(sweep_dir, None, merge=False)  # merged, or nothing to merge: said once
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


def _runs_on_ray(config: DictConfig) -> bool:
    return launched.launcher_name(config.hydra.launcher.get("_target_")) == ray_stop.RAY


def stopped(sweep_dir: Path, job_dir: Path | None, *, merge: bool = True) -> None:
    """After Ctrl-C: merge what finished (unless the caller just did: ``merge=False``), say
    where it is and how to go on, exit 130. A merge that fails still leaves every trial in
    the journal.

    A job a launcher started in a process of its own only says that it stopped and ends
    normally (its job file is written): the sweep's driver merges and exits 130."""
    if job_dir is not None and interrupt.in_launched_job():
        console.stderr.print(f"stopped by Ctrl-C in {job_dir}; finished trials are kept",
                             highlight=False)
        return
    if merge:
        try:
            finish_sweep(sweep_dir)
        except (OSError, ValueError) as exc:
            console.stderr.print(f"opsweep: error: merging {sweep_dir} failed: {exc}",
                                 highlight=False)
    where = job_dir or sweep_dir
    console.stderr.print(f"stopped by Ctrl-C in {where}; finished trials are kept. "
                         f"Continue with: python -m runner.resume {sweep_dir}", highlight=False)
    interrupt.ignore()
    raise SystemExit(interrupt.EXIT_INTERRUPTED)


def write_failed(error: OSError, sweep_dir: Path) -> None:
    """Exit 1 naming the file that could not be written and the command that goes on."""
    path = error.filename or sweep_dir
    console.stderr.print(f"opsweep: error: could not write {path}: {error.strerror or error}. "
                         "Every finished trial is in jobs/*/journal/; free space (or move what "
                         "is in the file's place), then continue with: python -m runner.resume "
                         f"{sweep_dir}", highlight=False)
    raise SystemExit(1)


def take_lock(config: DictConfig, sweep_dir: Path) -> None:
    """Before Hydra writes anything into the sweep folder: be its one writer, or exit 2.

    A run that is not a resume must find the folder without results even once it holds the
    lock: two runs started together with one fixed ``sweep_id`` both passed the command
    line's "folder exists" check, and the second must not run every trial again.
    """
    wait_s = float(config.get("lock_wait_s") or 0.0)
    resuming = os.environ.get(RESUME_ENV) == "1"
    try:
        lock.hold(sweep_dir, wait_s, what="python -m runner.resume --wait SECONDS" if resuming
                  else "lock_wait_s=SECONDS")
    except lock.SweepBusy as exc:
        fail(exc)
    except ValueError as exc:
        if not wait_s >= 0:  # nan too
            fail(f"invalid value for 'lock_wait_s': {wait_s!r}. Expected seconds >= 0 (0: exit "
                 "2 at once while another process writes the sweep).")
        fail(f"cannot lock the sweep folder {str(sweep_dir)!r}: {exc}")  # a path no OS holds
    except OSError as exc:
        fail(f"cannot lock the sweep folder {sweep_dir}: {exc}")
    if resuming:
        try:  # a journal entry from a newer opsweep: say so now, not as a traceback later
            check_formats(sweep_dir)
        except FormatError as exc:
            fail(exc)
    elif sweep_has_results(sweep_dir):
        fail(f"invalid value for 'sweep_id': {sweep_dir.name!r}: {sweep_dir} already holds the "
             "results of another run, and results are never overwritten. Choose another "
             f"sweep_id, or continue that sweep with: python -m runner.resume {sweep_dir}")


def sweep_has_results(sweep_dir: Path) -> bool:
    jobs = sweep_dir / "jobs"
    return jobs.is_dir() and any(has_results(job) for job in jobs.iterdir())


def finish_sweep(sweep_dir: Path) -> Path | None:
    """Merge a sweep, print its summary table and where the data is."""
    merged = merge_sweep(sweep_dir)
    if merged is None:
        console.stderr.print(f"no trial results under {sweep_dir}")
        return None
    rows = backfill(pq.read_table(merged)).to_pylist()  # a sweep resumed across versions
    # pandas: never before the first trial in the driver's own process (with workers it
    # is loaded ahead, runner.execution.job_file.import_ahead)
    from runner.analysis.selection import spec_cells

    spec = spec_cells(rows[:summary_table.MAX_SUMMARY_ROWS])
    console.stdout.print(summary_table.summary_table(rows, f"sweep {sweep_dir.name}", spec))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    # absolute: a multirun's sweep folder is relative, a single run's is not
    console.stderr.print(f"{len(rows)} trial{'' if len(rows) == 1 else 's'} ({tally}) → "
                         f"{merged.absolute()}", highlight=False)
    startup = timeline.reported_startup()
    for line in (timeline.busy_line(rows), *gpu_compare.per_gpu_lines(rows),
                 timeline.startup_line(startup),
                 timeline.cost_line(rows, startup, timeline.since_command())):
        if line:
            console.stderr.print(line, highlight=False)
    return merged
