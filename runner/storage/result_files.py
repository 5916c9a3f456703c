"""Which Parquet files hold the sweeps under a path: each sweep exactly once.

Why this is apart from :mod:`runner.storage.load`: choosing the files is a question of the
results tree's layout, not of reading rows. A sweep is its merged ``results.parquet`` when
that is readable, else its ``jobs/*/trials.parquet``, else (a job killed before it wrote
one) its journal; never two of these, so no sweep is counted twice. A results root is every
sweep below it. :func:`runner.storage.load.load` and its ``read_metadata`` both ask here,
so they always agree on what a path means. Nothing here reads more than a file's schema.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runner.storage.layout import JOB_FILE, JOURNAL_DIR, SWEEP_FILE, job_number

JOB_GLOB = f"jobs/*/{JOB_FILE}"
#: Directories under a results root that hold no sweeps.
NOT_SWEEPS = frozenset({"calibration"})


class ResultsNotFoundError(FileNotFoundError, ValueError):
    """No result files where the caller pointed (a user-input error and a missing file)."""


def find_result_files(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """The Parquet files that :func:`runner.storage.load.load` reads for ``paths``, each
    sweep exactly once.

    Raises :class:`ResultsNotFoundError` (a ``ValueError``) when a path or glob matches
    nothing or holds no results, naming the path and what was expected there.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: dict[Path, None] = {}
    for raw in paths:
        text = os.fspath(raw)
        matches = [Path(m) for m in sorted(glob.glob(os.path.expanduser(text)))]
        if not matches:
            raise ResultsNotFoundError(
                f"no results at {text!r}: the path does not exist (or the glob matches "
                "nothing); pass a sweep directory (results/<sweep_id>), a .parquet file or "
                "a results root, e.g. runner.load('results/')")
        found: list[Path] = []
        for match in matches:
            found.extend(_files_under(match))
        if not found:
            raise ResultsNotFoundError(
                f"no result files under {text!r}: expected results.parquet or "
                f"{JOB_GLOB} in a sweep directory, or sweep directories below a results "
                "root; did the sweep write anything (check its log)?")
        for f in found:
            files.setdefault(f.resolve(), None)
    return list(files)


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix == ".parquet" else []
    if not path.is_dir():
        return []
    if (path / SWEEP_FILE).is_file() and _readable(path / SWEEP_FILE):
        return [path / SWEEP_FILE]
    jobs = sorted(path.glob(JOB_GLOB), key=lambda p: job_number(p.parent))
    # a job killed before it wrote trials.parquet: its journal (log segments; one file per
    # finished trial from earlier versions)
    jobs += sorted((p for p in path.glob(f"jobs/*/{JOURNAL_DIR}/*")
                    if p.suffix in (".parquet", ".jsonl")
                    and not (p.parent.parent / JOB_FILE).exists()),
                   key=lambda p: (job_number(p.parent.parent), p.name))
    if jobs:
        return jobs
    out: list[Path] = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if child.name in NOT_SWEEPS or child.name.startswith((".", "_")):
            continue
        out.extend(_files_under(child))
    return out


def _readable(path: Path) -> bool:
    """False (and a warning naming it) for a damaged file: its sweep is read from its job
    files instead."""
    try:
        pq.read_schema(path)
        return True
    except (OSError, pa.ArrowException, ValueError) as exc:
        print(f"opsweep: warning: {path} is damaged ({type(exc).__name__}); reading the "
              "sweep's job files instead (python -m runner.collect rebuilds it)", file=sys.stderr)
        return False


def sweep_id_from_path(file: Path) -> str:
    """The sweep a file belongs to, told by where it lies (for a file with no ``sweep_id``
    column)."""
    if file.name == SWEEP_FILE:
        return file.parent.name
    if file.parent.parent.name == "jobs":
        return file.parent.parent.parent.name
    return file.stem
