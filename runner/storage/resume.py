"""``python -m runner.resume DIR``: continue a sweep from its results folder.

It re-runs exactly the trials that have no ``ok`` or ``skipped`` row: failed, crashed, timed
out, and never run (a job killed mid-way, jobs of a multirun that never started). It works for
single runs and ``-m`` sweeps, experiments with ``hydra.sweeper.params`` included, because it
runs the sweep's own command again:

* the original overrides come from Hydra's record (``multirun.yaml`` for ``-m``, else
  ``jobs/0/.hydra/hydra.yaml``), with ``sweep_id`` and ``results_dir`` pinned to DIR;
* each job re-plans its trials from that config and skips those its journal
  (``jobs/<n>/journal``) already holds as ok/skipped (same trial index and trial id);
* new rows are journaled beside the old ones; ``trials.parquet`` and ``results.parquet`` are
  replaced only atomically and only by a verified superset of their rows;
* Hydra's record of the resumed run goes to ``jobs/<n>/.hydra-resume-<utc>/``: the original
  ``.hydra/`` (the provenance of the data) is never overwritten.

Exit status: that of the resumed run (0, 2 for bad input, 130 after Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from omegaconf import OmegaConf

from runner.storage.layout import RESUME_ENV

#: Hydra overrides that describe where and how the original run went, not what it ran.
_RUNTIME_HYDRA_KEYS = ("hydra.mode", "hydra.run.dir", "hydra.sweep.dir", "hydra.output_subdir")
_PINNED_KEYS = ("sweep_id", "results_dir")


def resume_command(sweep_dir: Path) -> list[str]:
    """The ``python -m runner`` arguments that continue ``sweep_dir``."""
    multirun = _original_record(sweep_dir)
    single = sweep_dir / "jobs" / "0" / ".hydra" / "hydra.yaml"
    if multirun.is_file():
        record, flags = OmegaConf.load(multirun).hydra, ["-m"]
    elif single.is_file():
        record, flags = OmegaConf.load(single).hydra, []
    else:
        raise FileNotFoundError(
            f"{sweep_dir} has neither multirun.yaml nor jobs/0/.hydra/hydra.yaml: it is not a "
            "sweep folder written by python -m runner (pass results/<sweep_id>)")
    task = [o for o in record.overrides.task if o.partition("=")[0].lstrip("+~")
            not in _PINNED_KEYS]
    hydra = [o for o in record.overrides.hydra
             if o.partition("=")[0].lstrip("+~") not in _RUNTIME_HYDRA_KEYS]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d_%H-%M-%S.%f")
    pinned = [f"sweep_id={sweep_dir.name}", f"results_dir={sweep_dir.resolve().parent}",
              f"hydra.output_subdir=.hydra-resume-{stamp}"]
    return [*task, *hydra, *pinned, *flags]


def _original_record(sweep_dir: Path) -> Path:
    """Hydra rewrites ``multirun.yaml`` on every run into the folder: keep the first run's as
    ``multirun.original.yaml`` (a copy, made once; not a link: Hydra rewrites the file in
    place) and plan from that."""
    original = sweep_dir / "multirun.original.yaml"
    current = sweep_dir / "multirun.yaml"
    if current.is_file() and not original.exists():
        try:
            with open(original, "xb") as handle:
                handle.write(current.read_bytes())
        except OSError:
            return current
    return original if original.is_file() else current


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.resume", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, metavar="DIR",
                        help="sweep folder, e.g. results/2026-11-21_10-00-00.000000")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"opsweep: error: {args.sweep_dir} is not a directory; pass a sweep folder under "
              "results/", file=sys.stderr)
        return 2
    try:
        command = resume_command(args.sweep_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"opsweep: error: {exc}", file=sys.stderr)
        return 2
    print(f"resuming {args.sweep_dir}: python -m runner {' '.join(command)}", file=sys.stderr)
    env = {**os.environ, RESUME_ENV: "1"}
    # Ctrl-C reaches the child too (same process group): it stops gracefully and its exit
    # status (130) is ours
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.call([sys.executable, "-m", "runner", *command], env=env)
    finally:
        signal.signal(signal.SIGINT, previous)
