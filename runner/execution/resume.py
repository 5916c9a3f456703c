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

The command *becomes* the run (``os.execv``): one process, so killing it (SIGKILL included)
leaves nothing running, and the run takes the sweep's lock (``runner.storage.lock``) before it
plans: a second resume of the same sweep waits (``--wait``) or exits 2, and no trial runs
twice.

Exit status: that of the resumed run (0, 2 for bad input or a sweep another process is
writing, 130 after Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from omegaconf import OmegaConf

from runner.cli import OneLineArgumentParser, add_wait_option, not_a_sweep, program
from runner.storage.layout import RESUME_ENV

#: Hydra overrides that describe where and how the original run went, not what it ran.
_RUNTIME_HYDRA_KEYS = ("hydra.mode", "hydra.run.dir", "hydra.sweep.dir", "hydra.output_subdir")
_PINNED_KEYS = ("sweep_id", "results_dir", "lock_wait_s")


def resume_command(sweep_dir: Path, wait_s: float = 0.0) -> list[str]:
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
    pinned = [f"sweep_id={hydra_quote(sweep_dir.name)}",
              f"results_dir={hydra_quote(str(sweep_dir.resolve().parent))}",
              f"lock_wait_s={wait_s:g}", f"hydra.output_subdir=.hydra-resume-{stamp}"]
    return [*task, *hydra, *pinned, *flags]


def hydra_quote(value: str) -> str:
    """``value`` as one Hydra override value: quoted when it holds characters Hydra's grammar
    reads (a comma would make ``results_dir=a,b`` a sweep over two folders)."""
    if value and all(c.isalnum() or c in "-_./+@%" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    parser = OneLineArgumentParser(prog=program("runner.resume"), description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, metavar="DIR",
                        help="sweep folder, e.g. results/2026-11-21_10-00-00.000000")
    add_wait_option(parser)
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(not_a_sweep(args.sweep_dir), file=sys.stderr)
        return 2
    try:
        command = resume_command(args.sweep_dir, args.wait)
    except (OSError, ValueError) as exc:
        print(f"opsweep: error: {exc}", file=sys.stderr)
        return 2
    print(f"resuming {args.sweep_dir}: python -m runner {shlex.join(command)}", file=sys.stderr,
          flush=True)
    sys.stdout.flush()
    os.environ[RESUME_ENV] = "1"
    # replace this process with the run: a kill of this pid reaches the run itself
    os.execv(sys.executable, [sys.executable, "-m", "runner", *command])
