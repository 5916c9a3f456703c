"""``python -m runner.collect DIR [DIR ...]``: merge the job files of sweeps that did not finish.

A sweep killed mid-way (Ctrl-C, OOM-killer, a lost machine) leaves ``jobs/<n>/trials.parquet``
for every job that completed but no ``results.parquet``. This writes the merged file from
whatever jobs exist. A sweep that is already merged is left untouched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.execution.callbacks import finish_sweep
from runner.storage.files import SWEEP_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.collect", description=__doc__)
    parser.add_argument("sweep_dirs", nargs="+", type=Path, metavar="DIR",
                        help="sweep folder(s), e.g. results/2026-11-21_10-00-00.000000")
    args = parser.parse_args(argv)
    status = 0
    for sweep_dir in args.sweep_dirs:
        if not sweep_dir.is_dir():
            print(f"opsweep: error: {sweep_dir} is not a directory; pass a sweep folder under "
                  "results/", file=sys.stderr)
            status = 2
            continue
        if (sweep_dir / SWEEP_FILE).exists():
            print(f"{sweep_dir / SWEEP_FILE} already exists; left untouched")
            continue
        if finish_sweep(sweep_dir) is None:
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
