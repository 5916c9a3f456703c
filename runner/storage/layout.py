"""Where a sweep's files lie, by name: the one place those names are spelled.

::

    <results_dir>/<sweep_id>/results.parquet          the merged sweep (SWEEP_FILE)
    <results_dir>/<sweep_id>/jobs/<n>/trials.parquet  one Hydra job's rows (JOB_FILE)
    <results_dir>/<sweep_id>/jobs/<n>/journal/        the trial log, a line per trial (JOURNAL_DIR)
    <results_dir>/<sweep_id>/jobs/<n>/.hydra/         Hydra's record of the job's config

One ``<sweep_id>`` folder per ``python -m runner`` invocation; files are never overwritten
(:mod:`runner.storage.files`).

Standard library only: the command-line checks ask :func:`has_results` before a sweep starts,
without paying for pyarrow.
"""

from __future__ import annotations

from pathlib import Path

JOB_FILE = "trials.parquet"
SWEEP_FILE = "results.parquet"
JOURNAL_DIR = "journal"
#: Set (to "1") by ``python -m runner.resume`` for the run it starts: the sweep folder is
#: continued, only trials without an ok/skipped row run.
RESUME_ENV = "OPSWEEP_RESUME"


def journal_dir(job_dir: Path) -> Path:
    return Path(job_dir) / JOURNAL_DIR


def has_results(job_dir: Path) -> bool:
    """True when a job folder holds a result file or a journal: another run wrote there."""
    return (Path(job_dir) / JOB_FILE).exists() or journal_dir(job_dir).exists()


def job_number(job_dir: Path) -> tuple[int, str]:
    """The sort key of a job folder (``jobs/<n>``): by number, then any other name after."""
    name = Path(job_dir).name
    return (int(name), "") if name.isdigit() else (1 << 30, name)
