"""Checks of user input beyond the per-axis ones (``runner.config.validate``).

Each check rejects one kind of bad input before any trial runs, with a message that names
the key, the value and the valid choices or the fix (exit status 2, nothing left on disk).
The catalog, one line per kind, is in docs/errors.md.

* :func:`check_args` runs on the raw command line, before Hydra makes any folder;
* :func:`check_job` runs on a composed job and its planned trials, before the first trial.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.config.validate import ConfigError, bad_value

ISOLATION_CHOICES = ("process", "none")


def check_job(cfg: Any, planned: list, job_dir: Path, *, resuming: bool = False) -> None:
    """Job-level checks (after ``plan_job``)."""
    isolation = cfg.get("isolation", "process")
    if isolation not in ISOLATION_CHOICES:
        raise bad_value("isolation", isolation, ISOLATION_CHOICES)
    timeout = cfg.get("trial_timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout < 0):
        raise ConfigError(f"invalid value for 'trial_timeout_s': {timeout!r}. Expected a number "
                          "of seconds > 0, or 0/null for no limit.")
    if not resuming and _has_results(job_dir):
        raise ConfigError(f"invalid value for 'sweep_id': {job_dir.parent.parent.name!r}: "
                          f"{job_dir} already holds results of another run. Choose another "
                          "sweep_id, or continue that sweep with: python -m runner.resume "
                          f"{job_dir.parent.parent}")


def _has_results(job_dir: Path) -> bool:
    from runner.storage.files import JOB_FILE
    from runner.storage.journal import journal_dir

    return (job_dir / JOB_FILE).exists() or journal_dir(job_dir).exists()


def check_args(args: list[str]) -> None:
    """Command-line checks, before Hydra composes anything or makes a folder."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    texts = [a for a in args if "=" in a and not a.startswith("-")]
    overrides = OverridesParser.create().parse_overrides(texts)  # validated already
    single: dict[str, Any] = {}
    for ov in overrides:
        if not ov.is_sweep_override() and not ov.is_delete():
            single[ov.key_or_group] = ov.value()
    _check_sweep_id(single)


def _check_sweep_id(single: dict[str, Any]) -> None:
    """A fixed ``sweep_id`` whose folder exists would mix two runs' files and overwrite the
    first run's Hydra record: refuse before Hydra writes anything."""
    if "sweep_id" not in single or os.environ.get("OPSWEEP_RESUME") == "1":
        return
    sweep_id = str(single["sweep_id"])
    folder = Path(str(single.get("results_dir", "results"))) / sweep_id
    if folder.exists():
        raise ConfigError(f"invalid value for 'sweep_id': {sweep_id!r}: {folder} already exists "
                          "and results are never overwritten. Choose another sweep_id (or "
                          "leave it unset for a timestamp), or continue that sweep with: "
                          f"python -m runner.resume {folder}")
