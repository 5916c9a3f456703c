"""``python -m runner [key=value ...] [-m]``: run a sweep.

The command line is checked before Hydra composes anything (``runner.config.overrides``), so a
typo in any job of a multirun fails with exit status 2 before the first trial runs and before any
result directory is created.
"""

from __future__ import annotations

from runner.execution import timeline  # noqa: F401  (first: its import time is the "main" mark)

# isort: split
import sys

import hydra
from omegaconf import DictConfig

from runner.cli import fail
from runner.config import schema
from runner.config.errors import ConfigError
from runner.config.guards import check_args
from runner.config.overrides import check_command_line

schema.register()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> object:
    from runner.execution.job import run_job  # imports torch: keep `--help` fast

    return run_job(cfg)


def main() -> None:
    if _runs_trials(sys.argv[1:]):
        # Start the trial workers first: their torch import and CUDA context run on other
        # cores while the driver checks the command line (which may import torch to count
        # GPUs), Hydra composes and the job is planned (runner.execution.pool). A bad
        # command line stops them again (exit 2).
        from runner.execution.pool import prestart_from_command_line

        prestart_from_command_line(sys.argv[1:])
    try:
        check_args(sys.argv[1:])
        check_command_line(sys.argv[1:])
    except ConfigError as exc:
        fail(exc)
    _hydra_main()
    from runner.execution.callbacks import MERGE_FAILED

    if MERGE_FAILED:
        raise SystemExit(1)


#: Hydra flags after which no trial runs (help, config printing, completion).
_NO_TRIALS = ("-h", "--help", "--hydra-help", "-c", "--cfg", "-i", "--info", "--version",
              "--shell-completion", "-sc")


def _runs_trials(args: list[str]) -> bool:
    """Whether to prestart trial workers."""
    return not any(a.partition("=")[0] in _NO_TRIALS for a in args) \
        and "isolation=none" not in args


if __name__ == "__main__":
    main()
