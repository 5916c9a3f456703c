"""``python -m runner.collect DIR [DIR ...]``: merge the trials of sweeps that did not finish.

A sweep killed mid-way (Ctrl-C, the OOM killer, a lost machine) leaves every finished trial in
its jobs' journals (``jobs/<n>/journal/``) but no ``results.parquet``. This builds each job's
``trials.parquet`` and the merged file from them. An existing merged file is replaced only by
a verified superset of its rows, a damaged one is
rebuilt from the job files, and a damaged job file is named and skipped. Exit status 1 when a
write failed or nothing was found, 2 for a bad folder or one that another process is writing
(collect takes the sweep's lock, ``runner.storage.lock``; ``--wait`` waits for it).

To also run the trials that are missing or failed, use ``python -m runner.resume DIR``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.cli import OneLineArgumentParser, add_wait_option, not_a_sweep, program
from runner.execution.callbacks import finish_sweep
from runner.storage import lock


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=program("runner.collect"), description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="DIR",
                        help="sweep folder(s), e.g. results/2026-11-21_10-00-00.000000")
    add_wait_option(parser)
    args = parser.parse_args(argv)
    status = 0
    for sweep_dir in args.sweep_dirs:
        if not sweep_dir.is_dir():
            print(not_a_sweep(sweep_dir), file=sys.stderr)
            status = 2
            continue
        merged = sweep_dir / "results.parquet"
        if merged.is_dir():  # the merge's atomic rename can never replace a folder
            print(f"opsweep: error: {merged} is a folder, not a results file: the merged file "
                  f"cannot be written over it. Move it away (mv {merged} {merged}.folder), "
                  f"then run python -m runner.collect {sweep_dir} again.", file=sys.stderr)
            status = 1  # the merged file cannot be written: a failed write
            continue
        ours = not lock.held(sweep_dir)
        try:
            lock.hold(sweep_dir, args.wait, what="--wait SECONDS")
            if finish_sweep(sweep_dir) is None:
                status = 1
        except lock.SweepBusy as exc:
            print(f"opsweep: error: {exc} To look at its finished trials meanwhile, "
                  f"runner.load('{sweep_dir}') reads them without writing.", file=sys.stderr)
            status = 2
            continue
        except (OSError, ValueError) as exc:  # a failed write is an error, never exit 0
            print(f"opsweep: error: could not merge {sweep_dir}: {exc}", file=sys.stderr)
            status = 1
        finally:
            if ours:
                lock.release(sweep_dir)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
